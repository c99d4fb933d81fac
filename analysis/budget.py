"""The budget study: one pair's FLOPs savings at several training budgets, every growth method beside the no-growth
control, so that a reader sees where growth starts to pay and whether the order changes on the way into the regime.

    python -m analysis.budget --task bert_small_base --seeds 0 1 --out results/budget \\
        --point 1x=records/mini:records/small-continued \\
        --point 2x=records/probes/bert-2x/runs:records/probes/bert-2x/controls \\
        --point 4x=records/bert-6400:records/bert-6400-control

A point is NAME=RUNS[:CONTROLS]: a root of run records holding the task's scratch runs (and whatever growth runs were
made) at one budget, and the root of its no-growth control (bench/experiments/small_continued.py: task
<task>_smallcont, the small model trained on under the large recipe, nothing grown). Every number is
analysis/savings.py's seed_savings (seed s against scratch seed s of the same point); the control is put through the
same function as one more label, so its saving follows the rule a method's does. Each point's regime checks are
analysis/regime.py's. Only a method's main label counts (`ligo`, not the variant `ligo-warmup0`). The budget each
point stands at (steps, tokens) is read from its scratch records, never from its NAME.

Writes into --out: budget-<task>.png/.pdf (the figure), budget-<task>.md (the caption, the table, what it shows
(analysis/budget_verdict.py), each point's regime checks) and budget-<task>-seeds.csv (one row a seed). Bad input is
one `error:` line, exit 2, nothing written.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.transforms import blended_transform_factory  # noqa: E402

from analysis import figures, names, regime, styles  # noqa: E402
from analysis.budget_verdict import section  # noqa: E402
from analysis.__main__ import DEFAULT_FORMATS, OneLineArgumentParser, check_args  # noqa: E402
from analysis.frames import curves_frame, runs_frame  # noqa: E402
from analysis.load import identity, load_runs  # noqa: E402
from analysis.output import staged  # noqa: E402
from analysis.savings import seed_savings, summarize  # noqa: E402
from analysis.tables import display, is_variant, label_key, pct, saving_cell, seeds_text  # noqa: E402
from runs.signals import stop_signals_as_interrupt, stop_status, stopped_by  # noqa: E402

CONTROL = "control"        # the label the no-growth control takes among a point's runs (no method has this name)
CONTROL_NAME = "Control: the small model trained on"
ABSENT = "—"
CSV_COLUMNS = ["point", "steps", "tokens", "label", "method", "seed", "target", "final", "flops_to_target",
               "scratch_flops", "saving_flops", "reached", "note"]


class Refused(ValueError):
    """Input the study cannot use: one line, exit 2, before anything is written."""


@dataclass
class Point:
    name: str
    roots: str                      # as given, for the caption
    runs: pd.DataFrame              # runs_frame of the task, the control relabelled into it; scale = the point's name
    curves: pd.DataFrame
    checks: list                    # analysis/regime.py's checks at this budget
    steps: int
    tokens: float | None            # large-model training tokens (summary units), None where a record lacks them
    pair: tuple | None              # figures.pair: (family, small shape, large family, large shape)
    problems: list


def parse_point(text: str) -> tuple[str, Path, Path | None]:
    name, sep, roots = text.partition("=")
    if not sep or not name or not roots:
        raise Refused(f"--point {text}: give NAME=RUNS[:CONTROLS], e.g. 1x=records/mini:records/small-continued")
    runs, colon, controls = roots.partition(":")
    paths = [("RUNS", runs)] + ([("CONTROLS", controls)] if colon else [])
    for part, path in paths:
        if not path:
            raise Refused(f"--point {text}: {part} is empty")
        if not Path(path).is_dir():
            raise Refused(f"--point {name}: {path}: " + ("a file, not a directory" if Path(path).exists()
                                                         else "no such directory"))
    return name, Path(runs), Path(controls) if colon else None


def _of_task(runs: list, task: str, seeds) -> list:
    return [r for r in runs if identity(r)[0] == task and (seeds is None or identity(r)[4] in seeds)]


def load_point(name: str, runs_root: Path, controls_root: Path | None, task: str, seeds) -> Point:
    found, problems = load_runs(runs_root)
    mine = _of_task(found, task, seeds)
    runs, curves = runs_frame(mine), curves_frame(mine)
    scratch = runs[(runs["role"] == "large") & (runs["label"] == "scratch") & runs["trained"]]
    if scratch.empty:
        there = sorted({identity(r)[0] for r in found if identity(r)[2] == "large"})
        raise Refused(f"--point {name}: no scratch run of {task} under {runs_root}"
                      + (f" (seeds {' '.join(map(str, seeds))})" if seeds else "")
                      + (f"; tasks there: {', '.join(there)}" if there else "; no run records there"))
    scales = sorted(set(runs.loc[runs["role"] == "large", "scale"]))
    if len(scales) > 1:
        raise Refused(f"--point {name}: {runs_root} holds {task} at scales {', '.join(scales)}: one budget a point")
    steps = set(scratch["steps"])
    if len(steps) > 1:
        raise Refused(f"--point {name}: scratch's seeds trained {sorted(steps)} steps: one budget a point")
    steps = int(steps.pop())
    units = pd.to_numeric(scratch["units"], errors="coerce")
    pair = figures.pair(curves, task, scales[0])
    # a point is the records the user put together as one budget: the regime probe made scratch under --scale regime
    # and its control under mini with the same --set budget, so the scale's name is replaced by the point's
    runs, curves = runs.assign(scale=name), curves.assign(scale=name)
    controls = None
    if controls_root is not None:
        c_found, c_problems = load_runs(controls_root)
        problems += c_problems
        c_mine = [r for r in _of_task(c_found, task + regime.CONTROL_SUFFIX, seeds) if identity(r)[2] == "large"]
        if not c_mine:
            raise Refused(f"--point {name}: no control run of {task} ({task}{regime.CONTROL_SUFFIX}) under "
                          f"{controls_root}")
        controls, c_curves = runs_frame(c_mine).assign(scale=name), curves_frame(c_mine).assign(scale=name)
        if set(controls["steps"]) != {steps}:
            raise Refused(f"--point {name}: the control trained {sorted(set(controls['steps']))} steps, scratch "
                          f"{steps}: not one budget")
        as_label = {"task": task, "label": CONTROL, "method": CONTROL}
        runs = pd.concat([runs, controls.assign(**as_label)], ignore_index=True)
        curves = pd.concat([curves, c_curves.assign(**as_label)], ignore_index=True)
    checks = regime.check_task(runs[runs["label"] != CONTROL], task, name, controls)
    ours = (f"{task}-", f"{task}{regime.CONTROL_SUFFIX}-")       # the problems of other tasks' records are not ours
    problems = [p for p in problems if any(part.startswith(ours) for part in p.dir.parts)]
    return Point(name, f"{runs_root}" + (f" + {controls_root}" if controls_root else ""), runs, curves, checks,
                 steps, float(units.max()) if units.notna().all() else None, pair, problems)


def point_savings(points: list[Point], task: str) -> pd.DataFrame:
    """seed_savings of every point, main labels and the control only, with the point's budget beside each row."""
    parts = []
    for p in points:
        s = seed_savings(p.curves, p.runs, task, p.name)
        s = s[(s["label"] == CONTROL) | ((s["label"] != "scratch") & ~s["label"].map(is_variant))]
        parts.append(s.assign(point=p.name, steps=p.steps, tokens=p.tokens))
    return pd.concat(parts, ignore_index=True)


