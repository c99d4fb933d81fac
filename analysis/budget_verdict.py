"""What a budget study's table shows, written from it (analysis/budget.py puts it under the table): at each budget
the first saving and whether it leads the next by more than the seeds' spread, and from each budget to the next how
far each method's saving moves and whether by more than that spread.

A difference counts by analysis/claims.py's rule, the one the verdict uses: the gap between two means must exceed
the sum of their sample standard deviations (a single seed decides nothing). The seeds' own directions are named
beside it, since two seeds can agree in sign while their spread still covers the gap. Labels that are one
computation (StackBERT = Net2Net) count once, as the table's rows do not: the first of them speaks for both. Nothing
here names a method or a number: change a record and the words change with it.
"""
from __future__ import annotations

import pandas as pd

from analysis.claims import Saving, apart, savings_of
from analysis.tables import display, seeds_text

NOT_DECIDED = "not decided (1 seed)"


def spread_word(decided: bool | None) -> str:
    return {True: "beyond the spread", False: "within the spread", None: NOT_DECIDED}[decided]


def savings_at(point, summary: pd.DataFrame, task: str, labels) -> dict[str, Saving]:
    """label -> its Saving at `point`, one label per computation (the group's first), best first."""
    return {v.label: v for v in savings_of(summary, point.runs, task, point.name, tuple(labels))}


def per_seed(seeds: pd.DataFrame, point: str, label: str) -> dict[int, float]:
    """seed -> the label's saving at `point`, for the seeds that reached scratch's final."""
    s = seeds[(seeds["point"] == point) & (seeds["label"] == label) & seeds["reached"]]
    return dict(zip(s["seed"].astype(int), s["saving_flops"].astype(float)))


def first_at_each_seed(seeds: pd.DataFrame, point: str, found: dict[str, Saving]) -> str:
    """'s0 LiGO, s1 Direct copy': the computation with the highest saving at each seed (level ones joined)."""
    by_seed: dict[int, dict[str, float]] = {}
    for label, v in found.items():
        for seed, saving in per_seed(seeds, point, label).items():
            by_seed.setdefault(seed, {})[v.name] = saving
    parts = []
    for seed, values in sorted(by_seed.items()):
        best = max(values.values())
        parts.append(f"s{seed} " + " and ".join(name for name, x in values.items() if x == best))
    return ", ".join(parts)


def leaders(points, found_at: list[dict[str, Saving]], seeds: pd.DataFrame, status) -> str:
    """`found_at`: savings_at of each point, in the points' order."""
    lines = ["| budget | regime check | first | next | lead | first at each seed |",
             "|:---|:---|:---|:---|:---|:---|"]
    for p, found in zip(points, found_at):
        ranked = [v for v in found.values() if v.reached]
        if not ranked:
            lines.append(f"| {p.name} | {status(p)} | {'none reached' if found else 'no growth run'} | — | — | — |")
            continue
        first, rest = ranked[0], ranked[1:]
        if rest:
            lead = f"{100 * (first.mean - rest[0].mean):+.1f} points, {spread_word(apart(first, rest[0]))}"
        else:
            lead = "the only one reached" if len(found) > 1 else "the only one run"
        lines.append(f"| {p.name} | {status(p)} | {first.cell} | {rest[0].cell if rest else '—'} | {lead} | "
                     f"{first_at_each_seed(seeds, p.name, found)} |")
    return "\n".join(lines) + "\n"


def move(before: Saving | None, after: Saving | None, seeds_before: dict, seeds_after: dict) -> str:
    """How one saving moves from one budget to the next: the mean's change in points, whether it exceeds the spread,
    and each seed's direction."""
    if before is None or after is None:
        return "—"
    if not before.reached and not after.reached:
        return "not reached at either"
    if not after.reached:
        return "reached before, not after"
    if not before.reached:
        return "reached after, not before"
    change = after.mean - before.mean
    decided = apart(after, before) if change > 0 else apart(before, after)
    ways: dict[str, list[int]] = {}
    for seed in sorted(set(seeds_before) & set(seeds_after)):
        d = seeds_after[seed] - seeds_before[seed]
        ways.setdefault("higher" if d > 0 else "lower" if d < 0 else "level", []).append(seed)
    directions = "; ".join(f"{way} at {seeds_text(s)}" for way, s in ways.items())
    return f"{100 * change:+.1f}, {spread_word(decided)}" + (f" ({directions})" if directions else "")


def moves(points, found_at: list[dict[str, Saving]], seeds: pd.DataFrame, summary: pd.DataFrame, task: str,
          growth) -> str | None:
    """The move of each label's saving between neighbouring budgets that hold growth runs (a budget without any,
    e.g. a probe's scratch and control alone, is spanned); None where fewer than two budgets hold them."""
    kept = [(p, f) for p, f in zip(points, found_at) if f]
    if len(kept) < 2:
        return None
    steps = list(zip(kept, kept[1:]))
    lines = ["| | " + " | ".join(f"{a.name} → {b.name}" for (a, _), (b, _) in steps) + " |",
             "|:---|" + "---:|" * len(steps)]
    for label in growth:
        # where another label speaks for this one (one computation), its own saving is the same number
        own = [f.get(label) or savings_at(p, summary, task, [label]).get(label) for p, f in kept]
        speaks = [label in f for (p, f), v in zip(kept, own) if v is not None]
        if not any(speaks):
            continue        # one computation with another label at every budget: that label's row is its row
        names = {f[label].name for p, f in kept if label in f}
        # the group's name only where it is one group at every budget; else the label's own
        name = names.pop() if len(names) == 1 and all(speaks) and len(speaks) == len(kept) else display(label)
        cells = [move(own[i], own[i + 1], per_seed(seeds, a.name, label), per_seed(seeds, b.name, label))
                 for i, ((a, _), (b, _)) in enumerate(steps)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def section(points, seeds: pd.DataFrame, summary: pd.DataFrame, task: str, growth, status) -> str:
    """The markdown section: `growth` the growth methods' labels in the table's order, `status(point)` its regime
    check (PASS | FAIL | n/a)."""
    found_at = [savings_at(p, summary, task, growth) for p in points]
    text = ["## What the table shows", "",
            "Written from the table (analysis/budget_verdict.py). A difference counts where it exceeds the sum of the "
            "two sample spreads (analysis/claims.py's rule; a single seed decides nothing), each seed's direction "
            "named beside it; labels that are one computation count once. Savings rank methods only at a budget "
            "whose regime check passes.", "", "### First at each budget", "",
            leaders(points, found_at, seeds, status)]
    table = moves(points, found_at, seeds, summary, task, growth)
    if table:
        text += ["### From one budget to the next (points of saving)", "", table]
    return "\n".join(text)
