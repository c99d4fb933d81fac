"""Finding, checking and identifying run records (DESIGN.md §1: analysis reads only the run-record format).

`load_runs(root)` walks a directory of runs and returns the complete ones plus a list of problems (incomplete,
corrupt, duplicate, truncated last line, trained under another recipe than scratch) so that nothing is dropped
silently. `identity` is the key a run is grouped and paired by; analysis/frames.py turns the runs into the
DataFrames the tables and figures read (`runs_frame`, `curves_frame`).

A run's *label* is its directory name without the `-s<seed>` suffix (`ligo-fit500-s1` -> `ligo-fit500`), so
variants of one method (bench/sweeps/registry.py names them) are told apart; a directory named otherwise takes the
method's name. Pretraining runs of the small model (task `<name>:small`, e.g. the cache under
runs/out/cache/small, or the `small-s<seed>` copies a sweep makes) get role "small" and label "small": they
give the figures' dotted line and Table 5's first row (label "small"; "small-<variant>" for a small model
pretrained differently, e.g. Figure 7's briefly trained one).
"""
from __future__ import annotations

import json
import math
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from analysis import names

# Why import runs.record rather than re-implement it: it is the format's one reader, stdlib only (runs/__init__
# is empty, so no torch is pulled in), and it owns the truncated-last-line recovery that analysis must share.
# Nothing else from runs/, models/, methods/ or tasks/ is imported here or anywhere in analysis/.
from runs.record import CONFIG, EVAL_FILE, METRICS, SUMMARY, Run, is_leftover, load_run, without_logging

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


NUMERIC_FIELDS = ("step", "flops", "wall", "eval_loss", "eval_acc")
# the JSON type each part of a record must have where it is present (None stands for JSON null, allowed where listed):
# a hand-edited or foreign record of other types was a traceback in the middle of the analysis (a list for a dict)
# or a number read as text; checked before anything else reads the record
CONFIG_TYPES = {"task": (dict,), "method": (dict,), "task.name": (str,), "task.scale": (str,), "method.name": (str,),
                "method.config": (dict, None), "seed": (int, None), "small": (dict, None), "reference": (dict, None),
                "task.recipe": (dict, None), "task.small_recipe": (dict, None), "task.family": (str, None),
                "task.large": (dict, None), "task.small": (dict, None), "distributed": (dict, None),
                "strategies": (dict, None), "grown_recipe": (dict, None), "same_computation_as": (str, None),
                # how the analysis shows the method (analysis/names.py): records made before methods declared it lack it
                "method.display": (dict, None), "method.display.name": (str, None),
                "method.display.color": (str, None), "method.display.order": (float, None)}
NESTED_NUMBERS = {"small": ("pretrain_flops", "pretrain_wall"), "reference": ("unigram_ce", "eval_items"),
                  "distributed": ("world_size",)}
SUMMARY_NUMBERS = ("step", "units", "flops", "wall", "eval_loss", "eval_acc")


def _json_type(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(value), "a number")


def _is(value, kinds) -> bool:
    """`value` is one of `kinds` (None: JSON null); a bool is no int, an int is a float."""
    if value is None:
        return None in kinds
    if isinstance(value, bool):
        return bool in kinds
    return any(k is not None and (isinstance(value, k) or (k is float and isinstance(value, int))) for k in kinds)


def _number_problem(where: str, key: str, value) -> str | None:
    if value is not None and not (_is(value, (float,)) and math.isfinite(value)):
        return f"{where} {key} is {value!r}, not a finite number"
    return None


def _types(run: Run) -> str | None:
    """Why the record's parts are not of the JSON types the format writes, or None."""
    if not isinstance(run.config, dict):
        return f"config.json is {_json_type(run.config)}, not an object"
    missing = object()
    for key, kinds in CONFIG_TYPES.items():
        value = run.config
        for part in key.split("."):
            value = value.get(part, missing) if isinstance(value, dict) else missing
        if value is missing and None not in kinds:
            return "config.json lacks task.name, task.scale or method.name"
        if value is not missing and not _is(value, kinds):
            want = " or ".join("null" if k is None else {dict: "an object", str: "a string", int: "an integer",
                                                         float: "a number"}[k] for k in kinds)
            return f"config.json {key} is {_json_type(value)}, not {want}"
    if run.config.get("seed") is not None and run.config["seed"] < 0:
        return f"config.json seed is {run.config['seed']}, not >= 0"
    for part, keys in NESTED_NUMBERS.items():
        for key in keys:
            problem = _number_problem(f"config.json {part}.", key, (run.config.get(part) or {}).get(key))
            if problem:
                return problem.replace(". ", ".", 1)
    task = run.config["task"]
    families = {task.get("family"), *((task.get(s) or {}).get("family") for s in ("small", "large"))} - {None}
    if len(families) > 1:
        return f"config.json names more than one model family ({', '.join(sorted(map(str, families)))})"
    for i, row in enumerate(run.metrics):
        if not isinstance(row, dict):
            return f"metrics.jsonl line {i + 1} is {_json_type(row)}, not an object"
    if run.summary is not None:
        if not isinstance(run.summary, dict):
            return f"summary.json is {_json_type(run.summary)}, not an object"
        for key in SUMMARY_NUMBERS:
            problem = _number_problem("summary.json", key, run.summary.get(key))
            if problem:
                return problem
    return None


