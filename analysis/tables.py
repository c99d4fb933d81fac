"""Tables in the paper's layout, as DataFrames of display strings, rendered to Markdown and LaTeX.

- `savings_table`: Table 1 / Table 2 style — savings in FLOPs and wall time (and growbench's own columns that
  also charge the small model's pretraining; not in the paper) next to the final eval loss or accuracy and any
  downstream scores. Labels that are one computation (analysis/identical.py) share one row, "StackBERT =
  Net2Net", with the numbers of the first in the paper's order (runs of one computation that were each
  computed differ in wall time only); labels that coincide on some seeds only are marked "(s0 = Net2Net)".
- `fit_steps_table`: Table 3 — LiGO's operator-fit steps, the FLOPs they add, and the saving.
- `init_table`: Table 5 — the small model, the LiGO-grown model before any further pretraining, after it,
  and the large model from scratch, by pretraining eval loss (what every record holds) and by downstream
  scores where runs were evaluated (tasks/evals writes eval.json into the run directory).
- `generalisation_table`: each method's training loss over its last evaluation interval beside its final eval
  loss (where the fit went), one row per computation.
A saving that was never reached is written "not reached", never as a number; a seed without a scratch run of
the same seed has none either ("no scratch s1").
"""
from __future__ import annotations

import math
import re

import pandas as pd

from analysis import names
from analysis.identical import merge
from analysis.savings import MACHINE_SPEED_TOLERANCE

GLUE_ORDER = ["SST-2", "MNLI", "MNLI-mm", "MRPC", "CoLA", "QNLI", "QQP", "STS-B", "RTE", "WNLI"]
DOWNSTREAM_ORDER = GLUE_ORDER + ["SQuADv1.1 F1", "SQuADv1.1 EM", "SQuADv2.0 F1", "SQuADv2.0 EM", "Avg. GLUE",
                                 "CIFAR10", "CIFAR100", "Flowers", "Cars", "ChestXRay8"]
DOWNSTREAM_ORDER += [f"AF {c}" for c in GLUE_ORDER + ["Avg. GLUE"]]   # Table 6 (AdapterFusion)
WALL_NOTE = "† the record has no wall time for the operator fit (step 0 logs wall 0.0): wall saving without the fit"
SPEED_NOTE = (f"‡ the machine ran this method's training (a seed of it) more than {MACHINE_SPEED_TOLERANCE}x faster "
              "or slower per FLOP than its scratch seed's (savings_seeds.csv: speed_vs_scratch): its wall-time saving "
              "measures the machine's load more than the method; compare FLOPs")
OTHER_MACHINE = "other machine"
MACHINE_NOTE = (f"{OTHER_MACHINE}: the seeds named ran on another device or thread count than their scratch seed "
                "(savings_seeds.csv: machine): a wall time compares only on one machine, so their wall saving is not "
                "computed; compare FLOPs")
DRAWS_NOTE = ("§ the growth operator's random draws (its seed) were seed 0's in the seeds named: records made "
              "before a run's --seed reached its method (config.json method.config.seed); the spread over seeds then "
              "leaves out the operator's; `python -m bench.sweeps` reports them stale and re-runs them once moved away")
DISTILLED_NOTE = ("* a teacher ran in this interval (KI before its distillation weight reaches 0): the training loss "
                  "mixes in the distillation term")
RECIPE_NOTE = ("¶ trained under another recipe than its task's scratch run, outside any named grown recipe (the "
               "report's problems name the fields that differ): its row compares two recipes, not two starts under "
               "one")
# Table 3's runs: a LiGO start and its fit-steps variants, `ligo-fit<N>` (bench/sweeps/registry.py), `ligo_copy-fit<N>`
LIGO_STARTS = ("ligo", "ligo_copy")
FIT_STEPS_LABEL = re.compile(r"^(?P<start>ligo|ligo_copy)(-fit\d+)?$")


def method_of(label: str) -> str:
    """The method part of a label: sweeps name variants `ligo-fit500`, run.py's default directories
    `ligo+layer_drop0.1` (training strategies)."""
    return re.split(r"[-+]", label, maxsplit=1)[0]


