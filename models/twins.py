"""Copy symmetry, measured: how many of the units a width-growing method added are still twins of another unit.

A function-preserving width operator (Net2Net, HyperCloning, LiGO at its default start) makes every added unit an
exact copy of an existing one: the same incoming weights, so the same activation. Copies get equal gradients unless
something tells them apart (dropout does; LEMON's unequal fan-out splits do), so on a model without dropout
(Llama, ViT/DeiT, CaiT) they stay copies for the whole run and the large model computes what a model of the small
width computes (DESIGN.md §4, "Twins"). This module says how far that is true of a model at any point.

A unit of a space is one index of that space. Its *incoming weights* are the weights that produce it: every tensor
axis the canonical form tags with the space and role OUT (models/canonical.py), i.e. the rows of q/k/v/fc1/gate
(per layer) and their biases; in the residual stream D, over the whole model, the embeddings' columns, the rows of
every o/fc2 and their biases (and CaiT's LayerScale gammas), but not the norms' gains and shifts (`incoming`
says why). Two units are twins when their incoming-weight vectors differ by at most `TOLERANCE` (1%) relative to
the larger norm: their activations then differ by about as little, so the pair computes one unit's worth. Not tighter:
Adam's normalised step turns float32 noise between exact copies (~1e-7) into differences of ~lr on coordinates whose
gradient is near zero, so LiGO's copies leave a 1e-4 band within its 3-step fit at tiny scale (2e-4 after it), while
they stay the same unit. Dropout separates copies by ~lr per step on every coordinate (a few percent after a
handful of steps at mini scale); random units are ~140% apart. Twins form groups (connected components); a group of
g units holds g - 1 redundant units, and

    twin fraction of a space = sum over groups of (g - 1)  /  (units the large model has beyond the small one's)

so a Net2Net-grown model scores exactly 1.0 in every grown space (every added unit copies one) and a random
initialisation 0.0; the count is permutation-invariant (it does not matter which units a method calls new). Per-layer
spaces (Q, K, V, F, H) are summed over the layers. Only spaces that grow are reported.

The measure is named in what it returns (`MEASURE`, logged as `twins_measure` beside the numbers): an evaluation row
without that field was measured with D's norm entries in the vector, a looser D (`incoming`), and analysis
marks such rows rather than mix them with these.
"""
from __future__ import annotations

import re

import torch

from models.canonical import OUT, RESIDUAL, Canonical, space_size
from models.spec import ModelSpec

TOLERANCE = 1e-2            # relative L2 distance (module docstring)
_PROJECTED = 512            # vectors longer than this are compared through a fixed random projection
# The measure these numbers come from, logged on each row beside them (module docstring): D over its weights alone.
MEASURE = "D-weights"
_NORM = re.compile(r"(^|_)norm\d*$")       # a norm's module in canonical keys: norm, norm1, norm2, transform_norm


def incoming(space: str, key: str) -> bool:
    """Whether the OUT-tagged tensor `key` counts in the incoming weights of `space`'s units: all do but the norms'
    gains and shifts in D.

    Why: in Q, K, V, F and H a unit's vector is its weight row (two for a gated FFN) and its bias, so 1% there is 1%
    of the weights that compute the unit. D's norms add one gain (~1, the same in every unit: initialised to 1, they
    stay near it) and one shift per norm, two norms a layer, to every unit's vector: a part nearly common to all units
    and, unless the embeddings have grown large, larger than the weights' part (a weight row's norm is
    ~std x sqrt(fan-in)). It shrinks every relative distance in D (on a random tiny BERT the added units' nearest
    neighbours are a median 0.34 apart with the norm entries, 1.35 without; F's are 0.99), so that 1% of the whole
    vector admitted weights several percent apart. On the weights alone the tolerance means what it means in every
    other space: the weights' tensors concatenated as they are, as gate and up rows are in F (a text model's
    token-embedding column, one entry per vocabulary word, is then the largest of them). Normalising each tensor's
    block to equal weight instead would not: the gain blocks would stay nearly common to all units; a drift confined
    to one tensor would count 1/sqrt(blocks) of itself, a share that changes with depth; and blocks of one number per
    unit (a bias, the cls token, a norm's shift, a LayerScale gamma) would weigh as much as a weight row, so that
    float noise, large beside such small numbers, would part exact copies. What is left out: a width operator grows a
    norm's entries with the map it grows the weights' rows with, and what parts copies in training (dropout, unequal
    fan-out shares) parts their weights as it parts their gains, so only copies that differ in their norms alone
    would read as twins here, and no growth method makes those."""
    return space != RESIDUAL or not _NORM.search(key.rpartition(".")[0])


