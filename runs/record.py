"""The run record (DESIGN.md §6): one directory per run, written so that a crash never corrupts it.

    config.json     fully resolved config + environment (written atomically at the start; each --resume adds
                    its own start, the step it went on from and its environment, to `resumed`)
    metrics.jsonl   append-only, one JSON line per logged step, flushed whole
    summary.json    only on clean completion (its absence marks an incomplete run)
    checkpoint.pt   latest training state;  model/  the final model in its ecosystem's format
    eval.json       downstream results, merged suite by suite (runs/evaluation.py; run.py --eval / --evaluate)
    .lock           held by the process writing the run (runs/lock.py)

The reader is the only thing `analysis/` needs from here; it drops a truncated last line (power cut) with a
warning instead of failing or, worse, reading half a number.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

from runs.atomic import TEMPORARY, TRASH, TRASH_DIR, read_json, remove_stale_temporaries, write_json_atomic
from runs.lock import LOCK
from runs.signals import signals_held

CONFIG, METRICS, SUMMARY, EVAL_FILE = "config.json", "metrics.jsonl", "summary.json", "eval.json"
# Recipe fields that say when to log and evaluate, not what is computed: the trainer's numbers at a step do not
# depend on them (evaluation draws no random numbers and changes no state; tests/test_recipe_axes.py), so two records
# that differ only there are the same computation, one logged more densely (a sweep counts either as done; the
# analysis compares them without a recipe caveat).
LOGGING_FIELDS = ("eval_every", "log_every")


def without_logging(recipe: dict | None) -> dict:
    """A recorded recipe without its LOGGING_FIELDS."""
    return {k: v for k, v in (recipe or {}).items() if k not in LOGGING_FIELDS}


def logged_alike(task: dict | None) -> dict | None:
    """A task record with its recipe's LOGGING_FIELDS left out: what decides the computation (a sweep's record
    evaluated every 50 steps is the one it would make evaluating every 200, and the other way round)."""
    if not isinstance(task, dict) or not isinstance(task.get("recipe"), dict):
        return task
    return {**task, "recipe": without_logging(task["recipe"])}


# -- what in a record decides its computation: how two records, or a record and a run about to start, are compared
# (runs/preflight.py's refusals, runs/computation.py's twins, the sweeps' staleness, a checkpoint's identity)

def jsonable(obj):
    """`obj` as a record's JSON holds it (tuples as lists, paths and other objects as their text): what a
    value read back from config.json is compared with."""
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


def compared_task(record: dict | None) -> dict | None:
    """A task record as two runs' computations are compared (a sweep's record with the run it would make, a run with
    the committed scratch run it is measured against): per-scale method defaults and logging fields aside."""
    return logged_alike(comparable_task(record))


def comparable_method(record: dict | None) -> dict | None:
    """A method record's settings: its name and resolved config. The rest is derived from them (a depth method's
    composition) or, in older records, an outcome of growing (the block sources a depth method's composition
    kept), and must not make a record of the same computation look like another configuration."""
    return None if record is None else {k: record.get(k) for k in ("name", "config")}


def run_identity(config: dict) -> str:
    """A digest of what a run record's config.json says decides its numbers (what runs/preflight.py
    check_resumable compares: task, method settings, strategies, process layout, seed, small model), stored in each
    checkpoint the run writes, so that --resume knows a checkpoint of another run (copied in, or left by a run since
    replaced) from its own. Not its creation time or environment: a checkpoint of a run with the same settings is
    the same computation."""
    distributed = config.get("distributed") or {"world_size": 1}
    small = config.get("small")
    if isinstance(small, dict):     # how the run came by its small model is provenance, not the computation
        small = {k: v for k, v in small.items() if k != "obtained"}
    record = {"task": comparable_task(config.get("task")), "method": comparable_method(config.get("method")),
              "strategies": config.get("strategies"), "seed": config.get("seed"), "small": small,
              "distributed": [distributed.get("world_size"), distributed.get("mode")]}
    return hashlib.sha1(json.dumps(jsonable(record), sort_keys=True).encode()).hexdigest()


# what must agree between two records of one pretraining (or any run) for them to be the same computation
SAME_RESULT = ("step", "flops", "units", "eval_loss", "eval_acc")


def ended_otherwise(mine: dict, theirs: dict) -> list[str]:
    """How a run that ended as `mine` (a summary, or a run's record of its small model's, config.small
    `pretrain_result`) ended otherwise than one that ended as `theirs`: "eval_loss 3.98 vs 3.99", one item a field
    of SAME_RESULT (empty: the same computation, to every digit)."""
    return [f"{k} {mine.get(k)!r} vs {theirs.get(k)!r}" for k in SAME_RESULT if mine.get(k) != theirs.get(k)]


def result_differences(mine: Path, theirs: Path) -> list[str]:
    """How the complete run in `mine` ended otherwise than the one in `theirs` (ended_otherwise; a small model
    pretrained again on another CPU need not end the same: records/README.md)."""
    return ended_otherwise(read_json(Path(mine) / SUMMARY), read_json(Path(theirs) / SUMMARY))


def copy_record(src: Path, dst: Path, config: dict, dirs: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> None:
    """Give `dst` the record of `src`, the same computation: its .json/.jsonl files but `skip` and the folders
    `dirs` (the exported model, for a run that is read again), with `config` as its config.json. summary.json
    comes last, so `dst` reads as complete only once everything is in place."""
    dst = Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    for name in dirs:
        shutil.copytree(Path(src) / name, dst / name, dirs_exist_ok=True)
    for f in Path(src).iterdir():
        if f.is_file() and f.name not in (CONFIG, SUMMARY, *skip) and f.suffix in (".json", ".jsonl"):
            shutil.copy2(f, dst / f.name)
    write_json_atomic(dst / CONFIG, config)
    shutil.copy2(Path(src) / SUMMARY, dst / SUMMARY)


def is_run_config(config) -> bool:
    """Whether a parsed config.json is a run's (an HF model's config.json, say, is not)."""
    return isinstance(config, dict) and isinstance(config.get("task"), dict) and isinstance(config.get("method"), dict)


def enclosing_record(path: Path) -> Path | None:
    """The run record `path` lies in (it or a folder above it holds config.json and metrics.jsonl), or None: an
    output written there would be mixed with the run's files and read as part of it."""
    path = Path(path).absolute()
    return next((f for f in (path, *path.parents) if (f / CONFIG).is_file() and (f / METRICS).is_file()), None)


