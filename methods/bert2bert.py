"""bert2BERT advanced knowledge initialization (AKI): Chen et al. 2021, "bert2BERT: Towards Reusable
Pretrained Language Models" §4.2; the LiGO paper's bert2BERT baseline (§4, Tables 1-2).

AKI breaks FPI's symmetry with knowledge from the layer above: every tensor of block l is first grown by
FPI (in-expansion divided by copy counts, as in Net2Net), and then its *new output units* — rows, biases,
norm entries whose out-axis index is a new unit — are taken from block l + 1's FPI-grown tensor instead of
being copies of block l's own units. Old units stay layer l's. The last block has no block above and falls
back to plain FPI. CaiT's class-attention blocks follow the same rule among themselves. Embeddings and the
head are grown by FPI. Depth by stacking, as bert2BERT does. Deliberately not function-preserving;
`grow` still measures and reports the deviation (inherited from Net2Net).
"""
from __future__ import annotations

import torch

from methods.net2net import Net2Net
from methods.registry import MAIN_COMPARISONS, register_method
from methods.width import Net2NetWidth, new_unit_mask
from models.canonical import OUT, Canonical, grow_width
from models.spec import ModelSpec


@register_method("bert2bert")
class Bert2Bert(Net2Net):
    display_name = "bert2BERT"
    color = "tab:pink"
    table_order = 6
    sweeps = MAIN_COMPARISONS

    preserves_function = False

    def widen(self, canon: Canonical, large: ModelSpec, width: Net2NetWidth) -> Canonical:
        fpi = grow_width(canon, large, width)

        def aki(section, layer, key, t):
            blocks = getattr(fpi, section) if layer is not None else None
            if blocks is None or layer + 1 >= len(blocks):
                return t              # embeddings, head, and the last block: FPI
            small = canon.tensor(section, layer, key)
            new_rows = new_unit_mask(canon.axes(section, key), small.shape, t.shape, roles=(OUT,), device=t.device)
            return torch.where(new_rows, blocks[layer + 1][key], t)
        return fpi.map(aki)

    def describe(self):
        return {**super().describe(), "composition": {"depth": "stack: l mod L1", "width": "AKI (FPI + next layer)"}}
