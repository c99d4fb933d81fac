"""What a run checks before it writes anything, and what it says when it stops early.

`run_experiment` (runs/experiment.py) checks its inputs with these before taking the lock: the seed, the models'
sizes, the method's constraints, --small or the small-model cache, the data path (`check_inputs`); whether the path
can hold a run at all (`check_out`), what is there (`inspect_out`: a new run, one to resume or replace, or something
that is not a run and is never touched), whether a run of other settings holds this run's default directory
(`check_default_dir`), and whether a run there may be continued by this command (`check_record_types`,
`check_resumable`: same task, method, strategies, process layout, seed and small model; `check_checkpoint`: the
checkpoint is that run's and its rows reach it). Once the data is loaded, `check_vocab`. The sweeps and the bench
scripts check their plans with the same functions. Importable without torch (bench's result-file check uses
`check_out`): `check_inputs` imports the small-model cache where it runs.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from runs.atomic import read_json
from runs.lock import LOCK
from runs.record import (CHECKPOINT_FILE as CHECKPOINT, CONFIG, METRICS, SUMMARY, RunExistsError, comparable_method,
                         comparable_task, differing_keys, is_leftover, is_run_config, jsonable, read_metrics,
                         run_identity)
from runs.sizes import check_sizes
from tasks.rules import SEED_LIMIT

if TYPE_CHECKING:
    from methods.base import GrowthMethod



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


# -- the run's inputs and its record, checked before the lock (check_inputs, check_default_dir, check_record_types,
# check_checkpoint) or before the writer opens (check_vocab, once the data is loaded)

def check_default_dir(out: Path, config: dict, overwrite: bool) -> None:
    """A run of other settings (another --steps, --set lr=...) in the default directory of this one: --resume cannot
    continue it and --overwrite would lose it, so the refusal names --out first (one line, before anything is
    written). Settings as check_resumable compares them: the task and the method's configuration."""
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


def check_seed(seed) -> None:
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < SEED_LIMIT:
        raise ValueError(f"--seed must be an integer in [0, 2**63), got {seed}")


def check_inputs(task, method: GrowthMethod, seed: int, small: Path | None) -> None:
    """Everything about the input that can be checked before a file is written: the seed, the models' sizes, the
    method's own constraints on the recipe (its stages) and on the pair, the --small directory, the small-model
    cache, and last the data path: a bad setting is named as such on a machine that lacks the data too."""
    from runs.small_model import check_small_dir, small_cache_dir   # here: the rest of this module needs no torch
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