CHECKPOINT_FILE, MODEL_DIR = "checkpoint.pt", "model"     # runs/checkpoint.py's file; the exported model
# what methods.base.GrowthMethod.artifacts() of the shipped methods and strategies save beside the record (LiGO's
# operator and fit curve, a growth report, staged training's report): tests/test_faults.py checks the list is whole
ARTIFACTS = ("growth.json", "ligo_fit.json", "ligo_operator.pt", "staged.json")
# everything a run writes in its directory, in the order clear_run takes it away: summary.json first (the record
# then reads as incomplete), config.json last (until then it is still a record, which --overwrite or --resume
# takes up again)
RUN_ENTRIES = (SUMMARY, CHECKPOINT_FILE, MODEL_DIR, EVAL_FILE, *ARTIFACTS, METRICS, CONFIG)


def is_leftover(name: str) -> bool:
    """What a writer killed mid-way leaves in a run directory, never a run's or a user's file: clear_run's folder
    (`.cleared-<pid>`) or a temporary of a run's file (`.checkpoint.pt.<pid>.tmp`). Readers ignore them; the next
    writer removes them (remove_stale_temporaries)."""
    m = TEMPORARY.match(name)
    return bool(TRASH_DIR.match(name) or (m and m.group("name") in RUN_ENTRIES))


