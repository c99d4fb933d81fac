"""Savings (paper §4.1, DESIGN.md §6): the FLOPs and wall time the large model, at its full architecture, needs
to reach scratch's final quality, against what scratch spent.

- Seeds are paired: method seed s is measured against scratch seed s only. The target is that scratch seed's
  final eval loss (vision: final eval accuracy), the denominator its total cost (cumulative FLOPs / wall at its
  last evaluation point). A method seed without a scratch run of the same seed gets no saving (`note` says
  "no scratch s<N>"): dividing by another seed's cost, or by a seed-mean curve, would mix two comparisons.
- Cost to reach the target: cumulative FLOPs (wall seconds) at the first evaluation point that measured the full
  large model (`full_model`, analysis/frames.py) and reaches the target, interpolated linearly from the full-model
  point before it. An intermediate, shallower stage (MSLT, staged training) never counts. Cumulative FLOPs
  include the operator fit (step 0 is logged after the fit, its flops are the fit's cost); a grown model already
  at the target at step 0 costs just the fit. A run that never reaches it has cost NaN and `reached=False`.
- saving = 1 - method / scratch; `saving_flops_no_fit` leaves the operator fit out (growbench's, not the paper's).
  growbench's own variant (not the paper's: its App. C.1 is Figure 7, a small
  model trained briefly) adds the small model's pretraining (config.small.pretrain_flops / pretrain_wall) to the
  method's cost; scratch has none to add.
- Mean and sample std (ddof=1) over the seeds that reached; a single seed's row follows the same rule.
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
    """The seed-mean curve of one label (figures only; savings pair seeds): mean metric and mean cost at the
    steps every seed evaluated."""
    n = curves["seed"].nunique()
    g = curves.dropna(subset=[metric]).groupby("step")
    m = g.agg(**{metric: (metric, "mean"), "flops": ("flops", "mean"), "wall": ("wall", "mean"),
                 "n": ("seed", "nunique")}).reset_index()
    return m[m["n"] == n].drop(columns="n")


def scratch_curves(curves: pd.DataFrame) -> pd.DataFrame:
    """Eval rows of the scratch runs of one task and scale: label "scratch", else the runs of method scratch when
    they carry a single label (two differently named scratch runs of one seed would make the pairing ambiguous)."""
    large = curves[(curves["role"] == "large") & (curves["method"] == "scratch")]
    s = large[large["label"] == "scratch"]
    return s if not s.empty or large["label"].nunique() != 1 else large


def scratch_finals(curves: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per scratch seed (index): its final metric (`target`) and its total cost (`flops`, `wall` at its last
    evaluation point): what a method seed of the same seed is measured against."""
    s = scratch_curves(curves).dropna(subset=[metric]).sort_values("step")
    last = s.groupby("seed").last()
    return pd.DataFrame({"target": last[metric], "flops": last["flops"], "wall": last["wall"]})


def scratch_target(curves: pd.DataFrame, metric: str) -> tuple[float, pd.DataFrame]:
    """(mean over scratch seeds of the final metric, scratch eval rows): the figures' reference line. Savings do
    not use the mean: each method seed has its own scratch seed's target (scratch_finals)."""
    finals = scratch_finals(curves, metric)["target"]
    return (float(finals.mean()) if len(finals) else math.nan), scratch_curves(curves)


