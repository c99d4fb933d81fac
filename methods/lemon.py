"""LEMON (Wang et al., ICLR 2024, "LEMON: Lossless model expansion"): width and depth expanded so that the grown
model computes the small model's function exactly, with the copies of a unit no longer twins.

Width. Every unit of a grown space copies a small unit, in LEMON's circular layout (unit i copies i mod n1, as
HyperCloning tiles): whole heads with head_dim kept, whole key/value groups under grouped-query attention, FFN units.
A consumer's fan-out weights of a copied unit are split among its copies with unequal random coefficients that sum
to one (u / sum u over the copies, u ~ U(1 - split_spread, 1 + split_spread), drawn afresh for every consuming
tensor): the copies sum back to the original input, so the function is kept, while the copies' columns differ from
the start (Net2Net's equal 1/count columns receive equal gradients and stay equal).
The residual stream D feeds the norms. With D2 = k D1 + r, the grown stream is s [x, ..., x (k copies), e (r extra
units)]: e = avg(x) under LayerNorm (LEMON's average expansion: mean and variance of the stream are kept) and e = 0
under RMSNorm (the zero expansion; growbench's analogue, the mean square is kept). s = sqrt(D2 / (k D1)) restores
the variance the extra units dilute, so a norm with its epsilon sees exactly the small model's statistic (LEMON's
public implementation multiplies the norm's epsilon by k D1 / D2 instead: the same function, but growbench's
families fix epsilon). Every writer of D (embeddings, o, fc2 and their biases) takes this expansion: rows copied,
extra rows the average row or zero, all times s (CaiT's LayerScale gamma is folded into the average row). A norm's
output on the copies is then s times the small one: its weight is copied and divided by s, its bias copied, the
bias 0 on the extra units, so every norm outputs [norm(x) copies, 0], and its consumers' columns of the extra units
are free (random mixtures of the small columns: they read zeros). The norm feeding a tied output layer is that
layer's consuming side (models/canonical.py): it takes the unequal split, divided by s once more (the tied
embedding's rows carry s), and 0 on the extra units.
Exact (up to float rounding) for every width ratio, integer or not, on pre-norm families.

Depth. New blocks are inserted after the top small blocks (LEMON: for L2 <= 2 L1, small blocks 2 L1 - L2 .. L1 - 1
are each followed by one; more are spread evenly), each a width-grown copy of the next small block (LEMON takes the
next block's weights, as bert2BERT's AKI does; the top block its own), whose o and fc2 output exactly zero, so that a
pre-norm block passes the residual stream unchanged. Not all zero where that is still exact: the fan-out columns of
a group of copied units (heads, FFN units: equal outputs) are random with zero sum (`depth_noise`), so the copies
cancel; a unit without copies gets a zero column, and o's and fc2's biases are zero. A pair that does not grow in
width has no copies, so its new blocks' o and fc2 are entirely zero.

Refused (`check_pair`, one line): head_dim or the key/value group size changing (whole heads are copied), and on
post-norm families (BERT, RoBERTa) any depth growth and non-integer hidden ratios. There the LayerNorm after each
residual sum normalises a new block's input even when its branches output zero (LN(x) != x): LEMON's post-LN recipe
relies on LN(LN(x)) ~ LN(x), which holds only as the norm's epsilon -> 0 (RoBERTa's is 1e-5); and the residual
stream is a LayerNorm's output, which cannot carry the average units a non-integer ratio needs. Integer width-only
growth of a post-norm family is exact (s = 1, no extra units).

LEMON's learning-rate schedule for the grown model (maximum rate kept, faster decay) is a recipe, not a growth: the
task's recipe trains the grown model, and `--steps N` (or `--set steps=N`) is that schedule, its decay ending
at N; the `lemon` sweep (bench/sweeps/registry.py) runs it at the share of the steps LEMON's ViT result kept.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from methods.base import Config, GrowthMethod
from methods.depth import small_canonical
from methods.net2net import function_deviation
from methods.registry import register_method
from methods.width import check_whole_heads, net2net_maps
from models import from_canonical, get_family
from models.canonical import IN, OUT, RESIDUAL, Canonical, contract
from models.spec import ModelSpec
from tasks.rules import at_least, in_range

# CaiT's LayerScale: the gamma that scales, per channel, the output of the branch ending in o (gamma1) or fc2 (gamma2)
LAYER_SCALE = {"o": "gamma1", "fc2": "gamma2"}
BRANCH_OUTPUTS = ("o", "fc2")      # a new block's are made to output zero
NORM_KINDS = {"layernorm": "average", "rmsnorm": "zero"}   # the expansion of the residual stream each norm needs


@dataclass
class LemonConfig(Config):
    seed: int = 0               # every draw: split shares, extra units, new o/fc2; default: the run's --seed
    split_spread: float = 0.5   # copies' shares of a fan-out: u / sum(u), u ~ U(1 - spread, 1 + spread); 0: 1/count
    depth_noise: float = 0.1    # std of new blocks' zero-sum o/fc2 columns, relative to the small tensor's; 0: zeros
    RULES = {"split_spread": in_range(0, 1, high_open=True, note=" (shares stay positive)"),
             "depth_noise": at_least(0, " (0: zeros)")}


def check_lemon(small: ModelSpec, large: ModelSpec) -> None:
    """Raise the one-line ValueError of a pair LEMON cannot grow losslessly (its options are checked when it is
    made: LemonConfig.RULES)."""
    check_whole_heads(small, large, "lemon copies whole heads", "lemon copies whole key/value groups")
    family = get_family(small.family)
    if family.norm_kind not in NORM_KINDS:
        raise ValueError(f"lemon keeps the statistics of {' and '.join(NORM_KINDS)} only, not {family.name}'s "
                         f"{family.norm_kind}")
    if family.norm_position == "post" and large.layers != small.layers:
        raise ValueError(f"lemon cannot grow post-LN {family.name} in depth losslessly ({small.layers} -> "
                         f"{large.layers} layers): the LayerNorm after each residual sum changes a new block's input "
                         "even when its branches output zero")
    if family.norm_position == "post" and large.hidden % small.hidden:
        raise ValueError(f"lemon grows a post-LN {family.name}'s hidden size losslessly only by an integer factor "
                         f"({small.hidden} -> {large.hidden}): its residual stream is a LayerNorm's output, which "
                         "cannot carry the average units a non-integer ratio needs")


def depth_plan(L1: int, L2: int) -> list[tuple[int, bool]]:
    """(small block, new?) for every large block: each small block in order, followed by its new blocks; with fewer
    new blocks than small ones, the top small blocks get them (LEMON)."""
    per, top = divmod(L2 - L1, L1)
    plan = []
    for j in range(L1):
        plan += [(j, False)] + [(j, True)] * (per + (j >= L1 - top))
    return plan


def split_coefficients(g: torch.Tensor, n1: int, spread: float, gen: torch.Generator) -> torch.Tensor:
    """[n2]: each large unit's share of its small unit's fan-out; a unit's copies' shares are unequal (for spread
    > 0) and sum to one (a unit without copies keeps all of it)."""
    u = 1 + spread * (2 * torch.rand(len(g), generator=gen, dtype=torch.float64) - 1)
    return (u / torch.zeros(n1, dtype=torch.float64).index_add_(0, g, u)[g]).float()


def cancelling_columns(g: torch.Tensor, n1: int, rows: int, std: float, gen: torch.Generator) -> torch.Tensor:
    """[rows, n2] random fan-out columns with zero sum over every group of copies (whose outputs are equal, so they
    cancel); the column of a unit without copies is zero."""
    r = torch.randn(rows, len(g), generator=gen) * std
    group_mean = torch.zeros(rows, n1).index_add_(1, g, r) / torch.bincount(g, minlength=n1)
    return r - group_mean[:, g]


class LemonWidth:
    """LEMON's width expansion of one small canonical model (see the module docstring); every draw from `gen`."""

    def __init__(self, small: Canonical, large: ModelSpec, spread: float, gen: torch.Generator):
        self.small, self.large, self.spread, self.gen = small, large, spread, gen
        self.maps = net2net_maps(small.spec, large, torch.Generator(), kind="tiled")   # tiled: draws nothing
        self.n1 = small.spec.hidden
        self.k, self.extra = divmod(large.hidden, self.n1)
        self.scale = math.sqrt(large.hidden / (self.k * self.n1))
        self.expansion = NORM_KINDS[get_family(small.spec.family).norm_kind]
        self.tile = torch.arange(self.k * self.n1) % self.n1

    def split(self, g: torch.Tensor, n1: int) -> torch.Tensor:
        return torch.nn.functional.one_hot(g, n1).float() * split_coefficients(g, n1, self.spread, self.gen)[:, None]

    def residual_out(self, weights: torch.Tensor | None) -> torch.Tensor:
        """[D2, D1] for a writer of D: rows copied, the extra rows the average row (weighted by `weights`: LayerScale)
        or zero, all times s."""
        copies = torch.nn.functional.one_hot(self.tile, self.n1).float()
        row = torch.zeros(self.n1) if self.expansion == "zero" else (
            torch.ones(self.n1) if weights is None else weights.detach().float().cpu()) / self.n1
        return self.scale * torch.cat([copies, row.expand(self.extra, self.n1)])

    def residual_in(self) -> torch.Tensor:
        """[D2, D1] for a consumer of a norm's output: copies split; the extra units read zeros, so their columns
        are free: random mixtures of the small columns (of the small columns' size)."""
        free = torch.randn(self.extra, self.n1, generator=self.gen) / math.sqrt(self.n1)
        return torch.cat([self.split(self.tile, self.n1), free])

    def matrix(self, space: str, role: str, section: str, layer: int | None, weights=None) -> torch.Tensor:
        if space == RESIDUAL:
            return self.residual_out(weights) if role == OUT else self.residual_in()
        g, n1 = self.maps.unit_map(space, section, layer)
        return torch.nn.functional.one_hot(g, n1).float() if role == OUT else self.split(g, n1)

    def norm(self, t: torch.Tensor, bias: bool, tied: bool) -> torch.Tensor:
        """A norm of D: it sees the small statistic, so it normalises the copies to s times the small output."""
        copies = t.repeat(self.k)
        if tied:      # consuming side of the tied output layer, whose D axis carries s: the split, / s once more
            share = split_coefficients(self.tile, self.n1, self.spread, self.gen).to(t)
            return torch.cat([copies * share / self.scale ** (1 if bias else 2), t.new_zeros(self.extra)])
        if bias:
            return torch.cat([copies, t.new_zeros(self.extra)])
        # the extra units' weight multiplies a zero at growth: any value; the mean keeps it ordinary for training
        return torch.cat([copies, t.mean().expand(self.extra)]) / self.scale

    def layer_scale(self, t: torch.Tensor) -> torch.Tensor:
        """CaiT's gamma: copied as is (the branch's rows carry s); on the extra units gamma's rms, which
        `residual_out` divides out of the gamma-weighted average row."""
        return torch.cat([t.repeat(self.k), rms(t).expand(self.extra)])

    def grow(self) -> Canonical:
        """The small model grown in width (its layers kept)."""
        small = self.small

        def grow(section, layer, key, t):
            axes, module = small.axes(section, key), key.rpartition(".")[0]
            if "norm" in module:                 # the canonical norms of D: norm1/2, norm, transform_norm
                return self.norm(t, key.endswith("bias"), tied=axes[0][1] == IN)
            if key in LAYER_SCALE.values():
                return self.layer_scale(t)
            gamma = getattr(small, section)[layer].get(LAYER_SCALE.get(module, "")) if layer is not None else None
            weights = None if gamma is None else gamma / rms(gamma)
            for axis, tag in enumerate(axes):
                if tag is not None:
                    space, role = tag
                    t = contract(t, axis, self.matrix(space, role, section, None if space == RESIDUAL else layer,
                                                      weights))
            return t
        return small.map(grow, spec=self.large.with_(layers=small.spec.layers))

    def identity_block(self, grown: dict, source: int, depth_noise: float) -> dict:
        """A new block: the width-grown small block `source`, with o and fc2 outputting exactly zero."""
        block = {k: t.clone() for k, t in grown.items()}
        for name in BRANCH_OUTPUTS:
            w = block[f"{name}.weight"]
            g, n1 = self.maps.unit_map(self.small.block_axes[f"{name}.weight"][1][0], "blocks", source)
            std = depth_noise * float(self.small.blocks[source][f"{name}.weight"].float().std())
            block[f"{name}.weight"] = cancelling_columns(g, n1, w.shape[0], std, self.gen).to(w)
            if f"{name}.bias" in block:
                block[f"{name}.bias"] = torch.zeros_like(block[f"{name}.bias"])
        return block


