"""The sweep runner: the runs behind every table and figure of the paper (bench/sweep_registry.py says which), made,
resumed, pruned and evaluated.

    python -m bench.sweeps --list                                    # the sweeps and what each covers
    python -m bench.sweeps mini --scale mini --seeds 0 1 --out records/mini --eval mini --prune
    python -m bench.sweeps bert --seeds 0 1 --out records/regime --prune          # the default scale: regime
    python -m bench.sweeps bert --dry-run                            # the plan: done / resume / new / unavailable
    python -m bench.sweeps recipes --runs ligo-warmup0 --seeds 0     # one run of a sweep, by its label
    python -m analysis --runs records/mini --out results/mini           # then the tables and figures

Runs land in OUT/<task>-<scale>/<label>-s<seed>/ (the label names a variant, e.g. ligo-fit500; analysis reads
it back from the directory name). A re-run skips complete runs (summary.json present) and resumes incomplete
ones from their checkpoint, so an interrupted sweep is continued by running the same command again. Next to the
runs of each seed the runner copies the small model's pretraining record (config, metrics, summary; no
weights) as small-s<seed>/, so the figures' dotted line and Table 5's first row travel with committed records.
An entry whose method or option does not exist yet is reported as unavailable and the rest still run.

A run that would be the same computation as one already complete beside it (runs/computation.py: StackBERT is
Net2Net on a pair that grows in width and depth; stacking, interpolation and MSLT are their width operator on a
width-only pair) is not computed again: its directory gets the twin's record, with its own method in config.json
and `same_computation_as` naming the twin, and analysis prints the two as one row. A scratch run is looked for in
the other task directories too: bert_small_large and bert_base_large share theirs, and at paper and tiny scale the
depth-only pair trains bert_small_base's large model (at mini it has its own warm-up: tasks/registry.py).
"""
from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

from bench.sweep_records import (copy_small_record, evaluate, find_twin, prune, record_as_twin, small_record_source,
                                 stale_reason, status, suites_not_evaluated, twin_name)
from bench.sweep_registry import SWEEPS, Entry, plan
from runs.cli import OneLineArgumentParser
from tasks.scales import DEFAULT_SCALE, EMBEDDED_SCALES, SCALES

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


def check_plan(todo: list[tuple[Entry, int]], out: Path, scale: str, common: tuple,
               eval_suites: list[str] | None, eval_options) -> None:
    """Refuse, before any run trains, what would fail a run later: a bad value refused at the fifth entry must not
    come after four runs of an hour each. Every entry is built once (task, recipe, method options); every run
    directory must be creatable, or hold a readable run record; the run's inputs (seed, data path, the method's
    constraints on the pair) and the --eval suites must be accepted, the suites' data loadable, and a complete run
    they have not evaluated must still hold its model (not pruned). Each run then builds its own method (methods
    keep state: LiGO's operator, KI's teacher)."""
    from runs.preflight import check_inputs, check_out, inspect_out
    from runs.record import CONFIG, SUMMARY, enclosing_record
    if (record := enclosing_record(out)) is not None:      # runs nested in it would be read as part of that run
        raise ValueError(f"--out {out}: inside the run record {record}; give a folder outside any run")
    from tasks.evals import check_data, model_kind, plan as plan_suites
    built: dict[Entry, tuple | None] = {}
    pruned: list[Path] = []                    # complete, not evaluated on eval_suites, and no model/ left
    checked: set[tuple] = set()                # the suites' data is loaded once per kind of model
    for entry, seed in todo:
        if entry not in built:
            try:
                built[entry] = build(entry, scale, common)
            except LookupError:
                built[entry] = None            # reported as unavailable when its turn comes
        if built[entry] is None:
            continue
        task, method, _ = built[entry]
        path = run_dir(out, entry, scale, seed)
        if (path / SUMMARY).exists() and not (path / CONFIG).exists():
            raise ValueError(f"{path} holds {SUMMARY} but no {CONFIG}: a damaged record, neither skipped nor "
                             "resumed; move it away to run it again")
        check_out(path)
        inspect_out(path, resume=True, overwrite=False)    # a directory that is not a run's record is refused
        check_inputs(task, method, seed, None)
        kind = (model_kind(task.family), task.scale, tuple(task.evals))
        if eval_suites and kind not in checked:
            checked.add(kind)
            check_data(plan_suites(kind[0], eval_suites, None, task.scale, task.evals), eval_options)
        if (eval_suites and (path / SUMMARY).exists() and not (path / "model").is_dir()
                and suites_not_evaluated(path, eval_suites)):
            pruned.append(path)
    if pruned:
        raise ValueError(f"--eval {' '.join(eval_suites)}: {len(pruned)} complete run(s) were pruned before this "
                         f"evaluation and hold no model/ to evaluate (first: {pruned[0]}); leave out --eval, or "
                         "give another --out to train them again")


