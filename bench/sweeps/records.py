"""What a sweep reads from and does to a run directory: its state (done, resume, new), whether a complete record
is still this sweep's computation, the twin a run need not repeat, the small model's record copied beside it,
downstream evaluation before pruning, and the pruning itself. bench/sweeps/cli.py runs what bench/sweeps/registry.py
plans; this is its I/O."""
from __future__ import annotations

import shutil
from pathlib import Path

# runs.record is stdlib only: importing it here costs `--list` and `--dry-run` nothing
from runs.atomic import read_json
from runs.record import CONFIG, EVAL_FILE, METRICS, SUMMARY, copy_record, result_differences

RECORD_FILES = (CONFIG, METRICS, SUMMARY, EVAL_FILE)   # eval.json: if evaluated


def status(path: Path) -> str:
    if (path / SUMMARY).exists():
        return "done"
    return "resume" if (path / CONFIG).exists() else "new"


def stale_reason(path: Path, task, method, strategies) -> str | None:
    """Why the complete record in `path` is not the run this entry would make now (its task, method or strategies
    were recorded with another configuration: a recipe changed since), or None. A sweep must not count such a
    record as done: its numbers belong to another computation."""
    from runs.record import comparable_method, compared_task, differing_keys, jsonable
    recorded = read_json(path / CONFIG)
    was = {"task": compared_task(recorded.get("task")), "method": comparable_method(recorded.get("method") or {}),
           "strategies": recorded.get("strategies")}
    now = {"task": compared_task(task.to_dict()), "method": comparable_method(method.describe()),
           "strategies": strategies.record() if strategies is not None and strategies.active else None}
    for key, value in now.items():
        before, value = jsonable(was[key]), jsonable(value)
        if before != value:
            if isinstance(before, dict) and isinstance(value, dict):
                differ = ", ".join(differing_keys(before, value))
                return f"its {key} was recorded with another configuration (differs in: {differ})"
            return f"its {key} was recorded as {before!r}, the sweep now runs {value!r}"
    return None


def small_record_source(run: Path) -> Path | None:
    """The cached pretraining run of the small model `run` grew from, if it came from the cache."""
    small = read_json(run / CONFIG).get("small") or {}
    src = Path(small.get("path") or "")
    return src if small.get("source") == "cache" and (src / SUMMARY).exists() else None


def copy_small_record(run: Path, label: str, seed: int) -> str | None:
    """Copy the small model's pretraining record (no weights) next to the run as <label>-s<seed>, once per seed
    and variant (again when the cached one has been evaluated since). A record there of another pretraining (the
    small model pretrained again, on a CPU that does not end it at the record to every digit) is kept, not
    overwritten: it is the one the other runs of that seed grew from. Returns why it was kept, for the sweep's log;
    None otherwise."""
    src = small_record_source(run)
    dst = run.parent / f"{label}-s{seed}"
    if src is None:
        return None
    if (dst / SUMMARY).exists():
        if differ := result_differences(src, dst):
            return (f"{dst} kept: the small model this run grew from, {src}, is another pretraining than that "
                    f"record's ({'; '.join(differ)})")
        if not (src / EVAL_FILE).exists():
            return None
    dst.mkdir(parents=True, exist_ok=True)
    for name in RECORD_FILES:
        if (src / name).exists():
            shutil.copy2(src / name, dst / name)
    return None


def find_twin(task, method, strategies, path: Path, seed: int, device: str, log) -> Path | None:
    """A complete run that is the computation `method` would run in `path`, or None: for a method that grows
    without a fit, one beside `path` (same task directory and seed; a fit is itself the computation, and costs
    to find out); for one that uses no small model, the same label and seed of another task under the same root
    (`twin_in_another_task`)."""
    from methods.base import GrowthMethod
    from runs.computation import initial_fingerprint, logged_fingerprint
    from runs.experiment import pretrain_small
    from runs.small_model import resolve_small
    from runs.record import load_run
    if not method.needs_small:
        return twin_in_another_task(task, method, strategies, path, seed)
    same = same_settings_beside(task, method, strategies, path, seed)
    if same is not None:
        return same
    if type(method).fit is not GrowthMethod.fit or not path.parent.is_dir():
        return None
    siblings = [d for d in sorted(path.parent.glob(f"*-s{seed}")) if d != path and (d / SUMMARY).exists()]
    logged = {}
    for d in siblings:
        run = load_run(d)
        # a twin's twin points at the run that computed it: name that one
        computed_here = "same_computation_as" not in run.config
        if not run.task.endswith(":small") and run.config.get("seed") == seed and computed_here:
            logged[d] = logged_fingerprint(run.metrics)
    if not any(logged.values()):
        return None
    import torch
    small, _ = resolve_small(task, seed, None, torch.device(device), log, False, pretrain_small)
    mine = initial_fingerprint(task, method, seed, small.to(device), strategies)
    return next((d for d, fp in logged.items() if fp == mine), None)


