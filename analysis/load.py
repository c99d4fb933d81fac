"""Finding, checking and identifying run records (DESIGN.md §1: analysis reads only the run-record format).

`load_runs(root)` walks a directory of runs and returns the complete ones plus a list of problems (incomplete,
corrupt (analysis/record_checks.py), duplicate, truncated last line, trained under another recipe than scratch,
grown from another pretraining of the small model than the one beside it) so that nothing is dropped silently.
`identity` is the key a run is grouped and paired by; analysis/frames.py turns the runs into the DataFrames the
tables and figures read (`runs_frame`, `curves_frame`).

A run's *label* is its directory name without the `-s<seed>` suffix (`ligo-fit500-s1` -> `ligo-fit500`), so
variants of one method (bench/sweeps/registry.py names them) are told apart; a directory named otherwise takes the
method's name. Pretraining runs of the small model (task `<name>:small`, e.g. the cache under
runs/out/cache/small, or the `small-s<seed>` copies a sweep makes) get role "small" and label "small": they
give the figures' dotted line and Table 5's first row (label "small"; "small-<variant>" for a small model
pretrained differently, e.g. Figure 7's briefly trained one).
"""
from __future__ import annotations

import json
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from analysis import names
from analysis.record_checks import of_kind, record_problem

# Why import runs.record rather than re-implement it: it is the format's one reader, stdlib only (runs/__init__
# is empty, so no torch is pulled in), and it owns the truncated-last-line recovery that analysis must share.
# Of runs/ the analysis imports only it, its atomic writes and runs/signals.py (tests/test_layering.py).
from runs.record import (CONFIG, EVAL_FILE, METRICS, SUMMARY, Run, ended_otherwise, is_leftover, load_run,
                         without_logging)

SEED_SUFFIX = re.compile(r"^(?P<label>.+)-s(?P<seed>\d+)$")
SMALL_SUFFIX = ":small"
SAME_RECIPE = "same"      # the grown-recipe preset that changes nothing, as records name it (config grown_recipe)


@dataclass(frozen=True)
class Problem:
    """A run directory left out of (or kept with a caveat in) the analysis, and why."""
    dir: Path
    kind: str        # "incomplete" | "corrupt" | "duplicate" | "truncated" (kept) | "mismatch" (kept) | "eval" (kept)
    message: str

    def __str__(self) -> str:
        return f"{self.kind:10s} {self.dir}: {self.message}"


def find_run_dirs(root: Path) -> list[Path]:
    """Directories holding a run record. A run's own `model/config.json` (HF export) is not a run: we do not
    descend into a run directory, and a config.json without task/method keys is not a run config. Metrics or a
    summary without config.json is a damaged record: found, so that it is reported, not silently missing."""
    found = []
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not is_leftover(d))    # a killed --overwrite's folder is no run
        if CONFIG not in files:
            if METRICS in files or SUMMARY in files:
                found.append(Path(here))
                dirs[:] = []
            continue
        if METRICS in files or _looks_like_run_config(Path(here) / CONFIG):
            found.append(Path(here))
            dirs[:] = []
    return found


def _looks_like_run_config(path: Path) -> bool:
    try:
        c = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return isinstance(c, dict) and "task" in c and "method" in c


# tasks/scales.py SCALES, which the analysis cannot import (tests/test_analysis.py checks the two agree)
SCALE_NAMES = ("paper", "regime", "mini", "tiny")
TASK_DIR = re.compile(rf"^(?P<task>.+)-(?P<scale>{'|'.join(SCALE_NAMES)})$")


def _misfiled(run: Run) -> str | None:
    """A record in a `<task>-<scale>` directory (what run.py and the sweeps write) must be of that task and scale;
    one copied into another task's directory would be paired with that task's scratch run."""
    m = TASK_DIR.match(run.dir.parent.name)
    name, scale = run.config["task"]["name"], run.config["task"]["scale"]
    task = name.removesuffix(SMALL_SUFFIX)       # a small model's record sits beside its task's runs, or on its own
    if m and (m.group("task") not in (name, task) or m.group("scale") != scale):
        return f"config.json says task {task} at {scale} scale, but the record is filed under {run.dir.parent.name}"
    return None


