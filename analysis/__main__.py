"""Regenerate every table and figure from a directory of run records, in seconds:

    python -m analysis --runs records/mini --out results/mini

Writes to --out: report.md (what was read, what was skipped and why, every table), the paper's tables
(table1/2/3/5-<scale>.md/.tex), the paper's figures (figure2..8-<scale>.png/.pdf), for every task found a
savings table (savings-<task>-<scale>.md/.tex) and a curve figure (curves-<task>-<scale>.png/.pdf), and the
numbers behind them (savings_seeds.csv: per run; savings_summary.csv: per method, mean and std over seeds),
and regime.md (analysis/regime.py: is each task in a regime where savings mean something; also on stdout). Beside
them, what says why: recipes-/recipe-curves- (the grown model's recipe), starts- (LiGO's start taken apart),
twins- (copy symmetry; analysis/axes.py) and generalisation-<task>-<scale>.md (each method's closing training loss
beside its final eval loss: where its fit went; analysis/tables.py).
A figure or table whose runs are absent is listed as such, not drawn empty.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from analysis import axes, figures, regime, tables, verdict
from analysis.frames import curves_frame, runs_frame
from analysis.load import load_runs
from analysis.output import out_problem, staged
from analysis.savings import all_savings, summarize
from runs.signals import stop_signals_as_interrupt, stop_status, stopped_by

# the paper's tables: name -> (task, builder, caption). Table 4 (model configurations) is the task registry
# itself (tests check it). Table 6 is written only where runs carry AdapterFusion scores (eval.json "adapters").
DEFAULT_FORMATS = ["png", "pdf"]
REPRODUCE = Path(__file__).resolve().parents[1] / "REPRODUCE.md"   # where the verdict's reasons are
PAPER_TABLES = {
    "table1": ("bert_small_base", "savings", "Table 1: BERT-Small→BERT-Base, savings and downstream scores"),
    "table2": ("deit_s_b", "savings", "Table 2: DeiT-S→DeiT-B, savings and accuracy"),
    "table3": ("bert_small_base", "fit_steps", "Table 3: effect of the number of LiGO growing (fit) steps"),
    "table5": ("bert_small_base", "init", "Table 5: LiGO initialisation without further pretraining"),
    "table6": ("bert_small_base", "adapters", "Table 6: BERT-Small→BERT-Base, savings and AdapterFusion GLUE"),
}
NEEDS = {"savings": "scratch and method runs", "fit_steps": "scratch plus ligo / ligo-fit<N> (or ligo_copy) runs",
         "init": "a ligo run and the small-s<seed> record",
         "adapters": "runs evaluated with the adapters suite"}
TARGET_NOTE = ("Savings (paper §4.1): method seed s against scratch seed s only; target = that scratch seed's final "
               "eval loss (vision: accuracy), denominator = its total FLOPs / wall seconds. Cost to reach the "
               "target: cumulative FLOPs / wall seconds of the large model at its full architecture (shallower "
               "stages never count), interpolated linearly between eval points, operator fit included. Saving = "
               "1 - method/scratch, mean ± sample std over seeds. 'no scratch s<N>': that seed has no scratch run "
               "of its own, so no saving. 'incl. small-model pretraining': growbench's own columns (not the "
               "paper's), which also charge the small model's pretraining to the method; 'excl. fit': growbench's "
               "column that leaves the operator fit out, to show how much of the order the fit's share decides. "
               "A label with a grown-recipe suffix (ligo-warmup0) trained the grown model with that preset and is "
               "measured against scratch's own recipe. 'not reached': the run "
               "never got to the target. 'A = B': the labels are one computation (same fingerprint or a "
               "recorded twin), one row.")


def build_table(kind: str, summary, runs, task: str, scale: str):
    if kind == "savings":
        return tables.savings_table(summary, runs, task, scale, variants=False)
    if kind == "fit_steps":
        return tables.fit_steps_table(summary, runs, task, scale)
    if kind == "adapters":
        table = tables.savings_table(summary, runs, task, scale, variants=False, adapters=True)
        return table if any(c.startswith("AF ") for c in table.columns) else table.iloc[0:0]
    return tables.init_table(runs, task, scale)


def markdown(df, caption: str) -> str:
    text = tables.to_markdown(df, f"**{caption}**")
    return text + "".join(f"\n{note}\n" for note in notes(df))


def notes(df) -> list[str]:
    """The footnotes a table's cells call for (†: no fit wall time; ‡: machine speed differs; §: operator draws
    fixed at seed 0; *: a teacher ran in the interval a training loss was read over; ¶: another recipe than
    scratch's; "other machine": a wall saving not computed)."""
    cells = df.astype(str)
    marks = (("†", tables.WALL_NOTE), ("‡", tables.SPEED_NOTE), ("§", tables.DRAWS_NOTE), ("*", tables.DISTILLED_NOTE),
             ("¶", tables.RECIPE_NOTE), (tables.OTHER_MACHINE, tables.MACHINE_NOTE))
    return [note for mark, note in marks if cells.apply(lambda c: c.str.contains(mark, regex=False)).any().any()]


