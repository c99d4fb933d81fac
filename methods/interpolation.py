"""Interpolation (Chang et al. 2017; Dong et al. 2020; LiGO paper eq. (1)): every layer repeated in place.

Large block l copies small block floor(l * L1 / L2) — floor(l / k) when L2 = k * L1 — so neighbouring
copies solve "finer steps of the same ODE". On a pair that also grows in width, width is grown first by
the configured operator (default Net2Net FPI) and recorded in `describe()`. Not function-preserving.
"""
from __future__ import annotations

from methods.depth import CopyDepthMethod, interpolate_sources
from methods.registry import MAIN_COMPARISONS, register_method


@register_method("interpolation")
class Interpolation(CopyDepthMethod):
    display_name = "Interpolation"
    color = "tab:olive"
    table_order = 2
    sweeps = MAIN_COMPARISONS

    depth_rule = "interpolate: floor(l * L1 / L2)"

    def sources(self, L1, L2):
        return interpolate_sources(L1, L2)
