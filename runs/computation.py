"""Which runs are the same computation (DESIGN.md §6: two methods that are the same computation on a pair are
marked or merged in a table, never printed as rivals).

On some pairs two methods reduce to one another: StackBERT composes Net2Net's width with stacking, which is
Net2Net; on a width-only pair (DeiT, CaiT) stacking, interpolation and MSLT do nothing in depth and all become
their width operator. A run's numbers are decided by its initial weights, what its training does with them
(the stage plan: steps, trainable and active blocks per stage; an extra loss such as distillation), the task
(models, data, recipe), the training strategies and the seed. `fingerprint` hashes exactly that; run_experiment
logs it in the step-0 row of metrics.jsonl as "computation", and analysis merges the labels whose runs share it
seed for seed. The sweep runner (bench/sweeps/cli.py) uses `initial_fingerprint` to find such a twin before training
and records the run as the twin's instead of computing it again.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from runs.record import comparable_task


def weights_digest(model: torch.nn.Module) -> str:
    """sha1 over every tensor of the state dict: name, dtype, shape and bytes (bit-exact equality)."""
    h = hashlib.sha1()
    for name, t in sorted(model.state_dict().items()):
        t = t.detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def training_plan(method, task) -> list:
    """The stages as training sees them (names and the optimizer-reset flag are for the record only: the trainer
    builds a fresh optimizer at every stage boundary whatever they say)."""
    blocks = lambda s: None if s is None else sorted(s)  # noqa: E731
    return [[st.steps, blocks(st.trainable_blocks), blocks(st.active_blocks)]
            for st in method.stages(task, task.recipe.steps)]


def fingerprint(model, method, task, seed: int, strategies=None, task_record: dict | None = None) -> str:
    """The identity of a run's computation, given its initial (grown) model. `task_record`: hash this record of the
    task instead of `task.to_dict()` (the sweep checks a run of another task, equal in all this run reads, by
    recomputing the fingerprint that run logged under its own task's record)."""
    # the task's per-scale method defaults are in the method's config, which acts through the initial weights (a
    # fit) or the training signature (an extra loss): they are not the computation themselves
    record = {"init": weights_digest(model), **computation_record(method, task, seed, strategies, task_record)}
    return hashlib.sha1(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()


def computation_record(method, task, seed: int, strategies=None, task_record: dict | None = None) -> dict:
    """All `fingerprint` hashes but the initial weights: what is known of a run's computation before its model
    exists. Two runs that differ here are never the same computation (a sweep launching runs side by side holds a
    run back behind an earlier one only where these agree: bench/sweeps/launch.py)."""
    task_record = task.to_dict() if task_record is None else task_record
    return {"plan": training_plan(method, task), "training": method.training_signature(),
            "task": comparable_task(task_record), "seed": seed,
            "strategies": strategies.record() if strategies is not None else None}


def initial_fingerprint(task, method, seed: int, small_model, strategies=None, task_record: dict | None = None) -> str:
    """The fingerprint a run of `method` would log, computed the way run_experiment grows (the global RNG seeded
    with the run's seed just before `grow`). Only for methods without a fit: a fit is the computation itself."""
    method = method.for_run(seed)      # the method's draws with the run's seed, as run_experiment gives it
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        large = method.grow(small_model, task)
    return fingerprint(large, method, task, seed, strategies, task_record)


def logged_fingerprint(metrics: list[dict]) -> str | None:
    """The fingerprint a record logged (its step-0 row), None for records made before it was logged."""
    first = min(metrics, key=lambda r: r.get("step", 0), default={})
    return first.get("computation") if first.get("step") == 0 else None


# What a run that uses no small model (scratch, and the small model's own pretraining) does not read of its
# task: two tasks that differ only here train one model on one data stream with one recipe (bert_small_large's
# scratch is bert_base_large's; bert_small_base's small model is bert_small_large's). The grown recipe's name: its
# changes are in `recipe` where a run reads them (a grown run; scratch is always "same"; comparable_task drops the
# changes themselves), so a small model's pretraining made first by a warmup0 run is the one its plain run, or the
# small-continued control, would make.
NOT_READ_WITHOUT_SMALL = ("name", "small", "small_recipe", "notes", "evals", "grown_recipe")


def read_without_small(task_record: dict | None) -> dict:
    """What a run that uses no small model reads of its task's record (all but NOT_READ_WITHOUT_SMALL)."""
    from runs.record import jsonable
    return jsonable({k: v for k, v in (comparable_task(task_record) or {}).items() if k not in NOT_READ_WITHOUT_SMALL})


def computed_elsewhere(task, method, strategies, seed: int, candidates) -> Path | None:
    """The first of `candidates` (run directories of other tasks) that is, bit for bit, the run `method` (one that
    uses no small model) would make on `task`: complete, computed there (not itself a copy), of this seed, its
    task different only in what such a run never reads (NOT_READ_WITHOUT_SMALL), the same method settings, and
    the fingerprint it logged the one this run would log under that task's record (initial weights, training
    plan, strategies, seed). None otherwise, and for records made before fingerprints were logged."""
    from runs.record import CONFIG, SUMMARY, comparable_method, jsonable, load_run

    mine = (read_without_small(task.to_dict()), jsonable(comparable_method(method.describe())))
    for other in candidates:
        if not ((other / SUMMARY).exists() and (other / CONFIG).exists()):
            continue
        run = load_run(other)
        if "same_computation_as" in run.config or run.config.get("seed") != seed:
            continue
        theirs = (read_without_small(run.config.get("task")), jsonable(comparable_method(run.config.get("method"))))
        logged = logged_fingerprint(run.metrics)
        if theirs == mine and logged is not None and logged == initial_fingerprint(
                task, method, seed, None, strategies, task_record=run.config["task"]):
            return other
    return None


__all__ = ["NOT_READ_WITHOUT_SMALL", "computation_record", "computed_elsewhere", "fingerprint", "initial_fingerprint",
           "logged_fingerprint", "read_without_small", "training_plan", "weights_digest"]
