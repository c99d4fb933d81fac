"""The LiGO operator M = (w ⊗ I)(A ⊗ B) as a module (Wang et al., ICLR 2023, §3.2-3.3, Appendices A, B.1).

Width: one learnable matrix B per canonical *space* (models/canonical.py), so the §3.3 tying is the layout
itself: B_emb for the residual stream D (embeddings, every o/fc2 output, every norm, the head input), and per
layer B_Q, B_K, B_V, B_F (B_H for CaiT's talking heads; class-attention blocks get their own). OUT axes (rows,
biases, norms) take B. What an IN axis (columns: the consuming side) takes is the `tying`:

- "pinv" (default): A^T = pinv(B) = (B^T B)^-1 B^T, i.e. A = B (B^T B)^-1, derived from B at every
  materialisation (one learned matrix per space, as §3.3 intends). For a 0/1 copy matrix S, S^T S =
  diag(count), so A = S / count: exactly Net2Net's division of copied inputs. For *any* full-rank B a linear
  map then sees its input unchanged (W_large B x = B_out W (B^T B)^-1 B^T B x = B_out W x), so the operator
  before its fit is Net2Net (Proposition 1, tied head included: the canonical form tags the norm feeding a
  tied decoder IN, so that norm is divided too) and the fit starts from the best fixed operator.
  This departs from the paper's literal formula, which writes A = B (Alg. 1's B^T): read literally, a copy
  matrix *sums* the copied inputs (B^T B = diag(count) instead of I), and a tied head's logits come out
  count times too large; measured on trained BERT/GPT-2/DeiT/CaiT, the literal operator at its Net2Net init
  is worse than a random model. App. A proves Proposition 1 with separate, normalised A's, which is what the
  pseudo-inverse gives without a second free matrix.
- "literal": A = B (§3.3 / Alg. 1 as printed). Kept to reproduce the paper's formula; at width_init="net2net"
  it is *not* Net2Net (see above); with the official init (width_init="random": [I; C], new rows normalised
  averages) it starts near the small model's function for the old units.
- "untied": every IN axis its own free A (App. A's form; twice the width parameters), initialised to the
  fixed operator's IN matrix.

Llama (grouped-query attention) retags o's input axis as Q (models/canonical.py), so there A_o is derived from
B_Q, the query heads' expansion, where the other families derive it from B_V (without GQA both take the same head
map at the Net2Net init; with it, o must follow the query heads, each of which reads a copy of its value head).

Depth: w [L2, L1] per module type (one per BLOCK_AXES stem: q, k, v, o, fc1, fc2, norm1, norm2, gamma1/2,
talk_l/w); `separate_bias_depth` gives biases their own w (the official code does).

Order: "width_first" (paper Alg. 1: width per small layer, then depth mixing) or "depth_first" (official
code: mix depth, then width per *large* layer). Width form: "full" [n2, n1] or "identity_prefix" [I; C]
(official: the first n1 rows stay the identity, only C is learned).

Materialisation only calls models.canonical.grow_width / mix_depth, the same primitives the fixed methods
use, so with one-hot w and selection matrices LiGO reproduces stacking, interpolation and Net2Net
(Proposition 1, App. A; tests/test_ligo.py, on trained weights).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from methods.depth import depth_weights, interpolate_sources, stack_sources
from methods.width import check_whole_heads, net2net_width
from models.canonical import IN, OUT, RESIDUAL, Canonical, WidthMatrices, grow_width, mix_depth, space_size
from models.spec import ModelSpec

ORDERS = ("width_first", "depth_first")
WIDTH_FORMS = ("full", "identity_prefix")
DEPTH_INITS = ("stackbert", "interpolation", "stackbert_noisy")
WIDTH_INITS = ("net2net", "random")
TYINGS = ("pinv", "literal", "untied")
PER_LAYER = ("blocks", "class_blocks")       # sections whose non-D spaces are per layer


def check_choice(name: str, value: str, known: tuple) -> None:
    if value not in known:
        raise ValueError(f"unknown {name} '{value}'; known: {', '.join(known)}")


def stem(key: str) -> tuple[str, str]:
    """'q.weight' -> ('q', 'weight'); 'gamma1' -> ('gamma1', 'weight'): the module type and its kind."""
    name, _, kind = key.rpartition(".")
    return (name, kind) if kind in ("weight", "bias") else (key, "weight")


def depth_sources(init: str, L1: int, L2: int) -> list[int]:
    return interpolate_sources(L1, L2) if init == "interpolation" else stack_sources(L1, L2)


def _tags(canon: Canonical, section: str) -> list[tuple[str, str]]:
    """The (space, role) pairs the tensors of one section (first block for per-layer sections) carry, sorted: a
    set's order follows string hashing, which differs from process to process (PYTHONHASHSEED), and the slot
    order fixes the parameter order and the draw order of width_init="random" -- torchrun's ranks must agree."""
    if section in PER_LAYER:
        blocks = getattr(canon, section)
        keys = list(blocks[0]) if blocks else []
    else:
        keys = list(getattr(canon, section))
    return sorted({tag for k in keys for tag in canon.axes(section, k) if tag is not None})


