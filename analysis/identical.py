"""Runs that are one computation, so that tables and figures never show them as rivals (DESIGN.md §6).

Two runs are the same computation when their step-0 rows logged the same fingerprint (runs/computation.py: the
initial weights, training plan and signature, task, strategies and seed), or when a sweep recorded one as the
other's twin (config "same_computation_as", bench/sweeps/cli.py) instead of computing it again. Records made before
the fingerprint was logged are matched by their curves instead: two runs of one seed, neither with a
fingerprint, whose every evaluation point is bit-equal (analysis.frames.curve_digest). Two *labels* of a
task are merged (one table row "StackBERT = Net2Net", one figure line) when they ran the same seeds and are one
computation seed for seed; labels that coincide on some seeds only stay apart and are marked (`partial`).
Only the records decide: no method is named here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd


@dataclass
class Merged:
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)    # label -> every label of its group
    partial: dict[str, list[tuple[int, str]]] = field(default_factory=dict)   # label -> [(seed, other label)]

    def group(self, label: str) -> tuple[str, ...]:
        return self.groups.get(label, (label,))


def _computations(runs: pd.DataFrame) -> dict[tuple[str, int], tuple[str, int]]:
    """(label, seed) -> a representative (label, seed) of its computation (union-find over both kinds of link)."""
    parent = {(r["label"], int(r["seed"])): (r["label"], int(r["seed"])) for _, r in runs.iterrows()}

    def root(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def link(a, b):
        if a in parent and b in parent:
            parent[root(a)] = root(b)

    by_fingerprint, by_curve = {}, {}
    for _, r in runs.iterrows():
        me = (r["label"], int(r["seed"]))
        fp = r.get("computation")
        if isinstance(fp, str) and fp:
            link(me, by_fingerprint.setdefault(fp, me))
        elif isinstance(r.get("curve"), str):   # no fingerprint: the curve itself, within one seed
            link(me, by_curve.setdefault((r["curve"], me[1]), me))
        twin = r.get("twin_of")
        if isinstance(twin, tuple):
            link(me, (twin[0], int(twin[1])))
    return {x: root(x) for x in parent}


def merge(runs: pd.DataFrame) -> Merged:
    """Group the large-model labels of one task and scale (`runs`: analysis.frames.runs_frame rows of it, or its
    curves_frame rows, which carry the same two columns per run)."""
    large = runs[runs["role"] == "large"].drop_duplicates(["label", "seed"])
    comp = _computations(large)
    seeds = {lab: set(g["seed"].astype(int)) for lab, g in large.groupby("label")}
    labels, out = sorted(seeds), Merged()
    for a in labels:
        same = tuple(b for b in labels if seeds[b] == seeds[a]
                     and all(comp[(a, s)] == comp[(b, s)] for s in seeds[a]))
        if len(same) > 1:
            out.groups[a] = same
        # coinciding on some seeds only: not one row, but never unmarked
        shared = [(s, b) for b in labels if b not in same for s in sorted(seeds[a] & seeds[b])
                  if comp[(a, s)] == comp[(b, s)]]
        if shared:
            out.partial[a] = shared
    return out
