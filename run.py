#!/usr/bin/env python
"""growbench CLI: one growth-method run on one task.

    python run.py --method ligo --task bert_small_base            # regime scale on CPU, embedded data
    python run.py --method scratch --task deit_s_b --scale tiny
    python run.py --list
    torchrun --nproc_per_node 8 run.py --method ligo --task bert_base_large --scale paper --device cuda --set bf16=true
        # data-parallel (DDP; --fsdp shards); global batch = batch_size x grad_accum x processes
"""
from __future__ import annotations

import argparse
import errno
import os
import sys

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from runs.cli import OneLineArgumentParser, error_line, resolve_device, stop_line  # noqa: E402
from runs.signals import stop_signals_as_interrupt, stop_status  # noqa: E402
from tasks.scales import DEFAULT_SCALE, EMBEDDED_SCALES, SCALES  # noqa: E402


def parser() -> OneLineArgumentParser:
    """The command line; the documents' run.py commands are parsed with it too (tests/test_doc_commands.py)."""
    p = OneLineArgumentParser(description="Grow a large transformer from a small one and train it.")
    p.add_argument("--method", help="growth method (see --list)")
    p.add_argument("--task", help="task: model pair + data + recipe (see --list)")
    p.add_argument("--scale", default=DEFAULT_SCALE, help=f"{' | '.join(SCALES)} (default: {DEFAULT_SCALE})")
    p.add_argument("--steps", type=int, help="training steps of the large model (default: the task's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="run directory (default: runs/out/<task>-<scale>/<method>-s<seed>)")
    p.add_argument("--small", help="pretrained small model directory (HF save_pretrained / timm export)")
    p.add_argument("--device", default="auto", help="auto (cuda when available, else cpu) | cpu | cuda | cuda:N")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                   help="override a recipe field of the large model's training, a method option, a training "
                        "strategy, a model-spec field (large.FIELD, small.FIELD), or (prefixed small_recipe.) a field "
                        "of the small model's pretraining, e.g. --set lr=1e-4 --set fit_steps=50 "
                        "--set small_recipe.warmup=400")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace an existing run in --out")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--report-to", default="none", metavar="TRACKERS",
                   help="also send every logged row to these trackers, comma-separated: tensorboard (into RUN_DIR/"
                        "tensorboard), wandb (when installed), all (every installed one), none (default); "
                        "metrics.jsonl is written either way")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="torch.compile the training forward (default: on with a GPU, off on the CPU, where compiling "
                        "costs more than it saves on short runs)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="DataLoader processes making the training batches (default: 0 on the CPU, where batches are "
                        "made inline; the process's cores, at most 16, with a GPU); batches are the same either way")
    p.add_argument("--fsdp", action="store_true", help="under torchrun: shard weights, gradients and optimizer "
                   "state over the processes (FSDP2) instead of replicating them (DDP, the default)")
    p.add_argument("--list", action="store_true", help="list methods and tasks; with --method NAME, that method's "
                   "options (type, default, what each accepts and means)")
    p.add_argument("--eval", action="store_true", help="evaluate downstream after training (tasks/evals)")
    p.add_argument("--evaluate", metavar="RUN_DIR", help="evaluate an existing run downstream; --set KEY=VALUE "
                   "then sets evaluation options (epochs, lr, batch_size, seeds=0,1,2, max_train, data_dir, ...)")
    p.add_argument("--suite", help="evaluation suites, comma-separated: glue, squad, transfer, adapters, mini "
                   "(default: mini below paper scale, the task's suites at paper scale)")
    p.add_argument("--only", help="evaluate only these tasks of the suites, e.g. --only sst2,cola")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.list:        # read from the registries' source, without importing torch (runs/catalog.py)
        from runs.catalog import listing, method_options
        try:
            print(method_options(args.method) if args.method else listing(args.scale))
        except (KeyError, ValueError) as e:
            print(error_line(e), file=sys.stderr)
            return 2
        return 0
    if args.evaluate:
        with stop_signals_as_interrupt():
            return evaluate_main(args)
    if args.scale in EMBEDDED_SCALES:
        # the embedded scales never need the Hugging Face hub; offline mode spares a long look-up time-out
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        with stop_signals_as_interrupt():
            return train_main(args)
    except KeyboardInterrupt as e:     # runs.experiment.RunInterrupted says where the run stood
        print(stop_line(e.args[0] if e.args else None), file=sys.stderr)
        return stop_status()


