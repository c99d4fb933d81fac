"""How a result of the paper is judged on the records of one pair: a `Claim` reads the savings summary
(analysis/savings.summarize), where it compares seed with seed the savings per run it summarises
(analysis/savings.all_savings), and returns a `Verdict` (what the records show, whether it reproduces). The rules:

- a difference counts only where it exceeds the seeds' spread: the gap between two means must be larger than the sum
  of their sample standard deviations (one seed each: "1 seed", not decided); where two labels are compared as a
  difference (LiGO over StackBERT, LiGO's learning, Figure 5's variants), over the seeds both have run;
- a saving is a mean over the seeds that reached scratch's final value: a cell says where some did not ("2 of 3
  seeds reached");
- labels that are one computation (StackBERT = Net2Net) count once, as the savings tables print them.

The regime rule (a pair whose checks do not all pass is no test of a claim) is the verdict's (analysis/verdict.py),
which holds the paper's results and puts each claim to its pair. Nothing here names a record or a number of ours.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from analysis.identical import merge
from analysis.savings import summarize
from analysis.tables import display, is_variant, one_label_a_computation


@dataclass(frozen=True)
class Saving:
    """One label's FLOPs saving over its seeds (fractions)."""
    label: str
    name: str
    mean: float
    std: float
    seeds: int
    reached: int

    @property
    def number(self) -> str:
        """"47.5 ± 3.5" (percent), "47.5" for one seed, "not reached"; the mean is over the seeds that reached
        scratch's final, so where some did not it says so: "47.5 (2 of 3 seeds reached)"."""
        if self.reached == 0:
            return "not reached"
        return f"{100 * self.mean:.1f}" + ("" if math.isnan(self.std) else f" ± {100 * self.std:.1f}") + self.partly

    @property
    def partly(self) -> str:
        """" (2 of 3 seeds reached)" where some seeds did not reach scratch's final, else ""."""
        return f" ({self.reached} of {self.seeds} seeds reached)" if 0 < self.reached < self.seeds else ""

    @property
    def cell(self) -> str:
        return f"{self.name} {self.number}"


def savings_of(summary: pd.DataFrame, runs: pd.DataFrame, task: str, scale: str,
               labels: tuple[str, ...] | None = None) -> list[Saving]:
    """The savings of `labels` (default: the main comparison, variants left out, scratch left out), one per
    computation, best first (never reached last)."""
    s = summary[(summary["task"] == task) & (summary["scale"] == scale)]
    if s.empty:
        return []
    keep = s["label"].isin(labels) if labels is not None else ~s["label"].map(is_variant).astype(bool)
    s = s[keep & (s["label"] != "scratch")]
    if s.empty:
        return []
    r = runs[(runs["task"] == task) & (runs["scale"] == scale) & (runs["role"] == "large")]
    by_label = s.set_index("label", drop=False)
    out = [Saving(label, name, row["saving_flops_mean"], row["saving_flops_std"], int(row["n_seeds"]),
                  int(row["n_reached"]))
           for label, name in one_label_a_computation(merge(r), s["label"]) for row in [by_label.loc[label]]]
    return sorted(out, key=lambda v: -v.mean if v.reached else math.inf)


def apart(a: Saving, b: Saving) -> bool | None:
    """Whether a's saving exceeds b's by more than their spreads (True / False), None where a spread is unknown."""
    if a.reached == 0:
        return False
    if b.reached == 0:
        return True
    if math.isnan(a.std) or math.isnan(b.std):
        return None
    return bool(a.mean - b.mean > a.std + b.std)          # a bool, not numpy's: callers test `is False`


@dataclass(frozen=True)
class Verdict:
    result: str        # what the records show, a few words
    reproduced: str    # yes | partly | no | not decided (...) | untested (regime) | --


class Claim:
    """How a paper result is judged on the records of one pair (subclasses)."""

    def judge(self, summary, runs, task: str, scale: str, seeds) -> Verdict | None:     # None: no runs for it
        """`summary`: analysis/savings.summarize of `seeds` (analysis/savings.all_savings: one row per run)."""
        raise NotImplementedError


# A claim about LiGO is judged on LiGO as its authors ran it where the pair has its runs, else on its copy start
# (a pair whose LiGO runs predate the authors' start as the default): the cell names which.
LIGO = ("ligo", "ligo_copy")


def present(summary, task: str, scale: str, labels: tuple[str, ...]) -> str | None:
    """The first of `labels` with runs of `task` at `scale`."""
    have = set(summary.loc[(summary["task"] == task) & (summary["scale"] == scale), "label"]) if len(summary) else set()
    return next((label for label in labels if label in have), None)


