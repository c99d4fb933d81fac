"""Direct copy (Wei et al. 2016, "Network Morphism"; the DirectCopy baseline of bert2BERT, Chen et al. 2021, and of
the LiGO paper's Figure 6(b)): the small model's weights fill the leading block of every large tensor (the first n1
units of every space; attention keeps head_dim, so the first H1 heads are the small model's heads) and everything
else keeps the large model's random initialisation. Depth, where the pair grows it, by stacking (l mod L1), as
Net2Net composes.

Not function-preserving: the new units start random and feed the old ones (the copied weights are not divided
by anything, so the new columns add to the old units' inputs). It is what "reusing the small model without a
width rule" means, the width baseline below FPI and AKI. It also serves the depth-only methods as a width operator
(`--set width=direct_copy`).
"""
from __future__ import annotations

from dataclasses import dataclass

from methods.base import Config, GrowthMethod
from methods.depth import small_canonical, stack_sources
from methods.registry import register_method
from models import build_model, from_canonical, to_canonical
from models.canonical import Canonical, copy_depth
from models.spec import ModelSpec


@dataclass
class DirectCopyConfig(Config):
    """No options: the rest of the large model is its family's random initialisation (seeded by the run)."""


@register_method("direct_copy")
class DirectCopy(GrowthMethod):
    display_name = "Direct copy"
    color = "tab:gray"
    table_order = 9

    Config = DirectCopyConfig
    preserves_function = False

    def grow_width(self, canon: Canonical, large: ModelSpec) -> Canonical:
        """Width growth of canonical weights, layers kept: a freshly initialised model of the large width (the
        global RNG, which the run seeds) with the small tensors written into its leading blocks."""
        if canon.spec.head_dim != large.head_dim:   # the small heads are written into whole large heads
            raise ValueError(f"direct_copy places whole heads and needs head_dim fixed "
                             f"({canon.spec.head_dim} -> {large.head_dim})")
        fresh = to_canonical(build_model(large.with_(layers=canon.spec.layers)))

        def place(section, layer, key, t):
            small = canon.tensor(section, layer, key)
            out = t.to(device=small.device, dtype=small.dtype).clone()
            out[tuple(slice(0, n) for n in small.shape)] = small
            return out
        return fresh.map(place)

    def grow(self, small, task):
        canon = self.grow_width(small_canonical(small, task), task.large)
        return from_canonical(copy_depth(canon, stack_sources(task.small.layers, task.large.layers)))

    def describe(self):
        return {**super().describe(), "composition": {"depth": "stack: l mod L1", "width": self.name}}