def run_sweep(names: list[str], scale: str = DEFAULT_SCALE, seeds: list[int] | None = None, out: Path | None = None,
              only: list[str] | None = None, dry_run: bool = False, prune_done: bool = False,
              device: str = "cpu", common: tuple = (), eval_suites: list[str] | None = None,
              eval_settings: tuple[str, ...] = (), log=print, labels: list[str] | None = None,
              tasks: list[str] | None = None) -> dict[str, list[str]]:
    """Run (or with dry_run, list) every (entry, seed) of the named sweeps, evaluate them downstream on
    `eval_suites` (and the small models they grew from) with `eval_settings` ("KEY=VALUE" of
    tasks.evals.EvalOptions, run.py's --set eval.KEY=VALUE), prune; returns runs by outcome."""
    seeds = seeds if seeds is not None else ([0] if scale == "paper" else [0, 1])
    from runs import out_dirs
    from tasks.rules import SEED_LIMIT
    if isinstance(out, str) and not out.strip():      # Path("") is ".": the runs would land in the current directory
        raise ValueError("--out is empty; give the root folder of the run directories")
    out = out_dirs.OUT_ROOT if out is None else out
    if any(not 0 <= seed < SEED_LIMIT for seed in seeds):
        raise ValueError(f"--seeds must be integers in [0, 2**63), got {' '.join(map(str, seeds))}")
    if eval_settings and not eval_suites:
        raise ValueError("--set eval.* settings need --eval SUITE (they set the downstream evaluation)")
    eval_options = None
    if eval_suites:
        from tasks.evals import EvalOptions
        eval_options = EvalOptions.parse(list(eval_settings), device=device)
    todo = plan(names, scale, seeds, only, labels, tasks)
    check_plan(todo, Path(out), scale, common, eval_suites, eval_options)
    at: list = []
    if dry_run:
        return run_plan(todo, out, scale, common, dry_run, prune_done, device, eval_suites, eval_options, log, at)
    # two sweeps into one --out: the second waits for the first (each run's own lock would refuse it, run by run,
    # although the first was making those very runs), then skips what the first completed
    from runs.lock import SWEEP_LOCK, RunLock
    lock = RunLock(Path(out), wait=True, name=SWEEP_LOCK, what="sweep output",
                   on_wait=lambda who: log(f"waiting for {who}: it runs a sweep into {out}; complete runs are then "
                                           "skipped"))
    lock.acquire()
    try:
        return run_plan(todo, out, scale, common, dry_run, prune_done, device, eval_suites, eval_options, log, at)
    except KeyboardInterrupt as e:     # Ctrl-C, or SIGTERM/SIGHUP (run.py stop_signals_as_interrupt)
        if not at:
            raise
        said = (e.args[0] if e.args else "interrupted").split(";")[0]    # runs.preflight.RunInterrupted's
        i, n, path = at
        raise KeyboardInterrupt(f"{said} in {path} (run {i} of {n}); run the same command again to go on (complete "
                                "runs are skipped, this one resumed)") from None
    finally:
        lock.release(remove=True)


def run_plan(todo: list[tuple[Entry, int]], out: Path, scale: str, common: tuple, dry_run: bool, prune_done: bool,
             device: str, eval_suites: list[str] | None, eval_options, log, at: list) -> dict[str, list[str]]:
    """run_sweep's loop over the checked plan; `at` says which run it is in."""
    outcome: dict[str, list[str]] = {"done": [], "ran": [], "same computation": [], "stale": [], "unavailable": [],
                                     "failed": [], "planned": []}
    for i, (entry, seed) in enumerate(todo, 1):
        path = run_dir(Path(out), entry, scale, seed)
        at[:] = [i, len(todo), path]             # where an interrupt stopped the sweep (run_sweep says so)
        state, where = status(path), f"[{i}/{len(todo)}] {path}"
        try:
            task, method, strategies = build(entry, scale, common)
            method = method.for_run(seed)      # the draws run_experiment gives it: what its record says
        except LookupError as e:
            log(f"{where}: unavailable ({e})")
            outcome["unavailable"].append(f"{path}: {e}")
            continue
        stale = stale_reason(path, task, method, strategies) if state == "done" else None
        if stale:
            log(f"{where}: complete, but {stale}: not this sweep's result; move it away to re-run it")
            outcome["stale"].append(f"{path}: {stale}")
            continue
        if dry_run or state == "done":
            log(f"{where}: " + ("complete, skipped" if state == "done" else f"would {state.replace('new', 'run')}"))
            outcome["done" if state == "done" else "planned"].append(str(path))
            if dry_run:
                continue
        step, ok = "training", True
        try:   # one failing run must not stop the rest of the sweep
            twin = find_twin(task, method, strategies, path, seed, device, log) if state == "new" else None
            if twin is not None:
                record_as_twin(path, twin, method, task)
                log(f"{where}: the same computation as {twin_name(path, twin)}: its record, not run again")
                outcome["same computation"].append(f"{path} = {twin_name(path, twin)}")
                state = "done"
            if state != "done":
                log(f"{where}: {'resuming' if state == 'resume' else 'running'} ...")
                t0 = time.perf_counter()
                train(task, method, strategies, path, seed, device, state == "resume", log)
                log(f"{where}: finished in {time.perf_counter() - t0:.0f} s")
                outcome["ran"].append(str(path))
            step = "evaluation"
            for target in ([path, small_record_source(path)] if eval_suites else []):
                if target is not None:
                    evaluate(target, eval_suites, eval_options, log)
        except Exception as e:
            log(f"{where}: {step} FAILED {type(e).__name__}: {e}")
            log("".join(traceback.format_exception(e)[-3:]))
            outcome["failed"].append(f"{path} ({step}): {type(e).__name__}: {e}")
            if step == "training":
                continue
            ok = False          # trained but not evaluated: keep the weights for another try
        copy_small_record(path, entry.small_label, seed)
        if prune_done and ok:
            prune(path)
    return outcome