def check_paths(args) -> None:
    """Paths a run records, refused before anything is written: one that is not UTF-8 (the record is UTF-8 JSON: it
    trained the whole run and then failed), and an --out inside another run's record (its files would mix with that
    run's, and the analysis and the sweeps, which never look inside a run, would not see this one)."""
    from pathlib import Path

    from runs.record import enclosing_record
    for flag, path in (("--out", args.out), ("--small", args.small)):
        try:
            (path or "").encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{flag} {ascii(path)} is not valid UTF-8 (run records are UTF-8 JSON); give a UTF-8 "
                             "path") from None
    inside = enclosing_record(Path(args.out).absolute().parent) if args.out else None
    if inside is not None:
        raise ValueError(f"--out {args.out} is inside the run record {inside}; give a directory outside any run")


def train_main(args) -> int:
    from runs.lock import RunLocked
    from runs.trainer import NonFiniteLoss
    try:
        if not args.method or not args.task:
            raise ValueError("--method and --task are required (see --list)")
        if args.out is not None and not args.out.strip():
            raise ValueError("--out is empty; give a run directory")
        check_paths(args)
        import transformers
        transformers.utils.logging.disable_progress_bar()   # weight loading/saving bars would drown the run's own
        from methods import METHODS, get_method
        from models.family import unknown
        from runs.experiment import run_experiment
        from tasks import get_task
        if args.method not in METHODS:
            raise KeyError(unknown("method", args.method, METHODS))
        task = get_task(args.task, scale=args.scale)
        from runs.settings import check_repeated, route, split_eval_settings, split_item
        train_settings, eval_settings = split_eval_settings(args.settings, evaluate_only=False)
        from runs.strategies import strategies_from_settings
        items = [split_item(i) for i in train_settings]
        check_repeated(items)
        task, method_options, chosen = route(task, METHODS[args.method], items)
        strategies = strategies_from_settings(chosen)
        if args.small and any(item.startswith("small_recipe.") for item in train_settings):
            raise ValueError("--set small_recipe.* changes the small model's pretraining, which --small skips "
                             "(its weights are given); drop one")
        if args.steps is not None:
            if any(item.partition("=")[0] == "steps" for item in args.settings):
                raise ValueError("--steps and --set steps=... both set the run's steps; give one")
            if args.steps < 0:
                raise ValueError(f"--steps must be >= 0 (0: grow and evaluate only), got {args.steps}")
            task = task.with_(recipe=task.recipe.with_(steps=args.steps))
        args.device = resolve_device(args.device)
        if args.compile is None:
            args.compile = args.device.startswith("cuda")
        from tasks.data.loader import check_loader_args
        check_loader_args(args.workers, None, False)
        if args.resume and args.overwrite:
            raise ValueError("--resume and --overwrite contradict each other; give one")
        method = get_method(args.method, task=task, **method_options)
        from runs import distributed
        device = distributed.setup(args.device)  # under torchrun: a process group, cuda -> cuda:LOCAL_RANK
        if not distributed.is_main():
            args.quiet = True
        if args.eval:   # checked before training, so that a typo costs nothing and writes nothing
            from tasks.evals import model_kind, prepare
            evaluation = prepare(model_kind(task.family), task.scale, task.evals, args.suite, args.only,
                                 eval_settings, args.device)
        elif args.suite or args.only or eval_settings:
            what = "--suite/--only" if args.suite or args.only else "--set eval.* settings"
            raise ValueError(f"{what} need --eval or --evaluate RUN_DIR (they set the downstream evaluation)")
        if args.fsdp and distributed.world_size() <= 1:   # one process: there is nothing to shard
            raise ValueError("--fsdp shards the model over torchrun's processes; run under torchrun --nproc-per-node "
                             "N (N >= 2), or drop --fsdp")
        if args.resume:        # a typo in --out would otherwise start a fresh run, silently
            from pathlib import Path

            from runs.experiment import default_out
            where = Path(args.out) if args.out else default_out(task, method, args.seed, strategies)
            if not where.exists():
                raise ValueError(f"--resume: {where} does not exist, so there is nothing to resume; drop --resume "
                                 "to start the run there")
        out = run_experiment(task, method, seed=args.seed, device=device, out=args.out, small=args.small,
                             resume=args.resume, overwrite=args.overwrite, progress=not args.quiet,
                             log=lambda msg: print(msg, file=sys.stderr) if distributed.is_main() else None,
                             strategies=strategies, parallel="fsdp" if args.fsdp else "ddp", compile=args.compile,
                             report_to=args.report_to, workers=args.workers)
        if not distributed.is_main():            # rank 0 reports (and evaluates downstream)
            return 0
    except (KeyError, ValueError, RunLocked) as e:
        print(error_line(e), file=sys.stderr)
        return 2
    except OSError as e:         # a path under a file, no permission, a read-only or full disk
        print(error_line(e), file=sys.stderr)
        return 1 if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO) else 2
    except NonFiniteLoss as e:
        print(error_line(e), file=sys.stderr)
        return 1
    from runs.record import load_run
    run = load_run(out)
    s = run.summary or {}
    acc = f", eval accuracy {s['eval_acc']:.4f}" if s.get("eval_acc") is not None else ""
    loss = f"{s['eval_loss']:.4f}" if s.get("eval_loss") is not None else "n/a"
    print(f"record: {out}")
    print(f"final eval loss {loss}{acc}; {s.get('flops', 0):.3e} FLOPs; {s.get('wall', 0):.1f} s training")
    from analysis.reference import reference_lines
    try:       # the run is done and recorded: a committed record that cannot be read costs this line, not the run
        for line in reference_lines(out):
            print(line)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"saving: not measured ({type(e).__name__}: {e})")
    if args.eval:
        from runs.evaluation import run_and_report
        try:
            print(run_and_report(out, *evaluation, log=lambda msg: print(msg, file=sys.stderr)))
        except (KeyError, ValueError, OSError, ImportError, RunLocked) as e:
            print(error_line(e).replace("error: ", "error: evaluation: ", 1), file=sys.stderr)
            return 2
    return 0


