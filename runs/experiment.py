"""One comparison run, end to end: resolve the small model, fit the growth operator, grow, train, export.

`run.py` is a thin CLI over `run_experiment`; scripts and sweeps call it directly. Every input (recipe, method
constraints, data path, --small, --out) is checked before anything is written (runs/preflight.py); the run
directory is then locked for the whole run (runs/lock.py), and a run refused or interrupted before its record
exists leaves the file system as it found it.

`run_experiment` runs in named phases, each a function below, passing one `RunState` along:
    check_run     the inputs and the directory checked, the config built (before the lock: nothing written)
    prepare_run   the data, the small model (from --small or the cache, pretrained there first by `pretrain_small`),
                  the record opened
    start_run     the method's fit and grow, and step 0 (or, on --resume, the model the checkpoint loads into)
    train_run     the trainer (runs/trainer.py)
    finish_run    the artifacts, the export, the summary that marks the record complete
"""
from __future__ import annotations

import json
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import torch

from methods import get_method
from methods.base import GrowthMethod
from models import get_family
from runs import distributed, out_dirs
from runs.atomic import atomic_path, read_json, save_atomic, write_json_atomic
from runs.card import write_model_card
from runs.computation import fingerprint
from runs.hardware import cpu_model
from runs.ledger import FlopsLedger
from runs.lock import RunLock
from runs.preflight import (CannotResume, check_checkpoint, check_default_dir, check_inputs, check_out,
                            check_record_types, check_resumable, check_seed, check_vocab, inspect_out, interrupted,
                            jsonable, record_state)
from runs.record import CONFIG, METRICS, SUMMARY, RunWriter, read_metrics
from runs.small_model import describe_small, resolve_small, small_identity
from runs.strategies import Strategies, apply_strategies
from runs.tracking import parse_report_to
from runs.checkpoint import CHECKPOINT, load_checkpoint
from runs.trainer import evaluate, full_model, train, width_twins
from tasks.grown_recipes import SAME as SAME_RECIPE
from tasks.grown_recipes import describe as describe_grown_recipe


FLOPS_CONVENTION = ("analytic matmul FLOPs, 2 per multiply-add; backward = 2x forward for trainable layers, "
                    "input-gradient only for frozen layers above a trainable one, none below; attention included")
PACKAGES = ("torch", "transformers", "timm", "tokenizers", "datasets", "numpy")


def default_out(task, method: GrowthMethod, seed: int, strategies: Strategies | None = None) -> Path:
    """OUT_ROOT/<task>-<scale>/<label>-s<seed>; the label is the method, then its grown recipe's preset when it
    is not the task's own (`ligo-warmup0`), then its training strategies (`+layer_drop0.1`)."""
    tag = strategies.tag() if strategies is not None else ""
    recipe = f"-{task.grown_recipe}" if task.grown_recipe != SAME_RECIPE else ""
    return out_dirs.OUT_ROOT / f"{task.name}-{task.scale}" / f"{method.name}{recipe}{tag}-s{seed}"


def environment(device: torch.device) -> dict:
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).parent, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        rev = None
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    return {"git": rev, "versions": versions, "python": sys.version.split()[0], "device": str(device),
            "device_name": name, "cpu": cpu_model(), "threads": torch.get_num_threads()}


def reference(data, task) -> dict:
    """What the run's eval numbers are to be read against: for text, the unigram cross-entropy of the eval tokens
    under the task's tokenizer (a model that learned word frequencies and nothing else; analysis draws it on
    every text curve and checks the regime against it), and the size of the evaluation set."""
    batches = data.eval_batches(task.recipe.batch_size, task.recipe.eval_batches)
    ref = {"eval_items": int(sum(b["labels"].shape[0] for b in batches))}
    if hasattr(data, "unigram_cross_entropy"):
        ref["unigram_ce"] = data.unigram_cross_entropy(batches)
        ref["eval_targets"] = int(sum((b["labels"] != -100).sum() if data.objective == "mlm"
                                      else b["labels"][:, 1:].numel() for b in batches))
    return ref


def truncate_metrics(out: Path, step: int) -> list[dict]:
    """Drop rows logged after the checkpoint (they will be produced again), so no line is duplicated; returns
    the rows kept."""
    path = out / METRICS
    rows = [r for r in read_metrics(path) if r["step"] <= step] if path.exists() else []
    with atomic_path(path) as tmp:
        tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return rows


