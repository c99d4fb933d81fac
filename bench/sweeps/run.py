"""One run of a sweep, wherever it runs: its directory, its task and method built from the plan's entry, and
`run_one`, which makes it (trained, resumed, recorded as its twin, or skipped) and evaluates it. bench/sweeps/cli.py
calls `run_one` for every run of its plan in its own process; a submitit job (bench/sweeps/launch.py) calls the same
function on the same run directory. What the sweep does to a run directory (status, twins, pruning) is
bench/sweeps/records.py's; this module is torch-free at import, so that `python -m bench.sweeps --help` stays light."""
from __future__ import annotations

import time
import traceback
from pathlib import Path

from bench.sweeps.records import (evaluate, find_twin, record_as_twin, small_record_source, stale_reason, status,
                                 twin_name)
from bench.sweeps.registry import Entry


def run_dir(out: Path, entry: Entry, scale: str, seed: int) -> Path:
    return out / f"{entry.task}-{scale}" / f"{entry.name}-s{seed}"


def check_common_key(key: str, method: str, shared: set) -> None:
    """A --set key must mean something to every run it is given to: refused before any run, in one line (an
    entry's own unknown setting, by contrast, is a method or option not written yet: that entry is unavailable)."""
    from methods import METHODS
    from methods.base import config_fields
    from models.family import unknown
    if key in shared or key in config_fields(METHODS[method]):
        return
    owners = sorted(name for name, cls in METHODS.items() if key in config_fields(cls))
    if owners:
        raise ValueError(f"--set {key}: an option of {', '.join(owners)}, not of method '{method}'; "
                         f"select the methods that have it with --methods")
    raise ValueError(unknown("--set key", key, shared | set(config_fields(METHODS[method])))
                     + f" (recipe fields, small_recipe.<recipe field>, small.<spec field>, large.<spec field>, "
                       f"training strategies, data_path, tokenizer, and the options of '{method}')")


def build(entry: Entry, scale: str, common: tuple = ()):
    """(task, method, strategies) for an entry, or raise LookupError saying what is missing. Settings go where
    run.py --set sends them (runs/settings.py: method options, recipe and small_recipe fields, model specs,
    data, training strategies), typed as the fields they replace. `common` settings (--set, as text) apply to
    every entry, e.g. data_path=... at paper scale; they never enter the run's label."""
    from methods import METHODS, get_method
    from methods.base import config_fields
    from runs.settings import route, task_keys
    from runs.strategies import strategies_from_settings
    from tasks import get_task
    if entry.method not in METHODS:
        raise LookupError(f"method '{entry.method}' is not registered yet")
    task = get_task(entry.task, scale=scale)
    shared = task_keys(task)
    for key, _ in common:
        check_common_key(key, entry.method, shared)
    for key, _ in entry.settings:
        if key not in shared and key not in config_fields(METHODS[entry.method]):
            raise LookupError(f"neither method '{entry.method}', the recipe nor the training strategies have "
                              f"an option '{key}' yet")
    task, options, strategies = route(task, METHODS[entry.method], tuple(common) + tuple(entry.settings))
    if entry.small_steps_frac is not None:
        steps = max(1, round(task.small_recipe.steps * entry.small_steps_frac))
        task = task.with_(small_recipe=task.small_recipe.with_(steps=steps))
    chosen = strategies_from_settings(strategies) if strategies else None
    return task, get_method(entry.method, task=task, **options), chosen


def train(task, method, strategies, path: Path, seed: int, device: str, resume: bool, log) -> None:
    from runs.experiment import run_experiment
    extra = {"strategies": strategies} if strategies is not None else {}
    run_experiment(task, method, seed=seed, device=device, out=path, resume=resume, progress=False,
                   eval_lines=True, log=lambda msg: log(f"    {msg}"), **extra)


def run_one(entry: Entry, seed: int, i: int, n: int, out: Path, scale: str, common: tuple, dry_run: bool,
            device: str, eval_suites: list[str] | None, eval_options, log, train=train,
            evaluate=evaluate) -> tuple[dict[str, list[str]], bool | None]:
    """Run `i` of the `n` of a plan: build it, report it unavailable or stale, skip it when complete, record it as
    its twin or train (resume) it, evaluate it and its small model on `eval_suites`. Returns what it adds to the
    sweep's outcome and whether the caller should then copy the small model's record beside it and may prune it:
    None (nothing there to finish: unavailable, stale, planned, or its training failed), True, or False (trained
    but not evaluated: keep the weights for another try). `train` and `evaluate`: the callers' (a test replaces
    them in bench.sweeps; a job's evaluation waits for another job's of the same small model)."""
    path = run_dir(Path(out), entry, scale, seed)
    state, where = status(path), f"[{i}/{n}] {path}"
    outcome: dict[str, list[str]] = {}
    add = lambda key, item: outcome.setdefault(key, []).append(item)   # noqa: E731
    try:
        task, method, strategies = build(entry, scale, common)
        method = method.for_run(seed)      # the draws run_experiment gives it: what its record says
    except LookupError as e:
        log(f"{where}: unavailable ({e})")
        add("unavailable", f"{path}: {e}")
        return outcome, None
    stale = stale_reason(path, task, method, strategies) if state == "done" else None
    if stale:
        log(f"{where}: complete, but {stale}: not this sweep's result; move it away to re-run it")
        add("stale", f"{path}: {stale}")
        return outcome, None
    if dry_run or state == "done":
        log(f"{where}: " + ("complete, skipped" if state == "done" else f"would {state.replace('new', 'run')}"))
        add("done" if state == "done" else "planned", str(path))
        if dry_run:
            return outcome, None
    step, ok = "training", True
    try:   # one failing run must not stop the rest of the sweep
        twin = find_twin(task, method, strategies, path, seed, device, log) if state == "new" else None
        if twin is not None:
            record_as_twin(path, twin, method, task)
            log(f"{where}: the same computation as {twin_name(path, twin)}: its record, not run again")
            add("same computation", f"{path} = {twin_name(path, twin)}")
            state = "done"
        if state != "done":
            log(f"{where}: {'resuming' if state == 'resume' else 'running'} ...")
            t0 = time.perf_counter()
            train(task, method, strategies, path, seed, device, state == "resume", log)
            log(f"{where}: finished in {time.perf_counter() - t0:.0f} s")
            add("ran", str(path))
        step = "evaluation"
        for target in ([path, small_record_source(path)] if eval_suites else []):
            if target is not None:
                evaluate(target, eval_suites, eval_options, log)
    except Exception as e:
        log(f"{where}: {step} FAILED {type(e).__name__}: {e}")
        log("".join(traceback.format_exception(e)[-3:]))
        add("failed", f"{path} ({step}): {type(e).__name__}: {e}")
        if step == "training":
            return outcome, None
        ok = False          # trained but not evaluated: keep the weights for another try
    return outcome, ok
