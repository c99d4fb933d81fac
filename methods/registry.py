"""Method registry: explicit registration by name (timm style), helpful lookup errors."""
from __future__ import annotations

from models.family import unknown

METHODS: dict[str, type] = {}


def register_method(name: str):
    def deco(cls):
        if name in METHODS:
            raise ValueError(f"method '{name}' registered twice")
        cls.name = name
        METHODS[name] = cls
        return cls
    return deco


def get_method(name: str, task=None, **overrides):
    """An instance of the registered method `name`, with config fields overridden. With `task`, the task's
    scale-dependent defaults apply first to whichever config fields the method has (e.g. a mini task's
    `fit_steps`: 100 operator-fit steps are negligible beside 400K training steps, not beside 300)."""
    if name not in METHODS:
        raise KeyError(unknown("method", name, METHODS))
    cls = METHODS[name]
    fields = set(cls.Config.__dataclass_fields__)
    defaults = {k: v for k, v in getattr(task, "method_defaults", ()) if k in fields and k not in cls.keeps_own}
    return cls(**{**defaults, **overrides})


def list_methods() -> list[str]:
    return sorted(METHODS)