def write_table(df, out: Path, stem: str, caption: str) -> list[Path]:
    md, tex = out / f"{stem}.md", out / f"{stem}.tex"
    md.write_text(markdown(df, caption))
    # one caption in LaTeX, the notes as its sentences (markdown puts them under the table)
    tex.write_text(tables.to_latex(df, ". ".join([caption, *notes(df)]), f"table:{stem}"))
    return [md, tex]


def headline_line(df, task: str, scale: str, checks) -> str:
    """One line per task for the terminal: the main comparison's FLOPs savings in the table's order (`df`: the
    savings table without variants such as 'ligo-warmup0'), a failed regime check said first."""
    rows = [r for _, r in df.iterrows() if r["Method"] != tables.display("scratch")]
    cells = "; ".join(f"{r['Method']} {r['Savings (FLOPs)']}" for r in rows) or "no growth run yet (scratch only)"
    warning = " [regime check failed]" if regime.caption_warning(checks, task, scale) else ""
    return f"  {task} [{scale}]{warning}: {cells}\n"


def targets(seeds, task: str, scale: str) -> str:
    """'s0 4.012, s1 4.030': each scratch seed's final value, the target of the method seed of the same seed (three
    decimals, as regime.md gives them: '4.03' would read as less precise)."""
    t = seeds[(seeds["task"] == task) & (seeds["scale"] == scale) & seeds["paired"]]
    return ", ".join(f"s{s} {v:.3f}" for s, v in t.groupby("seed")["target"].first().items())


def command_line(args) -> str:
    """The analysis command that wrote an output, as a user would type it again (report.md says it)."""
    parts = ["python -m analysis", f"--runs {args.runs}"]
    if getattr(args, "controls", None) is not None:
        parts.append(f"--controls {args.controls}")
    parts.append(f"--out {args.out}")
    if list(args.formats) != DEFAULT_FORMATS:
        parts.append("--formats " + " ".join(args.formats))
    return " ".join(parts)


