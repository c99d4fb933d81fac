"""Fixed depth operators: which small block each large block copies (LiGO paper §3.1 eq. (1), Appendix A).

- StackBERT (Gong et al. 2019): large block l copies small block l mod L1 (the small stack repeated);
- interpolation (Chang et al. 2017; Dong et al. 2020): large block l copies block floor(l * L1 / L2), which
  is floor(l / k) for L2 = k * L1 (every layer repeated k times in place) and spreads the repeats evenly for
  non-multiples (3 -> 5 gives 0 0 1 1 2);
- `depth_weights` turns either into LiGO's one-hot depth coefficients w [L2, L1] (Proposition 1).

Also here, shared by every fixed method: `small_canonical` (validation of the small model against the task)
and `CopyDepthMethod`, the base of StackBERT and interpolation, which composes a width operator when the
pair also grows in width (DESIGN §3 "Composition").
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from methods.base import Config, GrowthMethod
from methods.registry import get_method
from models import check_growable, family_of, from_canonical, to_canonical
from models.canonical import Canonical, copy_depth, grows_width


def _check_depth(L1: int, L2: int) -> None:
    if not 0 < L1 <= L2:
        raise ValueError(f"depth growth needs 0 < small layers <= large layers, got {L1} -> {L2}")


def stack_sources(L1: int, L2: int) -> list[int]:
    """StackBERT: source block of every large block, l mod L1."""
    _check_depth(L1, L2)
    return [l % L1 for l in range(L2)]


def interpolate_sources(L1: int, L2: int) -> list[int]:
    """Interpolation: source block of every large block, floor(l * L1 / L2)."""
    _check_depth(L1, L2)
    return [l * L1 // L2 for l in range(L2)]


def depth_weights(sources: list[int], L1: int) -> torch.Tensor:
    """One-hot depth coefficients w [L2, L1] (w[l, sources[l]] = 1): mix_depth(canon, w) == copy_depth."""
    return torch.nn.functional.one_hot(torch.tensor(sources, dtype=torch.long), L1).float()


# The fields that decide growth; others (positions, tie_embeddings) are checked by check_growable/the adapters.
_GROWTH_FIELDS = ("family", "layers", "hidden", "heads", "ffn", "class_layers")


def small_canonical(small, task) -> Canonical:
    """Validate the pair and the small model against the task; return the small model's canonical weights."""
    check_growable(task.small, task.large)
    if small is None:
        raise ValueError("this method grows from a small model, but none was given")
    actual = family_of(small).spec_of(small)
    wrong = [f"{f} {getattr(actual, f)} != {getattr(task.small, f)}" for f in _GROWTH_FIELDS
             if getattr(actual, f) != getattr(task.small, f)]
    if wrong:
        raise ValueError(f"the small model does not match task.small: {', '.join(wrong)}")
    return to_canonical(small)


def width_operator(name: str, seed: int) -> GrowthMethod:
    """The registered method `name` used as a width operator: it must expose
    `grow_width(canon, large_spec) -> Canonical` (width only, layers kept); `seed` is passed on if it has one."""
    cls_fields = {f.name for f in dataclasses.fields(get_method(name).Config)}
    method = get_method(name, **({"seed": seed} if "seed" in cls_fields else {}))
    if not callable(getattr(method, "grow_width", None)):
        raise ValueError(f"method '{name}' cannot serve as a width operator: it has no grow_width(canon, large)")
    return method


def check_width_operator(name: str, seed: int, task) -> None:
    """A pair that grows in width: the configured width operator's own refusals (e.g. Net2Net under GQA), of the
    width growth alone (the operator sees the pair with the small depth: depth is the depth method's)."""
    if grows_width(task.small, task.large):
        width_operator(name, seed).check_pair(task.with_(large=task.large.with_(layers=task.small.layers)))


@dataclass
class CopyDepthConfig(Config):
    width: str = "net2net"   # registered method with grow_width(), used when the pair also grows in width
    seed: int = 0            # passed to the width operator (its draws); default: the run's --seed


class CopyDepthMethod(GrowthMethod):
    """Depth by copying whole small blocks (`sources`); width, if it grows, by the configured operator.
    Not function-preserving: a copied block adds its residual update a second time."""
    Config = CopyDepthConfig
    preserves_function = False
    depth_rule = ""          # for the run record

    def sources(self, L1: int, L2: int) -> list[int]:
        raise NotImplementedError

    def __init__(self, config=None, **overrides):
        super().__init__(config, **overrides)
        self.report: dict = {}

    def check_pair(self, task):
        check_width_operator(self.config.width, self.config.seed, task)

    def grow(self, small, task):
        canon = small_canonical(small, task)
        width = None
        if grows_width(task.small, task.large):
            # width first, on the L1 small blocks, so each copy of a block carries the same grown weights
            canon = width_operator(self.config.width, self.config.seed).grow_width(canon, task.large)
            width = self.config.width
        sources = self.sources(task.small.layers, task.large.layers)
        self.report = {"depth": self.depth_rule, "sources": sources, "width": width}
        return from_canonical(copy_depth(canon, sources))

    def describe(self):
        # the composition goes into the run record (DESIGN §3): which depth rule, which width operator ran. What
        # grow() chose (the source of each block) is an outcome, in growth.json: describe() is the same before a
        # run grows and after, so a resumed run's settings compare equal to the record it continues
        return {**super().describe(), "composition": {"depth": self.depth_rule, "width": self.config.width}}

    def artifacts(self):
        return {"growth.json": self.report} if self.report else {}