class LigoOperator(nn.Module):
    """Learnable width matrices (`self.width`) and depth coefficients (`self.depth`); `forward(small_canon)`
    materialises the large canonical model differentiably. Build, then `init_` or `set_depth`/`set_width`."""

    def __init__(self, small: Canonical, large: ModelSpec, *, order: str = "width_first",
                 width_form: str = "full", tying: str = "pinv", separate_bias_depth: bool = False):
        super().__init__()
        check_choice("order", order, ORDERS)
        check_choice("width_form", width_form, WIDTH_FORMS)
        check_choice("tying", tying, TYINGS)
        s = small.spec
        if s.class_layers != large.class_layers:
            raise ValueError(f"LiGO grows class-attention blocks in width only ({s.class_layers} -> "
                             f"{large.class_layers} class layers)")
        self.small_spec, self.large = s, large
        self.order, self.width_form = order, width_form
        self.tying, self.separate_bias_depth = tying, separate_bias_depth
        for section in ("embed", "head"):   # only the residual stream may cross the embedding/head
            bad = {sp for sp, _ in _tags(small, section)} - {RESIDUAL}
            if bad:
                raise ValueError(f"{section} carries per-layer spaces {sorted(bad)}; LiGO ties it to D only")
        # slot key -> (space, role, section, layer, n1, n2): the learned matrices; role is OUT for every slot
        # unless untied (an IN axis then has its own slot)
        self.slots: dict[str, tuple] = {}
        for section in ("embed", "head"):
            for space, role in _tags(small, section):
                self._add_slot(space, role, section, None)
        depth = {"blocks": s.layers if order == "width_first" else large.layers, "class_blocks": s.class_layers}
        for section in PER_LAYER:
            for space, role in _tags(small, section):
                for layer in range(depth[section]):
                    self._add_slot(space, role, section, None if space == RESIDUAL else layer)
        self.width = nn.ParameterDict()
        for key, (*_, n1, n2) in self.slots.items():
            rows = n2 if width_form == "full" else n2 - n1
            if rows:   # identity_prefix with n2 == n1 is the fixed identity: nothing to learn
                self.width[key] = nn.Parameter(torch.zeros(rows, n1))
        self.depth = nn.ParameterDict()
        for key in (small.blocks[0] if small.blocks else {}):
            name, kind = stem(key)
            dkey = name + ("_bias" if separate_bias_depth and kind == "bias" else "")
            if dkey not in self.depth:
                self.depth[dkey] = nn.Parameter(torch.zeros(large.layers, s.layers))

    # -- layout ------------------------------------------------------------------------------------------------
    def slot_key(self, space: str, role: str, section: str, layer: int | None) -> str:
        """The learned matrix an axis reads (for tied IN axes: the OUT matrix it is derived from)."""
        role = role if self.tying == "untied" else OUT
        suffix = "" if role == OUT else "_in"
        return f"{space}{suffix}" if space == RESIDUAL else f"{section}{layer}_{space}{suffix}"

    def _add_slot(self, space, role, section, layer):
        role = role if self.tying == "untied" else OUT
        key = self.slot_key(space, role, section, layer)
        if space != RESIDUAL and layer is None:
            raise ValueError(f"space {space} outside a block")
        self.slots[key] = (space, role, section, layer, space_size(self.small_spec, space),
                           space_size(self.large, space))

    def depth_key(self, block_key: str) -> str:
        name, kind = stem(block_key)
        return name + ("_bias" if self.separate_bias_depth and kind == "bias" else "")

    # -- the operator's matrices ---------------------------------------------------------------------------------
    def width_matrix(self, key: str) -> torch.Tensor:
        """The [n2, n1] matrix of one slot (for identity_prefix: [I; C])."""
        *_, n1, n2 = self.slots[key]
        if self.width_form == "full":
            return self.width[key]
        eye = torch.eye(n1, device=self._device(), dtype=self._dtype())
        return torch.cat([eye, self.width[key]]) if key in self.width else eye

    def width_matrices(self, solve_infos: list | None = None) -> WidthMatrices:
        """A `grow_width` callable; every matrix (and every derived IN matrix) is built once per
        materialisation: the cat and the solve are not free. `solve_infos`: see `forward`."""
        mats = {key: self.width_matrix(key) for key in self.slots}
        derived: dict[str, torch.Tensor] = {}
        self.solved = []        # (n1, n2) of every solve of this materialisation: their FLOPs are charged

        def lookup(space, role, section, layer):
            key = self.slot_key(space, role, section, layer)
            if role != IN or self.tying != "pinv":
                return mats[key]
            if key not in derived:
                derived[key] = pinv_transposed(mats[key], solve_infos)
                self.solved.append(tuple(mats[key].shape[::-1]))
            return derived[key]
        return lookup

    def solve_flops(self) -> float:
        """FLOPs of the last materialisation's solves, forward and backward, which FlopCounterMode does not see
        (it counts the Gram matmuls only): an LU of B^T B (2/3 n1^3) and two triangular solves with n2
        right-hand sides (2 n1^2 n2) forward; the backward solves once more with the same factors (2 n1^2 n2)."""
        return float(sum(2 / 3 * n1 ** 3 + 4 * n1 ** 2 * n2 for n1, n2 in getattr(self, "solved", [])))

    def depth_coefficients(self, block_key: str) -> torch.Tensor:
        return self.depth[self.depth_key(block_key)]

    def forward(self, small: Canonical, solve_infos: list | None = None) -> Canonical:
        """The large canonical model M(Θ) (differentiable in the operator; the small weights are constants).
        `solve_infos`: a list that collects the pseudo-inverses' solver status instead of checking each solve at
        once, which on a GPU waits for the device every time (13 times a materialisation at BERT-Small->Base); the
        caller checks them with `check_solves` where it waits anyway (the fit: once a step)."""
        width = self.width_matrices(solve_infos)
        if self.order == "width_first":      # paper: B_l W_l A_l^T per small layer, then sum_j w[l, j] (...)_j
            return mix_depth(grow_width(small, self.large, width), self.depth_coefficients)
        # official code: mix the small layers first, then expand each large layer with its own matrices
        return grow_width(mix_depth(small, self.depth_coefficients), self.large, width)

    # -- setting coefficients ------------------------------------------------------------------------------------
    @torch.no_grad()
    def set_depth(self, weights: torch.Tensor | Callable[[str], torch.Tensor]) -> None:
        """w [L2, L1] for every module type (a tensor), or per depth key (a callable)."""
        for key, p in self.depth.items():
            p.copy_(weights(key) if callable(weights) else weights)

    @torch.no_grad()
    def set_width(self, width: WidthMatrices | None, block_sources: list[int] | None = None) -> None:
        """Copy a fixed width operator in (None: the identity, for equal widths). With depth_first the
        matrices are per *large* layer: large layer l takes `width(..., block_sources[l])`, the small layer
        it starts as a copy of."""
        def make(space, role, section, layer, n1, n2):
            if width is None:
                if n1 != n2:
                    raise ValueError(f"no width operator given, but space {space} grows ({n1} -> {n2})")
                return torch.eye(n1)
            if self.order == "depth_first" and section == "blocks" and layer is not None and block_sources:
                layer = block_sources[layer]
            return width(space, role, section, layer)
        self._fill_width(make)

    @torch.no_grad()
    def _fill_width(self, make) -> None:
        for key, (space, role, section, layer, n1, n2) in self.slots.items():
            if key not in self.width:
                continue
            m = make(space, role, section, layer, n1, n2)
            if tuple(m.shape) != (n2, n1):
                raise ValueError(f"width matrix for {key} has shape {tuple(m.shape)}, expected {(n2, n1)}")
            # [I; C] keeps only C: a Net2Net in-matrix (prefix diag(1/count), not I) is then not reproduced
            self.width[key].copy_(m if self.width_form == "full" else m[n1:])

    @torch.no_grad()
    def init_(self, depth_init: str = "stackbert", width_init: str = "net2net", noise: float = 0.03,
              seed: int = 0) -> "LigoOperator":
        check_choice("depth_init", depth_init, DEPTH_INITS)
        check_choice("width_init", width_init, WIDTH_INITS)
        L1, L2 = self.small_spec.layers, self.large.layers
        sources = depth_sources(depth_init, L1, L2)
        one_hot = depth_weights(sources, L1)
        gen = torch.Generator().manual_seed(seed + 1)       # depth noise; the width draws use `seed` itself
        if depth_init == "stackbert_noisy":
            # official `stackbert_init`: U(0, noise) everywhere, 1 at l mod L1, each row normalised to sum 1;
            # drawn separately for every module type (and bias), as each official module owns its coefficients
            def noisy(_key):
                w = torch.rand(L2, L1, generator=gen) * noise
                w[one_hot.bool()] = 1.0
                return w / w.sum(-1, keepdim=True)
            self.set_depth(noisy)
        else:
            self.set_depth(one_hot)
        if width_init == "net2net":
            # same seed and defaults as the net2net method -> the same index maps (Proposition 1 test)
            check_net2net_init(self.small_spec, self.large)
            self.set_width(net2net_width(self.small_spec, self.large, torch.Generator().manual_seed(seed)),
                           block_sources=sources)
        else:
            self._fill_width(random_width(torch.Generator().manual_seed(seed)))
        return self

    def in_matrix(self, space: str, section: str = "blocks", layer: int | None = None) -> torch.Tensor:
        """The [n2, n1] matrix an IN axis of `space` is expanded with (for inspection and tests)."""
        return self.width_matrices()(space, IN, section, None if space == RESIDUAL else layer)

    @torch.no_grad()
    def break_symmetry(self, noise: float, seed: int = 0) -> "LigoOperator":
        """Add N(0, noise^2 / n1) to the rows of every width matrix that make new units (rows >= n1): a copy of a
        unit and its original then differ by about `noise` relative to the unit. Without it, a copy init is a
        fixed point of symmetry for a model trained without dropout: copies get equal gradients in the fit (and
        in training), so they never diverge and the extra width is never used (Net2Net's paper adds noise for
        the same reason)."""
        gen = torch.Generator().manual_seed(seed + 2)
        for key, (*_, n1, n2) in self.slots.items():
            if key not in self.width or n2 == n1:
                continue
            p = self.width[key]
            rows = slice(n1, None) if self.width_form == "full" else slice(None)
            eps = torch.randn(p[rows].shape, generator=gen) * (noise / n1 ** 0.5)
            p[rows] += eps.to(device=p.device, dtype=p.dtype)
        return self

    @classmethod
    def from_fixed(cls, small: Canonical, large: ModelSpec, depth_sources: list[int] | None = None,
                   width: WidthMatrices | None = None, **options) -> "LigoOperator":
        """A fixed operator: one-hot depth from `depth_sources` (default: identity, L1 == L2) and width from
        `width` (default: identity, equal widths) — Proposition 1's stacking / interpolation / Net2Net."""
        op = cls(small, large, **options)
        sources = depth_sources if depth_sources is not None else list(range(small.spec.layers))
        op.set_depth(depth_weights(sources, small.spec.layers))
        op.set_width(width, block_sources=sources)
        return op

    def _device(self):
        return next(iter(self.depth.values())).device if len(self.depth) else torch.device("cpu")

    def _dtype(self):
        return next(iter(self.depth.values())).dtype if len(self.depth) else torch.float32