@dataclass(frozen=True)
class First(Claim):
    """The method saves the most FLOPs of the main comparison, ahead of the next by more than the spread."""
    methods: tuple[str, ...] = LIGO

    def judge(self, summary, runs, task, scale, seeds):
        ranked = savings_of(summary, runs, task, scale)
        method = present(summary, task, scale, self.methods)
        mine = [v for v in ranked if v.label == method]
        if not mine:
            return None
        me, place = mine[0], ranked.index(mine[0]) + 1
        others = [v for v in ranked if v is not me]
        result = f"{me.cell}, {ordinal(place)} of {len(ranked)}"
        if not others:
            return Verdict(result, "--")
        rival = others[0]
        result += f"; {'next' if place == 1 else 'first'}: {rival.cell}"
        if place > 1:
            return Verdict(result, {True: "no", False: "partly: level within the spread",
                                    None: "not decided (1 seed)"}[apart(rival, me)])
        verdict = apart(me, rival)
        return Verdict(result, {True: "yes", False: "partly: first within the spread",
                                None: "not decided (1 seed)"}[verdict])


@dataclass(frozen=True)
class Ahead(Claim):
    """The method saves more than `other`, by more than the spread (the paper's margin is in the paper column),
    the two compared on the seeds both have run (a comparison half made names them)."""
    other: str
    methods: tuple[str, ...] = LIGO

    def judge(self, summary, runs, task, scale, seeds):
        method = present(summary, task, scale, self.methods)
        found = {v.label: v for v in savings_of(summary, runs, task, scale, (method, self.other))}
        if method not in found or self.other not in found:
            return None
        pair, common = on_common_seeds(seeds, runs, task, scale, (method, self.other))
        if pair is None:
            return Verdict(f"{found[method].cell} vs {found[self.other].cell}: no seed in common",
                           f"not decided ({NO_COMMON_SEED})")
        me, them = pair
        gap = "" if not (me.reached and them.reached) else f": {100 * (me.mean - them.mean):+.1f} points"
        verdict = apart(me, them)
        return Verdict(f"{me.cell} vs {them.cell}{gap}{seeds_named(common)}",
                       {True: "yes", False: "no" if apart(them, me) else "partly: within the spread",
                        None: "not decided (1 seed)"}[verdict])


@dataclass(frozen=True)
class Saves(Claim):
    """The method (or its variant `<method><suffix>`) reaches scratch's final value with a positive saving at every
    seed."""
    suffix: str = ""
    methods: tuple[str, ...] = LIGO

    def judge(self, summary, runs, task, scale, seeds):
        label = present(summary, task, scale, tuple(m + self.suffix for m in self.methods))
        found = savings_of(summary, runs, task, scale, (label,))
        if not found:
            return None
        me = found[0]
        ok = me.reached == me.seeds and me.mean > 0
        return Verdict(f"{me.cell} ({me.seeds} seed{'s' * (me.seeds > 1)})", "yes" if ok else "no")


ONE_SEED, NO_COMMON_SEED = "1 seed", "no seed in common"      # why a variant's comparison is not decided


@dataclass(frozen=True)
class Adds(Claim):
    """Each variant of `method` (its labels `<method>-<suffix>`) saves more than `method` itself, each compared with
    `method` on the seeds both have run (a variant run at fewer seeds is compared like with like; its cell names them)."""
    method: str
    suffixes: tuple[str, ...]

    def judge(self, summary, runs, task, scale, seeds):
        labels = (self.method,) + tuple(f"{self.method}-{s}" for s in self.suffixes)
        found = {v.label: v for v in savings_of(summary, runs, task, scale, labels)}
        if self.method not in found or len(found) == 1:
            return None
        cells, verdicts = [], []
        for suffix in self.suffixes:
            label = f"{self.method}-{suffix}"
            if label not in found:
                cells.append(f"{suffix} not run")
                continue
            pair, common = on_common_seeds(seeds, runs, task, scale, (label, self.method))
            if pair is None:
                cells.append(f"{suffix}: no seed in common")
                verdicts.append(NO_COMMON_SEED)
                continue
            cells.append(f"{suffix} {difference(*pair)}{seeds_named(common)}")
            decided = apart(*pair)
            verdicts.append(ONE_SEED if decided is None else decided)
        result = f"over {found[self.method].cell}: " + ", ".join(cells)
        undecided = list(dict.fromkeys(v for v in verdicts if isinstance(v, str)))
        if not verdicts or undecided:
            return Verdict(result, f"not decided ({'; '.join(undecided)})" if undecided else "--")
        n = sum(verdicts)
        return Verdict(result, "yes" if n == len(self.suffixes) else f"partly: {n} of {len(self.suffixes)}"
                       if n else "no")


