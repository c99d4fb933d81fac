"""Net2Net / bert2BERT function-preserving width growth (FPI) as a fixed width operator.

Paper: LiGO §3.1 eq. (2) and Appendix A (Proposition 1); Chen et al. 2016 "Net2Net"; Chen et al. 2021
"bert2BERT" (FPI). A unit i2 of a grown space copies small unit g(i2) (g(i) = i for the first n1 units):
- OUT role (a tensor *produces* the space: rows, biases, norms, embeddings): S [n2, n1], S[i2, g(i2)] = 1;
- IN role (a tensor *consumes* the space: columns): S with column j divided by count(j), the number of
  large units copying j — the copies then sum back to the original input, so B W A^T (B = S, A = S/count)
  computes the same function.
Tying (DESIGN §2): ONE index map for the residual stream D, shared by every module; attention grows by whole
heads (one head map per layer, expanded by head_dim for Q/K/V and used as is for CaiT's talking heads H);
one map per FFN layer. LayerNorm averages over D, so it only sees the same statistics when every unit is
copied equally often: the default "balanced" maps draw the new units as concatenated random permutations
of range(n1), which makes that hold for every integer ratio (and copies units floor/ceil times otherwise);
"uniform" draws them i.i.d. as the original Net2Net does (exact only where no norm sees the space); "tiled"
repeats the whole small space (g(i) = i mod n1: HyperCloning's layout, as balanced as "balanced").
Grouped-query attention (Llama) grows by whole key/value groups: a key/value head map is drawn, and query head
h of the large model copies query head r of the small model's group g_kv(h // G), r = h mod G, with the group
size G (query heads per key/value head) kept, so every copied query head still reads a copy of its own value
head.

The LiGO author builds Proposition 1's fixed operator from `net2net_maps` + `selection`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from models.canonical import IN, OUT, RESIDUAL
from models.spec import ModelSpec

INDEX_MAPS = ("balanced", "uniform", "tiled")


def index_map(n1: int, n2: int, generator: torch.Generator, kind: str = "balanced") -> torch.Tensor:
    """g [n2] (long): g(i) = i for i < n1; the n2 - n1 new units pick small units at random."""
    if n2 < n1:
        raise ValueError(f"cannot shrink a space ({n1} -> {n2}) by copying units")
    extra = n2 - n1
    if kind == "balanced":
        # whole random permutations, truncated: each small unit is copied floor or ceil(n2/n1) times
        rounds = -(-extra // n1) if extra else 0
        picks = torch.cat([torch.randperm(n1, generator=generator) for _ in range(rounds)] or
                          [torch.zeros(0, dtype=torch.long)])[:extra]
    elif kind == "uniform":
        picks = torch.randint(n1, (extra,), generator=generator)
    elif kind == "tiled":
        picks = torch.arange(n1, n2) % n1
    else:
        raise ValueError(f"unknown index map '{kind}'; known: {', '.join(INDEX_MAPS)}")
    return torch.cat([torch.arange(n1), picks])


def copy_counts(g: torch.Tensor, n1: int) -> torch.Tensor:
    """How many large units copy each small unit (>= 1, since g starts with the identity)."""
    return torch.bincount(g, minlength=n1)


def selection(g: torch.Tensor, n1: int, dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """(out_matrix, in_matrix), both [n2, n1]: the one-hot copy matrix, and it with column j / count(j)."""
    out = torch.nn.functional.one_hot(g, n1).to(dtype)
    return out, out / copy_counts(g, n1).to(dtype)


def expand_heads(g_heads: torch.Tensor, head_dim: int) -> torch.Tensor:
    """Head map -> unit map over heads x head_dim (kron(S_heads, I_head_dim) as an index map)."""
    return (g_heads[:, None] * head_dim + torch.arange(head_dim)).reshape(-1)


@dataclass
class Net2NetMaps:
    """The raw index maps of one Net2Net growth. Per-layer maps are keyed by (section, layer) of the SMALL
    model ("blocks" / "class_blocks"); after depth stacking a copied layer reuses its source's maps."""
    residual: torch.Tensor
    heads: dict[tuple[str, int], torch.Tensor] = field(default_factory=dict)
    ffn: dict[tuple[str, int], torch.Tensor] = field(default_factory=dict)
    head_dim: int = 0
    kv_heads: dict[tuple[str, int], torch.Tensor] = field(default_factory=dict)   # GQA only; else = heads

    def unit_map(self, space: str, section: str, layer: int | None) -> tuple[torch.Tensor, int]:
        """(g, n1) for one (space, section, layer) of the canonical layout."""
        if space == RESIDUAL:
            g = self.residual
        elif space == "F":
            g = self.ffn[section, layer]
        elif space == "H":
            g = self.heads[section, layer]
        elif space == "Q" or (section, layer) not in self.kv_heads:
            # Q (and K, V without GQA): whole heads, so head_dim stays and the softmax scale with it
            g = expand_heads(self.heads[section, layer], self.head_dim)
        else:  # K, V under grouped-query attention: whole key/value heads
            g = expand_heads(self.kv_heads[section, layer], self.head_dim)
        return g, small_size(g)