def unit_vectors(canon: Canonical) -> dict[tuple[str, int | None], torch.Tensor]:
    """(space, layer or None for D) -> [units, incoming weights] in float64, from every OUT-tagged axis that
    `incoming` counts. Long rows (the residual stream collects every layer's o/fc2 rows and the embeddings' columns)
    are projected to `_PROJECTED` dimensions with a fixed Gaussian matrix per tensor: equal vectors stay equal, and
    distances are kept to a few percent (Johnson-Lindenstrauss), which is all a 1% threshold needs."""
    parts: dict[tuple[str, int | None], list[torch.Tensor]] = {}
    gen = torch.Generator().manual_seed(0)
    for section, layer, key, t in canon.items():
        for axis, tag in enumerate(canon.axes(section, key)):
            if tag is None or tag[1] != OUT or not incoming(tag[0], key):
                continue
            space = tag[0]
            where = (space, None if space == RESIDUAL else (section, layer))
            rows = torch.movedim(t.detach().to("cpu", torch.float64), axis, 0).reshape(t.shape[axis], -1)
            if rows.shape[1] > _PROJECTED:
                proj = torch.randn(rows.shape[1], _PROJECTED, generator=gen, dtype=torch.float64)
                rows = rows @ proj / _PROJECTED ** 0.5
            parts.setdefault(where, []).append(rows)
    return {where: torch.cat(p, dim=1) for where, p in parts.items()}


def relative_distances(vectors: torch.Tensor) -> torch.Tensor:
    """[n, n] L2 distance between units relative to the larger of their norms (0 between two zero vectors)."""
    norms = vectors.norm(dim=1)
    scale = torch.maximum(norms[:, None], norms[None, :])
    return torch.where(scale > 0, torch.cdist(vectors, vectors) / scale.clamp_min(1e-300), torch.zeros_like(scale))


def twin_gap(rel: torch.Tensor, added: int) -> float:
    """How close the `added` closest units are to a twin, from their relative distances `rel`: the median, over the
    `added` units nearest to another unit, of that distance. 0 for exact copies, ~1.4 for a random init; it shows
    twins drifting apart before they leave the 1% band (and copies that never do)."""
    rel = rel.clone()
    rel.fill_diagonal_(float("inf"))
    nearest = rel.min(dim=1).values.sort().values[:added]
    return float(nearest.median()) if len(nearest) else float("nan")


def redundant_units(rel: torch.Tensor, tolerance: float = TOLERANCE) -> int:
    """sum over twin groups of (size - 1), from the units' relative distances `rel`: the number of units that add
    nothing a twin does not already compute."""
    n = rel.shape[0]
    if n < 2:
        return 0
    close = rel <= tolerance
    parent = list(range(n))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i
    for i, j in torch.nonzero(torch.triu(close, diagonal=1)).tolist():
        a, b = root(i), root(j)
        if a != b:
            parent[b] = a
    return n - len({root(i) for i in range(n)})


def twin_fractions(canon: Canonical, small: ModelSpec, tolerance: float = TOLERANCE) -> dict[str, dict[str, float]]:
    """{"twins": space -> twin fraction, "twin_gap": space -> median twin gap over its layers} for every space wider
    in `canon` than in `small` (module docstring), and "twins_measure": `MEASURE`, so that a logged row says which
    measure made its numbers."""
    redundant: dict[str, int] = {}
    added: dict[str, int] = {}
    gaps: dict[str, list[float]] = {}
    for (space, _), vectors in sorted(unit_vectors(canon).items(), key=lambda kv: str(kv[0])):
        extra = space_size(canon.spec, space) - space_size(small, space)
        if extra <= 0 or vectors.shape[0] != space_size(canon.spec, space):
            continue          # not grown (or a class block's space sized otherwise): nothing was added
        rel = relative_distances(vectors)
        redundant[space] = redundant.get(space, 0) + redundant_units(rel, tolerance)
        added[space] = added.get(space, 0) + extra
        gaps.setdefault(space, []).append(twin_gap(rel, extra))
    return {"twins": {space: redundant[space] / added[space] for space in sorted(added)},
            "twin_gap": {space: float(torch.tensor(gaps[space]).median()) for space in sorted(gaps)},
            "twins_measure": MEASURE}