def run_experiment(task, method: GrowthMethod, *, seed: int = 0, device="cpu", out: Path | None = None,
                   small: Path | None = None, resume: bool = False, overwrite: bool = False,
                   progress: bool = True, log=print, strategies: Strategies | None = None, parallel: str = "ddp",
                   compile: bool = False, locked: bool = False, eval_lines: bool = False, workers: int | None = None,
                   report_to: tuple[str, ...] | str = ()) -> Path:
    """Under torchrun every rank calls this with the same arguments (runs/distributed.py); rank 0 alone writes.
    `parallel`: "ddp" or "fsdp" (with several processes); `compile`: torch.compile the training forward;
    `locked`: the caller holds the directory's lock already (pretrain_small); `eval_lines`: a line through `log` at
    every evaluation (loss, lr, speed), for callers without a progress bar (sweeps); `workers`: DataLoader processes
    for the training batches (runs.trainer.train). Bad input is refused before
    anything is written; the directory is locked (runs/lock.py) from then until the run ends.
    `report_to`: trackers that receive every logged row beside metrics.jsonl (runs/tracking.py: tensorboard, wandb)."""
    report_to = parse_report_to(report_to)
    run = check_run(task, method, seed=seed, device=device, out=out, small=small, resume=resume,
                    overwrite=overwrite, log=log, strategies=strategies, parallel=parallel, compile=compile)
    if run.complete:
        return run.out
    lock = RunLock(run.out).acquire() if distributed.is_main() and not locked else None
    try:
        if lock is not None and record_state(run.out) != run.seen:
            # another process wrote here between our look and the lock: its record now exists (inspect_out's usual
            # message), or
            inspect_out(run.out, resume, overwrite)
            raise ValueError(f"{run.out} changed while this run was starting (another process?); run the command "
                             "again")
        prepare_run(run, progress=progress, log=log, report_to=report_to)
        start_run(run, progress=progress)
        train_run(run, progress=progress, parallel=parallel, compile=compile, log=log, eval_lines=eval_lines,
                  workers=workers)
        finish_run(run)
    except KeyboardInterrupt as e:
        raise interrupted(e, run.writer) from None
    except WrongArchitecture:
        if run.writer is not None:    # refused before step 0: this run's fresh config and empty metrics go
            run.writer.close()
            for name in (METRICS, CONFIG):
                (run.out / name).unlink(missing_ok=True)
            run.writer = None
        raise
    finally:
        if run.writer is not None:
            run.writer.close()
        if lock is not None:
            lock.release(undo=run.writer is None)     # refused or interrupted before writing: leave no trace
    distributed.barrier()              # the record (and a cached small model) is complete before any rank reads it
    return run.out


@dataclass
class RunState:
    """One run between its phases: what `check_run` resolved (the task and method as this run uses them, its
    directory, its config, what the directory holds), then what each later phase made. A record of the run's
    moving parts, so that each phase names what it reads and adds instead of sharing a function's locals."""
    task: object
    method: GrowthMethod
    family: object
    seed: int
    device: torch.device
    out: Path
    small: Path | None                 # --small, or None: the cache
    strategies: Strategies | None
    config: dict                       # config.json as it will be written (prepare_run adds reference and small)
    mode: str = "new"                  # inspect_out's: "new" | "resume" | "overwrite"
    seen: tuple = ()                   # the record's files before the lock (record_state)
    complete: bool = False             # --resume of a finished run: nothing to do
    checkpoint: dict | None = None     # --resume: the checkpoint the run continues from
    # prepare_run
    data: object = None
    small_model: object = None
    resumed_rows: list = field(default_factory=list)    # the rows the checkpoint covers (truncate_metrics)
    writer: object = None              # RunWriter on rank 0, SilentWriter elsewhere; None until the record is open
    # start_run
    ledger: FlopsLedger | None = None
    large: object = None
    start_wall: float = 0.0            # the fit's and the growth's wall time, part of the run's
    init_row: dict = field(default_factory=dict)        # step 0's row, or the last row a checkpoint covers
    # train_run
    result: dict | None = None


