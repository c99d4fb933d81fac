"""What a finished growth run saved, read against the committed records of its task: the scratch run of the same task,
scale and seed in its scale's canonical root (records/README.md), by the rule every savings table uses
(analysis/savings.py), and whether that root's regime checks pass for the task (analysis/regime.py, with the root's
no-growth controls). run.py prints these lines after a run, so the README's job ends with its saving and its regime.

A committed scratch run counts only where it is the same computation as the run's task: the task record equal to the
run's (logging fields and per-scale method defaults aside: runs/record.compared_task). Otherwise (a `--set`, a recipe
changed since the record was made, another scale) the lines say which fields differ and give no number: a saving
against another recipe's scratch would be a wrong number, not an approximate one. Where the two were trained on other
devices the line says so: the same computation, other numerics.
"""
from __future__ import annotations

import math
from pathlib import Path

from runs.record import compared_task, differing_keys, load_run, run_machine

REPO = Path(__file__).resolve().parents[1]
# scale -> (the root of its canonical comparison, the root of its no-growth controls): records/README.md's table
CANONICAL = {"regime": ("records/regime", "records/regime-control"),
             "mini": ("records/mini", "records/small-continued")}


def _device(run) -> str:
    # a run resumed on another device ran on both ("cpu then cuda")
    return run_machine(run.config, lambda env: str((env or {}).get("device") or "?"))


def _shown(path: Path, repo: Path) -> Path:
    """`path` as the lines name it: relative to the repository where it lies inside it."""
    return path.relative_to(repo) if path.is_relative_to(repo) else path


def reference_lines(run_dir: Path, repo: Path | None = None) -> list[str]:
    """The lines run.py prints after the run in `run_dir`: its saving against the committed scratch run of its task,
    scale and seed, and that task's regime verdict; or one line saying why there is none. Nothing for a scratch run,
    a run that trained no steps, or a scale without a canonical root (paper, tiny)."""
    repo = Path(repo or REPO)
    run = load_run(Path(run_dir))
    if (run.config.get("task") or {}).get("scale") not in CANONICAL:
        return []
    # (here, not above: a tiny run's closing lines should not wait for pandas)
    from analysis import names, regime
    from analysis.frames import curves_frame, runs_frame
    from analysis.load import identity, load_runs, trained
    from analysis.savings import seed_savings
    from analysis.tables import display
    task, scale, role, label, seed = identity(run)
    if role != "large" or run.config["method"]["name"] == "scratch" or not trained(run):
        return []
    runs_root, controls_root = (repo / part for part in CANONICAL[scale])
    folder = runs_root / f"{task}-{scale}"
    shown = _shown(folder, repo)
    scratch_dir = folder / f"scratch-s{seed}"
    if not (scratch_dir / "summary.json").exists():
        return [f"saving: none measured: no committed scratch run of {task} at {scale}, seed {seed} ({shown}/"
                f"scratch-s{seed}; records/README.md says which runs each root holds and what is pending)"]
    scratch = load_run(scratch_dir)
    # the per-scale method defaults are not the computation: a step-count default stretched with another budget (MSG's
    # ramp) changes no scratch run
    differ = differing_keys(*(compared_task(r.config["task"]) for r in (scratch, run)))
    if differ:
        return [f"saving: none measured: the committed scratch run ({shown}/scratch-s{seed}) trained another task "
                f"than this run (differs in {', '.join(differ[:4])}{' ...' if len(differ) > 4 else ''})"]
    committed, _ = load_runs(folder)
    # the task's committed runs, this run in place of a committed one of its label and seed
    mine = identity(run)
    together = [r for r in committed if identity(r) != mine] + [run]
    frame, curves = runs_frame(together), curves_frame(together)
    rows = seed_savings(curves, frame, task, scale)
    mine_rows = rows[(rows["label"] == label) & (rows["seed"] == seed)] if len(rows) else rows
    if not len(mine_rows):
        return [f"saving: none measured: the committed scratch run ({shown}/scratch-s{seed}) has no evaluation to "
                f"measure against"]
    row = mine_rows.iloc[0]
    metric = "eval accuracy" if row["metric"] == "eval_acc" else "eval loss"
    names.learn(run.config["method"])
    shown_name = display(label)
    fmt = (lambda v: f"{100 * v:.2f}%") if row["metric"] == "eval_acc" else (lambda v: f"{v:.4f}")
    where = f"scratch: {shown}/scratch-s{seed}"
    if _device(scratch) != _device(run):
        where += f", trained on {_device(scratch)}, this run on {_device(run)}: the same computation, other numerics"
    if row["reached"]:
        fit = (f" ({100 * row['saving_flops_no_fit']:.1f}% without its fit)"
               if row["fit_flops"] > 0 and not math.isnan(row["saving_flops_no_fit"]) else "")
        lines = [f"saving: {shown_name} reached scratch's final {metric}, {fmt(row['target'])}, with "
                 f"{100 * row['saving_flops']:.1f}% fewer FLOPs{fit}; {where}"]
    else:
        lines = [f"saving: none: {shown_name} ended at {fmt(row['final'])}, short of scratch's final {metric}, "
                 f"{fmt(row['target'])}; {where}"]
    controls = runs_frame(load_runs(controls_root)[0]) if controls_root.is_dir() else None
    checks = regime.check_task(frame, task, scale, controls)
    failed = [c.name for c in checks if c.status == "FAIL"]
    missing = [c.name for c in checks if c.status.startswith("n/a")]
    if failed:
        lines.append(f"regime: FAIL, not met: {'; '.join(failed)}"
                     + (f" (no record for: {'; '.join(missing)})" if missing else "")
                     + ". At this budget the saving does not measure what growth is worth (REPRODUCE.md, 'The regime')")
    elif missing:
        lines.append(f"regime: not established: no record for {'; '.join(missing)} ({shown}, "
                     f"{_shown(controls_root, repo)})")
    else:
        lines.append(f"regime: PASS, all {len(checks)} checks over the committed seeds ({shown} and its controls): "
                     f"the saving measures growth")
    return lines
