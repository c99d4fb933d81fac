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


def get_method(name: str, **overrides):
    """An instance of the registered method `name`, with config fields overridden."""
    if name not in METHODS:
        raise KeyError(unknown("method", name, METHODS))
    return METHODS[name](**overrides)


def list_methods() -> list[str]:
    return sorted(METHODS)
