"""Method registry: explicit registration by name (timm style), helpful lookup errors."""
from __future__ import annotations

from models.family import unknown

METHODS: dict[str, type] = {}

# The sweeps built from what methods declare (GrowthMethod.sweeps; bench/sweeps/registry.py): the main comparisons, one
# pair each (the paper's BERT, RoBERTa, GPT-2, DeiT and CaiT pairs, and the Llama-style pair). A method joins one by
# naming it in its own file; every other sweep lists its runs itself.
MAIN_COMPARISONS = ("bert", "roberta", "gpt2", "deit", "cait", "llama")

# What a method declares for itself and never inherits (a subclass registered under another name is another method:
# ligo_copy is a Ligo, with a name, colour and sweeps of its own): how records show it (GrowthMethod.display_name,
# color, table_order) and the sweeps that run it. Not declared: these defaults.
OWN = {"display_name": None, "color": None, "table_order": None, "sweeps": ()}


def register_method(name: str):
    def deco(cls):
        if name in METHODS:
            raise ValueError(f"method '{name}' registered twice")
        for attr, default in OWN.items():
            if attr not in vars(cls):
                setattr(cls, attr, default)
        if isinstance(cls.sweeps, str) or not all(isinstance(s, str) for s in cls.sweeps):
            raise TypeError(f"method '{name}': sweeps must be a tuple of sweep names, got {cls.sweeps!r}")
        if set(cls.sweeps) - set(MAIN_COMPARISONS):
            raise ValueError(f"method '{name}' declares sweeps {sorted(set(cls.sweeps) - set(MAIN_COMPARISONS))}; "
                             f"a method joins only the main comparisons ({', '.join(MAIN_COMPARISONS)}), every "
                             "other sweep lists its runs in bench/sweeps/registry.py")
        cls.sweeps = tuple(cls.sweeps)
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


def refusal(name: str, task) -> str | None:
    """Why the method `name` refuses to grow `task`'s pair (its check_pair's one line), or None where it takes it:
    for the tools that lay methods out over pairs (a sweep, a benchmark's table) without running any."""
    try:
        get_method(name, task).check_pair(task)
    except ValueError as e:
        return str(e)
    return None


def list_methods() -> list[str]:
    return sorted(METHODS)
