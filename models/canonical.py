"""The canonical transformer: one weight layout that every growth method is written against (DESIGN.md §2).

Every family adapter converts its model to and from a `Canonical`; a growth method then only ever sees
q/k/v/o/fc1/fc2/norms (math convention, `W[out, in]`) and never a family's own module names.

Each tensor axis is tagged with the *space* it lives in and the *role* it plays:
- spaces: "D" the residual stream (one for the whole model: embeddings, every o/fc2 output, every norm,
  the head input); per layer "Q" (heads x head_dim), "K", "V" (key/value heads x head_dim: fewer than the
  query heads under grouped-query attention), "F" (the FFN; a gated FFN's gate and up projection, fc1, both
  produce it), "H" (heads, for CaiT's talking-heads mixing); `None` for fixed axes (vocabulary, positions,
  pixels, classes).
- roles: OUT (the tensor produces this space: rows of a weight, biases, norm parameters, embeddings) or
  IN (the tensor consumes it: columns of a weight).
A width operator is then just "a matrix per (space, role, layer)", which is exactly LiGO's tying (§3.3)
and the one-index-map-for-the-residual-stream that Net2Net needs.

A family may retag block tensors (`Canonical.block_axes`): under grouped-query attention (Llama) the output
projection o consumes one head_dim slice per *query* head (each computed from the value head of its group), so
its input axis is Q, not V. Without GQA the two spaces coincide in size and every fixed operator grows them by
the same head map.

One tag is not what its shape suggests: the norm that feeds a *tied* output layer (BERT's MLM transform norm,
GPT-2's ln_f) is tagged IN. The tied decoder reuses the token embedding, whose D axis is expanded as an OUT
axis (copied, not divided), so the division that the consuming side of a linear map needs (Net2Net's
1/count, LiGO's pseudo-inverse) has nowhere to go but into that norm: tagging it IN puts it there for every
width operator, with no special case in any method.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

import torch

from models.spec import ModelSpec

OUT, IN = "out", "in"
RESIDUAL = "D"

# Axes of the tensors inside one transformer block; shared by all families (absent keys are simply skipped).
BLOCK_AXES: dict[str, tuple] = {
    "q.weight": (("Q", OUT), ("D", IN)), "q.bias": (("Q", OUT),),
    "k.weight": (("K", OUT), ("D", IN)), "k.bias": (("K", OUT),),
    "v.weight": (("V", OUT), ("D", IN)), "v.bias": (("V", OUT),),
    "o.weight": (("D", OUT), ("V", IN)), "o.bias": (("D", OUT),),
    "fc1.weight": (("F", OUT), ("D", IN)), "fc1.bias": (("F", OUT),),
    # gated FFN (Llama's SwiGLU): fc2(act(gate x) * fc1 x); the gate produces the FFN space as fc1 does
    "gate.weight": (("F", OUT), ("D", IN)),
    "fc2.weight": (("D", OUT), ("F", IN)), "fc2.bias": (("D", OUT),),
    "norm1.weight": (("D", OUT),), "norm1.bias": (("D", OUT),),
    "norm2.weight": (("D", OUT),), "norm2.bias": (("D", OUT),),
    # CaiT extras: LayerScale gammas scale the residual branch per channel; talking heads mix heads.
    "gamma1": (("D", OUT),), "gamma2": (("D", OUT),),
    "talk_l.weight": (("H", OUT), ("H", IN)), "talk_l.bias": (("H", OUT),),
    "talk_w.weight": (("H", OUT), ("H", IN)), "talk_w.bias": (("H", OUT),),
}

# Sections of a canonical model; blocks are grown in depth, class blocks (CaiT) only in width.
SECTIONS = ("embed", "blocks", "class_blocks", "head")


# Grouped-query attention: o consumes the query heads' outputs (module docstring).
GQA_BLOCK_AXES: dict[str, tuple] = {**BLOCK_AXES, "o.weight": (("D", OUT), ("Q", IN))}


SPACES = ("D", "Q", "K", "V", "F", "H")


def space_size(spec: ModelSpec, space: str) -> int:
    kv = spec.kv * spec.head_dim
    return {"D": spec.hidden, "Q": spec.hidden, "K": kv, "V": kv, "F": spec.ffn, "H": spec.heads}[space]


def grows_width(small: ModelSpec, large: ModelSpec) -> bool:
    """Whether any space of `large` is wider than in `small` (key/value heads included): a pair that needs a width
    operator, and whose runs record twin fractions (models/twins.py)."""
    return any(space_size(large, s) > space_size(small, s) for s in SPACES)


@dataclass
class Canonical:
    spec: ModelSpec
    embed: dict[str, torch.Tensor]
    blocks: list[dict[str, torch.Tensor]]
    head: dict[str, torch.Tensor]
    embed_axes: dict[str, tuple]
    head_axes: dict[str, tuple]
    class_blocks: list[dict[str, torch.Tensor]] = field(default_factory=list)
    # Head key of the norm whose output feeds a *tied* output layer (BERT's MLM transform norm, GPT-2's
    # ln_f); `axes` tags its parameters IN (module docstring). None when untied.
    tied_head_norm: str | None = None
    # The axes of block tensors: BLOCK_AXES, or a family's retagging (GQA_BLOCK_AXES; module docstring).
    block_axes: dict[str, tuple] = field(default_factory=lambda: BLOCK_AXES)

    def axes(self, section: str, key: str) -> tuple:
        if section == "embed":
            return self.embed_axes[key]
        if section == "head":
            if self.tied_head_norm is not None and key.rpartition(".")[0] == self.tied_head_norm:
                return (("D", IN),)        # see the module docstring: the tied decoder's consuming side
            return self.head_axes[key]
        return self.block_axes[key]

    def tensor(self, section: str, layer: int | None, key: str) -> torch.Tensor:
        """The tensor `items` and `map` name (section, layer or None, key): the lookup a method makes into another
        Canonical of the same keys (the small model's, beside the grown one it maps)."""
        tensors = getattr(self, section)
        return tensors[layer][key] if layer is not None else tensors[key]

    def items(self) -> Iterator[tuple[str, int | None, str, torch.Tensor]]:
        """(section, layer or None, key, tensor) for every tensor, in a fixed order."""
        for key, t in self.embed.items():
            yield "embed", None, key, t
        for section in ("blocks", "class_blocks"):
            for layer, block in enumerate(getattr(self, section)):
                for key, t in block.items():
                    yield section, layer, key, t
        for key, t in self.head.items():
            yield "head", None, key, t

    def map(self, fn: Callable[[str, int | None, str, torch.Tensor], torch.Tensor],
            spec: ModelSpec | None = None) -> "Canonical":
        """A new Canonical with every tensor replaced by fn(section, layer, key, tensor)."""
        return replace(
            self, spec=spec or self.spec,
            embed={k: fn("embed", None, k, t) for k, t in self.embed.items()},
            blocks=[{k: fn("blocks", i, k, t) for k, t in b.items()} for i, b in enumerate(self.blocks)],
            class_blocks=[{k: fn("class_blocks", i, k, t) for k, t in b.items()}
                          for i, b in enumerate(self.class_blocks)],
            head={k: fn("head", None, k, t) for k, t in self.head.items()})

    def num_params(self) -> int:
        return sum(t.numel() for *_, t in self.items())


def contract(t: torch.Tensor, axis: int, matrix: torch.Tensor) -> torch.Tensor:
    """Replace axis `axis` of t (size n1) by matrix @ that axis (matrix: [n2, n1]). Differentiable."""
    return torch.movedim(torch.tensordot(matrix.to(device=t.device, dtype=t.dtype), t, dims=([1], [axis])), 0, axis)


# A width operator: (space, role, section, layer) -> [n_large, n_small] matrix. `layer` is None for the
# residual stream D, else the index of the block (in `section`) whose per-layer space is meant.
WidthMatrices = Callable[[str, str, str, "int | None"], torch.Tensor]


def grow_width(canon: Canonical, large: ModelSpec, matrices: WidthMatrices) -> Canonical:
    """Apply a width operator to every tagged axis; depth is unchanged (the spec keeps canon's layers)."""
    target = large.with_(layers=canon.spec.layers)

    def grow(section, layer, key, t):
        for axis, tag in enumerate(canon.axes(section, key)):
            if tag is None:
                continue
            space, role = tag
            m = matrices(space, role, section, None if space == RESIDUAL else layer)
            t = contract(t, axis, m)
        return t
    return canon.map(grow, spec=target)


def copy_depth(canon: Canonical, sources: list[int]) -> Canonical:
    """Large block l is a copy (clone) of small block sources[l]: stacking, interpolation, MSLT."""
    return replace(canon, spec=canon.spec.with_(layers=len(sources)),
                   blocks=[{k: t.clone() for k, t in canon.blocks[j].items()} for j in sources])


def mix_depth(canon: Canonical, weights: Callable[[str], torch.Tensor]) -> Canonical:
    """Large block l, tensor k = sum_j weights(k)[l, j] * small block j's k (LiGO's depth operator)."""
    keys = list(canon.blocks[0])
    # unbind, not mixed[k][l]: the backward of one indexing is a zero tensor of the whole stack with its slice
    # filled in, so L2 indexings wrote L2 whole stacks (at BERT-Base, 12 x 113 MB for each FFN matrix: a fifth of a
    # CPU fit step's time at batch 2); unbind's backward stacks the L2 gradients once. Same values, both ways.
    mixed = {k: torch.einsum("lj,j...->l...", weights(k).to(canon.blocks[0][k].dtype),
                             torch.stack([b[k] for b in canon.blocks])).unbind(0) for k in keys}
    n_large = len(next(iter(mixed.values())))
    return replace(canon, spec=canon.spec.with_(layers=n_large),
                   blocks=[{k: mixed[k][l] for k in keys} for l in range(n_large)])