def clear_run(directory: Path) -> list[str]:
    """Remove what a run wrote in its directory (RUN_ENTRIES: record, checkpoint, model/, eval.json, a method's
    artifacts, and temporaries of them) and nothing else: --overwrite must not leave an old run's files beside the
    new one's, nor delete what the run did not write (a user's notes, a run nested inside). Returns the names left
    (the lock aside; a folder with a trailing /), for the caller to say so.

    Interruptible without harm: the run's entries are first renamed into a `.cleared-<pid>` folder, all at once
    with signals held (config.json last, so that even a SIGKILL between two renames leaves an incomplete record,
    not files without a config), and only then deleted; a folder a killed deletion left is deleted by the next
    clear_run and ignored by the record's readers (runs.preflight.inspect_out, analysis)."""
    d = Path(directory)
    remove_stale_temporaries(d)               # an earlier clear_run's folder, if it was killed
    temporaries = [e.name for e in d.iterdir() if TEMPORARY.match(e.name) and is_leftover(e.name)]
    mine = [n for n in RUN_ENTRIES if os.path.lexists(d / n)] + temporaries
    trash = d / f"{TRASH}{os.getpid()}"
    if trash.is_dir():                        # this process's own, from a clear_run interrupted before
        shutil.rmtree(trash)
    with signals_held():
        trash.mkdir()
        for name in mine:
            os.rename(d / name, trash / name)
    shutil.rmtree(trash)
    return sorted(e.name + ("/" if e.is_dir() else "") for e in d.iterdir() if e.name != LOCK)


# -- a run's starts: the first (config.json's own environment) and each resume, which may run elsewhere (another
# machine, thread count or commit): a wall time is one machine's only where every start ran on it

RESUMED = "resumed"       # config.json: one entry per resume, in order


def add_start(directory: Path, config: dict, step: int) -> None:
    """Note a resume of the record in `directory` in its config.json: the step it goes on from (the last row kept),
    when, the command and the environment of this start. The first start's config stays as it was written."""
    recorded = read_json(directory / CONFIG)
    start = {"step": step, "created": config.get("created"), "argv": config.get("argv"),
             "environment": config.get("environment")}
    recorded[RESUMED] = [*(recorded.get(RESUMED) or []), jsonable(start)]
    write_json_atomic(directory / CONFIG, recorded)


def starts(config: dict) -> list[dict]:
    """Each start of a run, first to last: {"step", "environment", ...}; the first goes on from step 0."""
    first = {"step": 0, "created": config.get("created"), "argv": config.get("argv"),
             "environment": config.get("environment") or {}}
    return [first, *(config.get(RESUMED) or [])]


def device_named(environment: dict | None) -> str:
    """The device a start ran on, by name: a CPU run's CPU model where the record names one (runs/hardware.py
    cpu_model), as two CPUs of one architecture run at another pace, else the device's name ("x86_64", the GPU's).
    A record that names no model (made before models were recorded) is not taken for one that does: nothing says
    it ran on that CPU."""
    env = environment or {}
    model = env.get("cpu") if env.get("device") == "cpu" else None
    return model or env.get("device_name") or env.get("device") or "?"


def machine(environment: dict | None) -> str:
    """One start's machine as the wall-time comparisons name it: its device (device_named) and torch threads."""
    return f"{device_named(environment)}, {(environment or {}).get('threads') or '?'} thr."


def run_machine(config: dict, name_of=machine) -> str:
    """The machine a run's wall time was measured on; the starts' machines joined by ' then ' where a resume ran on
    another, which matches no single machine, so that no wall-time comparison takes such a run as one machine's.
    `name_of`: what of an environment names its machine (default: device and threads)."""
    names = []
    for start in starts(config):
        name = name_of(start.get("environment"))
        if not names or names[-1] != name:
            names.append(name)
    return " then ".join(names)


class RunExistsError(FileExistsError):
    pass