def shown(label: str) -> str:
    return CONTROL_NAME if label == CONTROL else display(label)


def labels_of(seeds: pd.DataFrame) -> list[str]:
    """Growth methods in the paper's order, the control last."""
    have = set(seeds["label"])
    return sorted(have - {CONTROL}, key=label_key) + ([CONTROL] if CONTROL in have else [])


def budget_text(p: Point) -> str:
    return f"{p.steps:,} steps" + (f", {p.tokens:,.0f} tokens" if p.tokens is not None else "")


def regime_status(p: Point) -> tuple[str, str]:
    """(PASS | FAIL | n/a, the sentence the caption says of this budget)."""
    failed = [c for c in p.checks if c.status == "FAIL"]
    unknown = [c for c in p.checks if c.status.startswith("n/a")]
    control = next((c for c in p.checks if c.name.startswith("the small model trained on")), None)
    if control is not None and control.status == "FAIL":
        text = ("FAIL: the small model trained on, nothing grown, reaches scratch's final value, so a saving here "
                "measures how much of the small model's training a start keeps, not what growth is worth "
                f"[{control.detail}]")
        others = [c.name for c in failed if c is not control]
        if others:       # the small model on the unigram plateau as well, say: a second reason, named
            text += f"; failed too: {'; '.join(others)}"
    elif failed:
        text = f"FAIL ({'; '.join(c.name for c in failed)}): these savings do not rank the methods"
    else:
        text = "every check made passes"
    if control is None:
        text += "; no control given: whether growth is needed at this budget is not checked"
    if unknown:
        text += "; not checked: " + "; ".join(f"{c.name} ({c.status.removeprefix('n/a (').rstrip(')')})"
                                             for c in unknown)
    return ("FAIL" if failed else "n/a" if unknown or control is None else "PASS"), text


