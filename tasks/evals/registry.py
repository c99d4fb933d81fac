"""The suites' registry (tasks/evals/__init__.py's module docstring says what a suite is): `@register_suite` puts
a suite's run function under its name. A module of its own, as models/family.py and methods/registry.py are, so
that each suite module registers itself here without importing the package that imports it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Suite:
    name: str
    run: Callable
    tasks: dict            # model kind ("text" / "image") -> every task name the suite knows
    default: dict          # model kind -> the tasks run when --only is not given
    doc: str = ""
    unavailable: Callable | None = None   # () -> None, or why the suite cannot run here (checked up front)
    load_data: Callable | None = None     # (task names, EvalOptions) -> None: loads what they need, or raises


SUITES: dict[str, Suite] = {}


def register_suite(name: str, tasks: dict, default: dict | None = None, unavailable: Callable | None = None,
                   load_data: Callable | None = None):
    def deco(fn):
        SUITES[name] = Suite(name, fn, tasks, default or tasks, (fn.__doc__ or "").strip().split("\n")[0],
                             unavailable, load_data)
        return fn
    return deco
