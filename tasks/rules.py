"""Value rules, (test, what the value must be), for the options a user sets: a recipe's fields (tasks/task.py
RECIPE_RULES) and a growth method's options (methods/base.py, Config.RULES). A value that breaks one is refused in
one line before a run writes anything."""
from __future__ import annotations

import math
from typing import Any, Callable

Rule = tuple[Callable[[Any], bool], str]


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def integer_at_least(low: int, note: str = "") -> Rule:
    return (lambda v: is_int(v) and v >= low), f"an integer >= {low}{note}"


def at_least(low: float, note: str = "") -> Rule:
    return (lambda v: is_number(v) and v >= low), f"a finite number >= {low:g}{note}"


def above(low: float, note: str = "") -> Rule:
    return (lambda v: is_number(v) and v > low), f"a finite number > {low:g}{note}"


def in_range(low: float, high: float, *, low_open: bool = False, high_open: bool = False, note: str = "") -> Rule:
    def ok(v) -> bool:
        return is_number(v) and (low < v if low_open else low <= v) and (v < high if high_open else v <= high)
    return ok, f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}{note}"


def one_of(choices) -> Rule:
    return (lambda v: v in choices), f"one of {', '.join(map(str, choices))}"


SEED_LIMIT = 2**63      # torch.manual_seed takes a signed 64-bit integer; a larger seed fails after files exist
SEED_RULE: Rule = ((lambda v: is_int(v) and 0 <= v < SEED_LIMIT), "an integer in [0, 2**63)")  # run.py --seed too


def adam_betas(option: str) -> Rule:
    return ((lambda v: isinstance(v, (tuple, list)) and len(v) == 2 and all(is_number(b) and 0 <= b < 1 for b in v)),
            f"a pair b1,b2 with 0 <= b < 1, e.g. {option}=0.9,0.999")
