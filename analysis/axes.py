"""The axes that explain a comparison: the grown model's recipe and copy symmetry.

- `recipe_table` / `recipe_figure`: one row (one line) per method, one column (one x position) per grown-recipe
  preset (config.json `grown_recipe`, tasks/grown_recipes.py): the FLOPs saving against scratch's own-recipe run,
  mean ± std over seeds, the figure's bars min..max over seeds. Written where a task has runs of some preset other
  than `same`: recipes-<task>-<scale>.md/.tex/.png/.pdf.
- `recipe_curve_table`: where the curves stand under each preset (the eval metric at steps 0, 50, 200 and at the
  end), the comparison that remains when a preset leaves every run short of scratch's final:
  recipe-curves-<task>-<scale>.md/.tex.
- `start_parts_table`: LiGO's start taken apart (bench/sweeps/registry.py official_start_parts): its copy start,
  then LiGO's parts added one group at a time, each row's curve at steps 0, 200, 400, 800 and the end
  and its saving, with the step each row adds to the one above: starts-<task>-<scale>.md/.tex.
- `twins_table` / `twins_figure`: per label, the share of added units still twins of another unit (models/twins.py),
  per space, at step 0 and at the last evaluation, and over training (mean over seeds, band min..max). Written where a
  task's records carry the measure (pairs that grow width): twins-<task>-<scale>.md/.tex/.png/.pdf. D values from
  rows logged before the measure was named (`OLD_D`) carry `OLD_D_MARK`.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from analysis.figures import plt, save
from analysis.styles import color, line_styles
from analysis.identical import merge
from analysis.load import identity
from analysis.savings import target_metric
from analysis.tables import display, label_key, saving_cell

PRESET_ORDER = ("same", "warmup0", "paper_lr", "warmup0_paper_lr", "lr_tenth", "official")
SPACES = ("D", "Q", "K", "V", "F", "H")
SPACE_NAMES = {"D": "residual stream", "Q": "queries", "K": "keys", "V": "values", "F": "FFN", "H": "heads"}


def _preset_key(name: str) -> tuple:
    return (PRESET_ORDER.index(name) if name in PRESET_ORDER else len(PRESET_ORDER), name)


def recipe_rows(seeds: pd.DataFrame, runs: pd.DataFrame, task: str, scale: str) -> pd.DataFrame:
    """Per (method label, preset, seed): the FLOPs saving (NaN where not reached), for the labels whose runs carry a
    grown recipe. The method label is the run label without its preset suffix (`ligo-warmup0` -> `ligo`)."""
    r = runs[(runs["task"] == task) & (runs["scale"] == scale) & (runs["role"] == "large")
             & runs["grown_recipe"].notna()]
    s = seeds[(seeds["task"] == task) & (seeds["scale"] == scale)] if not seeds.empty else seeds
    rows = []
    for _, run in r.iterrows():
        preset = run["grown_recipe"]
        base = run["label"].removesuffix(f"-{preset}") if preset != "same" else run["label"]
        got = s[(s["label"] == run["label"]) & (s["seed"] == run["seed"])] if not s.empty else s
        saving = float(got["saving_flops"].iloc[0]) if len(got) else math.nan
        rows.append({"method": base, "preset": preset, "label": run["label"], "seed": run["seed"], "saving": saving,
                     "reached": bool(len(got) and got["reached"].iloc[0])})
    return pd.DataFrame(rows, columns=["method", "preset", "label", "seed", "saving", "reached"])


def has_recipe_axis(rows: pd.DataFrame) -> bool:
    return not rows.empty and (rows["preset"] != "same").any()


def on_the_axis(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of the methods swept along the axis (some preset other than `same`): the table and the figure
    compare a method with itself under other recipes, not every method of the task at `same`."""
    swept = set(rows.loc[rows["preset"] != "same", "method"])
    return rows[rows["method"].isin(swept)]


def recipe_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Methods x presets: 'mean ± std (n/m)', n seeds that reached scratch's final of m run."""
    rows = on_the_axis(rows)
    presets = sorted(rows["preset"].unique(), key=_preset_key)
    out = []
    for method in sorted(rows["method"].unique(), key=label_key):
        cells = {"Method": display(method)}
        for preset in presets:
            g = rows[(rows["method"] == method) & (rows["preset"] == preset)]
            ok = g["saving"].dropna()
            if g.empty:
                cells[preset] = "--"
            elif ok.empty:
                cells[preset] = f"not reached (0/{len(g)})"
            else:
                std = f" ± {100 * ok.std(ddof=1):.1f}" if len(ok) > 1 else ""
                cells[preset] = f"{100 * ok.mean():.1f}%{std} ({len(ok)}/{len(g)})"
        out.append(cells)
    return pd.DataFrame(out)