def is_variant(label: str) -> bool:
    return method_of(label) != label


def display(label: str) -> str:
    """A label's name in tables and legends: its method's display name (as its records declare it, analysis/names.py),
    a variant's after it in brackets ("LiGO (fit500)"); a label of no known method as it is."""
    head = method_of(label)
    rest = label[len(head):].lstrip("-")
    return names.name(label) or (f"{names.name(head)} ({rest})" if names.name(head) and rest else label)


def label_key(label: str) -> tuple:
    """The methods' row order (the paper's, as each method declares it), each method before its variants, variants in
    natural order (fit50 < fit300)."""
    head = method_of(label)
    natural = tuple((0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", label) if t)
    return (names.rank(head), label != head, natural)


def seeds_text(values) -> str:
    """"s0 s1": the seeds among `values`, each once, in order."""
    return " ".join(f"s{int(s)}" for s in sorted(set(values)))


def pct(mean: float, std: float = math.nan) -> str:
    if mean is None or pd.isna(mean):
        return "not reached"
    return f"{100 * mean:.1f}%" + ("" if pd.isna(std) else f" ± {100 * std:.1f}")


def num(mean: float, std: float = math.nan, digits: int = 3) -> str:
    if mean is None or pd.isna(mean):
        return "--"
    return f"{mean:.{digits}f}" + ("" if pd.isna(std) else f" ± {std:.{digits}f}")


def saving_cell(row: pd.Series, col: str) -> str:
    """Mean ± std over the seeds that reached, then which seeds have no number and why."""
    missing = row.get("missing") or ""
    if row["n_reached"] == 0:
        # every seed paired and none got there: plainly "not reached"; else which seeds lack what
        return "not reached" if missing.startswith("not reached:") and ";" not in missing else missing
    elsewhere = (row.get("wall_elsewhere") or "") if "wall" in col else ""
    if elsewhere:       # see MACHINE_NOTE: those seeds' wall savings are not computed
        missing = "; ".join(filter(None, [missing, f"{OTHER_MACHINE}: {elsewhere}"]))
        if pd.isna(row[f"{col}_mean"]):
            return missing
    if col.endswith("_with_small") and pd.isna(row[f"{col}_mean"]):
        return "unknown"            # the small model came from --small: its pretraining cost is not recorded
    return pct(row[f"{col}_mean"], row[f"{col}_std"]) + (f" ({missing})" if missing else "")


def _downstream(runs: pd.DataFrame, adapters: bool | None = False, row_seeds: dict | None = None) -> pd.DataFrame:
    """Downstream score cells per label, columns in the paper's order: the mean over the seeds evaluated, ± their
    sample std where there are several, and which seeds, e.g. "75.00 (s0)", where they are fewer than the row's
    (row_seeds: label -> the row's seeds; default the label's seeds in `runs`): a row's "Seeds" count must not be
    read as the downstream column's. adapters: False = full fine-tuning only (Table 1/2), True = AdapterFusion
    columns only (Table 6), None = everything."""
    rows = [{"label": r["label"], "seed": r["seed"], **r["downstream"]} for _, r in runs.iterrows() if r["downstream"]]
    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame(rows)
    scores = [c for c in df if c not in ("label", "seed") and (adapters is None or c.startswith("AF ") == adapters)]
    cols = [c for c in DOWNSTREAM_ORDER if c in scores] + sorted(c for c in scores if c not in DOWNSTREAM_ORDER)
    if row_seeds is None:
        row_seeds = {label: set(part["seed"]) for label, part in runs.groupby("label")}
    cells = {}
    for label, part in df.groupby("label"):
        for c in cols:
            got = part.dropna(subset=[c])
            if got.empty:
                continue
            cell = f"{got[c].mean():.2f}" + (f" ± {got[c].std(ddof=1):.2f}" if len(got) > 1 else "")
            seeds = sorted(set(got["seed"]))
            if set(seeds) != set(row_seeds.get(label, seeds)):
                cell += " (" + ", ".join(f"s{s}" for s in seeds) + ")"
            cells.setdefault(label, {})[c] = cell
    return pd.DataFrame.from_dict(cells, orient="index", columns=cols)


# growbench's own "incl. small-model pretraining" columns charge the small model's pretraining to the method:
# a comparison for someone who has no small model yet. The paper has no such column (its App. C.1, Figure 7,
# grows from a small model trained briefly and still charges only the large model's training).
SAVING_COLUMNS = (("saving_flops", "Savings (FLOPs)"), ("saving_flops_no_fit", "Savings excl. fit (FLOPs)"),
                  ("saving_wall", "Savings (Walltime)"),
                  ("saving_flops_with_small", "Savings incl. small-model pretraining (FLOPs)"),
                  ("saving_wall_with_small", "Savings incl. small-model pretraining (Walltime)"))


def _partial(merged, label: str) -> str:
    """' (s0 = Net2Net)' for a label that is the same computation as another on some seeds only."""
    by_seed = {}
    for seed, other in merged.partial.get(label, []):
        by_seed.setdefault(seed, []).append(other)
    cells = [f"s{seed} = " + " = ".join(map(display, sorted(others, key=label_key)))
             for seed, others in sorted(by_seed.items())]
    return f" ({', '.join(cells)})" if cells else ""


def one_label_a_computation(merged, labels) -> list[tuple[str, str]]:
    """(label, row name) per computation among `labels`, in the paper's order: the first of a computation's labels
    speaks for the others ("StackBERT = Net2Net"), a label that is one computation with another on some seeds only
    is marked ("(s0 = Net2Net)")."""
    shown, printed, rows = set(labels), set(), []
    for label in sorted(shown, key=label_key):
        group = sorted(set(merged.group(label)) & shown, key=label_key)
        if printed & set(group):
            continue
        printed |= set(group)
        rows.append((label, " = ".join(map(display, group)) + _partial(merged, label)))
    return rows


def _fixed_draws(runs: pd.DataFrame) -> str:
    """' § (s1 s2)' where some of a label's seeds drew the operator's randomness with another seed than their own
    (a method with a `seed` option whose recorded seed is not the run's), else ''."""
    fixed = sorted(seed for seed, cfg in zip(runs["seed"], runs["method_config"])
                   if isinstance(cfg, dict) and "seed" in cfg and cfg["seed"] != seed)
    return f" § ({' '.join(f's{seed}' for seed in fixed)})" if fixed else ""


def _recipe_mark(runs: pd.DataFrame) -> str:
    """' ¶' where a run of the row trained under another recipe than scratch's (see RECIPE_NOTE), else ''."""
    return " ¶" if runs["recipe_differs"].notna().any() else ""


def savings_table(summary: pd.DataFrame, runs: pd.DataFrame, task: str, scale: str, variants: bool = True,
                  adapters: bool | None = False) -> pd.DataFrame:
    """Table 1/2 layout for one task and scale (rows: scratch first, then the paper's order). variants=False
    keeps the main comparison only (labels without a suffix, as the paper's tables), not e.g. ligo-fit500;
    adapters=True gives Table 6 (AdapterFusion scores in place of full fine-tuning)."""
    s = summary[(summary["task"] == task) & (summary["scale"] == scale)]
    if not variants and not s.empty:
        s = s[~s["label"].map(is_variant)]
    if s.empty:
        return pd.DataFrame()
    r = runs[(runs["task"] == task) & (runs["scale"] == scale) & (runs["role"] == "large")]
    down = _downstream(r, adapters)
    acc = s["metric"].iloc[0] == "eval_acc"
    merged, rows = merge(r), []
    by_label = s.set_index("label", drop=False)
    for label, row_name in one_label_a_computation(merged, s["label"]):
        row = by_label.loc[label]
        is_scratch = row["method"] == "scratch" and row["label"] == "scratch"
        cells = {"Method": row_name}
        for col, name in SAVING_COLUMNS:
            cells[name] = "--" if is_scratch else saving_cell(row, col)
            if "wall" in col and row["fit_wall_missing"] and not pd.isna(row[f"{col}_mean"]):
                cells[name] += " †"   # see WALL_NOTE: the operator fit's wall time is not in the record
            if "wall" in col and row.get("machine_differs") and not pd.isna(row[f"{col}_mean"]):
                cells[name] += " ‡"   # see SPEED_NOTE: the run and its scratch seed ran at different speeds
        final = f"Final eval {'acc.' if acc else 'loss'}"
        cells[final] = (pct(row["final_mean"], row["final_std"]) if acc
                        else num(row["final_mean"], row["final_std"]))
        if not down.empty:
            for c in down.columns:
                v = down[c].get(row["label"], math.nan)
                cells[c] = "--" if pd.isna(v) else v
        mine = r[r["label"] == row["label"]]
        cells["Seeds"] = str(row["n_seeds"]) + _fixed_draws(mine) + _recipe_mark(mine)
        rows.append(cells)
    return pd.DataFrame(rows)


def generalisation_table(runs: pd.DataFrame, task: str, scale: str) -> pd.DataFrame:
    """Where each run's fit went: the training loss of its last evaluation interval (frames: closing_train_loss)
    beside its final eval loss, and the gap between them, seed mean ± std; the small model first, then the paper's
    order, one row per computation as in `savings_table`. Two starts that end at one eval loss can have fit the
    training tokens very differently: the lower training loss is then fit that does not carry to held-out tokens."""
    r = runs[(runs["task"] == task) & (runs["scale"] == scale) & runs["role"].isin(["small", "large"])]
    r = r[r["closing_train_loss"].notna() & r["final_loss"].notna()]
    if r.empty:
        return pd.DataFrame()
    large = r[r["role"] == "large"]
    small = r[r["role"] == "small"]      # "small", and e.g. "small-ligo-smallshort": a variant's own small model
    parts = [(display(label), small[small["label"] == label]) for label in sorted(set(small["label"]), key=label_key)]
    parts += [(name, large[large["label"] == label])
              for label, name in one_label_a_computation(merge(large), large["label"])]
    rows = []
    for name, part in parts:
        train, final = part["closing_train_loss"].astype(float), part["final_loss"].astype(float)
        # std(ddof=1) of one seed is NaN, which num() leaves out
        rows.append({"Method": name,
                     "Training loss (last eval interval)": num(train.mean(), train.std(ddof=1))
                     + (" *" if part["closing_distilled"].any() else ""),
                     "Final eval loss": num(final.mean(), final.std(ddof=1)),
                     "Eval − training": num((final - train).mean(), (final - train).std(ddof=1)),
                     "Seeds": str(len(part)) + _recipe_mark(part)})
    return pd.DataFrame(rows)


def fit_steps_table(summary: pd.DataFrame, runs: pd.DataFrame, task: str, scale: str) -> pd.DataFrame:
    """Table 3: one row per fit-steps setting of each LiGO start that has fit-steps variants (labels `ligo`,
    `ligo-fit<N>`; `ligo_copy`, `ligo_copy-fit<N>`)."""
    s = summary[(summary["task"] == task) & (summary["scale"] == scale)
                & summary["label"].str.match(FIT_STEPS_LABEL)]
    r = runs[(runs["task"] == task) & (runs["scale"] == scale)]
    starts = {FIT_STEPS_LABEL.match(label)["start"] for label in s["label"] if label != method_of(label)}
    rows = []
    for _, row in s.iterrows():
        start = FIT_STEPS_LABEL.match(row["label"])["start"]
        if start not in starts:                  # a start without fit-steps variants is no Table 3
            continue
        cfg = r[r["label"] == row["label"]]["method_config"].iloc[0]
        rows.append({"order": (LIGO_STARTS.index(start), pd.to_numeric(cfg.get("fit_steps"), errors="coerce")),
                     "Start": display(start), "# of Steps": str(cfg.get("fit_steps", "?")),
                     "+FLOPs": f"{row['fit_flops']:.3g}", "Savings": saving_cell(row, "saving_flops")})
    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame(rows).drop_duplicates("order")
    return df.sort_values("order").drop(columns="order").reset_index(drop=True)


def init_table(runs: pd.DataFrame, task: str, scale: str, label: str | None = None) -> pd.DataFrame:
    """Table 5: small (scratch), large grown with `label` before / after pretraining, large from scratch.
    The grown-but-untrained row takes its eval loss from step 0 of the `label` runs and its downstream scores
    from runs labelled `<label>-init` (a grown model evaluated downstream without training), if any. Default label:
    the first LiGO start with `-init` runs, else `ligo`."""
    r = runs[(runs["task"] == task) & (runs["scale"] == scale)]
    if label is None:
        label = next((start for start in LIGO_STARTS if (r["label"] == f"{start}-init").any()), "ligo")
    small = r[(r["role"] == "small") & (r["label"] == "small")]
    grown = r[(r["role"] == "large") & (r["label"] == label)]
    grown_init = r[(r["role"] == "large") & (r["label"] == f"{label}-init")]
    scratch = r[(r["role"] == "large") & (r["label"] == "scratch")]
    if grown.empty:
        return pd.DataFrame()
    acc = grown["final_acc"].notna().any()
    final, init = ("final_acc", "init_acc") if acc else ("final_loss", "init_loss")
    name = names.name(label) or label
    spec = [("Small (scratch)", small, final, small), (f"Large ({name} init)", grown, init, grown_init),
            (f"Large ({name} init + pretrain)", grown, final, grown), ("Large (scratch)", scratch, final, scratch)]
    rows = []
    for title, part, col, evaluated in spec:
        vals = pd.to_numeric(part[col], errors="coerce").dropna()
        cell = {"Model": title, f"Eval {'acc.' if acc else 'loss'}":
                num(vals.mean() if len(vals) else math.nan, vals.std(ddof=1) if len(vals) > 1 else math.nan),
                "Seeds": str(len(vals))}
        down = (_downstream(evaluated.assign(label=title), row_seeds={title: set(part.loc[part[col].notna(), "seed"])})
                if len(evaluated) else pd.DataFrame())
        if not down.empty:
            cell.update({c: down[c].iloc[0] for c in down.columns if not pd.isna(down[c].iloc[0])})
        rows.append(cell)
    return pd.DataFrame(rows).fillna("--")


def to_markdown(df: pd.DataFrame, caption: str = "") -> str:
    """A GitHub-Markdown table (no tabulate dependency)."""
    if df.empty:
        return f"{caption}\n\n(no data)\n" if caption else "(no data)\n"
    head = "| " + " | ".join(map(str, df.columns)) + " |"
    sep = "|" + "|".join(":---" if i == 0 else "---:" for i in range(len(df.columns))) + "|"
    body = ["| " + " | ".join(str(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(([caption, ""] if caption else []) + [head, sep] + body) + "\n"


def _tex(text: str) -> str:
    text = str(text).replace("\\", r"\textbackslash{}")
    for a, b in (("%", r"\%"), ("_", r"\_"), ("&", r"\&"), ("#", r"\#"), ("±", r"$\pm$"), ("→", r"$\rightarrow$"),
                 ("†", r"$^\dagger$"), ("‡", r"$^\ddagger$"), ("§", r"\S{}"), ("¶", r"\P{}"), ("−", "$-$")):
        text = text.replace(a, b)
    return text


def to_latex(df: pd.DataFrame, caption: str = "", label: str = "") -> str:
    """A LaTeX table in the paper's style (first column left, a rule after it), plain tabular + hlines."""
    if df.empty:
        return f"% {caption}: no data\n"
    spec = "l|" + "c" * (len(df.columns) - 1)
    lines = [r"\begin{table}", r"\centering"]
    if caption:
        lines.append(rf"\caption{{{_tex(caption)}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    lines += [rf"\begin{{tabular}}{{{spec}}}", r"\hline",
              " & ".join(rf"\textbf{{{_tex(c)}}}" for c in df.columns) + r" \\", r"\hline"]
    lines += [" & ".join(_tex(v) for v in row) + r" \\" for row in df.itertuples(index=False)]
    lines += [r"\hline", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"