def _check(run: Run) -> str | None:
    """Why a loaded record cannot be analysed, or None."""
    typed = _types(run)
    if typed:
        return typed
    if not any(r.get("eval_loss") is not None or r.get("eval_acc") is not None for r in run.metrics):
        return "metrics.jsonl has no evaluation rows"
    if any("step" not in r or "flops" not in r for r in run.metrics):
        return "a metrics row lacks step or flops"
    for r in run.metrics:     # a hand-edited or foreign value would otherwise be read as NaN ("not reached")
        for key in NUMERIC_FIELDS:
            value = r.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value)):
                # NaN/inf: the trainer stops on a non-finite loss, so such a row is no growbench result (and a
                # final NaN would make the target an earlier evaluation, or leave a method no final at all)
                return f"metrics.jsonl row at step {r['step']!r}: {key} is {value!r}, not a finite number"
    steps = [r["step"] for r in run.metrics]
    if any(b <= a for a, b in zip(steps, steps[1:])):   # two writers, or a resume that repeated lines
        return "metrics.jsonl steps do not increase (a row repeated or out of order)"
    for r in run.metrics:
        if r["step"] < 0 or r["flops"] < 0:
            return f"metrics.jsonl row at step {r['step']}: a negative step or FLOPs count"
        # a cross-entropy is never negative, an accuracy lies in [0, 1], time runs forward
        for key, low, high in (("eval_loss", 0, math.inf), ("eval_acc", 0, 1), ("wall", 0, math.inf)):
            if r.get(key) is not None and not low <= r[key] <= high:
                return f"metrics.jsonl row at step {r['step']}: {key} is {r[key]!r}, outside [{low}, {high}]"
        for key in ("twins", "twin_gap"):      # {space: number}: what models/twins.py logs
            if key in r and r[key] is not None and logged_spaces(r[key]) is None and r[key] != {}:
                return f"metrics.jsonl row at step {r['step']}: {key} is {r[key]!r}, not {{space: number}}"
        if "full_model" in r and not isinstance(r["full_model"], bool):
            return f"metrics.jsonl row at step {r['step']}: full_model is {r['full_model']!r}, not true or false"
    gap = _missing_step(run, steps)
    if gap is not None:
        return f"metrics.jsonl lacks the row of step {gap} (rows lost: the curve would bridge the gap)"
    flops = [r["flops"] for r in run.metrics]
    if any(b < a for a, b in zip(flops, flops[1:])):     # cumulative: a saving read off it would be nonsense
        at = next(r["step"] for r, a, b in zip(run.metrics[1:], flops, flops[1:]) if b < a)
        return f"metrics.jsonl cumulative FLOPs decrease at step {at}"
    if run.summary is not None:
        if run.summary.get("step") != steps[-1]:
            return (f"summary.json says step {run.summary.get('step')} but metrics.jsonl ends at step {steps[-1]}: "
                    "the record was written by two processes or cut; re-run it")
        if run.summary.get("eval_loss") is None and run.summary.get("eval_acc") is None:
            return "summary.json has no final evaluation"
        last = [r for r in run.metrics if r.get("eval_loss") is not None or r.get("eval_acc") is not None][-1]
        for key in ("eval_loss", "eval_acc", "flops"):
            said, logged = run.summary.get(key), (last if key != "flops" else run.metrics[-1]).get(key)
            if said is not None and logged is not None and said != logged:
                return f"summary.json {key} {said!r} is not the last logged row's {logged!r}"
    return _misfiled(run)


def _missing_step(run: Run, steps: list[int]) -> int | None:
    """The first step the trainer logs a row at (every recipe.log_every and eval_every steps, the last step) that the
    record lacks up to its last row, or None; records without those recipe fields are not checked."""
    recipe = run.config["task"].get("recipe") or {}
    every = [recipe.get(k) for k in ("log_every", "eval_every")]
    if not all(_is(n, (int,)) and n > 0 for n in every) or not steps:
        return None
    have, last = set(steps), steps[-1]
    expected = sorted({s for n in every for s in range(n, last + 1, n)} | {0})
    return next((s for s in expected if s not in have), None)


TASK_DIR = re.compile(r"^(?P<task>.+)-(?P<scale>paper|mini|tiny)$")


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
        why = _check(run)
        if not run.complete and (why is None or not why.startswith("config")):
            # a run still fitting or training has no eval row yet either: that is incomplete, not corrupt
            last = max((r["step"] for r in run.metrics if isinstance(r, dict) and _is(r.get("step"), (int,))),
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
    return runs, problems + recipe_mismatches(runs)


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


def logged_spaces(value) -> dict | None:
    """A logged {space: number} (twin fractions, twin gaps), or None where a row has none or it is not of that form
    (a hand-edited record must not be read as a measurement)."""
    if not isinstance(value, dict) or not value:
        return None
    ok = all(isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
             for k, v in value.items())
    return dict(value) if ok else None
