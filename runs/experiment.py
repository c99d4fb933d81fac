"""One comparison run, end to end: resolve the small model, fit the growth operator, grow, train, export.

`run.py` is a thin CLI over `run_experiment`; scripts and sweeps call it directly. Every input (recipe, method
constraints, data path, --small, --out) is checked before anything is written (runs/preflight.py); the run
directory is then locked for the whole run (runs/lock.py), and a run refused or interrupted before its record
exists leaves the file system as it found it.
"""
from __future__ import annotations

import json
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import torch

from methods.base import GrowthMethod
from models import get_family
from runs import distributed, out_dirs
from runs.computation import fingerprint
from runs.card import write_model_card
from runs.ledger import FlopsLedger
from runs.lock import RunLock
from runs.preflight import (CannotResume, check_out, check_resumable, inspect_out, interrupted, jsonable,
                            record_state, run_identity)
from runs.record import (CONFIG, METRICS, SUMMARY, RunExistsError, RunWriter, atomic_path, read_json, read_metrics,
                         save_atomic, write_json_atomic)
from runs.sizes import check_sizes
from runs.small_model import check_small_dir, describe_small, resolve_small, small_cache_dir, small_identity
from runs.strategies import Strategies, apply_strategies
from runs.tracking import parse_report_to
from runs.trainer import CHECKPOINT, evaluate, full_model, load_checkpoint, train, width_twins
from tasks.grown_recipes import SAME as SAME_RECIPE
from tasks.grown_recipes import describe as describe_grown_recipe
from tasks.rules import SEED_LIMIT


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
            "device_name": name, "threads": torch.get_num_threads()}


def check_default_dir(out: Path, config: dict, overwrite: bool) -> None:
    """A run of other settings (another --steps, --set lr=...) in the default directory of this one: --resume cannot
    continue it and --overwrite would lose it, so the refusal names --out first (one line, before anything is
    written). Settings as check_resumable compares them: the task and the method's configuration."""
    from runs.preflight import comparable_method, comparable_task, differing_keys
    try:
        old = read_json(out / CONFIG) if (out / CONFIG).is_file() else None
    except ValueError:
        return                      # a damaged config.json: inspect_out says so
    if overwrite or not isinstance(old, dict) or not isinstance(old.get("task"), dict):
        return
    differ = differing_keys(comparable_task(jsonable(old["task"])) or {}, comparable_task(jsonable(config["task"])))
    differ += [f"method.{k}" for k in differing_keys(comparable_method(jsonable(old.get("method") or {})) or {},
                                                     comparable_method(jsonable(config["method"])))]
    if differ:
        raise RunExistsError(f"{out} (this run's default directory) holds a run of other settings (differs in: "
                             f"{', '.join(differ)}); pass --out DIR to keep both, or --overwrite to replace it")


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


def check_seed(seed) -> None:
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < SEED_LIMIT:
        raise ValueError(f"--seed must be an integer in [0, 2**63), got {seed}")


def check_inputs(task, method: GrowthMethod, seed: int, small: Path | None) -> None:
    """Everything about the input that can be checked before a file is written: the seed, the models' sizes, the
    method's own constraints on the recipe (its stages) and on the pair, the --small directory, the small-model
    cache, and last the data path: a bad setting is named as such on a machine that lacks the data too."""
    check_seed(seed)
    check_sizes(task)
    method.stages(task, task.recipe.steps)      # e.g. MSLT's one step per stage at least
    method.check_pair(task)                     # e.g. G_stack's whole-model stacks, GQA group sizes
    if small is not None and not method.needs_small:
        raise ValueError(f"--small {small}: method '{method.name}' grows from no small model (it trains the large "
                         "one from its own initialisation); drop --small")
    if method.needs_small and small is not None:
        check_small_dir(task, small)
    elif method.needs_small and not (small_cache_dir(task, seed) / SUMMARY).exists():
        steps = method.small_recipe(task).steps
        if steps < 1:                 # a random small model would be cached as a pretrained one
            raise ValueError(f"small_recipe.steps={steps}: method '{method.name}' grows "
                             "from a pretrained small model; give small_recipe.steps >= 1 (or --small DIR)")
        check_out(small_cache_dir(task, seed))
    task.check_data()