def evaluate_main(args) -> int:
    """--evaluate RUN_DIR: downstream evaluation of a finished run; eval.json is written only on success."""
    import json
    from pathlib import Path
    config = Path(args.evaluate) / "config.json"
    try:   # offline unless the run is paper scale (read before transformers is imported: it reads the flag once)
        scale = json.loads(config.read_text())["task"]["scale"]
    except (OSError, ValueError, KeyError, TypeError):
        scale = None       # (a damaged config.json is reported, naming the file, by pretrained_from_run)
    if scale != "paper":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    log = lambda msg: print(msg, file=sys.stderr)  # noqa: E731
    from runs.lock import RunLocked
    try:
        if args.method or args.task or args.eval:
            raise ValueError("--evaluate RUN_DIR evaluates an existing run: give no --method/--task/--eval")
        # what trains or names a run's output means nothing here (eval.json goes into RUN_DIR): refused, not ignored
        training = [flag for flag, given in (("--out", args.out), ("--steps", args.steps is not None),
                                             ("--small", args.small), ("--resume", args.resume),
                                             ("--overwrite", args.overwrite), ("--fsdp", args.fsdp),
                                             ("--compile", args.compile is not None),
                                             ("--workers", args.workers is not None),
                                             ("--report-to", args.report_to != "none")) if given]
        if training:
            raise ValueError(f"--evaluate RUN_DIR writes into RUN_DIR/eval.json and trains nothing: drop "
                             f"{', '.join(training)}")
        args.device = resolve_device(args.device)
        from runs.evaluation import pretrained_from_run, run_and_report
        from runs.settings import split_eval_settings
        from tasks.evals import prepare
        pre = pretrained_from_run(args.evaluate)
        _, settings = split_eval_settings(args.settings, evaluate_only=True)
        evaluation = prepare(pre.kind, pre.task.get("scale"), pre.task.get("evals"), args.suite, args.only,
                             settings, args.device)
        print(run_and_report(args.evaluate, *evaluation, log=log))
    except KeyboardInterrupt:
        print(stop_line("interrupted; eval.json keeps the suites that finished"), file=sys.stderr)
        return stop_status()
    except (KeyError, ValueError, OSError, ImportError, RunLocked) as e:
        print(error_line(e), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        if "runs.distributed" in sys.modules:      # torchrun: close the process group main() opened
            sys.modules["runs.distributed"].teardown()