def cell(summary: pd.DataFrame, seeds: pd.DataFrame, label: str, point: str) -> str:
    """Mean ± std over the seeds that reached, the seeds counted named; ABSENT where the label has no run there."""
    row = summary[(summary["label"] == label) & (summary["scale"] == point)]
    if row.empty:
        return ABSENT
    row = row.iloc[0]
    if row["n_reached"] == 0:
        return saving_cell(row, "saving_flops")
    ok = seeds[(seeds["label"] == label) & (seeds["point"] == point) & seeds["reached"]]
    return (f"{pct(row['saving_flops_mean'], row['saving_flops_std'])} ({seeds_text(ok['seed'])}"
            + (f"; {row['missing']}" if row["missing"] else "") + ")")


def table(points: list[Point], seeds: pd.DataFrame, summary: pd.DataFrame) -> str:
    head = "| | " + " | ".join(p.name for p in points) + " |"
    lines = [head, "|:---|" + "---:|" * len(points),
             "| large model's budget | " + " | ".join(budget_text(p) for p in points) + " |",
             "| scratch seeds | " + " | ".join(seeds_text(p.runs.loc[p.runs["label"] == "scratch", "seed"])
                                               for p in points) + " |",
             "| regime check | " + " | ".join(regime_status(p)[0] for p in points) + " |"]
    for label in labels_of(seeds):
        lines.append(f"| {shown(label)} | " + " | ".join(cell(summary, seeds, label, p.name) for p in points) + " |")
    return "\n".join(lines) + "\n"


def pair_text(pair) -> str:
    if pair is None:
        return ""
    return f"{pair[0]} {pair[1]} → {pair[3] if pair[0] == pair[2] else f'{pair[2]} {pair[3]}'}"


def caption(points: list[Point], seeds: pd.DataFrame, summary: pd.DataFrame, task: str) -> str:
    growth = [lab for lab in labels_of(seeds) if lab != CONTROL]
    present = {(lab, pt) for lab, pt in zip(seeds["label"], seeds["point"])}
    text = [f"**{task}, {pair_text(points[0].pair)}: FLOPs saved against scratch at {len(points)} training budgets.** "
            "Each saving is analysis/savings.py's: method seed s against scratch seed s of the same budget, the cost "
            "to reach scratch's final eval loss at the full architecture, the operator fit charged and the small "
            "model's pretraining not; mean ± sample std over the seeds that reached it (the seeds counted in "
            "brackets); in the figure a bar spans the seeds and a dot is one. The control (black, dashed, hollow "
            "squares) is the small model trained on under the large model's recipe, nothing grown "
            "(bench/experiments/small_continued.py), measured by the same rule (the table's last row). Scratch saves 0 "
            "by definition.", ""]
    for p in points:
        ctl = p.runs.loc[p.runs["label"] == CONTROL, "seed"]
        text.append(f"- **{p.name}**: {budget_text(p)} (from its scratch records); scratch seeds "
                    f"{seeds_text(p.runs.loc[p.runs['label'] == 'scratch', 'seed'])}, control seeds "
                    f"{seeds_text(ctl) if len(ctl) else 'none'}; records {p.roots}. Regime: {regime_status(p)[1]}.")
    absent = []
    for p in points:
        missing = [shown(lab) for lab in growth if (lab, p.name) not in present]
        if missing and len(missing) == len(growth):
            absent.append(f"every growth method at {p.name} (no growth run there)")
        elif missing:
            absent.append(f"{', '.join(missing)} at {p.name}")
    if absent:
        text.append("\nAbsent (no run at that budget; not drawn there, not interpolated, a line broken across it): "
                    + "; ".join(absent) + ".")
    unreached = [f"{shown(r['label'])} at {r['scale']} ({r['missing']})" for _, r in summary.iterrows()
                 if r["n_reached"] == 0]
    if unreached:
        text.append("\nNo saving (no seed reached scratch's final; a hollow triangle at the figure's foot): "
                    + "; ".join(unreached) + ".")
    return "\n".join(text) + "\n"


