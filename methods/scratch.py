"""scratch: the large model from random initialisation — the denominator of every saving (paper §4.1)."""
from __future__ import annotations

from methods.base import GrowthMethod
from methods.registry import MAIN_COMPARISONS, register_method
from models import build_model


@register_method("scratch")
class Scratch(GrowthMethod):
    display_name = "Scratch"
    color = "tab:blue"
    table_order = 0
    sweeps = MAIN_COMPARISONS

    needs_small = False

    def grow(self, small, task):
        return build_model(task.large)
