"""Savings (paper §4.1, DESIGN.md §6): the FLOPs and wall time a method needs to reach scratch's final quality.

- Target: the scratch run's final eval loss (vision: final eval accuracy). With several scratch seeds the
  target is the *mean* of their final values.
- Cost to reach it: cumulative FLOPs (wall seconds) at the first evaluation point that reaches the target,
  interpolated linearly between that point and the one before. Cumulative FLOPs include the operator fit
  (step 0 is logged after the fit, its flops are the fit's cost); a grown model already at the target at step 0
  costs just the fit. A run that never reaches the target has cost NaN and `reached=False`: never a number.
- saving = 1 - method / scratch. The App. C.1 variant adds the small model's own pretraining
  (config.small.pretrain_flops / pretrain_wall) to the method's cost; scratch has none.
- Seeds: method seed s is paired with scratch seed s when that scratch run exists and reaches the common target;
  otherwise (no such seed, or that scratch seed ended above the mean target, which happens to about half of
  them) the denominator is read off the seed-mean scratch curve, whose last point is the target by
  construction. The `denominator` column says which. Mean and sample std (ddof=1) are over seeds that reached.
- Wall time is the trainer's (evaluation excluded). A record whose step 0 has fit FLOPs but wall 0.0 carries
  no fit wall time: its wall savings leave the fit out (its FLOPs savings do not) and `fit_wall_missing` says so.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

HIGHER_IS_BETTER = {"eval_acc"}
COSTS = ("flops", "wall")


def target_metric(curves: pd.DataFrame) -> str:
    """eval_acc where the runs have it (vision, as the paper compares accuracy), else eval_loss."""
    return "eval_acc" if "eval_acc" in curves and curves["eval_acc"].notna().any() else "eval_loss"


def reached(value: float, target: float, metric: str) -> bool:
    return value >= target if metric in HIGHER_IS_BETTER else value <= target


def cost_to_reach(curve: pd.DataFrame, target: float, metric: str = "eval_loss", cost: str = "flops") -> float:
    """Cost (`flops` or `wall`) at which `curve` (eval rows of one run, any order) first reaches `target`,
    linearly interpolated between eval points; NaN if it never does."""
    c = curve.dropna(subset=[metric]).sort_values("step")
    ys, xs = c[metric].to_numpy(float), c[cost].to_numpy(float)
    for i, y in enumerate(ys):
        if not reached(y, target, metric):
            continue
        if i == 0 or ys[i] == ys[i - 1]:
            return float(xs[i])
        frac = (target - ys[i - 1]) / (ys[i] - ys[i - 1])
        return float(xs[i - 1] + frac * (xs[i] - xs[i - 1]))
    return math.nan


def mean_curve(curves: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The seed-mean curve of one label: mean metric and mean cost at the steps every seed evaluated."""
    n = curves["seed"].nunique()
    g = curves.dropna(subset=[metric]).groupby("step")
    m = g.agg(**{metric: (metric, "mean"), "flops": ("flops", "mean"), "wall": ("wall", "mean"),
                 "n": ("seed", "nunique")}).reset_index()
    return m[m["n"] == n].drop(columns="n")


def scratch_target(curves: pd.DataFrame, metric: str) -> tuple[float, pd.DataFrame]:
    """(target, scratch eval rows) for one task and scale: the mean over scratch seeds of the final metric."""
    s = curves[(curves["role"] == "large") & (curves["method"] == "scratch") & (curves["label"] == "scratch")]
    if s.empty:
        s = curves[(curves["role"] == "large") & (curves["method"] == "scratch")]
    if s.empty:
        return math.nan, s
    finals = s.dropna(subset=[metric]).sort_values("step").groupby("seed")[metric].last()
    return float(finals.mean()), s