@dataclass(frozen=True)
class FitSteps(Claim):
    """Table 3: a longer operator fit lowers the saving (the fit's FLOPs grow, its start gains less), for each LiGO
    start that has fit-steps variants (`<start>-fit<N>`)."""
    starts: tuple[str, ...] = ("ligo", "ligo_copy")

    def judge(self, summary, runs, task, scale, seeds):
        r = runs[(runs["task"] == task) & (runs["scale"] == scale) & (runs["role"] == "large")]
        s = summary[(summary["task"] == task) & (summary["scale"] == scale)]
        parts, verdicts = [], []
        for start in self.starts:
            labels = [lab for lab in s["label"] if lab == start or lab.startswith(f"{start}-fit")]
            if len(labels) < 2 or not any(lab != start for lab in labels):
                continue
            steps = {lab: r[r["label"] == lab]["method_config"].iloc[0].get("fit_steps") for lab in labels}
            rows = s.set_index("label").loc[sorted(labels, key=lambda lab: steps[lab])]
            means = [m for m in rows["saving_flops_mean"]]
            parts.append(f"{display(start)}: " + " / ".join(
                f"{steps[lab]}: {'not reached' if math.isnan(m) else f'{100 * m:.1f}'}"
                for lab, m in zip(rows.index, means)))
            reached = [m for m in means if not math.isnan(m)]
            verdicts.append(len(reached) == len(means) and all(a >= b for a, b in zip(reached, reached[1:])))
        if not parts:
            return None
        return Verdict("; ".join(parts), "yes" if all(verdicts) else "partly" if any(verdicts) else "no")


@dataclass(frozen=True)
class Learns(Claim):
    """LiGO's learning adds to its initialisation: the run with its fit saves more than the one without
    (`<method>-nofit`); the other fits of the learning sweep are reported beside it. Each fit is compared with the
    no-fit run on the seeds both have (a sweep half done compares like with like, and its cell names those seeds)."""
    method: str = "ligo"
    others: tuple[str, ...] = ("movingfit", "longfit")

    def judge(self, summary, runs, task, scale, seeds):
        bare = f"{self.method}-nofit"
        fits = [(self.method, "authors' fit")] + [(f"{self.method}-{o}", o) for o in self.others]
        found = {v.label: v for v in savings_of(summary, runs, task, scale, (bare,) + tuple(f for f, _ in fits))}
        if bare not in found or self.method not in found:
            return None
        cells = [f"no fit {found[bare].number}"]
        best = None                                   # (the fit, the no-fit run) on their common seeds
        missing = []                                  # fits of the sweep not run yet: a "no" may still turn
        for label, name in fits:
            if label not in found:
                cells.append(f"{name} not run")
                missing.append(name)
                continue
            pair, common = on_common_seeds(seeds, runs, task, scale, (label, bare))
            if pair is None:
                cells.append(f"{name}: no seed in common with no fit")
                continue
            cells.append(f"{name} {difference(*pair)}{seeds_named(common)}")
            if pair[0].reached and (best is None or gain_of(pair) > gain_of(best)):
                best = pair
        verdict = False if best is None else apart(*best)
        reproduced = {True: "yes", False: "no: within the spread or below" if best else "no",
                      None: "not decided (1 seed)"}[verdict]
        if missing and verdict is False:
            reproduced += f" (so far: {', '.join(missing)} not run)"
        return Verdict("; ".join(cells), reproduced)


def difference(variant: Saving, base: Saving) -> str:
    """The variant's saving over the base's, in points ("+2.5"); what it saves where only it reaches scratch's final."""
    if not variant.reached:
        return "not reached"
    if not base.reached:
        return f"saves {variant.number}"
    return f"{100 * (variant.mean - base.mean):+.1f}" + variant.partly


def seeds_named(common: list[int] | None) -> str:
    """" (s0 s1)": the seeds a difference was taken on, where they are fewer than the labels ran."""
    return "" if common is None else f" ({' '.join(f's{x}' for x in common)})"


def gain_of(pair: tuple[Saving, Saving]) -> float:
    """A fit's saving over the no-fit run's (fractions); infinite where only the fit reached scratch's final."""
    fit, nofit = pair
    return math.inf if not nofit.reached else fit.mean - nofit.mean


def on_common_seeds(seeds: pd.DataFrame, runs: pd.DataFrame, task: str, scale: str, labels: tuple[str, str]):
    """The two labels' savings over the seeds both ran, and those seeds (None where each ran the same ones); (None,
    []) where they share no seed. The labels are two computations (savings_of kept both over all their seeds)."""
    mine = seeds[(seeds["task"] == task) & (seeds["scale"] == scale) & seeds["label"].isin(labels)]
    ran = [set(mine.loc[mine["label"] == label, "seed"]) for label in labels]
    common = sorted(ran[0] & ran[1])
    if not common:
        return None, []
    found = {v.label: v for v in savings_of(summarize(mine[mine["seed"].isin(common)]), runs, task, scale, labels)}
    return (found[labels[0]], found[labels[1]]), (None if ran[0] == ran[1] else common)


@dataclass(frozen=True)
class Static(Claim):
    """A line the records cannot decide (a table of configurations, a result not produced at this scale)."""
    result: str
    reproduced: str

    def judge(self, summary, runs, task, scale, seeds):
        return Verdict(self.result, self.reproduced)


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