def check_vocab(task, data) -> None:
    """Every token id the data holds must have a row in both models' embeddings: a tokenizer larger than a
    spec's vocab (`--set large.vocab=5`) was an IndexError in the middle of training."""
    tokens = getattr(data, "vocab_size", None)
    for which in ("small", "large"):
        spec = getattr(task, which)
        if tokens and spec.vocab < tokens:
            raise ValueError(f"{which}.vocab={spec.vocab} is smaller than the tokenizer's {tokens} tokens; give "
                             f"{which}.vocab >= {tokens}")


def truncate_metrics(out: Path, step: int) -> list[dict]:
    """Drop rows logged after the checkpoint (they will be produced again), so no line is duplicated; returns
    the rows kept."""
    path = out / METRICS
    rows = [r for r in read_metrics(path) if r["step"] <= step] if path.exists() else []
    with atomic_path(path) as tmp:
        tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return rows


# what --resume reads of a record's config.json, and the JSON types it must have there (None: may be absent or null)
RECORD_TYPES = {("seed",): int, ("task",): dict, ("task", "name"): str, ("task", "recipe"): dict, ("method",): dict,
                ("method", "name"): str, ("method", "config"): dict, ("strategies",): (dict, None),
                ("distributed",): (dict, None), ("small",): (dict, None)}
JSON_NAMES = {dict: "an object", list: "an array", str: "a string", int: "an integer", float: "a number",
              bool: "true or false", type(None): "null"}


def check_record_types(path: Path, config: dict) -> None:
    """Refuse, in one line, a config.json whose fields --resume compares have the wrong JSON types (an edited or
    foreign record: `distributed` an array was an AttributeError traceback, `seed` "0" read 'seed 0, not 0')."""
    for keys, expected in RECORD_TYPES.items():
        value = config
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        allowed = expected if isinstance(expected, tuple) else (expected,)
        if (value is None and None in allowed) or (isinstance(value, tuple(t for t in allowed if t is not None))
                                                   and not (isinstance(value, bool) and bool not in allowed)):
            continue
        wanted = " or ".join(JSON_NAMES[type(None) if t is None else t] for t in allowed)
        raise CannotResume(f"{path}: {'.'.join(keys)} is {JSON_NAMES.get(type(value), type(value).__name__)} "
                           f"({json.dumps(value)[:40]}), not {wanted}: a damaged record; restore it, or start over "
                           "with --overwrite")


def logged_steps(recipe, total: int) -> tuple[list[int], list[int]]:
    """(the steps a run of `total` steps logs a row at, those of them that evaluate and checkpoint): step 0 (the
    grown model), every log_every-th and eval_every-th step and the last (runs/trainer.py train; a test checks a
    run's rows against this)."""
    evals = [s for s in range(1, total + 1) if s % recipe.eval_every == 0 or s == total]
    rows = [0] + [s for s in range(1, total + 1) if s % recipe.log_every == 0 or s % recipe.eval_every == 0
                  or s == total]
    return rows, evals


def check_checkpoint(out: Path, checkpoint: dict, config: dict, task, method: GrowthMethod, log) -> None:
    """Refuse (CannotResume, one line, nothing written) a checkpoint this record cannot be continued from: one that
    another run wrote (its `run` identity is not config.json's), one past the run's steps, or one whose step the
    metrics rows do not reach exactly (rows lost: the resumed run would never fill the gap) or overrun beyond the
    evaluation after it (the record went on past a later checkpoint: this one is older). Rows after the checkpoint
    up to that evaluation are the ones a kill leaves (logged, not yet checkpointed): truncate_metrics drops them.
    A checkpoint written before checkpoints carried an identity is continued with a note (its rows are checked)."""
    where = out / CHECKPOINT
    identity = checkpoint.get("run")
    if identity is None:
        log(f"note: {where} predates checkpoints that name their run: not checked against {CONFIG} (its rows are)")
    elif identity != run_identity(config):
        raise CannotResume(f"{where} was written by another run (other settings or seed than {out / CONFIG} "
                           "records): a run resumes from its own checkpoint only; remove it, or start over with "
                           "--overwrite")
    step = checkpoint.get("logged_step", checkpoint["state"]["step"])
    total = sum(stage.steps for stage in method.stages(task, task.recipe.steps))
    if not isinstance(step, int) or not 0 < step <= total:
        raise CannotResume(f"{where} is at step {step!r}, not one of this run's steps 1..{total}; start over with "
                           "--overwrite")
    rows = read_metrics(out / METRICS) if (out / METRICS).exists() else []
    steps = [r.get("step") if isinstance(r, dict) else None for r in rows]
    if any(not isinstance(s, int) or isinstance(s, bool) for s in steps):
        raise CannotResume(f"{out / METRICS}: a row without an integer step; the record is damaged, start over "
                           "with --overwrite")
    expected, evals = logged_steps(task.recipe, total)
    have, want = [s for s in steps if s <= step], [s for s in expected if s <= step]
    if have != want:
        missing = sorted(set(want) - set(have))
        said = (f"lacks the rows of step(s) {_some(missing)}" if missing else
                f"holds rows this run does not log in this order (steps {_some(have)})")
        raise CannotResume(f"{out / METRICS} {said} up to {where}'s step {step}: rows were lost or added, and a "
                           "resumed run would not fill the gap; start over with --overwrite")
    after = next((s for s in evals if s > step), total)
    if any(s > after for s in steps):
        raise CannotResume(f"{out / METRICS} goes on to step {max(steps)}, past the evaluation after {where}'s step "
                           f"{step} (step {after}): the checkpoint is older than the record; start over with "
                           "--overwrite")