def load_runs(root: Path) -> tuple[list[Run], list[Problem]]:
    """Every complete, readable run under `root` (sorted by path), and the problems met on the way."""
    runs, problems, seen = [], [], {}
    for d in find_run_dirs(Path(root)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                run = load_run(d)
            except (OSError, ValueError, TypeError) as e:   # json.JSONDecodeError is a ValueError
                problems.append(Problem(d, "corrupt", f"{type(e).__name__}: {e}"))
                continue
        problems += [Problem(d, "truncated", str(w.message)) for w in caught]
        why = record_problem(run) or _misfiled(run)
        if not run.complete and (why is None or not why.startswith("config")):
            # a run still fitting or training has no eval row yet either: that is incomplete, not corrupt
            last = max((r["step"] for r in run.metrics if isinstance(r, dict) and of_kind(r.get("step"), (int,))),
                       default=None)
            where = "nothing logged yet" if last is None else f"last logged step {last}"
            problems.append(Problem(d, "incomplete", f"no summary.json ({where}); resume it"))
            continue
        if why:
            problems.append(Problem(d, "corrupt", why))
            continue
        bad_eval = _eval_file_problem(d)
        if bad_eval:
            problems.append(Problem(d, "eval", bad_eval))
        key = identity(run)
        if key in seen:
            # a sweep's small-s<seed> copy of the cached small run is the same record: no need to say so
            if run.config != seen[key].config:
                problems.append(Problem(d, "duplicate", f"same task/scale/label/seed as {seen[key].dir}; left out"))
            continue
        seen[key] = run
        runs.append(run)
        names.learn(run.config["method"])      # how the tables and figures show its method, where the record says
    return runs, problems + recipe_mismatches(runs) + small_model_mismatches(runs)


def _eval_file_problem(d: Path) -> str | None:
    """Why a run's eval.json (downstream scores) cannot be read, or None: the run is kept, its scores left out, and
    the report says so rather than showing '--' as if it had never been evaluated."""
    path = d / EVAL_FILE
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return f"{EVAL_FILE} unreadable ({type(e).__name__}): its downstream scores are left out"
    if not isinstance(record, dict) or not isinstance(record.get("suites", {}), dict):
        return f"{EVAL_FILE} is not a suites record: its downstream scores are left out"
    for suite, body in record.get("suites", {}).items():
        where = f"{EVAL_FILE} suite {suite!r}"
        if not isinstance(body, dict) or not isinstance(body.get("tasks") or {}, dict):
            return f"{where} is not {{tasks: {{name: {{metrics}}}}}}: its downstream scores are left out"
        for name, entry in (body.get("tasks") or {}).items():
            if not isinstance(entry, dict) or not isinstance(entry.get("metrics") or {}, dict):
                return f"{where} task {name!r} has no metrics object: the suite's scores are left out"
    return None


def identity(run: Run) -> tuple[str, str, str, str, int]:
    """(task, scale, role, label, seed): the key a run is grouped and paired by."""
    task = run.config["task"]["name"]
    role = "small" if task.endswith(SMALL_SUFFIX) else "large"
    seed = run.config.get("seed")
    m = SEED_SUFFIX.match(run.dir.name)
    if role == "small":   # small-s0 (a sweep's copy), small-<variant>-s0; the cache's digest names give "small"
        label = m.group("label") if m and m.group("label").startswith("small") else "small"
    else:
        label = m.group("label") if m else run.config["method"]["name"]
    if seed is None and m:
        seed = int(m.group("seed"))
    return task.removesuffix(SMALL_SUFFIX), run.config["task"]["scale"], role, label, int(seed or 0)


def trained(run: Run) -> bool:
    """False for a steps=0 run (Table 5's grown init: fit, grow, export, evaluate): it trained under no recipe
    and has no curve to cost."""
    return run.summary.get("step") != 0


def grown_recipe(run: Run) -> tuple[str | None, dict]:
    """(preset name, the recipe fields it changed) of a growth run (config.json `grown_recipe`, tasks/grown_recipes.py):
    ("same", {}) for a grown model trained with scratch's recipe; (None, {}) for scratch and for records made before
    the field existed."""
    recorded = run.config.get("grown_recipe")
    if not isinstance(recorded, dict):
        return None, {}
    changes = recorded.get("changes")
    return recorded.get("name"), changes if isinstance(changes, dict) else {}


def scratch_recipes(runs: list[Run]) -> dict[tuple[str, str], dict | None]:
    """(task, scale) -> the training recipe of the task's scratch run (the first one read)."""
    scratch = {}
    for r in runs:
        t, s, role, _, _ = identity(r)
        if role == "large" and r.config["method"]["name"] == "scratch":
            scratch.setdefault((t, s), r.config["task"].get("recipe"))
    return scratch


def recipe_preset(run: Run, scratch_recipe: dict | None) -> str | None:
    """The grown-recipe preset a growth run trained under: the recorded one, or, for a record made before the field
    existed, `same` when it trained with exactly its task's scratch recipe (what `same` is; when to log aside), so
    that such records stand in the `same` column of the recipe axis; None for scratch, the small models, an
    untrained run and an unrecorded recipe that differs (a flagged mismatch, not a preset)."""
    name = grown_recipe(run)[0]
    if (name is None and run.config.get("small") and trained(run) and scratch_recipe is not None
            and without_logging(run.config["task"].get("recipe") or {}) == without_logging(scratch_recipe)):
        return SAME_RECIPE
    return name


def recipe_difference(run: Run, scratch_recipe: dict | None) -> str | None:
    """The fields in which a trained large run's recipe differs from its task's scratch run's ("steps 693 vs
    1600"), or None where it does not (or there is nothing to compare: scratch itself, a small model, an untrained
    run, a task without scratch). Two differences do not count: the fields a run's named grown recipe declares it
    changed (config.json `grown_recipe`: a labelled variant, "LiGO (warmup0)", whose saving is by design against
    scratch's own recipe), and when to log (runs.record.LOGGING_FIELDS)."""
    role = identity(run)[2]
    if role != "large" or not trained(run) or scratch_recipe is None:
        return None
    # a record without a recipe: every field differs; the preset's fields take the run's own values (the record
    # of truth), so they never differ
    mine, theirs = without_logging(run.config["task"].get("recipe") or {}), without_logging(scratch_recipe)
    theirs = {**theirs, **{k: mine.get(k) for k in grown_recipe(run)[1]}}
    if mine == theirs:
        return None
    return ", ".join(f"{k} {mine.get(k)!r} vs {theirs.get(k)!r}" for k in sorted(mine | theirs)
                     if mine.get(k) != theirs.get(k))


def recipe_mismatches(runs: list[Run]) -> list[Problem]:
    """Savings compare a method with scratch under one training recipe; a run trained under another recipe than
    its task's scratch run (recipe_difference) is kept but flagged, naming the fields that differ, since its
    saving then compares two recipes: fewer `steps` (a faster decay, LEMON's schedule) still prices reaching
    scratch's final, another lr credits the method with a tuning scratch did not get. The tables mark its rows
    too (analysis/tables.py RECIPE_NOTE)."""
    scratch = scratch_recipes(runs)
    out = []
    for r in runs:
        t, s = identity(r)[:2]
        differs = recipe_difference(r, scratch.get((t, s)))
        if differs:
            out.append(Problem(r.dir, "mismatch", f"trained with another recipe than the task's scratch run "
                                                  f"({differs})"))
    return out


def small_model_mismatches(runs: list[Run]) -> list[Problem]:
    """A growth run is paired with the small model of its task and seed among the runs (the figures' dotted line,
    Table 5's first row, the no-growth control's start); one that grew from another pretraining of that small
    model, its cache entry pretrained again (on another CPU the end can differ in the last digits), is kept but
    flagged, naming how the two pretrainings ended. Only records that say how theirs ended (config.small
    `pretrain_result`) are checked; a small model pretrained under another recipe is not that small model."""
    keys = [identity(r) for r in runs]
    smalls = {(t, scale, seed): r for r, (t, scale, role, label, seed) in zip(runs, keys)
              if (role, label) == ("small", "small")}
    out = []
    for r, (t, scale, role, _, seed) in zip(runs, keys):
        ended = (r.config.get("small") or {}).get("pretrain_result")
        small = smalls.get((t, scale, seed))
        if role != "large" or not isinstance(ended, dict) or small is None or small.summary is None:
            continue
        recipe = without_logging(r.config["task"].get("small_recipe") or {})
        if recipe != without_logging(small.config["task"].get("recipe") or {}):
            continue
        differs = ended_otherwise(ended, small.summary)
        if differs:
            out.append(Problem(r.dir, "mismatch", f"grew from another pretraining of its small model than "
                                                  f"{small.dir.name}'s record ({', '.join(differs)})"))
    return out
