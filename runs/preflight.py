"""What a run checks before it writes anything, and what it says when it stops early.

`run_experiment` (runs/experiment.py) looks at its directory with these before taking the lock: whether the
path can hold a run at all (`check_out`), what is there (`inspect_out`: a new run, one to resume or replace, or
something that is not a run and is never touched), and whether a run there may be continued by this command
(`check_resumable`: same task, method, strategies, process layout, seed and small model).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from runs.lock import LOCK
from runs.record import CONFIG, METRICS, SUMMARY, RunExistsError, is_leftover, is_run_config, read_json

CHECKPOINT = "checkpoint.pt"     # runs/trainer.py's (not imported from there: this module stays torch-free)


def jsonable(obj):
    return json.loads(json.dumps(obj, default=str))


def differing_keys(before: dict, now: dict, prefix: str = "") -> list[str]:
    """The dotted keys where two records differ, e.g. ['recipe.lr', 'small_recipe.lr']."""
    keys = []
    for k in sorted(set(before) | set(now)):
        a, b = before.get(k), now.get(k)
        if a != b:
            nested = isinstance(a, dict) and isinstance(b, dict)
            keys += differing_keys(a, b, f"{prefix}{k}.") if nested else [f"{prefix}{k}"]
    return keys


def comparable_task(record: dict | None) -> dict | None:
    """A task record without its per-scale method defaults: they cover every method, and the one a run uses is
    resolved into its method config (compared on its own), so a default added for another method (MSG's
    ramp_steps) changes no run's computation."""
    # grown_changes: the values a grown-recipe preset set, already in the recipe compared beside it
    return None if record is None else {k: v for k, v in record.items() if k not in ("method_defaults", "grown_changes")}


def comparable_method(record: dict | None) -> dict | None:
    """A method record's settings: its name and resolved config. The rest is derived from them (a depth method's
    composition) or, in older records, an outcome of growing (the block sources a depth method's composition
    kept), and must not make a record of the same computation look like another configuration."""
    return None if record is None else {k: record.get(k) for k in ("name", "config")}


def run_identity(config: dict) -> str:
    """A digest of what a run record's config.json says decides its numbers (what check_resumable compares: task,
    method settings, strategies, process layout, seed, small model), stored in each checkpoint the run writes, so
    that --resume knows a checkpoint of another run (copied in, or left by a run since replaced) from its own. Not
    its creation time or environment: a checkpoint of a run with the same settings is the same computation."""
    distributed = config.get("distributed") or {"world_size": 1}
    record = {"task": comparable_task(config.get("task")), "method": comparable_method(config.get("method")),
              "strategies": config.get("strategies"), "seed": config.get("seed"), "small": config.get("small"),
              "distributed": [distributed.get("world_size"), distributed.get("mode")]}
    return hashlib.sha1(json.dumps(jsonable(record), sort_keys=True).encode()).hexdigest()


