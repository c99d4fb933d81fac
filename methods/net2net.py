"""Net2Net / bert2BERT function-preserving initialization (FPI): Chen et al. 2016, "Net2Net"; Chen et al.
2021, "bert2BERT" §4.1; LiGO paper §3.1 eq. (2).

Width by the FPI operator of `methods/width.py` (one residual index map, whole heads, one map per FFN
layer; copies divided by their count on the consuming side; the norm feeding a tied output head divided
too), depth by stacking (l mod L1), optional symmetry-breaking noise on the grown copies only.

Function preservation (`preserves_function`) is claimed for width growth with integer ratios: the
"balanced" maps copy every unit equally often, so LayerNorm statistics, and hence the logits, are kept.
Non-integer ratios (512 -> 768) change LayerNorm statistics and stacking adds residual updates; neither is
hidden: `grow` measures max |logit difference| against the small model on a random probe batch and
reports it (`self.report`, `artifacts()`), so the trainer can put it in the run record.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from methods.base import Config, GrowthMethod
from methods.depth import small_canonical, stack_sources
from methods.registry import MAIN_COMPARISONS, register_method
from methods.width import INDEX_MAPS, Net2NetWidth, check_whole_heads, net2net_width, new_unit_mask
from models import family_of, from_canonical, get_family
from models.canonical import Canonical, copy_depth, grow_width
from models.spec import ModelSpec
from tasks.rules import at_least, one_of


@dataclass
class Net2NetConfig(Config):
    seed: int = 0                 # index maps and noise (never the global RNG); default: the run's --seed
    noise: float = 0.0            # std of noise on grown copies, relative to each small tensor's std
    index_map: str = "balanced"   # "balanced" (exact for integer ratios) or "uniform" (i.i.d., original Net2Net)
    per_layer_maps: bool = True   # a fresh head/FFN map per layer (False: one shared by all layers)
    RULES = {"noise": at_least(0, " (0: no noise)"), "index_map": one_of(INDEX_MAPS)}


def probe_batch(spec: ModelSpec, seed: int = 0, batch: int = 2, seq: int = 16) -> dict[str, torch.Tensor]:
    """A small random input the family's `logits` accepts, for measuring function deviation."""
    gen = torch.Generator().manual_seed(seed)
    if get_family(spec.family).objective == "image":
        return {"pixel_values": torch.randn(batch, spec.in_chans, spec.image_size, spec.image_size, generator=gen)}
    seq = min(seq, spec.positions) if spec.positions else seq
    return {"input_ids": torch.randint(spec.vocab, (batch, seq), generator=gen),
            "attention_mask": torch.ones(batch, seq, dtype=torch.long)}


@torch.no_grad()
def function_deviation(small, large, batch: dict | None = None) -> float:
    """max |logits(large) - logits(small)| in eval mode (dropout off); both models' modes are restored."""
    fam = family_of(small)
    batch = batch if batch is not None else probe_batch(fam.spec_of(small))
    device = next(small.parameters()).device
    batch = {k: v.to(device) for k, v in batch.items()}
    large = large.to(device)
    modes = small.training, large.training
    small.eval(), large.eval()
    try:
        return float((fam.logits(large, batch).float() - fam.logits(small, batch).float()).abs().max())
    finally:
        small.train(modes[0]), large.train(modes[1])


@register_method("net2net")
class Net2Net(GrowthMethod):
    display_name = "Net2Net"
    color = "tab:brown"
    table_order = 5
    sweeps = MAIN_COMPARISONS

    Config = Net2NetConfig
    preserves_function = True     # for width growth by integer ratios; see the module docstring

    def __init__(self, config=None, **overrides):
        super().__init__(config, **overrides)
        self.report: dict = {}

    def check_pair(self, task):
        check_whole_heads(task.small, task.large)

    # -- width, usable alone (StackBERT/interpolation compose with it through `grow_width`) ---------------
    def width_operator(self, small: ModelSpec, large: ModelSpec, generator: torch.Generator) -> Net2NetWidth:
        return net2net_width(small, large, generator, self.config.per_layer_maps, self.config.index_map)

    def widen(self, canon: Canonical, large: ModelSpec, width: Net2NetWidth) -> Canonical:
        """The width rule proper (a tied head's norm is divided by the copy counts: the canonical form tags
        it IN); bert2BERT's AKI overrides it."""
        return grow_width(canon, large, width)

    def grow_width(self, canon: Canonical, large: ModelSpec) -> Canonical:
        """Width growth of canonical weights (layers kept): maps, rule, then noise on the new copies."""
        check_whole_heads(canon.spec, large)
        gen = torch.Generator().manual_seed(self.config.seed)
        grown = self.widen(canon, large, self.width_operator(canon.spec, large, gen))
        return self._add_noise(canon, grown, gen) if self.config.noise else grown

    def _add_noise(self, small: Canonical, grown: Canonical, gen: torch.Generator) -> Canonical:
        # noise only where a new unit is involved: the original small weights stay intact, and copies
        # stop being exact twins (Net2Net §2.3); scaled per tensor so norms and weights get comparable noise
        def noisy(section, layer, key, t):
            s = small.tensor(section, layer, key)
            mask = new_unit_mask(small.axes(section, key), s.shape, t.shape, device=t.device)
            if not mask.any():
                return t
            std = s.float().std() if s.numel() > 1 else s.float().abs().mean()
            eps = torch.randn(t.shape, generator=gen) * (self.config.noise * float(std))   # CPU generator
            return t + eps.to(device=t.device, dtype=t.dtype) * mask
        return grown.map(noisy)

    # -- the method -------------------------------------------------------------------------------------------
    def grow(self, small, task):
        canon = small_canonical(small, task)
        check_whole_heads(task.small, task.large)
        canon = self.grow_width(canon, task.large)
        large = from_canonical(copy_depth(canon, stack_sources(task.small.layers, task.large.layers)))
        self.report = {
            "function_deviation": function_deviation(small, large),
            "width_only": task.small.layers == task.large.layers,
            "integer_ratio": all(getattr(task.large, f) % getattr(task.small, f) == 0
                                 for f in ("hidden", "heads", "ffn")),
        }
        return large

    def describe(self):
        return {**super().describe(), "composition": {"depth": "stack: l mod L1", "width": self.name}}

    def artifacts(self):
        return {"growth.json": self.report} if self.report else {}