def _some(steps: list[int]) -> str:
    return ", ".join(map(str, steps[:5])) + (f", ... ({len(steps)} in all)" if len(steps) > 5 else "")


def run_experiment(task, method: GrowthMethod, *, seed: int = 0, device="cpu", out: Path | None = None,
                   small: Path | None = None, resume: bool = False, overwrite: bool = False,
                   progress: bool = True, log=print, strategies: Strategies | None = None, parallel: str = "ddp",
                   compile: bool = False, locked: bool = False, eval_lines: bool = False, workers: int | None = None,
                   report_to: tuple[str, ...] | str = ()) -> Path:
    """Under torchrun every rank calls this with the same arguments (runs/distributed.py); rank 0 alone writes.
    `parallel`: "ddp" or "fsdp" (with several processes); `compile`: torch.compile the training forward;
    `locked`: the caller holds the directory's lock already (resolve_small); `eval_lines`: a line through `log` at
    every evaluation (loss, lr, speed), for callers without a progress bar (sweeps); `workers`: DataLoader processes
    for the training batches (runs.trainer.train). Bad input is refused before
    anything is written; the directory is locked (runs/lock.py) from then until the run ends.
    `report_to`: trackers that receive every logged row beside metrics.jsonl (runs/tracking.py: tensorboard, wandb)."""
    report_to = parse_report_to(report_to)
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
    seen = record_state(out)
    mode, old = inspect_out(out, resume, overwrite)
    if mode == "resume":
        check_record_types(out / CONFIG, old)
        check_resumable(out, old, config, small_identity(task, seed, small) if method.needs_small else None)
        if (out / SUMMARY).exists():
            log(f"{out} is already complete; nothing to resume")
            return out
    checkpoint = None
    if mode == "resume" and (out / CHECKPOINT).exists():
        try:
            checkpoint = load_checkpoint(out / CHECKPOINT)
        except ValueError as e:
            raise CannotResume(e.args[0]) from None
        check_checkpoint(out, checkpoint, old, task, method, log)
    lock = RunLock(out).acquire() if distributed.is_main() and not locked else None
    writer = None
    try:
        if lock is not None and record_state(out) != seen:   # another process wrote here between our look and the lock:
            inspect_out(out, resume, overwrite)              # its record now exists (the usual message), or
            raise ValueError(f"{out} changed while this run was starting (another process?); run the command again")
        with distributed.main_first():     # rank 0 trains and caches the tokenizer, the others then read it
            data = task.pretrain_data()    # loads (and on first use trains the tokenizer) before anything is written
        check_vocab(task, data)
        config["reference"] = reference(data, task)
        small_model = small_info = None
        if method.needs_small and (checkpoint is None or method.trains_with_small):
            small_model, small_info = resolve_small(task, seed, small, device, log, progress)
            # the small model lives on the run's device: LiGO's fit, every growth and KI's teacher run there
            small_model = small_model.to(device)
        config["small"] = small_info
        if small_info is not None:
            log(f"small model: {describe_small(small_info)}")
        resuming = checkpoint is not None  # a run without a checkpoint starts over in the same directory
        resumed_rows = []
        if checkpoint is not None and distributed.is_main():
            # before the writer opens metrics.jsonl for appending: truncation replaces the file
            resumed_rows = truncate_metrics(out, checkpoint["state"]["step"])
        distributed.barrier()              # every rank has read what it needed before rank 0 writes
        writer = (RunWriter(out, config, resume=resuming, overwrite=mode != "new" and not resuming, report_to=report_to)
                  if distributed.is_main() else distributed.SilentWriter(out))
        if getattr(writer, "kept", None):     # --overwrite deletes only what a run writes (runs.record.clear_run)
            log(f"--overwrite: the old run's files replaced; kept what it did not write: {', '.join(writer.kept)}")
        ledger = FlopsLedger()
        torch.manual_seed(seed)
        if checkpoint is None:
            # the operator fit draws its own batch stream, so it never shifts the training data; each rank takes
            # its share of it, and the fit's FLOPs are summed over the ranks
            fit_batches = distributed.rank_stream(
                lambda i: data.train_batch(i, task.recipe.batch_size, seed + 1_000_003), task.recipe.grad_accum)
            before = ledger.as_dict()
            started = time.perf_counter()      # the fit and the growth are part of a method's wall time
            method.fit(small_model, task, fit_batches, ledger, progress=progress and distributed.is_main())
            distributed.sum_over_ranks(ledger, before)
            torch.manual_seed(seed)
            large = method.grow(small_model, task)
            check_grown(large, family, task, method)
            start_wall = time.perf_counter() - started
            row = {"step": 0, "units": 0, "wall": round(start_wall, 4), "stage": "init", "flops": ledger.total,
                   "full_model": full_model(large, family, task) and method.computes_large(0, task.recipe.steps),
                   **{f"flops_{k}": v for k, v in ledger.as_dict().items()},
                   # which other runs are this same computation (runs/computation.py; analysis merges them)
                   "computation": fingerprint(large, method, task, seed, strategies)}
            row.update(evaluate(large.to(device), family, data.eval_batches(task.recipe.batch_size,
                                                                            task.recipe.eval_batches),
                                device, task.recipe.bf16))
            row.update(width_twins(large, family, task))
            writer.log(row)
            init_row = row
            _save_artifacts(out, method)
        else:
            # the last row the checkpoint covers: what the summary reports when the run was killed after its
            # final checkpoint (the loop below then has no step left to run)
            start_wall, init_row = 0.0, resumed_rows[-1] if resumed_rows else {}
            # the shape the checkpoint's stage had (MSLT changes depth); KI takes its teacher back here
            stage = method.stages(task, task.recipe.steps)[checkpoint["stage"]]
            large = method.resume_model(small_model, task, stage)
        result = train(large, task, method, data, ledger, writer, seed=seed, device=device,
                       resume_from=checkpoint, progress=progress, strategies=strategies, parallel=parallel,
                       compile=compile, start_wall=start_wall, log=log if eval_lines else None,
                       workers=workers)
        _save_artifacts(out, method)   # again: some appear during training (staged training's depth step)
        final = distributed.plain_model(result["model"], family)     # under FSDP: gathered (on every rank)
        if distributed.is_main():
            family.export(final.cpu(), out / "model", preprocessing=data.preprocessing())
            if getattr(data, "tokenizer", None) is not None:  # fine-tuning (tasks/evals) needs the same tokenizer
                save_tokenizer(data.tokenizer, out / "model", task.large.positions)
        last = result["last"] or init_row      # --steps 0: the grown model itself (paper Table 5's "LiGO init")
        summary = {"step": result["state"].step, "units": result["state"].units, "wall": result["state"].wall,
                   "flops": ledger.total, "flops_by_phase": ledger.as_dict(),
                   "eval_loss": last.get("eval_loss"), "eval_acc": last.get("eval_acc")}
        if distributed.is_main():      # under the config the record holds (a resumed run's is the first one's)
            write_model_card(out / "model", read_json(out / CONFIG), summary)
        writer.finish(summary)
    except KeyboardInterrupt as e:
        raise interrupted(e, writer) from None
    except WrongArchitecture:
        if writer is not None:        # refused before step 0: this run's fresh config and empty metrics go
            writer.close()
            for name in (METRICS, CONFIG):
                (out / name).unlink(missing_ok=True)
            writer = None
        raise
    finally:
        if writer is not None:
            writer.close()
        if lock is not None:
            lock.release(undo=writer is None)     # refused or interrupted before writing: leave no trace
    distributed.barrier()              # the record (and a cached small model) is complete before any rank reads it
    return out


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