def curve_cells(runs: pd.DataFrame, task_curves: pd.DataFrame, steps: tuple[int, ...]) -> dict[str, str]:
    """'step N' and 'end' cells of one label's curves (`runs`, every seed): the metric savings are read on
    (accuracy where the task logs it, as vision runs do beside a loss; else the loss), mean over the seeds that
    logged that step ("--" where none did: runs evaluated every 200 steps have no step 50). `task_curves` (every
    label of the task) decides the metric, so every row of a table shows the same one."""
    metric = target_metric(task_curves)
    shown = (lambda v: f"{100 * v:.2f}%") if metric == "eval_acc" else (lambda v: f"{v:.3f}")
    cells = {}
    for step in (*steps, None):
        at = runs.sort_values("step").groupby("seed").last() if step is None else runs[runs["step"] == step]
        values = at[metric].dropna()
        cells["end" if step is None else f"step {step}"] = shown(values.mean()) if len(values) else "--"
    return cells


def recipe_curve_table(curves: pd.DataFrame, rows: pd.DataFrame, task: str, scale: str,
                       steps: tuple[int, ...] = (0, 50, 200)) -> pd.DataFrame:
    """Where each method's curve stands under each preset, which a saving cannot say when no run reaches scratch's
    final (a lower peak lr at a mini budget): per (method, preset) on the axis, and scratch under the task's recipe,
    the eval metric (loss for text, accuracy for images: what savings are read on) at `steps` and at the end, mean
    over the seeds that logged that step ("--" where none did: runs evaluated every 200 steps have no step 50)."""
    cur = curves[(curves["task"] == task) & (curves["scale"] == scale) & (curves["role"] == "large")]
    rows = on_the_axis(rows)
    label_of = dict(zip(zip(rows["method"], rows["preset"]), rows["label"]))      # the run label of each point
    order = [("scratch", "task's")] + sorted(label_of, key=lambda mp: (_preset_key(mp[1]), label_key(mp[0])))
    out = []
    for method, preset in order:
        label = label_of.get((method, preset), method)
        c = cur[cur["label"] == label]
        if c.empty:
            continue
        cells = {"Recipe": preset, "Method": display(method), **curve_cells(c, cur, steps),
                 "Seeds": str(c["seed"].nunique())}
        out.append(cells)
    return pd.DataFrame(out)


def recipe_figure(rows: pd.DataFrame, task: str, scale: str, out: Path, formats=("png", "pdf")) -> list[Path]:
    """Saving vs grown-model recipe: one line per method, dots the seed mean, bars min..max over seeds; a run that
    never reached scratch's final is drawn as an open marker at the foot of the axes, seen but not read as a number."""
    rows = on_the_axis(rows)
    presets = sorted(rows["preset"].unique(), key=_preset_key)
    styles = line_styles(rows["method"])      # LiGO (copies): LiGO's colour, a variant's line and marker
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for i, method in enumerate(sorted(rows["method"].unique(), key=label_key)):
        xs, means, lo, hi = [], [], [], []
        offset = (i - (rows["method"].nunique() - 1) / 2) * 0.06      # methods side by side at each preset
        for x, preset in enumerate(presets):
            g = rows[(rows["method"] == method) & (rows["preset"] == preset)]
            ok = g["saving"].dropna() * 100
            if len(ok):
                xs.append(x + offset)
                means.append(ok.mean())
                lo.append(ok.mean() - ok.min())
                hi.append(ok.max() - ok.mean())
            if len(g) > len(ok):        # at the foot of the axes, off the saving scale
                ax.plot([x + offset], [0.03], marker="v", mfc="none", color=color(method), ls="none",
                        transform=ax.get_xaxis_transform())
        style, marker = styles[method]
        ax.errorbar(xs, means, yerr=[lo, hi], color=color(method), ls=style, marker=marker, capsize=3,
                    label=display(method))
    ax.set_xticks(range(len(presets)), presets)
    ax.set_xlabel("grown model's recipe (tasks/grown_recipes.py)")
    ax.set_ylabel("FLOPs saving vs scratch (%)")
    ax.axhline(0, color="black", lw=0.8)
    ax.grid(alpha=0.3)
    runs = rows.groupby(["method", "preset"])["seed"].nunique()
    seeds = f"{runs.min()}" if runs.min() == runs.max() else f"{runs.min()}–{runs.max()}"
    ax.set_title(f"{task} [{scale}]: saving vs the grown model's recipe\nmarker: seed mean; bar: min..max over "
                 f"the seeds ({seeds} seeds run per point);\nopen triangle at the foot: a seed that never reached "
                 "scratch's final", fontsize=8)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    return save(fig, out / f"recipes-{task}-{scale}", formats)