def check_run(task, method: GrowthMethod, *, seed: int, device, out, small, resume: bool, overwrite: bool, log,
              strategies: Strategies | None, parallel: str, compile: bool) -> RunState:
    """Prepare, part one: everything that can be refused before a file is written or the lock taken. Resolves the
    method for this run (its seed, its small model's budget, the training strategies around it), the run directory
    (default_out when none is given) and the config.json the run will write; checks the inputs
    (runs/preflight.py check_inputs), the directory (writable, a run's or empty, a default directory not holding a
    run of other settings) and, on --resume, that the record there is this run's and its checkpoint continues it.
    A bad setting is thus one line and no trace. Returns the state the later phases share; `complete` when
    --resume finds the run already finished."""
    if resume and overwrite:
        raise ValueError("--resume and --overwrite contradict each other; give one")
    if isinstance(out, str) and not out.strip():
        raise ValueError("--out is empty; give a run directory")
    device = torch.device(device)
    check_seed(seed)
    method = method.for_run(seed)      # its random draws with the run's seed, unless set (--set seed=N)
    in_default_dir = out is None
    out = Path(out) if out is not None else default_out(task, method, seed, strategies)
    if method.needs_small:      # a method may set its small model's budget (G_stack's growth timing)
        task = task.with_(small_recipe=method.small_recipe(task))
    method = apply_strategies(method, strategies)     # staged training wraps the method's stages
    family = get_family(task.family)
    check_inputs(task, method, seed, small)
    config = {"task": jsonable(task.to_dict()), "method": jsonable(method.describe()), "seed": seed,
              "flops_convention": FLOPS_CONVENTION, "environment": environment(device), "argv": sys.argv,
              "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "distributed": distributed.describe(parallel, task.recipe), "compile": compile}
    if strategies is not None and strategies.active:
        config["strategies"] = strategies.record()
    if method.needs_small:      # the grown model's recipe, named (analysis labels and pairs by it)
        config["grown_recipe"] = describe_grown_recipe(task)
    check_out(out)
    if in_default_dir:
        check_default_dir(out, config, overwrite)
    run = RunState(task, method, family, seed, device, out, small, strategies, config, seen=record_state(out))
    run.mode, old = inspect_out(out, resume, overwrite)
    if run.mode == "resume":
        check_record_types(out / CONFIG, old)
        check_resumable(out, old, config, small_identity(task, seed, small) if method.needs_small else None)
        if (out / SUMMARY).exists():
            log(f"{out} is already complete; nothing to resume")
            run.complete = True
            return run
    if run.mode == "resume" and (out / CHECKPOINT).exists():
        try:
            run.checkpoint = load_checkpoint(out / CHECKPOINT)
        except ValueError as e:
            raise CannotResume(e.args[0]) from None
        check_checkpoint(out, run.checkpoint, old, task, method, log)
    return run


def prepare_run(run: RunState, *, progress: bool, log, report_to: tuple[str, ...]) -> None:
    """Prepare, part two, under the lock: the data (loaded, and its tokenizer trained and cached on first use, by
    rank 0 first), refused if its tokens do not fit the models' vocabularies; what the eval numbers are read
    against (`reference`); the small model, from --small or the cache (pretrained there first when absent:
    `pretrain_small`), unless a resumed run never needs it again; then the record opened: config.json written (or,
    on --resume, metrics.jsonl cut back to the checkpoint's step, since the rows after it are computed again).
    Nothing is written before the data and the small model are there, so a failure to get them leaves no record."""
    task, seed, checkpoint = run.task, run.seed, run.checkpoint
    with distributed.main_first():     # rank 0 trains and caches the tokenizer, the others then read it
        run.data = task.pretrain_data()    # loads (and on first use trains the tokenizer) before anything is written
    check_vocab(task, run.data)
    run.config["reference"] = reference(run.data, task)
    small_info = None
    if run.method.needs_small and (checkpoint is None or run.method.trains_with_small):
        small_model, small_info = resolve_small(task, seed, run.small, run.device, log, progress, pretrain_small)
        # the small model lives on the run's device: LiGO's fit, every growth and KI's teacher run there
        run.small_model = small_model.to(run.device)
    run.config["small"] = small_info
    if small_info is not None:
        log(f"small model: {describe_small(small_info)}")
    resuming = checkpoint is not None  # a run without a checkpoint starts over in the same directory
    if checkpoint is not None and distributed.is_main():
        # before the writer opens metrics.jsonl for appending: truncation replaces the file
        run.resumed_rows = truncate_metrics(run.out, checkpoint["state"]["step"])
    distributed.barrier()              # every rank has read what it needed before rank 0 writes
    run.writer = (RunWriter(run.out, run.config, resume=resuming, overwrite=run.mode != "new" and not resuming,
                            report_to=report_to)
                  if distributed.is_main() else distributed.SilentWriter(run.out))
    if getattr(run.writer, "kept", None):     # --overwrite deletes only what a run writes (runs.record.clear_run)
        log(f"--overwrite: the old run's files replaced; kept what it did not write: {', '.join(run.writer.kept)}")


def start_run(run: RunState, *, progress: bool) -> None:
    """Start: the large model at step 0. A new run lets the method learn before growing (`fit`: LiGO's operator, on
    a batch stream of its own so that the training data never shifts, its FLOPs charged to the ledger's `fit`
    phase and summed over the ranks), grows the large model from the small one, refuses a grown model that is not
    the task's large architecture (check_grown: the fresh record is removed), and logs step 0: the grown model's
    evaluation, FLOPs so far, wall time of fit and growth, and the computation's fingerprint (which other runs are
    the same computation). A resumed run instead builds the model its checkpoint's stage loads into (MSLT's depth
    of that stage; KI takes its teacher back) and reports from the last row the checkpoint covers."""
    task, method, seed, device, data = run.task, run.method, run.seed, run.device, run.data
    run.ledger = ledger = FlopsLedger()
    torch.manual_seed(seed)
    if run.checkpoint is None:
        # the operator fit draws its own batch stream, so it never shifts the training data; each rank takes
        # its share of it, and the fit's FLOPs are summed over the ranks
        fit_batches = distributed.rank_stream(
            lambda i: data.train_batch(i, task.recipe.batch_size, seed + 1_000_003), task.recipe.grad_accum)
        before = ledger.as_dict()
        started = time.perf_counter()      # the fit and the growth are part of a method's wall time
        method.fit(run.small_model, task, fit_batches, ledger, progress=progress and distributed.is_main())
        distributed.sum_over_ranks(ledger, before)
        torch.manual_seed(seed)
        large = method.grow(run.small_model, task)
        check_grown(large, run.family, task, method)
        run.start_wall = time.perf_counter() - started
        row = {"step": 0, "units": 0, "wall": round(run.start_wall, 4), "stage": "init", "flops": ledger.total,
               "full_model": full_model(large, run.family, task) and method.computes_large(0, task.recipe.steps),
               **{f"flops_{k}": v for k, v in ledger.as_dict().items()},
               # which other runs are this same computation (runs/computation.py; analysis merges them)
               "computation": fingerprint(large, method, task, seed, run.strategies)}
        row.update(evaluate(large.to(device), run.family, data.eval_batches(task.recipe.batch_size,
                                                                            task.recipe.eval_batches),
                            device, task.recipe.bf16))
        row.update(width_twins(large, run.family, task))
        run.writer.log(row)
        run.init_row = row
        _save_artifacts(run.out, method)
    else:
        # the last row the checkpoint covers: what the summary reports when the run was killed after its
        # final checkpoint (the loop below then has no step left to run)
        run.start_wall, run.init_row = 0.0, run.resumed_rows[-1] if run.resumed_rows else {}
        # the shape the checkpoint's stage had (MSLT changes depth); KI takes its teacher back here
        stage = method.stages(task, task.recipe.steps)[run.checkpoint["stage"]]
        large = method.resume_model(run.small_model, task, stage)
    run.large = large


def train_run(run: RunState, *, progress: bool, parallel: str, compile: bool, log, eval_lines: bool,
              workers: int | None) -> None:
    """Train: the large model through the method's stages for the recipe's steps (runs/trainer.py train), from
    step 0 or from the checkpoint; every logged row goes to the record, and a checkpoint follows every
    evaluation, so that a killed run resumes exactly where it stood."""
    run.result = train(run.large, run.task, run.method, run.data, run.ledger, run.writer, seed=run.seed,
                       device=run.device, resume_from=run.checkpoint, progress=progress, strategies=run.strategies,
                       parallel=parallel, compile=compile, start_wall=run.start_wall,
                       log=log if eval_lines else None, workers=workers)


def finish_run(run: RunState) -> None:
    """Finish: the method's artifacts saved again (some appear during training: staged training's depth step), the
    final model exported in its ecosystem's format with its tokenizer (downstream fine-tuning reads both) and a
    model card, and the summary written last: its presence is what marks the record complete. With --steps 0 the
    summary reports the grown model itself (paper Table 5's "LiGO init")."""
    result, ledger = run.result, run.ledger
    _save_artifacts(run.out, run.method)   # again: some appear during training (staged training's depth step)
    final = distributed.plain_model(result["model"], run.family)     # under FSDP: gathered (on every rank)
    if distributed.is_main():
        run.family.export(final.cpu(), run.out / "model", preprocessing=run.data.preprocessing())
        if getattr(run.data, "tokenizer", None) is not None:  # fine-tuning (tasks/evals) needs the same tokenizer
            save_tokenizer(run.data.tokenizer, run.out / "model", run.task.large.positions)
    last = result["last"] or run.init_row      # --steps 0: the grown model itself (paper Table 5's "LiGO init")
    summary = {"step": result["state"].step, "units": result["state"].units, "wall": result["state"].wall,
               "flops": ledger.total, "flops_by_phase": ledger.as_dict(),
               "eval_loss": last.get("eval_loss"), "eval_acc": last.get("eval_acc")}
    if distributed.is_main():      # under the config the record holds (a resumed run's is the first one's)
        write_model_card(run.out / "model", read_json(run.out / CONFIG), summary)
    run.writer.finish(summary)


def pretrain_small(task, seed: int, cache: Path, device, log, progress: bool) -> None:
    """Pretrain the small model `task` grows from into its cache entry `cache`: a run of `scratch` on the task's
    small model and small recipe (Task.small_task), which runs.small_model.resolve_small calls, holding the
    entry's lock, when the cache lacks it. A pretraining cut short (Ctrl-C, a crash) continues where it stopped;
    one that this command cannot continue (other settings left in the entry) is started over."""
    pretrain = dict(seed=seed, device=device, out=cache, progress=progress, log=log, locked=True)
    try:
        run_experiment(task.small_task(), get_method("scratch"), resume=True, **pretrain)
    except CannotResume:
        run_experiment(task.small_task(), get_method("scratch"), overwrite=True, **pretrain)


class WrongArchitecture(ValueError):
    """A method grew a model that is not the task's large model: refused before step 0."""


def check_grown(model, family, task, method: GrowthMethod) -> None:
    """The grown model must be the task's large architecture in every size (layers, hidden, heads, key/value heads,
    FFN, positions, vocabulary, image and patch size, classes, class layers, tied embeddings), or a run would train
    and score another model as the large one (a width-copying method on a pair that grows width trained a 64-wide
    model in a 96-wide task, and every row said full_model). Depth alone may differ where the method's stages change
    the model's depth (MSLT starts shallower); its evaluations then count only at full depth (trainer.full_model)."""
    spec = family.spec_of(model)
    staged_depth = len(method.stages(task, task.recipe.steps)) > 1
    differ = [f"{name} {getattr(spec, name)} vs {getattr(task.large, name)}" for name in spec.__dataclass_fields__
              if getattr(spec, name) != getattr(task.large, name) and not (name == "layers" and staged_depth)]
    if differ:
        raise WrongArchitecture(
            f"method '{method.name}' grew {spec.short()}, not task {task.name}'s large model {task.large.short()} "
            f"({', '.join(differ)}); grow must return the large architecture (a depth method on a pair that grows "
            f"width composes a width operator, as methods/stackbert.py does); nothing was trained")


def save_tokenizer(tokenizer, directory: Path, positions: int) -> None:
    """Export the tokenizer beside the model, with `model_max_length` the model's positions: a pipeline that
    truncates then cuts inputs to what the model can take (a locally trained tokenizer has no limit)."""
    before = tokenizer.model_max_length
    tokenizer.model_max_length = positions
    try:
        tokenizer.save_pretrained(directory)
    finally:
        tokenizer.model_max_length = before


def _save_artifacts(out: Path, method: GrowthMethod) -> None:
    if not distributed.is_main():
        return
    for name, obj in method.artifacts().items():
        if name.endswith(".json"):
            write_json_atomic(out / name, obj)
        else:
            save_atomic(obj, out / name)