def figure(points: list[Point], seeds: pd.DataFrame, summary: pd.DataFrame, task: str, out: Path,
           formats) -> list[Path]:
    tokens = all(p.tokens is not None for p in points)
    x = {p.name: p.tokens if tokens else p.steps for p in points}
    fig, ax = plt.subplots(figsize=(7.5, 5), layout="constrained")
    ax.set_xscale("log", base=2)
    # the closest two budgets, in octaves (3x and 4x are 0.42 apart, 1x and 2x one): the methods' sideways spread and
    # the grey bands stay inside it, so one budget's marks do not run into the next's
    octaves = sorted(np.log2(list(x.values())))
    gap = min(np.diff(octaves), default=1.0)
    spread, half_band = min(0.4, 0.6 * gap), min(0.5, gap / 2)
    for p in points:                      # grey where a saving does not measure growth (the regime check fails)
        if regime_status(p)[0] == "FAIL":
            ax.axvspan(x[p.name] / 2 ** half_band, x[p.name] * 2 ** half_band, color="0.92", zorder=0)
    ax.axhline(0, color=names.color("scratch"), lw=1, label=f"{display('scratch')} (0 by definition)")
    labels = labels_of(seeds)
    foot = blended_transform_factory(ax.transData, ax.transAxes)
    for i, label in enumerate(labels):
        # a small sideways shift per label (a fraction of an octave) so that seeds of methods at one budget don't hide
        # each other; the tick marks the budget itself
        shift = 2 ** (spread * ((i + 0.5) / len(labels) - 0.5))
        color = "black" if label == CONTROL else styles.color(label)
        style = dict(ls="--", marker="s", mfc="white") if label == CONTROL else dict(ls="-", marker="o")
        xs, means = [], []
        for p in points:
            row = summary[(summary["label"] == label) & (summary["scale"] == p.name)]
            xs.append(x[p.name] * shift)
            means.append(100 * row["saving_flops_mean"].iloc[0] if len(row) else np.nan)   # NaN: the line breaks
            ok = seeds[(seeds["label"] == label) & (seeds["point"] == p.name) & seeds["reached"]]
            if len(ok):
                vals = 100 * ok["saving_flops"].to_numpy(float)
                ax.vlines(xs[-1], vals.min(), vals.max(), color=color, lw=1)
                ax.scatter([xs[-1]] * len(vals), vals, s=9, color=color, zorder=3)
            elif len(row):
                ax.plot(xs[-1], 0.02, marker="v", mfc="white", color=color, transform=foot, clip_on=False)
        ax.plot(xs, means, color=color, label=shown(label), ms=6, **style)
    ticks = [x[p.name] for p in points]
    ax.set_xticks(ticks, [f"{p.name}\n{p.steps:,} steps" + (f"\n{p.tokens / 1e6:.1f}M tokens" if tokens else "")
                          + f"\nregime {regime_status(p)[0]}" for p in points], fontsize=8)
    ax.minorticks_off()
    ax.set_xlim(min(ticks) / 2 ** 0.75, max(ticks) * 2 ** 0.75)
    ax.set_xlabel(f"large model's training budget ({'tokens' if tokens else 'steps'}, log scale; grey: the regime "
                  "check fails)")
    ax.set_ylabel("FLOPs saved against scratch (%)")
    ax.set_title(f"{pair_text(points[0].pair) or task}: saving vs training budget", fontsize=10)
    fig.legend(loc="outside lower center", ncol=3, fontsize=7, frameon=False)
    return figures.save(fig, out / f"budget-{task}", formats)