def check_net2net_init(small: ModelSpec, large: ModelSpec, method: str = "ligo") -> None:
    """width_init="net2net" needs what Net2Net needs (head_dim kept; under GQA the group size kept)."""
    try:
        check_whole_heads(small, large)
    except ValueError as e:
        raise ValueError(f"{method}'s width_init='net2net': {e}; use width_init='random' for this pair") from None


def pinv_transposed(B: torch.Tensor, solve_infos: list | None = None) -> torch.Tensor:
    """A = B (B^T B)^-1, the transpose of B's pseudo-inverse (B [n2, n1] of full column rank, n2 >= n1), so that
    A^T B = I: an input expanded by B is read back exactly. Solved, not inverted (B^T B is symmetric). For a 0/1
    copy matrix, B^T B is diagonal and the solve is an exact division: A = B / count, Net2Net's IN matrix bit for
    bit. Always in float32: the solve has no bf16 kernel, and the operator's precision is not the model's.
    A singular B^T B (B lost rank) is refused here, or, with `solve_infos`, by `check_solves` later: the solver's
    status is appended there unread (torch.linalg.solve is solve_ex with the check, which syncs a GPU)."""
    B32 = B.float()
    A, info = torch.linalg.solve_ex(B32.T @ B32, B32.T, check_errors=solve_infos is None)
    if solve_infos is not None:
        solve_infos.append(info)
    return A.T.to(B.dtype)


def check_solves(solve_infos: list) -> None:
    """Refuse a materialisation whose pseudo-inverses were not solvable (collected by `forward(..., solve_infos)`):
    its IN matrices are not what the operator defines. Reads the statuses once (one wait on a GPU)."""
    if solve_infos and bool(torch.stack(solve_infos).ne(0).any()):
        raise ValueError("LiGO's width operator lost rank: B^T B of a width matrix is singular, so its pseudo-inverse "
                         "(tying='pinv') is undefined; lower fit_lr, or use tying='untied'")


def random_width(gen: torch.Generator):
    """Official `normalized_uniform_init` (width "rand"): [I; C], every new row ~ U(0, 1) normalised to sum 1."""
    def make(space, role, section, layer, n1, n2):
        new = torch.rand(n2 - n1, n1, generator=gen)
        return torch.cat([torch.eye(n1), new / new.sum(-1, keepdim=True)])
    return make
