"""What a run record must hold before the analysis reads a number of it: JSON types, finite numbers, rows whose
steps and cumulative FLOPs increase, no row lost, a summary that agrees with the last row. A record that fails is
left out with the one line that says why (analysis/load.py), never read as a result: a hand-edited or foreign
value would otherwise be a traceback mid-analysis, or worse, a saving computed from a string or a NaN.
"""
from __future__ import annotations

import math

from runs.record import Run

NUMERIC_FIELDS = ("step", "flops", "wall", "eval_loss", "eval_acc")
# the JSON type each part of a record must have where it is present (None stands for JSON null, allowed where listed):
# a hand-edited or foreign record of other types was a traceback in the middle of the analysis (a list for a dict)
# or a number read as text; checked before anything else reads the record
CONFIG_TYPES = {"task": (dict,), "method": (dict,), "task.name": (str,), "task.scale": (str,), "method.name": (str,),
                "method.config": (dict, None), "seed": (int, None), "small": (dict, None), "reference": (dict, None),
                "task.recipe": (dict, None), "task.small_recipe": (dict, None), "task.family": (str, None),
                "task.large": (dict, None), "task.small": (dict, None), "distributed": (dict, None),
                "strategies": (dict, None), "grown_recipe": (dict, None), "same_computation_as": (str, None),
                "small.pretrain_result": (dict, None),
                # how the analysis shows the method (analysis/names.py): records made before methods declared it lack it
                "method.display": (dict, None), "method.display.name": (str, None),
                "method.display.color": (str, None), "method.display.order": (float, None)}
NESTED_NUMBERS = {"small": ("pretrain_flops", "pretrain_wall"), "reference": ("unigram_ce", "eval_items"),
                  "distributed": ("world_size",)}
SUMMARY_NUMBERS = ("step", "units", "flops", "wall", "eval_loss", "eval_acc")


def _json_type(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(value), "a number")


def of_kind(value, kinds) -> bool:
    """`value` is one of `kinds` (None: JSON null); a bool is no int, an int is a float."""
    if value is None:
        return None in kinds
    if isinstance(value, bool):
        return bool in kinds
    return any(k is not None and (isinstance(value, k) or (k is float and isinstance(value, int))) for k in kinds)


def _number_problem(where: str, key: str, value) -> str | None:
    if value is not None and not (of_kind(value, (float,)) and math.isfinite(value)):
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
        if value is not missing and not of_kind(value, kinds):
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


def record_problem(run: Run) -> str | None:
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
    return None


def _missing_step(run: Run, steps: list[int]) -> int | None:
    """The first step the trainer logs a row at (every recipe.log_every and eval_every steps, the last step) that the
    record lacks up to its last row, or None; records without those recipe fields are not checked."""
    recipe = run.config["task"].get("recipe") or {}
    every = [recipe.get(k) for k in ("log_every", "eval_every")]
    if not all(of_kind(n, (int,)) and n > 0 for n in every) or not steps:
        return None
    have, last = set(steps), steps[-1]
    expected = sorted({s for n in every for s in range(n, last + 1, n)} | {0})
    return next((s for s in expected if s not in have), None)


def logged_spaces(value) -> dict | None:
    """A logged {space: number} (twin fractions, twin gaps), or None where a row has none or it is not of that form
    (a hand-edited record must not be read as a measurement)."""
    if not isinstance(value, dict) or not value:
        return None
    ok = all(isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
             for k, v in value.items())
    return dict(value) if ok else None