def main(argv=None) -> int:
    p = OneLineArgumentParser(prog="python -m bench.sweeps", description="Run the sweeps behind the paper's "
                                "tables and figures; complete runs are skipped, incomplete ones resumed.")
    p.add_argument("names", nargs="*", help="sweep names (see --list)")
    p.add_argument("--scale", default=DEFAULT_SCALE, help=f"{' | '.join(SCALES)} (default: {DEFAULT_SCALE})")
    p.add_argument("--seeds", type=int, nargs="+", help="default: 0 1 (paper scale: 0)")
    p.add_argument("--out", help="root of the run directories (default: runs/out)")
    p.add_argument("--methods", nargs="+", help="only these methods")
    p.add_argument("--runs", nargs="+", metavar="LABEL", help="only these runs, by the label their directories "
                   "carry before -s<seed> (e.g. ligo-warmup0 stackbert-warmup0; --list shows them)")
    p.add_argument("--tasks", nargs="+", metavar="TASK", help="only these pairs of sweeps that cover several (e.g. "
                   "symmetry --tasks deit_s_b)")
    p.add_argument("--device", default="auto", help="auto (cuda when available) | cpu | cuda")
    p.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    p.add_argument("--prune", action="store_true", help="delete checkpoints and weights of complete runs "
                   "(keep the records only, for committing)")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                   help="for every run, as run.py --set: a recipe field (small_recipe.FIELD: the small model's "
                        "pretraining), a model-spec field (large.FIELD, small.FIELD), a training strategy or method "
                        "option, e.g. --set data_path=/data/wiki; eval.KEY=VALUE sets the --eval fine-tuning "
                        "(eval.seeds=0,1,2)")
    p.add_argument("--eval", nargs="+", metavar="SUITE", help="evaluate each finished run (and its small model) "
                   "downstream with these tasks/evals suites before pruning, e.g. --eval mini, --eval glue squad")
    p.add_argument("--list", action="store_true")
    args = p.parse_args(argv)
    if args.list or not args.names:
        for s in SWEEPS.values():
            by_task: dict[str, list[str]] = {}
            for e in s.entries(args.scale):
                if e.name not in by_task.setdefault(e.task, []):
                    by_task[e.task].append(e.name)
            print(f"{s.name:14s} {s.covers}")
            for task, labels in by_task.items():
                print(f"{'':14s} {task}: {', '.join(labels)}")
        if args.list:
            return 0
        print("error: no sweep named; give one or more of the sweeps listed above", file=sys.stderr)
        return 2
    if args.scale in EMBEDDED_SCALES:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")   # the embedded scales never need the hub
    import transformers          # (after HF_HUB_OFFLINE: it is read when transformers is imported)
    transformers.utils.logging.disable_progress_bar()   # as run.py: the runs load and save weights in this process,
    #                                                     and those bars would drown the sweep's own lines
    from runs.cli import error_line, stop_line
    from runs.signals import stop_signals_as_interrupt, stop_status
    from runs.lock import RunLocked
    try:
        with stop_signals_as_interrupt():
            return sweep_main(args)
    except KeyboardInterrupt as e:      # bench.sweeps.run_sweep says which run it stopped in
        print(stop_line(e.args[0] if e.args else "interrupted before any run started; nothing was written"),
              file=sys.stderr)
        return stop_status()
    except (KeyError, ValueError, OSError, RunLocked) as e:   # OSError: a data path or --out that cannot be used
        print(error_line(e), file=sys.stderr)
        return 2


def sweep_main(args) -> int:
    if args.out is not None and args.out.strip():
        args.out = Path(args.out)
    from runs.cli import resolve_device   # the one definition of --device (run.py's too)
    args.device = resolve_device(args.device)
    from runs.settings import check_repeated, split_eval_settings, split_item   # one --set (run.py's too)
    train_settings, eval_settings = split_eval_settings(args.settings, evaluate_only=False)
    common = tuple(split_item(item) for item in train_settings)
    check_repeated(common)
    result = run_sweep(args.names, args.scale, args.seeds, args.out, args.methods, args.dry_run, args.prune,
                       args.device, common, args.eval, tuple(eval_settings), labels=args.runs, tasks=args.tasks)
    print("; ".join(f"{k}: {len(v)}" for k, v in result.items() if v))
    for line in result["stale"] + result["unavailable"] + result["failed"]:
        print(f"  {line}")
    return 1 if result["failed"] or result["unavailable"] or result["stale"] else 0


if __name__ == "__main__":
    sys.exit(main())