def check_args(args) -> str | None:
    """Why these arguments cannot work (one line), or None: checked before a file is written, so a typo in
    --formats does not come after twenty files. --out must be new, empty, or an earlier analysis's output (it
    holds the .written list): another folder's files (a user's report.md) would be overwritten, and a run
    record would be mixed with tables (analysis/output.py out_problem)."""
    for flag, name in (("--runs", "runs"), ("--out", "out")):
        if getattr(args, name) == "":                  # Path("") would be "." silently
            return f"{flag}: an empty path; give a directory (. for this one)"
        setattr(args, name, Path(getattr(args, name)))
    if not args.runs.is_dir():
        return f"--runs {args.runs}: " + ("a file, not a directory" if args.runs.exists() else "no such directory")
    if getattr(args, "controls", None) is not None and not args.controls.is_dir():
        return (f"--controls {args.controls}: " + ("a file, not a directory" if args.controls.exists()
                                                   else "no such directory"))
    from matplotlib.backend_bases import FigureCanvasBase
    known = sorted(FigureCanvasBase.get_supported_filetypes())
    for fmt in args.formats:
        if fmt not in known:
            return f"--formats {fmt}: not a figure format matplotlib writes; known: {', '.join(known)}"
    return out_problem(args.out)


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse refusing in one `error: ...` line and exit 2, as run.py's parser of the same name does (analysis
    imports nothing of the runner: it reads only the record format, so it keeps its own three lines)."""

    def error(self, message):
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def main(argv=None) -> int:
    p = OneLineArgumentParser(prog="python -m analysis", description=__doc__.split("\n")[0])
    p.add_argument("--runs", required=True, help="directory searched (recursively) for run records")
    p.add_argument("--out", required=True, help="where tables, figures and report.md go (new, empty, or an "
                   "earlier analysis's output)")
    p.add_argument("--formats", nargs="+", default=DEFAULT_FORMATS, help="figure formats (default: png pdf)")
    p.add_argument("--controls", type=Path, default=None,
                   help="records of the no-growth control (bench/experiments/small_continued.py), for the regime check")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    problem = check_args(args)      # all before anything is read or written
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    runs_list, problems = load_runs(args.runs)
    for prob in problems:
        print(prob, file=sys.stderr)
    args.control_runs = []
    if args.controls is not None:
        args.control_runs, control_problems = load_runs(args.controls)
        for prob in control_problems:
            print(prob, file=sys.stderr)
        if not args.control_runs:
            print(f"error: --controls {args.controls}: no complete run records there", file=sys.stderr)
            return 1
    if not runs_list:
        print(f"error: no complete run records under {args.runs}", file=sys.stderr)
        return 1
    try:
        with stop_signals_as_interrupt(), staged(args.out) as (staging, publish):
            written = write_all(args, runs_list, problems, staging)
            stale = publish(written)
    except KeyboardInterrupt:
        print(f"error: interrupted{stopped_by()}; --out {args.out} is as it was", file=sys.stderr)
        return stop_status()
    except OSError as e:           # a full disk, a quota, a path that cannot be written: the file and why
        print(f"error: {e.filename or f'--out {args.out}'}: {e.strerror or e}; --out {args.out} is as it was",
              file=sys.stderr)
        return 1
    print(f"{len(written)} files written to {args.out} from {len(runs_list)} runs in "
          f"{time.perf_counter() - t0:.1f} s{f' ({stale} stale ones removed)' if stale else ''}; "
          f"see {args.out / 'report.md'}")
    return 0


def write_all(args, runs_list, problems, out: Path) -> list[Path]:
    """Every table, figure and report of the analysis, written into `out` (the staging folder); returns them."""
    runs, curves = runs_frame(runs_list), curves_frame(runs_list)
    seeds = all_savings(curves, runs)
    summary = summarize(seeds)
    written = []
    if not seeds.empty:
        seeds.to_csv(out / "savings_seeds.csv", index=False)
        summary.to_csv(out / "savings_summary.csv", index=False)
        written += [out / "savings_seeds.csv", out / "savings_summary.csv"]

    report = [f"# Analysis of {args.runs}", "", f"Written by `{command_line(args)}`.", "",
              f"{len(runs_list)} complete runs read; "
              f"{sum(p.kind in ('incomplete', 'corrupt', 'duplicate') for p in problems)} left out.", "",
              TARGET_NOTE, ""]
    checks = regime.check_all(runs, runs_frame(args.control_runs) if args.controls is not None else None)
    (out / "regime.md").write_text(f"# Regime checks ({args.runs})\n\n{regime.__doc__}\n"
                                        + regime.to_markdown(checks))
    written.append(out / "regime.md")
    print(regime.to_text(checks), end="")
    report += ["## Regime checks", "", regime.to_markdown(checks)]
    if problems:
        report += ["## Runs left out or flagged", ""]
        report += [f"- {p.kind}: `{p.dir}` — {p.message}" for p in problems] + [""]
    groups = sorted(set(zip(runs.loc[runs["role"] == "large", "task"], runs.loc[runs["role"] == "large", "scale"])))
    scales = sorted({s for _, s in groups})
    missing = []
    for scale in scales:                # the verdict first: the answer at a glance, its reasons linked
        df = verdict.verdict_table(seeds, runs, checks, scale, os.path.relpath(REPRODUCE, args.out.resolve()))
        if not df.empty:
            caption = (f"Verdict [{scale} scale]: one line per result of the paper, computed from these records "
                       f"(analysis/verdict.py says how each is judged)")
            written += write_table(df, out, f"verdict-{scale}", caption)
            report += [f"## Verdict [{scale}]", "", markdown(df, caption), ""]
    report += ["## Paper tables", ""]
    for scale in scales:
        for name, (task, kind, caption) in PAPER_TABLES.items():
            df = build_table(kind, summary, runs, task, scale) if not summary.empty or kind == "init" else None
            if df is None or df.empty:
                missing.append(f"{name}-{scale} (needs {NEEDS[kind]} of {task})")
                continue
            caption = f"{caption} [{scale} scale]{regime.caption_warning(checks, task, scale)}"
            written += write_table(df, out, f"{name}-{scale}", caption)
            report += [markdown(df, caption), ""]
    report += ["## Savings per task", ""]
    headline = []
    for task, scale in groups:
        df = tables.savings_table(summary, runs, task, scale) if not summary.empty else None
        if df is None or df.empty:
            missing.append(f"savings-{task}-{scale} (no scratch run: no target)")
            continue
        caption = (f"{task} [{scale}]: targets (scratch final per seed) {targets(seeds, task, scale)}"
                   + regime.caption_warning(checks, task, scale))
        written += write_table(df, out, f"savings-{task}-{scale}", caption)
        report += [markdown(df, caption), ""]
        headline.append(headline_line(tables.savings_table(summary, runs, task, scale, variants=False), task, scale,
                                      checks))
    report += ["## Why: the grown model's recipe, LiGO's start and copy symmetry", ""]

    def add_table(df, stem: str, caption: str) -> None:
        """A table of the "why" section into --out and report.md; none where it has no rows."""
        if not df.empty:
            written.extend(write_table(df, out, stem, caption))
            report.extend([markdown(df, caption), ""])

    for task, scale in groups:
        rows = axes.recipe_rows(seeds, runs, task, scale)
        if axes.has_recipe_axis(rows):
            caption = (f"{task} [{scale}]: FLOPs saving by the grown model's recipe (tasks/grown_recipes.py), each "
                       "seed against its own scratch seed trained with the task's recipe; (n/m): seeds that reached "
                       "scratch's final of those run" + regime.caption_warning(checks, task, scale))
            df = axes.recipe_table(rows)
            written += write_table(df, out, f"recipes-{task}-{scale}", caption)
            written += axes.recipe_figure(rows, task, scale, out, args.formats)
            report += [markdown(df, caption), "", f"![recipes](recipes-{task}-{scale}.png)", ""]
            df = axes.recipe_curve_table(curves, rows, task, scale)
            caption = (f"{task} [{scale}]: where the curves stand under each grown recipe (eval loss, accuracy for "
                       "images; seed mean, at "
                       "the steps named and at the end; scratch with the task's recipe): the order of the starts when "
                       "a recipe leaves every one short of scratch's final")
            add_table(df, f"recipe-curves-{task}-{scale}", caption)
        add_table(axes.start_parts_table(curves, summary, task, scale), f"starts-{task}-{scale}",
                  f"{task} [{scale}]: LiGO as its authors started it, taken apart: its copy start with LiGO's "
                  "parts added one group a row (eval metric, seed mean; FLOPs saved as in the savings table; "
                  "step from above: the row's saving minus the one above it, in points)"
                  + regime.caption_warning(checks, task, scale))
        add_table(tables.generalisation_table(runs, task, scale), f"generalisation-{task}-{scale}",
                  f"{task} [{scale}]: where the fit went: the training loss of the last evaluation interval (the loss "
                  "minimised, under the recipe's dropout and augmentation) against the final eval loss, seed mean ± "
                  "std; a start whose training loss ends lower at the same eval loss fit the training tokens in a way "
                  "held-out ones do not share")
        points = axes.twin_points(curves, runs, task, scale, axes.old_twin_rows(runs_list))
        if not points.empty:
            caption = (f"{task} [{scale}]: share of the added units that are twins of another unit (incoming weights "
                       "within 1%; models/twins.py), at step 0 → at the end, seed mean; gap: median relative distance "
                       "of the added units to their nearest unit at the end"
                       + (f"; {axes.OLD_D_MARK} {axes.OLD_D}" if axes.old_d_names(points) else ""))
            df = axes.twins_table(points)
            written += write_table(df, out, f"twins-{task}-{scale}", caption)
            written += axes.twins_figure(points, task, scale, out, args.formats)
            report += [markdown(df, caption), "", f"![twins](twins-{task}-{scale}.png)", ""]
    figs = []
    for scale in scales:
        for name in figures.PAPER_FIGURES:
            got = figures.paper_figure(curves, name, scale, out, args.formats)
            figs += got
            if not got:
                missing.append(f"{name}-{scale} (no runs for any of its panels)")
        for task, s in groups:
            if s == scale:
                figs += figures.curve_figure(curves, task, scale, out, args.formats)
    written += figs
    report += ["## Figures", ""] + [f"- [{f.name}]({f.name})" for f in figs if f.suffix == ".png"] + [""]
    if missing:
        report += ["## Not produced (no runs for them)", ""] + [f"- {m}" for m in missing] + [""]
    print("savings (FLOPs, mean ± std over seeds; every row in savings-<task>-<scale>.md):")
    print("".join(headline), end="")
    (out / "report.md").write_text("\n".join(report))
    written.append(out / "report.md")
    return written


if __name__ == "__main__":
    sys.exit(main())