def verdict(points: list[Point], seeds: pd.DataFrame, summary: pd.DataFrame, task: str) -> str:
    growth = [lab for lab in labels_of(seeds) if lab != CONTROL]
    return section(points, seeds, summary, task, growth, lambda p: regime_status(p)[0])


def write(points: list[Point], task: str, out: Path, formats, command: str) -> list[Path]:
    seeds = point_savings(points, task)
    summary = summarize(seeds)
    stem = f"budget-{task}"
    written = figure(points, seeds, summary, task, out, formats)
    checks = "".join(f"\n### Regime checks at {p.name}\n\n{regime.to_markdown(p.checks)}" for p in points)
    (out / f"{stem}.md").write_text(f"# Saving vs training budget: {task}\n\nWritten by `{command}`.\n\n"
                                    f"{caption(points, seeds, summary, task)}\n![budget]({stem}.png)\n\n"
                                    f"{table(points, seeds, summary)}\n{verdict(points, seeds, summary, task)}"
                                    f"{checks}")
    seeds.reindex(columns=CSV_COLUMNS).to_csv(out / f"{stem}-seeds.csv", index=False)
    return written + [out / f"{stem}.md", out / f"{stem}-seeds.csv"]


def main(argv=None) -> int:
    p = OneLineArgumentParser(prog="python -m analysis.budget", description=__doc__.split("\n")[0])
    p.add_argument("--task", required=True, help="the pair's task name (bert_small_base)")
    p.add_argument("--point", action="append", required=True, metavar="NAME=RUNS[:CONTROLS]",
                   help="one budget: its run records' root and its no-growth control's root (repeat for each)")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds to read (default: every one found)")
    p.add_argument("--out", required=True, help="where the figure, table and csv go (new, empty, or an earlier "
                   "analysis's output)")
    p.add_argument("--formats", nargs="+", default=DEFAULT_FORMATS, help="figure formats (default: png pdf)")
    args = p.parse_args(argv)
    try:
        parsed = [parse_point(text) for text in args.point]
        dup = {n for n, _, _ in parsed if [q[0] for q in parsed].count(n) > 1}
        if dup:
            raise Refused(f"--point {sorted(dup)[0]}: given twice")
        # --out and --formats under the analysis's own rules (analysis/__main__.py), a point's root standing as --runs
        problem = check_args(SimpleNamespace(runs=parsed[0][1], out=args.out, formats=args.formats, controls=None))
        if problem:
            raise Refused(problem)
        points = [load_point(name, runs, controls, args.task, args.seeds) for name, runs, controls in parsed]
        pairs = {pair_text(pt.pair) for pt in points}
        if len(pairs) > 1:
            raise Refused(f"--task {args.task}: the points grow different pairs ({'; '.join(sorted(pairs))})")
    except Refused as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    points.sort(key=lambda pt: (pt.tokens or 0, pt.steps))
    for pt in points:
        for prob in pt.problems:
            print(prob, file=sys.stderr)
    command = " ".join(["python -m analysis.budget", f"--task {args.task}"] + [f"--point {t}" for t in args.point]
                       + ([f"--seeds {' '.join(map(str, args.seeds))}"] if args.seeds else []) + [f"--out {args.out}"]
                       + ([f"--formats {' '.join(args.formats)}"] if list(args.formats) != DEFAULT_FORMATS else []))
    try:
        with stop_signals_as_interrupt(), staged(Path(args.out)) as (staging, publish):
            written = write(points, args.task, staging, args.formats, command)
            publish(written)
    except KeyboardInterrupt:
        print(f"error: interrupted{stopped_by()}; --out {args.out} is as it was", file=sys.stderr)
        return stop_status()
    except OSError as e:
        print(f"error: {e.filename or f'--out {args.out}'}: {e.strerror or e}; --out {args.out} is as it was",
              file=sys.stderr)
        return 1
    print(f"{len(written)} files written to {args.out}; see {Path(args.out) / f'budget-{args.task}.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
