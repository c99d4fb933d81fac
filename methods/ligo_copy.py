"""LiGO from Net2Net's copies: the function-preserving member of the LiGO family (`--method ligo_copy`).

The same learned operator as `ligo` (methods/ligo.py) with the paper's Alg. 1 layout (width first, full matrices,
one width matrix per space, one depth vector per module type) started where Proposition 1 puts it: width rows are
Net2Net's copy matrix, depth is one-hot stacking, and the consuming (IN) side reads B's pseudo-inverse
(methods/ligo_operator.py says why, not the literal B of Alg. 1, which at a copy init sums copied inputs). With
`fit_steps=0` it is therefore Net2Net's width growth with stacking, bit for bit, tied output layers included, and
`depth_init="interpolation"` is interpolation: the reductions Proposition 1 states, which tests/test_ligo.py checks on
learned weights. Its fit lr moves the operator (no warm-up).

A copy init is a symmetric point: a copied unit and its source get equal gradients, in the fit and in training,
unless something tells them apart. Dropout does where it acts (BERT, RoBERTa, GPT-2: on the residual stream and the
attention, not between fc1 and fc2); a model without dropout (ViT/DeiT, CaiT, Llama) keeps every copy equal to its
source forever (models/twins.py measures it on every run). `fit_noise` adds N(0, noise^2/n1) to the new units' rows of
every width matrix before a fit (Net2Net's own paper adds noise for the same reason), so a new unit starts about
`noise` (relative) away from its source; it never applies with fit_steps=0, where the start stays exactly Net2Net. On
the families without dropout the task sets it to 0.1 (tasks/registry.py FAMILY_METHOD_DEFAULTS; REPRODUCE.md, Table 2,
has the evidence), elsewhere it is 0.
"""
from __future__ import annotations

from dataclasses import dataclass

from methods.ligo import Ligo, LigoConfig
from methods.registry import MAIN_COMPARISONS, register_method


@dataclass
class LigoCopyConfig(LigoConfig):
    order: str = "width_first"           # paper Alg. 1: expand each small layer, then mix
    width_form: str = "full"             # B [D2, D1], every row learned
    tying: str = "pinv"                  # the IN side reads B's pseudo-inverse: Net2Net's division at a copy init
    separate_bias_depth: bool = False    # one depth vector per module type
    depth_init: str = "stackbert"        # one-hot on l mod L1
    width_init: str = "net2net"          # Net2Net's copy matrix
    fit_warmup_steps: int | None = 0     # the fit's lr is 2e-4 from its first step, decaying linearly to 0


@register_method("ligo_copy")
class LigoCopy(Ligo):
    display_name = "LiGO (copy start)"
    color = "darkred"
    table_order = 8
    sweeps = MAIN_COMPARISONS

    Config = LigoCopyConfig
    keeps_own = ()                       # its copies take the family's symmetry-breaking noise (module docstring)
