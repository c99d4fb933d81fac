"""The sweep runner: the runs behind every table and figure of the paper (bench/sweeps/registry.py says which), made,
resumed, pruned and evaluated.

    python -m bench.sweeps --list                                    # the sweeps and what each covers
    python -m bench.sweeps mini --scale mini --seeds 0 1 --out records/mini --eval mini --prune
    python -m bench.sweeps bert --seeds 0 1 --out records/regime --prune          # the default scale: regime
    python -m bench.sweeps bert --dry-run                            # the plan: done / resume / new / unavailable
    python -m bench.sweeps recipes --runs ligo-warmup0 --seeds 0     # one run of a sweep, by its label
    python -m analysis --runs records/mini --out results/mini           # then the tables and figures
    python -m bench.sweeps bert --seeds 0 1 --out records/regime --launcher local       # the runs as local jobs
    python -m bench.sweeps bert --seeds 0 1 --out records/regime --launcher slurm --slurm-time 240 \
        --slurm-partition gpu --slurm-gpus-per-node 1 --slurm-cpus-per-task 8      # ... or as Slurm jobs

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

By default the runs are made one after another in this process (`--launcher inline`). `--launcher local|slurm`
makes each (or `--runs-per-job N` of them) a submitit job running the same per-run function (bench/sweeps/run.py) on
the same directory, waits for them and reports alike (bench/sweeps/launch.py).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from bench.sweeps.records import copy_small_record, evaluate, prune, status, suites_not_evaluated   # noqa: F401
from bench.sweeps.registry import SWEEPS, Entry, plan
# one run, the same function inline and in a submitit job (bench/sweeps/launch.py); re-exported for their callers
from bench.sweeps.run import build, check_common_key, run_dir, run_one, train   # noqa: F401
from runs.cli import OneLineArgumentParser
from tasks.scales import DEFAULT_SCALE, EMBEDDED_SCALES, SCALES


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
              tasks: list[str] | None = None, launch=None) -> dict[str, list[str]]:
    """Run (or with dry_run, list) every (entry, seed) of the named sweeps, evaluate them downstream on
    `eval_suites` (and the small models they grew from) with `eval_settings` ("KEY=VALUE" of
    tasks.evals.EvalOptions, run.py's --set eval.KEY=VALUE), prune; returns runs by outcome. `launch`
    (bench.sweeps.launch_options.Launch): the runs as submitit jobs, locally or on Slurm; None or inline: one after
    another in this process."""
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
    jobs = launch is not None and launch.kind != "inline"
    if jobs:
        from bench.sweeps.launch_options import check_launch
        check_launch(launch)
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
        if jobs:      # the same runs, each made by the same function in a submitit job, into the same directories
            from bench.sweeps.launch import launch_plan
            return launch_plan(todo, Path(out), scale, common, device, eval_suites, eval_settings, eval_options, log,
                               launch, lambda path, entry, seed, ok: finish_run(path, entry, seed, ok, prune_done, log))
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
    """run_sweep's loop over the checked plan, one run after another in this process (bench.sweeps.run.run_one);
    `at` says which run it is in."""
    outcome: dict[str, list[str]] = {"done": [], "ran": [], "same computation": [], "stale": [], "unavailable": [],
                                     "failed": [], "planned": []}
    for i, (entry, seed) in enumerate(todo, 1):
        path = run_dir(Path(out), entry, scale, seed)
        at[:] = [i, len(todo), path]             # where an interrupt stopped the sweep (run_sweep says so)
        got, ok = run_one(entry, seed, i, len(todo), Path(out), scale, common, dry_run, device, eval_suites,
                          eval_options, log, train=train, evaluate=evaluate)
        for key, items in got.items():
            outcome[key].extend(items)
        if ok is not None:
            finish_run(path, entry, seed, ok, prune_done, log)
    return outcome


def finish_run(path: Path, entry: Entry, seed: int, ok: bool, prune_done: bool, log) -> None:
    """After a run (made, found complete, or recorded as its twin): the small model's record beside it, and with
    --prune the record alone, unless its evaluation failed (`ok` False: the weights are kept for another try)."""
    if kept := copy_small_record(path, entry.small_label, seed):
        log(f"    {kept}")
    if prune_done and ok:
        prune(path)


def parser() -> OneLineArgumentParser:
    """The command line; the documents' sweep commands are parsed with it too (tests/test_doc_commands.py)."""
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
    g = p.add_argument_group("launching through submitit (bench/sweeps/launch.py)")
    g.add_argument("--launcher", choices=("inline", "local", "slurm"), default="inline",
                   help="inline (default): one run after another in this process; local: submitit jobs on this "
                        "machine; slurm: submitit jobs on Slurm. The sweep waits for its jobs; records land in --out")
    g.add_argument("--runs-per-job", type=int, metavar="N", help="runs made one after another in one job (default 1)")
    g.add_argument("--local-parallelism", type=int, metavar="N", help="local: at most N jobs at once (default: one "
                   "per GPU with --device cuda, else one per core); each gets max(1, cores // N) threads")
    g.add_argument("--slurm-partition", help="slurm: the partition")
    g.add_argument("--slurm-time", type=int, metavar="MINUTES", help="slurm: each job's time limit (required); "
                   "a job that reaches it is requeued and resumes from its checkpoints")
    g.add_argument("--slurm-gpus-per-node", type=int, metavar="N")
    g.add_argument("--slurm-cpus-per-task", type=int, metavar="N", help="slurm: the job's cores, and its torch threads")
    g.add_argument("--slurm-mem-gb", type=float, metavar="GB")
    g.add_argument("--slurm-array-parallelism", type=int, metavar="N", help="slurm: at most N jobs of an array at once")
    g.add_argument("--slurm", action="append", metavar="KEY=VALUE", help="slurm: any parameter of submitit's "
                   "SlurmExecutor (executor.update_parameters(slurm_KEY=VALUE)), e.g. --slurm qos=high "
                   "--slurm constraint=volta32gb")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
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
    launch = None
    if args.launcher != "inline" or args.runs_per_job is not None or args.local_parallelism is not None or any(
            getattr(args, a) is not None for a in vars(args) if a.startswith("slurm")):
        from bench.sweeps.launch_options import check_device_name, launch_from_args
        launch = launch_from_args(args)
    if launch is not None and launch.kind == "slurm":
        check_device_name(args.device)    # resolved in each job, on its node: this machine may have no GPU
    else:
        args.device = resolve_device(args.device)
    from runs.settings import check_repeated, split_eval_settings, split_item   # one --set (run.py's too)
    train_settings, eval_settings = split_eval_settings(args.settings, evaluate_only=False)
    common = tuple(split_item(item) for item in train_settings)
    check_repeated(common)
    result = run_sweep(args.names, args.scale, args.seeds, args.out, args.methods, args.dry_run, args.prune,
                       args.device, common, args.eval, tuple(eval_settings), labels=args.runs, tasks=args.tasks,
                       launch=launch)
    print("; ".join(f"{k}: {len(v)}" for k, v in result.items() if v))
    for line in result["stale"] + result["unavailable"] + result["failed"]:
        print(f"  {line}")
    return 1 if result["failed"] or result["unavailable"] or result["stale"] else 0


if __name__ == "__main__":
    sys.exit(main())