def seed_savings(curves: pd.DataFrame, runs: pd.DataFrame, task: str, scale: str) -> pd.DataFrame:
    """Per (label, seed) of one task and scale: the paired scratch seed's target and totals, the cost to reach
    the target at full architecture, whether reached, and the savings (FLOPs, wall, and both with the small
    model's pretraining charged). `note` says why a row has no saving ("no scratch s1", "not reached", "no
    full-model eval")."""
    cur = curves[(curves["task"] == task) & (curves["scale"] == scale)]
    info = runs[(runs["task"] == task) & (runs["scale"] == scale) & (runs["role"] == "large")]
    metric = target_metric(cur)
    scratch = scratch_finals(cur, metric)
    if scratch.empty:
        return pd.DataFrame()
    scratch_runs = info[info["label"].isin(scratch_curves(cur)["label"].unique())]
    scratch_speed = scratch_runs.groupby("seed")["seconds_per_flop"].first()
    scratch_machine = scratch_runs.groupby("seed")["machine"].first()
    rows = []
    for (label, seed), g in cur[cur["role"] == "large"].groupby(["label", "seed"]):
        meta = info[(info["label"] == label) & (info["seed"] == seed)].iloc[0]
        if not meta["trained"]:     # Table 5's grown-init row (analysis.load.trained)
            continue
        final = g.dropna(subset=[metric]).sort_values("step")[metric].iloc[-1]
        paired = seed in scratch.index
        row = {"task": task, "scale": scale, "label": label, "method": meta["method"], "seed": seed,
               "metric": metric, "target": scratch.loc[seed, "target"] if paired else math.nan, "final": final,
               "fit_flops": meta["fit_flops"], "fit_wall_missing": bool(meta["fit_wall_missing"]),
               "pretrain_flops": meta["pretrain_flops"], "pretrain_wall": meta["pretrain_wall"], "paired": paired}
        full = g[g["full_model"]]       # only the full architecture can reach the target (paper §4.1)
        for c in COSTS:
            need = cost_to_reach(full, row["target"], metric, c) if paired else math.nan
            base = scratch.loc[seed, c] if paired else math.nan
            # no small model (scratch): nothing to charge; one given by --small has unknown cost: NaN
            extra = meta[f"pretrain_{c}"] if meta["has_small"] else 0.0
            row[f"{c}_to_target"] = need
            row[f"scratch_{c}"] = base
            row[f"saving_{c}"] = 1 - need / base if base > 0 else math.nan
            with_small = need + extra if extra is not None and not pd.isna(extra) else math.nan
            row[f"saving_{c}_with_small"] = 1 - with_small / base if base > 0 else math.nan
        # the machine's speed during this run against its scratch seed's (seconds per FLOP): far from 1, its
        # wall-time saving measures the machine's load, not the method
        mine, theirs = meta["seconds_per_flop"], scratch_speed.get(seed, math.nan)
        row["speed_vs_scratch"] = theirs / mine if pd.notna(mine) and pd.notna(theirs) and mine > 0 else math.nan
        # a wall time compares only on one machine (device and threads, every start of both runs): none where the
        # run and its scratch seed ran on different ones (e.g. a sweep's 1-thread jobs against 2-thread scratch)
        row["machine"] = meta["machine"]
        row["wall_elsewhere"] = bool(paired and meta["machine"] != scratch_machine.get(seed))
        if row["wall_elsewhere"]:
            row["saving_wall"] = row["saving_wall_with_small"] = math.nan
        # without the operator fit (growbench's column, not the paper's, which charges it): how much of a method's
        # place in the order is its fit's share of the budget (1.3-1.9% of scratch at mini, 0.03% in the paper)
        row["saving_flops_no_fit"] = (1 - (row["flops_to_target"] - row["fit_flops"]) / row["scratch_flops"]
                                      if row["scratch_flops"] > 0 else math.nan)
        row["reached"] = not math.isnan(row["flops_to_target"])
        row["note"] = ("" if row["reached"] else f"no scratch s{seed}" if not paired
                       else "no full-model eval" if full.empty else "not reached")
        rows.append(row)
    return pd.DataFrame(rows)


MACHINE_SPEED_TOLERANCE = 1.25   # a run this much faster or slower per FLOP than its scratch seed is flagged


def machine_differs(speed_vs_scratch: float) -> bool:
    """Whether a run's machine ran at another speed than its scratch seed's (beyond the tolerance)."""
    return (not pd.isna(speed_vs_scratch)
            and not 1 / MACHINE_SPEED_TOLERANCE <= speed_vs_scratch <= MACHINE_SPEED_TOLERANCE)


def summarize(seeds: pd.DataFrame) -> pd.DataFrame:
    """Per label: seeds run, seeds paired with a scratch seed, seeds that reached the target, mean and std of
    every saving over those that did, mean final metric over all seeds, and which seeds have no number and why
    (`missing`, e.g. "no scratch s2; not reached: s1")."""
    if seeds.empty:
        return pd.DataFrame()
    out = []
    for (task, scale, label), g in seeds.groupby(["task", "scale", "label"], sort=False):
        ok = g[g["reached"]]
        seeds_of = lambda part: " ".join(f"s{s}" for s in sorted(part["seed"]))  # noqa: E731
        # seeds without a number, by reason: "no scratch s2 s3; not reached: s1"
        unpaired = g[~g["paired"]]
        missing = ([f"no scratch {seeds_of(unpaired)}"] if len(unpaired) else []) + [
            f"{note}: {seeds_of(part)}" for note, part in g[g["paired"] & ~g["reached"]].groupby("note")]
        row = {"task": task, "scale": scale, "label": label, "method": g["method"].iloc[0],
               "metric": g["metric"].iloc[0], "n_seeds": len(g), "n_paired": int(g["paired"].sum()),
               "n_reached": len(ok), "missing": "; ".join(missing),
               "final_mean": g["final"].mean(), "final_std": _std(g["final"]),
               "fit_flops": g["fit_flops"].mean(), "fit_wall_missing": bool(g["fit_wall_missing"].any()),
               "speed_vs_scratch": ", ".join(f"{v:.2f}" for v in ok["speed_vs_scratch"].dropna()),
               # the seeds whose wall saving is not computed, and the load flag of those whose is
               "wall_elsewhere": seeds_of(ok[ok["wall_elsewhere"]]),
               "machine_differs": bool(ok[~ok["wall_elsewhere"]]["speed_vs_scratch"].map(machine_differs).any())}
        for col in ("saving_flops", "saving_wall", "saving_flops_with_small", "saving_wall_with_small",
                    "saving_flops_no_fit", "flops_to_target", "wall_to_target"):
            vals = ok[col].dropna()
            row[f"{col}_mean"] = vals.mean() if len(vals) else math.nan
            row[f"{col}_std"] = _std(vals)
        out.append(row)
    return pd.DataFrame(out)


def _std(values: pd.Series) -> float:
    v = pd.Series(values).dropna().to_numpy(float)
    return float(np.std(v, ddof=1)) if len(v) > 1 else math.nan


def all_savings(curves: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """seed_savings for every (task, scale) that has a scratch run, concatenated."""
    parts = [seed_savings(curves, runs, t, s)
             for (t, s), _ in curves[curves["role"] == "large"].groupby(["task", "scale"])]
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