# LiGO's start rebuilt from its copy start, one group of its parts a row (methods/ligo.py says what each is;
# bench/sweeps/registry.py official_start_parts makes the runs between the two ends)
START_PARTS = (("ligo_copy", "LiGO's copy start (Net2Net's copies, pseudo-inverse tying, one-hot depth, its fit)"),
               ("ligo_copy-random", "+ LiGO's random width rows"),
               ("ligo-pinv", "+ LiGO's depth init, order and fit"),
               ("ligo", "+ the literal tying (LiGO as its authors started it)"))


def start_parts_table(curves: pd.DataFrame, summary: pd.DataFrame, task: str, scale: str,
                      steps: tuple[int, ...] = (0, 200, 400, 800)) -> pd.DataFrame:
    """One row per rung of START_PARTS (empty unless the task has run every rung: a missing one would fold its part
    into the next row's step, under the wrong name): the eval metric at `steps` and at the end (seed mean), the
    FLOPs saving with and without the fit as the savings table gives it (`summary`: analysis/savings.summarize),
    and the saving's step from the row above (its mean minus the row above's), so that LiGO's lead over its
    copy start reads as the sum of its parts."""
    cur = curves[(curves["task"] == task) & (curves["scale"] == scale) & (curves["role"] == "large")]
    s = summary[(summary["task"] == task) & (summary["scale"] == scale)] if not summary.empty else summary
    if not all((cur["label"] == label).any() for label, _ in START_PARTS):
        return pd.DataFrame()
    out, above = [], math.nan
    for label, name in START_PARTS:
        c = cur[cur["label"] == label]
        got = s[s["label"] == label] if not s.empty else s
        row = got.iloc[0] if len(got) else None
        mean = row["saving_flops_mean"] if row is not None else math.nan
        step = "--" if math.isnan(above) or math.isnan(mean) else f"{100 * (mean - above):+.1f}"
        out.append({"Start": name, **curve_cells(c, cur, steps),
                    "FLOPs saved": saving_cell(row, "saving_flops") if row is not None else "--",
                    "excl. fit": saving_cell(row, "saving_flops_no_fit") if row is not None else "--",
                    "step from above": step, "Seeds": str(c["seed"].nunique())})
        above = mean
    return pd.DataFrame(out)


# A twins row without `twins_measure` was logged before models/twins.py named its measure: its D vector held every
# norm's gain and shift beside the weights, a looser D than the rows that name the measure (models/twins.py
# `incoming`). Its model is not kept, so it cannot be measured again: the table and figure mark it, not mix it.
OLD_D = "D measured with the norm entries (rows logged before commit 5cabb72)"
OLD_D_MARK = "[D with norms]"      # text, not a sign: the table notes' signs (†, ‡, §, *, ¶) are taken


def old_twin_rows(runs_list) -> set[tuple]:
    """(task, scale, role, label, seed, step) of every logged twins row that names no measure (`OLD_D`)."""
    return {(*identity(r), m["step"]) for r in runs_list for m in r.metrics
            if m.get("twins") and "twins_measure" not in m}


def twin_points(curves: pd.DataFrame, runs: pd.DataFrame, task: str, scale: str, old=frozenset()) -> pd.DataFrame:
    """One row per (label, seed, step, space) with the twin fraction and gap there, for the task's large runs; labels
    that are one computation (analysis/identical.py: StackBERT = Net2Net on a width-only pair) are one label, named
    after all of them. `old_d`: the row is one of `old` (`old_twin_rows`) and its space D."""
    cur = curves[(curves["task"] == task) & (curves["scale"] == scale) & (curves["role"] == "large")]
    merged = merge(runs[(runs["task"] == task) & (runs["scale"] == scale)])
    shown = set(cur.loc[cur["twins"].notna(), "label"])
    rows = []
    for _, r in cur[cur["twins"].notna()].iterrows():
        group = sorted(set(merged.group(r["label"])) & shown, key=label_key)
        if group[0] != r["label"]:
            continue                      # drawn under the first label of its computation
        gaps = r["twin_gap"] or {}
        measured_old = (task, scale, "large", r["label"], r["seed"], r["step"]) in old
        for space, value in r["twins"].items():
            rows.append({"label": r["label"], "name": " = ".join(map(display, group)), "seed": r["seed"],
                         "step": r["step"], "space": space, "twins": value, "gap": gaps.get(space, math.nan),
                         "old_d": measured_old and space == "D"})
    return pd.DataFrame(rows, columns=["label", "name", "seed", "step", "space", "twins", "gap", "old_d"])


