"""StackBERT (Gong et al. 2019, "Efficient Training of BERT by Progressively Stacking"; LiGO paper eq. (1)).

Large block l copies small block l mod L1 — the small stack repeated on top of itself. On a pair that also
grows in width, width is grown first by the configured operator (default Net2Net FPI) and recorded in
`describe()`. Not function-preserving.

StackBERT resets the optimizer at each growth. The grown model always starts with a fresh optimizer (the
trainer builds one per stage), so the one stage only marks `reset_optimizer` for the record.
"""
from __future__ import annotations

from methods.base import Stage
from methods.depth import CopyDepthMethod, stack_sources
from methods.registry import MAIN_COMPARISONS, register_method


@register_method("stackbert")
class StackBert(CopyDepthMethod):
    display_name = "StackBERT"
    color = "tab:orange"
    table_order = 1
    sweeps = MAIN_COMPARISONS

    depth_rule = "stack: l mod L1"

    def sources(self, L1, L2):
        return stack_sources(L1, L2)

    def stages(self, task, total_steps):
        return [Stage("train", total_steps, reset_optimizer=True)]
