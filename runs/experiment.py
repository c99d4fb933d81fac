"""One comparison run, end to end: resolve the small model, fit the growth operator, grow, train, export.

`run.py` is a thin CLI over `run_experiment`; scripts and sweeps call it directly.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import torch

from methods import get_method
from methods.base import GrowthMethod
from models import get_family
from models.family import exported_family
from runs import distributed
from runs.computation import fingerprint
from runs.ledger import FlopsLedger
from runs.record import CONFIG, SUMMARY, RunExistsError, RunWriter, read_metrics, write_json_atomic
from runs.strategies import Strategies, apply_strategies
from runs.trainer import CHECKPOINT, evaluate, full_model, load_checkpoint, train

OUT_ROOT = Path(os.environ.get("GROWBENCH_OUT", Path(__file__).resolve().parent / "out"))
FLOPS_CONVENTION = ("analytic matmul FLOPs, 2 per multiply-add; backward = 2x forward for trainable layers, "
                    "input-gradient only for frozen layers above a trainable one, none below; attention included")
PACKAGES = ("torch", "transformers", "timm", "tokenizers", "datasets", "numpy")


def default_out(task, method: GrowthMethod, seed: int, strategies: Strategies | None = None) -> Path:
    tag = strategies.tag() if strategies is not None else ""
    return OUT_ROOT / f"{task.name}-{task.scale}" / f"{method.name}{tag}-s{seed}"


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


def _jsonable(obj):
    return json.loads(json.dumps(obj, default=str))


def small_cache_dir(task, seed: int) -> Path:
    key = json.dumps({"spec": task.small.to_dict(), "recipe": _jsonable(task.small_recipe.__dict__),
                      "data": task.data, "tokenizer": task.tokenizer, "seed": seed}, sort_keys=True)
    digest = hashlib.sha1(key.encode()).hexdigest()[:10]
    return OUT_ROOT / "cache" / "small" / f"{task.name}-{task.scale}-s{seed}-{digest}"


def resolve_small(task, seed: int, small_dir: Path | None, device, log, progress: bool):
    """The pretrained small model: from --small, from the cache, or trained now (and cached)."""
    family = get_family(task.family)
    if small_dir is not None:
        small_dir = Path(small_dir)
        if not small_dir.is_dir():
            raise FileNotFoundError(f"--small {small_dir}: no such directory (give an HF/timm model directory)")
        found = exported_family(small_dir)
        if found != task.family:
            raise ValueError(f"--small {small_dir} holds a {found or 'unrecognised'} model, but task {task.name} "
                             f"grows a {task.family} model (give a {task.family} save_pretrained/export directory)")
        try:
            model = family.load(small_dir)
        except Exception as e:
            raise ValueError(f"--small {small_dir}: cannot load a {task.family} model from it "
                             f"({type(e).__name__}); expected an HF save_pretrained / timm export directory") from None
        spec = family.spec_of(model) if family.owns(model) else None
        if spec != task.small:
            raise ValueError(f"--small {small_dir} holds {spec.short() if spec else 'another model'}, but task "
                             f"{task.name} needs {task.small.short()}")
        return model, {"path": str(small_dir), "pretrain_flops": None, "source": "given"}
    cache = small_cache_dir(task, seed)
    if not (cache / SUMMARY).exists():
        log(f"no --small given: pretraining the small model first ({task.small.layers} layers, "
            f"hidden {task.small.hidden}, {task.small_recipe.steps} steps) -> {cache}")
        run_experiment(task.small_task(), get_method("scratch"), seed=seed, device=device, out=cache,
                       overwrite=True, progress=progress, log=log)
    summary = json.loads((cache / SUMMARY).read_text())
    model = family.load(cache / "model")
    return model, {"path": str(cache), "pretrain_flops": summary["flops"], "pretrain_wall": summary["wall"],
                   "source": "cache"}


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


def check_resumable(out: Path, config: dict) -> None:
    old = json.loads((out / CONFIG).read_text())
    for key in ("task", "method"):
        before, now = _jsonable(old.get(key)) or {}, _jsonable(config[key])
        if before.get("name") != now.get("name"):
            raise ValueError(f"{out} holds a run of another {key} ('{before.get('name')}', not '{now.get('name')}'); "
                             "resume needs the same one, or use --overwrite / another --out")
        if before != now:
            differ = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
            raise ValueError(f"{out} holds a run of {key} '{now['name']}' with another configuration "
                             f"(differs in: {', '.join(differ)}); resume needs the same settings")
    if _jsonable(old.get("strategies")) != _jsonable(config.get("strategies")):
        raise ValueError(f"{out} holds a run with other training strategies ({old.get('strategies')}); "
                         "resume needs the same --set layer_drop/token_drop/staged settings")
    before, now = old.get("distributed") or {"world_size": 1}, config["distributed"]
    if (before.get("world_size"), before.get("mode")) != (now["world_size"], now["mode"]):
        raise ValueError(f"{out} holds a run on {before.get('world_size')} process(es) ({before.get('mode')}); "
                         f"resume it with the same torchrun --nproc_per_node and sharding mode")


def truncate_metrics(out: Path, step: int) -> None:
    """Drop rows logged after the checkpoint (they will be produced again), so no line is duplicated."""
    path = out / "metrics.jsonl"
    rows = [r for r in read_metrics(path) if r["step"] <= step] if path.exists() else []
    tmp = path.with_name(".metrics.jsonl.tmp")
    tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    os.replace(tmp, path)


def run_experiment(task, method: GrowthMethod, *, seed: int = 0, device="cpu", out: Path | None = None,
                   small: Path | None = None, resume: bool = False, overwrite: bool = False,
                   progress: bool = True, log=print, strategies: Strategies | None = None, parallel: str = "ddp",
                   compile: bool = False) -> Path:
    """Under torchrun every rank calls this with the same arguments (runs/distributed.py); rank 0 alone writes.
    `parallel`: "ddp" or "fsdp" (with several processes); `compile`: torch.compile the training forward."""
    device = torch.device(device)
    out = Path(out) if out is not None else default_out(task, method, seed, strategies)
    method = apply_strategies(method, strategies)     # staged training wraps the method's stages
    family = get_family(task.family)
    config = {"task": _jsonable(task.to_dict()), "method": _jsonable(method.describe()), "seed": seed,
              "flops_convention": FLOPS_CONVENTION, "environment": environment(device), "argv": sys.argv,
              "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "distributed": distributed.describe(parallel, task.recipe), "compile": compile}
    if strategies is not None and strategies.active:
        config["strategies"] = strategies.record()
    if (out / CONFIG).exists() and not (resume or overwrite):
        raise RunExistsError(f"run directory {out} already holds a run; pass --resume to continue it "
                             "or --overwrite to replace it")
    resuming = resume and (out / CONFIG).exists()
    if resuming:
        check_resumable(out, config)
        if (out / SUMMARY).exists():
            log(f"{out} is already complete; nothing to resume")
            return out
    checkpoint = load_checkpoint(out / CHECKPOINT) if resuming and (out / CHECKPOINT).exists() else None
    with distributed.main_first():     # rank 0 trains and caches the tokenizer, the others then read it
        data = task.pretrain_data()    # loads (and on first use trains the tokenizer) before anything is written
    config["reference"] = reference(data, task)
    small_model = small_info = None
    if method.needs_small and (checkpoint is None or method.trains_with_small):
        small_model, small_info = resolve_small(task, seed, small, device, log, progress)
        # the small model lives on the run's device: LiGO's fit, every growth and KI's teacher run there
        small_model = small_model.to(device)
    config["small"] = small_info
    if resuming and checkpoint is None:
        resuming = False               # nothing to continue from: start over in the same directory
    if checkpoint is not None and distributed.is_main():
        # before the writer opens metrics.jsonl for appending: truncation replaces the file
        truncate_metrics(out, checkpoint["state"]["step"])
    distributed.barrier()              # every rank has read what it needed before rank 0 writes
    writer = (RunWriter(out, config, resume=resuming, overwrite=overwrite or (resume and not resuming))
              if distributed.is_main() else distributed.SilentWriter(out))
    try:
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
            start_wall = time.perf_counter() - started
            row = {"step": 0, "units": 0, "wall": round(start_wall, 4), "stage": "init", "flops": ledger.total,
                   "full_model": full_model(large, family, task),
                   **{f"flops_{k}": v for k, v in ledger.as_dict().items()},
                   # which other runs are this same computation (runs/computation.py; analysis merges them)
                   "computation": fingerprint(large, method, task, seed, strategies)}
            row.update(evaluate(large.to(device), family, data.eval_batches(task.recipe.batch_size,
                                                                            task.recipe.eval_batches),
                                device, task.recipe.bf16))
            writer.log(row)
            init_row = row
            _save_artifacts(out, method)
        else:
            start_wall, init_row = 0.0, {}
            # the shape the checkpoint's stage had (MSLT changes depth); KI takes its teacher back here
            stage = method.stages(task, task.recipe.steps)[checkpoint["stage"]]
            large = method.resume_model(small_model, task, stage)
        result = train(large, task, method, data, ledger, writer, seed=seed, device=device,
                       resume_from=checkpoint, progress=progress, strategies=strategies, parallel=parallel,
                       compile=compile, start_wall=start_wall)
        _save_artifacts(out, method)   # again: some appear during training (staged training's depth step)
        final = distributed.plain_model(result["model"], family)     # under FSDP: gathered (on every rank)
        if distributed.is_main():
            family.export(final.cpu(), out / "model")
            if getattr(data, "tokenizer", None) is not None:  # fine-tuning (tasks/evals) needs the same tokenizer
                data.tokenizer.save_pretrained(out / "model")
        last = result["last"] or init_row      # --steps 0: the grown model itself (paper Table 5's "LiGO init")
        summary = {"step": result["state"].step, "units": result["state"].units, "wall": result["state"].wall,
                   "flops": ledger.total, "flops_by_phase": ledger.as_dict(),
                   "eval_loss": last.get("eval_loss"), "eval_acc": last.get("eval_acc")}
        writer.finish(summary)
    finally:
        writer.close()
    distributed.barrier()              # the record (and a cached small model) is complete before any rank reads it
    return out


def _save_artifacts(out: Path, method: GrowthMethod) -> None:
    if not distributed.is_main():
        return
    for name, obj in method.artifacts().items():
        if name.endswith(".json"):
            write_json_atomic(out / name, obj)
        else:
            torch.save(obj, out / name)