def same_settings_beside(task, method, strategies, path: Path, seed: int) -> Path | None:
    """A complete run beside `path`, of this seed and computed there, recorded with exactly this task, method config
    and strategies under another label (two labels of one setting: `ligo` where a family's default is what
    `ligo-noise0.1` sets explicitly), or None. Found by the records alone, so it holds for methods with a fit too."""
    if not path.parent.is_dir():
        return None
    for d in sorted(path.parent.glob(f"*-s{seed}")):
        if d == path or not (d / SUMMARY).exists() or not (d / CONFIG).exists():
            continue
        config = read_json(d / CONFIG)
        if (config.get("seed") == seed and "same_computation_as" not in config
                and not str((config.get("task") or {}).get("name", "")).endswith(":small")
                and stale_reason(d, task, method, strategies) is None):
            return d
    return None


def twin_in_another_task(task, method, strategies, path: Path, seed: int) -> Path | None:
    """For a method that uses no small model: `path`'s label and seed in another task directory under the same
    root that is this run's computation bit for bit (runs.computation.computed_elsewhere)."""
    from runs.computation import computed_elsewhere
    others = [d for d in sorted(path.parent.parent.glob(f"*/{path.name}")) if d.parent != path.parent]
    return computed_elsewhere(task, method, strategies, seed, others)


def record_as_twin(path: Path, twin: Path, method, task) -> None:
    """Give `path` the record of `twin`, the same computation, under `method`'s own name and config and `task`'s
    record (a twin in another task directory is named by its directory and run, e.g.
    "bert_small_base-mini/scratch-s0")."""
    from runs.record import LOGGING_FIELDS, jsonable
    recorded = read_json(twin / CONFIG)
    task_record = jsonable(task.to_dict())
    logged = (recorded.get("task") or {}).get("recipe") or {}
    # the rows are the twin's: so is when they were logged (a record must not say eval_every 200 over rows every 50)
    task_record["recipe"].update({k: logged[k] for k in LOGGING_FIELDS if k in logged})
    config = {**recorded, "method": jsonable(method.describe()), "task": task_record,
              "same_computation_as": twin_name(path, twin)}
    copy_record(twin, path, config)


def twin_name(path: Path, twin: Path) -> str:
    """How `path`'s record names its twin: the run's directory beside it, or "<task dir>/<run>" in another task."""
    return twin.name if twin.parent == path.parent else f"{twin.parent.name}/{twin.name}"


def evaluate(run: Path, suites: list[str], options, log) -> None:
    """Downstream evaluation (tasks/evals) of a finished run, for the suites eval.json does not hold yet, with
    `options` (tasks.evals.EvalOptions: --set eval.KEY=VALUE); it needs the exported model, so it runs before any
    pruning."""
    todo = suites_not_evaluated(run, suites)
    if not todo:
        return
    if not (run / "model").is_dir():
        raise FileNotFoundError(f"{run}: no model/ to evaluate (pruned?); re-run it without --prune")
    from runs.evaluation import evaluate_run
    evaluate_run(run, todo, options=options, log=lambda msg: log(f"    {msg}"))


def suites_not_evaluated(run: Path, suites: list[str]) -> list[str]:
    """The suites of `suites` the run's eval.json does not hold yet."""
    path = run / EVAL_FILE
    have = set((read_json(path).get("suites") or {}) if path.exists() else ())
    return [s for s in suites if s not in have]


def prune(run: Path) -> None:
    """Leave only the record (config, metrics, summary, JSON artefacts): no checkpoint, no weights, no lock file
    (runs/lock.py: a process that opened it before the unlink retries on the new file)."""
    (run / "checkpoint.pt").unlink(missing_ok=True)
    (run / ".lock").unlink(missing_ok=True)
    shutil.rmtree(run / "model", ignore_errors=True)
    for p in run.glob("*.pt"):
        p.unlink()