def seed_savings(curves: pd.DataFrame, runs: pd.DataFrame, task: str, scale: str,
                 pair_seeds: bool = True) -> pd.DataFrame:
    """Per (label, seed) of one task and scale: cost to reach scratch's target, whether reached, the denominator,
    and the savings (FLOPs, wall, and both with the small model's pretraining charged)."""
    cur = curves[(curves["task"] == task) & (curves["scale"] == scale)]
    info = runs[(runs["task"] == task) & (runs["scale"] == scale) & (runs["role"] == "large")]
    metric = target_metric(cur)
    target, scratch = scratch_target(cur, metric)
    if math.isnan(target):
        return pd.DataFrame()
    scratch_mean = mean_curve(scratch, metric)
    denom_mean = {c: cost_to_reach(scratch_mean, target, metric, c) for c in COSTS}
    denom_seed = {(seed, c): cost_to_reach(g, target, metric, c) for seed, g in scratch.groupby("seed") for c in COSTS}
    rows = []
    for (label, seed), g in cur[cur["role"] == "large"].groupby(["label", "seed"]):
        meta = info[(info["label"] == label) & (info["seed"] == seed)].iloc[0]
        if not meta["trained"]:     # Table 5's grown-init row (analysis.load.trained)
            continue
        final = g.dropna(subset=[metric]).sort_values("step")[metric].iloc[-1]
        paired = pair_seeds and all(not math.isnan(denom_seed.get((seed, c), math.nan)) for c in COSTS)
        row = {"task": task, "scale": scale, "label": label, "method": meta["method"], "seed": seed,
               "metric": metric, "target": target, "final": final, "fit_flops": meta["fit_flops"],
               "fit_wall_missing": bool(meta["fit_wall_missing"]),
               "pretrain_flops": meta["pretrain_flops"], "pretrain_wall": meta["pretrain_wall"],
               "denominator": "paired seed" if paired else "seed-mean scratch"}
        for c in COSTS:
            need = cost_to_reach(g, target, metric, c)
            base = denom_seed[(seed, c)] if paired else denom_mean[c]
            # no small model (scratch): nothing to charge; one given by --small has unknown cost: NaN
            extra = meta[f"pretrain_{c}"] if meta["has_small"] else 0.0
            row[f"{c}_to_target"] = need
            row[f"scratch_{c}"] = base
            row[f"saving_{c}"] = 1 - need / base if base > 0 else math.nan
            with_small = need + extra if extra is not None and not pd.isna(extra) else math.nan
            row[f"saving_{c}_with_small"] = 1 - with_small / base if base > 0 else math.nan
        row["reached"] = not math.isnan(row["flops_to_target"])
        rows.append(row)
    return pd.DataFrame(rows)


def summarize(seeds: pd.DataFrame) -> pd.DataFrame:
    """Per label: seeds run, seeds that reached the target, mean and std of every saving over those that did,
    mean final metric over all seeds."""
    if seeds.empty:
        return pd.DataFrame()
    out = []
    for (task, scale, label), g in seeds.groupby(["task", "scale", "label"], sort=False):
        ok = g[g["reached"]]
        row = {"task": task, "scale": scale, "label": label, "method": g["method"].iloc[0],
               "metric": g["metric"].iloc[0], "target": g["target"].iloc[0], "n_seeds": len(g),
               "n_reached": len(ok), "final_mean": g["final"].mean(), "final_std": _std(g["final"]),
               "fit_flops": g["fit_flops"].mean(), "fit_wall_missing": bool(g["fit_wall_missing"].any())}
        for col in ("saving_flops", "saving_wall", "saving_flops_with_small", "saving_wall_with_small",
                    "flops_to_target", "wall_to_target"):
            vals = ok[col].dropna()
            row[f"{col}_mean"] = vals.mean() if len(vals) else math.nan
            row[f"{col}_std"] = _std(vals)
        out.append(row)
    return pd.DataFrame(out)


def _std(values: pd.Series) -> float:
    v = pd.Series(values).dropna().to_numpy(float)
    return float(np.std(v, ddof=1)) if len(v) > 1 else math.nan


def all_savings(curves: pd.DataFrame, runs: pd.DataFrame, pair_seeds: bool = True) -> pd.DataFrame:
    """seed_savings for every (task, scale) that has a scratch run, concatenated."""
    parts = [seed_savings(curves, runs, t, s, pair_seeds)
             for (t, s), _ in curves[curves["role"] == "large"].groupby(["task", "scale"])]
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