def old_d_names(points: pd.DataFrame) -> set[str]:
    """The names whose D points include a row measured the old way (`OLD_D`)."""
    if "old_d" not in points:
        return set()
    return set(points.loc[points["old_d"].astype(bool), "name"])


def twins_table(points: pd.DataFrame) -> pd.DataFrame:
    """Per label: each space's twin fraction at step 0 -> at its last evaluation (seed means), and the seeds; a D
    cell with any row measured the old way carries `OLD_D_MARK`."""
    spaces = [s for s in SPACES if s in set(points["space"])]
    marked = old_d_names(points)
    out = []
    for label in sorted(points["label"].unique(), key=label_key):
        g = points[points["label"] == label]
        cells = {"Method": g["name"].iloc[0]}
        for space in spaces:
            p = g[g["space"] == space]
            first = p[p["step"] == p["step"].min()].groupby("seed")["twins"].first()
            last = p.sort_values("step").groupby("seed")["twins"].last()
            gap = p.sort_values("step").groupby("seed")["gap"].last()
            mark = f" {OLD_D_MARK}" if space == "D" and g["name"].iloc[0] in marked else ""
            cells[f"{space} ({SPACE_NAMES[space]})"] = (f"{first.mean():.2f} → {last.mean():.2f} "
                                                       f"(gap {gap.mean():.2g}){mark}") if len(p) else "--"
        cells["Seeds"] = str(g["seed"].nunique())
        out.append(cells)
    return pd.DataFrame(out)


def twins_figure(points: pd.DataFrame, task: str, scale: str, out: Path, formats=("png", "pdf")) -> list[Path]:
    """Copy symmetry over training, one column per grown space (residual stream first): the share of added units
    that are twins (top) and the twin gap, how far the nearest units are apart (bottom, log scale: exact copies sit
    at the floor, drifting ones climb, random units are near 1). A name whose D was measured the old way carries
    `OLD_D_MARK` in the legend, and the title says what it means."""
    spaces = [s for s in SPACES if s in set(points["space"])]
    fig, axes = plt.subplots(2, len(spaces), figsize=(2.8 * len(spaces) + 0.8, 6.4), squeeze=False, sharex=True,
                             layout="constrained")
    labels = sorted(points["label"].unique(), key=label_key)
    styles = line_styles(labels)
    floor = 1e-9                     # exact copies: a gap of 0 drawn at the floor of the log axis
    for col, space in enumerate(spaces):
        for label in labels:
            p = points[(points["label"] == label) & (points["space"] == space)]
            if p.empty:
                continue
            style, marker = styles[label]
            for row, (value, clip) in enumerate((("twins", None), ("gap", floor))):
                stats = p.groupby("step")[value].agg(["mean", "min", "max"])
                if clip:
                    stats = stats.clip(lower=clip)
                ax = axes[row][col]
                ax.plot(stats.index, stats["mean"], color=color(label), ls=style, marker=marker, ms=2.5,
                        label=p["name"].iloc[0])
                if p["seed"].nunique() > 1:
                    ax.fill_between(stats.index, stats["min"], stats["max"], color=color(label), alpha=0.15, lw=0)
        axes[0][col].set_title(f"{space}: {SPACE_NAMES[space]}", fontsize=9)
        axes[0][col].set_ylim(-0.05, 1.05)
        axes[1][col].set_yscale("log")
        axes[1][col].set_ylim(floor / 2, 3)
        axes[1][col].set_xlabel("step")
        for ax in axes[:, col]:
            ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("added units still twins (share)")
    axes[1][0].set_ylabel("twin gap (relative distance)")
    handles = {}
    for ax in axes.flat:                 # every line once, below the panels (never over a curve)
        for h, name in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(name, h)
    seeds = points.groupby("name")["seed"].nunique()
    usual = seeds.mode().max()
    marked = old_d_names(points)
    shown = [(name if seeds[name] == usual else f"{name} [{seeds[name]} seed{'' if seeds[name] == 1 else 's'}]")
             + (f" {OLD_D_MARK}" if name in marked else "") for name in handles]
    fig.legend(list(handles.values()), shown, fontsize=7, loc="outside lower center", ncol=min(4, len(shown)),
               frameon=False, handlelength=3.5)
    fig.suptitle(f"{task} [{scale}]: copy symmetry over training (line: mean over {usual} seed(s), or the number in "
                 f"brackets, band: min..max over them;\ntwins: incoming weights within 1%; a gap of 0 drawn at "
                 f"{floor:g}){f'; {OLD_D_MARK} {OLD_D}' if marked else ''}", fontsize=9)
    return save(fig, out / f"twins-{task}-{scale}", formats)