class CannotResume(ValueError):
    """The directory holds a run this command cannot continue: other settings, seed or small model, or a
    damaged checkpoint."""


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C, with where the run stood: args[0] is the one-line message for the user."""


def check_resumable(out: Path, old: dict, config: dict, small: dict | None) -> None:
    """Refuse to continue a run with anything that would change its numbers: task (recipe, data, models),
    method config, strategies, process layout, seed, or the small model it grows from."""
    # the seed first: a method's seed follows it (GrowthMethod.for_run), and --seed is what was given
    if old.get("seed") != config["seed"]:
        raise CannotResume(f"{out} holds a run with seed {old.get('seed')}, not {config['seed']}; resume needs "
                           "the same --seed")
    for key in ("task", "method"):
        before, now = jsonable(old.get(key)) or {}, jsonable(config[key])
        comparable = comparable_task if key == "task" else comparable_method
        before, now = comparable(before), comparable(now)
        if before.get("name") != now.get("name"):
            raise CannotResume(f"{out} holds a run of another {key} ('{before.get('name')}', not '{now.get('name')}'); "
                               "resume needs the same one, or use --overwrite / another --out")
        if before != now:
            differ = ", ".join(differing_keys(before, now))
            raise CannotResume(f"{out} holds a run of {key} '{now['name']}' with another configuration "
                               f"(differs in: {differ}); resume needs the same settings")
    if jsonable(old.get("strategies")) != jsonable(config.get("strategies")):
        raise CannotResume(f"{out} holds a run with other training strategies ({old.get('strategies')}); "
                           "resume needs the same --set layer_drop/token_drop/staged settings")
    before, now = old.get("distributed") or {"world_size": 1}, config["distributed"]
    if (before.get("world_size"), before.get("mode")) != (now["world_size"], now["mode"]):
        raise CannotResume(f"{out} holds a run on {before.get('world_size')} process(es) ({before.get('mode')}); "
                           f"resume it with the same torchrun --nproc_per_node and sharding mode")
    recorded = old.get("small")
    if small is not None and recorded:
        def where(info):
            return f"--small {info.get('path')}" if info.get("source") == "given" else "the cached small model"
        same = recorded.get("source") == small["source"]
        if same and small["source"] == "given":
            resolved = recorded.get("resolved") or str(Path(recorded.get("path", "")).expanduser().resolve())
            same = resolved == small["resolved"] and recorded.get("files", small["files"]) == small["files"]
        elif same:
            same = recorded.get("path") == small["path"]
        if not same:
            changed = " (its files changed since)" if recorded.get("source") == small["source"] == "given" else ""
            raise CannotResume(f"{out} holds a run grown from {where(recorded)}{changed}; resume needs the same "
                               f"small model, not {where(small)}")


def check_out(out: Path, flag: str = "--out") -> None:
    """The run directory must be creatable and writable: one line for a path under a file, no permission, or
    a read-only file system (checked before anything is written). `flag`: the option that named it."""
    existing = Path(out).absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        where = f"{flag} {out} is" if existing == Path(out).absolute() else f"{flag} {out}: {existing} is"
        raise ValueError(f"{where} a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        readonly = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
        raise ValueError(f"{flag} {out}: cannot write in {existing} "
                         f"({'read-only file system' if readonly else 'permission denied'})")


def inspect_out(out: Path, resume: bool, overwrite: bool) -> tuple[str, dict | None]:
    """What `out` holds and what this run will do there: ("new" | "resume" | "overwrite", its old config).
    Never writes into or deletes a directory that is not a run's (an exported model, a user's files, a
    checkpoint without its config)."""
    if not out.is_dir():
        return "new", None
    if (out / CONFIG).exists():
        old = read_json(out / CONFIG)
        if not is_run_config(old):
            raise ValueError(f"{out} is not a run directory: its {CONFIG} is not a growbench run's (an exported "
                             "model?); choose another --out")
        if resume:
            return "resume", old
        if overwrite:
            return "overwrite", old
        raise RunExistsError(f"run directory {out} already holds a run; pass --resume to continue it "
                             "or --overwrite to replace it")
    others = sorted(p.name for p in out.iterdir() if p.name != LOCK and not is_leftover(p.name))
    if others:
        listed = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise ValueError(f"{out} holds {listed} but no {CONFIG}: not a run record (or a damaged one), so nothing "
                         "there is resumed, replaced or deleted; choose another --out")
    return "new", None


def record_state(out: Path) -> tuple:
    """What the record files look like now (to see, once locked, that no other process changed them)."""
    return tuple((n, st.st_size, st.st_mtime_ns) for n in (CONFIG, METRICS, SUMMARY, CHECKPOINT)
                 if (st := _stat(out / n)) is not None)


def _stat(path: Path):
    try:
        return path.stat()
    except OSError:
        return None


def interrupted(error: KeyboardInterrupt, writer) -> RunInterrupted:
    """The one-line message for Ctrl-C: where the run stood and how to go on."""
    if writer is not None:
        state = getattr(writer, "state", None)
        if state is None:
            return RunInterrupted("interrupted before the first training step; continue with --resume")
        return RunInterrupted(f"interrupted at step {state.step}; continue with --resume")
    if isinstance(error, RunInterrupted):     # in the small model's pretraining (resolve_small)
        return RunInterrupted(f"{error.args[0].split(';')[0]} of pretraining the small model; run the same "
                              "command again to continue it")
    return RunInterrupted("interrupted before the run started; nothing was written")