class RunWriter:
    """Writes a run's record; `report_to`: trackers (runs/tracking.py) that receive every logged row too."""

    def __init__(self, directory: Path, config: dict, resume: bool = False, overwrite: bool = False,
                 report_to: tuple[str, ...] = ()):
        self.dir = Path(directory)
        if (self.dir / CONFIG).exists() and not (resume or overwrite):
            raise RunExistsError(f"run directory {self.dir} already holds a run; pass --resume to continue it "
                                 "or --overwrite to replace it")
        self.dir.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(self.dir)        # a killed process's half-written checkpoint or deletion
        # what --overwrite left in place (not the old run's: a user's notes, a run nested inside), for the caller to say
        self.kept = clear_run(self.dir) if overwrite else []
        # a resumed run's metrics.jsonl was cut back to its checkpoint: its last row is the step the run goes on from
        rows = read_metrics(self.dir / METRICS) if resume else []
        last_step = rows[-1]["step"] if rows else None
        if not resume or not (self.dir / CONFIG).exists():
            write_json_atomic(self.dir / CONFIG, config)
        else:
            add_start(self.dir, config, last_step or 0)
        self._metrics = open(self.dir / METRICS, "a")
        self.trackers = self._open_trackers(report_to, config, resume, last_step)

    def _open_trackers(self, report_to: tuple[str, ...], config: dict, resume: bool, last_step: int | None) -> list:
        if not report_to:
            return []
        from runs.tracking import open_trackers      # here: the record itself needs neither torch nor a tracker
        # a resumed run's trackers continue after its last step, under the config the record was created with
        if resume:
            config = read_json(self.dir / CONFIG)
        return open_trackers(report_to, self.dir, config, last_step)

    def log(self, row: dict) -> None:
        # one write call per line, then flush + fsync: a crash leaves at most one truncated last line
        try:
            self._metrics.write(json.dumps(row, sort_keys=True) + "\n")
            self._metrics.flush()
            os.fsync(self._metrics.fileno())
        except OSError as e:          # a full disk: say which file
            raise OSError(e.errno, e.strerror, str(self.dir / METRICS)) from None
        for tracker in self.trackers:
            tracker.log(row)

    def finish(self, summary: dict) -> None:
        self._metrics.close()
        self._close_trackers()
        write_json_atomic(self.dir / SUMMARY, summary)

    def close(self) -> None:
        if not self._metrics.closed:
            self._metrics.close()
        self._close_trackers()

    def _close_trackers(self) -> None:
        trackers, self.trackers = self.trackers, []
        for tracker in trackers:
            tracker.close()


def read_metrics(path: Path) -> list[dict]:
    """Metric rows; a truncated or corrupt *last* line is dropped with a warning; a corrupt line elsewhere
    is an error (that is not a crash artefact but a damaged file)."""
    rows, lines = [], Path(path).read_text().splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                warnings.warn(f"{path}: dropped a truncated last line ({len(line)} characters)")
            else:
                raise ValueError(f"{path}: line {i + 1} is not valid JSON; the record is damaged")
    return rows


@dataclass
class Run:
    dir: Path
    config: dict
    metrics: list[dict]
    summary: dict | None

    @property
    def complete(self) -> bool:
        return self.summary is not None

    @property
    def method(self) -> str:
        return self.config["method"]["name"]

    @property
    def task(self) -> str:
        return self.config["task"]["name"]

    def frame(self):
        import pandas as pd
        return pd.DataFrame(self.metrics)

    def closing_training_loss(self) -> tuple[float | None, bool]:
        """(mean training loss of the rows logged in the run's last evaluation interval, whether a teacher ran in
        it), or (None, False) where no row logged one. The interval is the recipe's `eval_every` steps before the
        last logged step (at mini: the last 200 steps, four rows). Read beside the final eval loss it says where a
        run's fit went: a training loss far below the eval loss is fit to the training tokens that held-out ones do
        not share. The loss is the one the trainer minimised, so under the recipe's dropout and augmentation, and
        mixed with the distillation term where a teacher ran (KI before its weight reaches 0: hence the flag)."""
        rows = sorted((m for m in self.metrics if m.get("train_loss") is not None), key=lambda m: m["step"])
        if not rows:
            return None, False
        window = int(((self.config.get("task") or {}).get("recipe") or {}).get("eval_every") or 0)
        start = rows[-1]["step"] - window
        closing = [m for m in rows if m["step"] > start] or rows[-1:]
        # cumulative teacher FLOPs where the interval begins: any growth inside it means distillation ran
        before = max((m.get("flops_teacher") or 0.0 for m in self.metrics if m["step"] <= start), default=0.0)
        distilled = (closing[-1].get("flops_teacher") or 0.0) > before
        return sum(m["train_loss"] for m in closing) / len(closing), distilled


def load_run(directory: Path) -> Run:
    d = Path(directory)
    if not (d / CONFIG).exists():
        raise FileNotFoundError(f"{d} is not a run directory (no {CONFIG})")
    config = read_json(d / CONFIG)
    metrics = read_metrics(d / METRICS) if (d / METRICS).exists() else []
    summary = read_json(d / SUMMARY) if (d / SUMMARY).exists() else None
    return Run(d, config, metrics, summary)