def rms(t: torch.Tensor) -> torch.Tensor:
    return t.float().pow(2).mean().sqrt().clamp_min(1e-12).to(t.dtype)


@register_method("lemon")
class Lemon(GrowthMethod):
    """LEMON: lossless width and depth expansion with symmetry breaking (unequal splits of copied units' fan-out,
    new blocks whose outputs cancel), exact on pre-norm families for any width ratio."""
    display_name = "LEMON"
    color = "navy"
    table_order = 12
    sweeps = ("llama",)

    Config = LemonConfig
    preserves_function = True     # width and depth, any ratio, pre-norm; post-norm pairs that are not are refused

    def __init__(self, config=None, **overrides):
        super().__init__(config, **overrides)
        self.report: dict = {}

    def check_pair(self, task):
        check_lemon(task.small, task.large)

    # -- width, usable alone (as a width operator of the depth methods: --set width=lemon) ------------------------
    def grow_width(self, canon: Canonical, large: ModelSpec) -> Canonical:
        check_lemon(canon.spec, large.with_(layers=canon.spec.layers))
        gen = torch.Generator().manual_seed(self.config.seed)
        return LemonWidth(canon, large, self.config.split_spread, gen).grow()

    # -- the method -------------------------------------------------------------------------------------------
    def grow(self, small, task):
        self.check_pair(task)
        canon = small_canonical(small, task)
        width = LemonWidth(canon, task.large, self.config.split_spread,
                           torch.Generator().manual_seed(self.config.seed))
        grown = width.grow()
        L1 = task.small.layers
        plan = depth_plan(L1, task.large.layers)
        # a new block after small block j is made from block j + 1 (the top one from itself), as LEMON does
        blocks = [width.identity_block(grown.blocks[min(j + 1, L1 - 1)], min(j + 1, L1 - 1), self.config.depth_noise)
                  if new else {k: t.clone() for k, t in grown.blocks[j].items()} for j, new in plan]
        large = from_canonical(replace(grown, spec=task.large, blocks=blocks))
        self.report = {
            "function_deviation": function_deviation(small, large),
            "plan": [{"small_block": j, "new": new} for j, new in plan],
            "residual": {"copies": width.k, "extra_units": width.extra, "expansion": width.expansion,
                         "scale": width.scale},
        }
        return large

    def describe(self):
        return {**super().describe(), "composition": {"depth": "lemon: identity blocks after the top small blocks",
                                                      "width": self.name}}

    def artifacts(self):
        return {"growth.json": self.report} if self.report else {}