def small_size(g: torch.Tensor) -> int:
    """n1 of an index map: g is the identity on range(n1) and picks from range(n1) afterwards."""
    return int(g.max()) + 1


def check_whole_heads(small: ModelSpec, large: ModelSpec,
                      heads: str = "net2net grows attention by whole heads",
                      groups: str = "net2net grows grouped-query attention by whole key/value groups") -> None:
    """What every operator that copies whole heads needs: head_dim kept and, under grouped-query attention, the
    query heads per key/value head kept (without GQA both sides have groups of 1). `heads` / `groups` open the
    one-line refusal with the method's name and what it does."""
    if small.head_dim != large.head_dim:
        raise ValueError(f"{heads} and needs head_dim fixed ({small.head_dim} -> {large.head_dim})")
    if small.group != large.group:
        raise ValueError(f"{groups} and needs the query heads per key/value head fixed "
                         f"({small.heads}/{small.kv} -> {large.heads}/{large.kv})")


def gqa_head_maps(small: ModelSpec, large: ModelSpec, generator: torch.Generator,
                  kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(query head map, key/value head map) growing whole groups: see the module docstring."""
    g_kv = index_map(small.kv, large.kv, generator, kind)
    h = torch.arange(large.heads)
    return g_kv[h // large.group] * small.group + h % large.group, g_kv


def net2net_maps(small: ModelSpec, large: ModelSpec, generator: torch.Generator,
                 per_layer_maps: bool = True, kind: str = "balanced") -> Net2NetMaps:
    """Draw every index map of a small -> large width growth (depth is not grown here)."""
    check_whole_heads(small, large)
    gqa = bool(small.kv_heads or large.kv_heads)
    maps = Net2NetMaps(index_map(small.hidden, large.hidden, generator, kind), head_dim=small.head_dim)
    shared = None
    for section, n in (("blocks", small.layers), ("class_blocks", small.class_layers)):
        for layer in range(n):
            if shared is None or per_layer_maps:
                heads = (gqa_head_maps(small, large, generator, kind) if gqa
                         else (index_map(small.heads, large.heads, generator, kind), None))
                shared = heads + (index_map(small.ffn, large.ffn, generator, kind),)
            maps.heads[section, layer], kv, maps.ffn[section, layer] = shared
            if kv is not None:
                maps.kv_heads[section, layer] = kv
    return maps


class Net2NetWidth:
    """A `WidthMatrices` callable over fixed Net2Net maps; `.maps` exposes the index maps."""

    def __init__(self, maps: Net2NetMaps):
        self.maps = maps
        self._cache: dict[tuple, torch.Tensor] = {}

    def __call__(self, space: str, role: str, section: str, layer: int | None) -> torch.Tensor:
        key = (space, role, section if layer is not None else None, layer)
        if key not in self._cache:
            g, n1 = self.maps.unit_map(space, section, layer)
            out, inn = selection(g, n1)
            self._cache[key[:1] + (OUT,) + key[2:]] = out
            self._cache[key[:1] + (IN,) + key[2:]] = inn
        return self._cache[key]


def net2net_width(small: ModelSpec, large: ModelSpec, generator: torch.Generator,
                  per_layer_maps: bool = True, kind: str = "balanced") -> Net2NetWidth:
    """The FPI width operator (a `WidthMatrices`) for small -> large, with its maps on `.maps`."""
    return Net2NetWidth(net2net_maps(small, large, generator, per_layer_maps, kind))


def new_unit_mask(axes: tuple, small_shape: torch.Size, large_shape: torch.Size, roles=(OUT, IN),
                  device=None) -> torch.Tensor:
    """Boolean mask over a grown tensor: True where the index along some grown axis whose role is in
    `roles` is a new unit (>= the small size). Used for symmetry-breaking noise and AKI's new rows."""
    mask = torch.zeros(large_shape, dtype=torch.bool, device=device)
    for axis, tag in enumerate(axes):
        if tag is None or tag[1] not in roles or large_shape[axis] == small_shape[axis]:
            continue
        shape = [1] * len(large_shape)
        shape[axis] = -1
        mask |= (torch.arange(large_shape[axis], device=device) >= small_shape[axis]).reshape(shape)
    return mask
