"""HyperCloning (Samragh et al. 2024, "Scaling Smart: Accelerating Large Language Model Pre-Training with Small
Model Initialization"): the small model's width is cloned by an integer factor n, function preserving.

Every space is *tiled*: large unit i is a clone of small unit i mod n1 (embeddings [E, E], norms [w, w], the
residual stream of the large model is n copies of the small one's), attention grows by whole heads with head_dim
kept (under grouped-query attention by whole key/value groups: the key/value heads are tiled too, as the official
code multiplies both head counts), and a linear map whose input is cloned divides by the number of input copies
(W_large = [[W/n, W/n], [W/n, W/n]]), so its output is the clone of W x. Since every unit is copied n times, norms
see the same statistics and the logits are the small model's exactly (`preserves_function`).

Symmetry breaking (the paper's noise option, `snr_db`; off by default as in the official code): within every block
weight whose input is cloned, the input copies are taken in pairs and one gets + N, the other - N, with N Gaussian
at the given signal-to-noise ratio (dB) against that slice of the weight. The copies of an input carry equal values,
so the noise cancels exactly and the function is still preserved (up to rounding), while the clones stop being
twins that would receive equal gradients forever. Embeddings, norms and the output layer get no noise (official).

In growbench's terms noise-free HyperCloning is Net2Net FPI with a tiled index map instead of random ones: the same
function and, since training is equivariant to permuting units, the same training up to a permutation; it is
listed separately for its layout and its function-preserving noise. Ratios that are not integers are an extension
(not the paper's): units are then tiled floor/ceil times, norms see other statistics, and the deviation is measured
and reported (`growth.json`), as Net2Net does. A pair that also grows in depth is stacked (l mod L1), recorded.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from methods.base import Config, GrowthMethod
from methods.depth import small_canonical, stack_sources
from methods.net2net import function_deviation
from methods.registry import register_method
from methods.width import check_whole_heads, net2net_width
from models import from_canonical
from models.canonical import IN, Canonical, copy_depth, grow_width
from models.spec import ModelSpec

NOISY_SECTIONS = ("blocks", "class_blocks")


def check_clonable(s: ModelSpec, large: ModelSpec) -> ModelSpec:
    check_whole_heads(s, large, "hypercloning clones whole heads", "hypercloning clones whole key/value groups")
    return s


@dataclass
class HyperCloningConfig(Config):
    snr_db: float | None = None   # symmetry-breaking noise at this signal-to-noise ratio in dB; None: no noise
    seed: int = 0                 # seeds the noise (never the global RNG); default: the run's --seed


@register_method("hypercloning")
class HyperCloning(GrowthMethod):
    """HyperCloning: width cloned by an integer factor (every unit tiled, cloned inputs divided by their count),
    function preserving, with optional symmetry-breaking noise that cancels on the cloned inputs."""
    display_name = "HyperCloning"
    color = "teal"
    table_order = 10
    sweeps = ("llama",)

    Config = HyperCloningConfig
    preserves_function = True     # integer width ratios, with or without the noise

    def __init__(self, config=None, **overrides):
        super().__init__(config, **overrides)
        self.report: dict = {}

    def check_pair(self, task):
        check_clonable(task.small, task.large)

    # -- width, usable alone (as a width operator of the depth methods: --set width=hypercloning) -----------------
    def grow_width(self, canon: Canonical, large: ModelSpec) -> Canonical:
        s = check_clonable(canon.spec, large)
        grown = grow_width(canon, large, net2net_width(s, large, torch.Generator(), kind="tiled"))  # tiled: no draws
        return grown if self.config.snr_db is None else self._add_noise(canon, grown)

    def _add_noise(self, small: Canonical, grown: Canonical) -> Canonical:
        gen = torch.Generator().manual_seed(self.config.seed)
        power = 10.0 ** (-float(self.config.snr_db) / 10)          # noise power / signal power

        def noisy(section, layer, key, t):
            axes = small.axes(section, key)
            n1 = getattr(small, section)[layer][key].shape[-1] if section in NOISY_SECTIONS else 0
            if section not in NOISY_SECTIONS or t.dim() != 2 or axes[1] is None or axes[1][1] != IN \
                    or t.shape[1] == n1:
                return t
            out = t.clone()
            n2 = t.shape[1]
            # copies of input unit j sit at j, j + n1, j + 2 n1, ...: pair copy 2m with copy 2m + 1
            for start in range(0, n2, 2 * n1):
                k = max(0, min(n1, n2 - start - n1))           # the second copy of the pair may be partial
                if k == 0:
                    break
                a, b = slice(start, start + k), slice(start + n1, start + n1 + k)
                std = float(t[:, a].float().pow(2).mean() * power) ** 0.5
                eps = (torch.randn(t.shape[0], k, generator=gen) * std).to(device=t.device, dtype=t.dtype)
                out[:, a] += eps
                out[:, b] -= eps
            return out
        return grown.map(noisy)

    # -- the method -------------------------------------------------------------------------------------------
    def grow(self, small, task):
        canon = self.grow_width(small_canonical(small, task), task.large)
        large = from_canonical(copy_depth(canon, stack_sources(task.small.layers, task.large.layers)))
        s, l = task.small, task.large
        self.report = {
            "function_deviation": function_deviation(small, large),
            "width_only": s.layers == l.layers,
            "integer_ratio": all(getattr(l, f) % getattr(s, f) == 0 for f in ("hidden", "heads", "kv", "ffn")),
            "snr_db": self.config.snr_db,
        }
        return large

    def describe(self):
        return {**super().describe(), "composition": {"depth": "stack: l mod L1", "width": self.name}}

    def artifacts(self):
        return {"growth.json": self.report} if self.report else {}
