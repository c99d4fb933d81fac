"""The verdict: one line per result of the paper, every number computed from the records an analysis reads.

Each `PaperResult` names the paper's claim in a few words (the paper's own numbers: constants of the paper, not of
the records), the pair it was measured on, a `Claim` that judges the records, and the REPRODUCE.md section that says
why. A claim reads the savings summary (analysis/savings.summarize), where it compares seed with seed the savings
per run it summarises (analysis/savings.all_savings), and the regime checks (analysis/regime.py):

- a difference counts only where it exceeds the seeds' spread: the gap between two means must be larger than the sum
  of their sample standard deviations (one seed each: "1 seed", not decided); where two labels are compared as a
  difference (LiGO over StackBERT, LiGO's learning, Figure 5's variants), over the seeds both have run;
- a saving is a mean over the seeds that reached scratch's final value: a cell says where some did not ("2 of 3
  seeds reached");
- a pair whose regime checks do not all pass is no test of the claim: its line says what the records show and
  "untested (regime)", never yes or no;
- labels that are one computation (StackBERT = Net2Net) count once, as the savings tables print them.

`verdict_table` returns the lines as a DataFrame of short cells; analysis/__main__.py writes it as verdict.md.
Nothing here names a record or a number of ours: change a record and the line changes with it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from analysis.identical import merge
from analysis.savings import summarize
from analysis.tables import display, is_variant, one_label_a_computation

UNTESTED = "untested (regime)"


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


def regime_status(checks, task: str, scale: str) -> str:
    """"PASS" (every check passed), "FAIL: <the failed checks, in short>", or "n/a: <the checks not taken>"."""
    mine = [c for c in checks if c.task == task and c.scale == scale]
    short = lambda c: c.short or c.name        # noqa: E731
    failed = [short(c) for c in mine if c.status == "FAIL"]
    if failed:
        return "FAIL: " + "; ".join(failed)
    if mine and all(c.status == "PASS" for c in mine):
        return "PASS"
    return "n/a: " + "; ".join(short(c) for c in mine if c.status != "PASS") if mine else "n/a"


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


@dataclass(frozen=True)
class PaperResult:
    name: str          # "Table 1, Fig. 2(a-b)"
    pair: str          # "BERT-Small→Base"
    task: str
    paper: str         # the paper's claim, a few words with its numbers
    claim: Claim
    section: str       # REPRODUCE.md's section heading that says why


STRATEGIES = ("layerdrop", "tokendrop", "staged")        # Figure 5's runs: bench/sweeps/registry.py ORTHOGONAL
FIGURE5 = "Figure 5 — LiGO with orthogonal efficient-training strategies"
PAPER_RESULTS: tuple[PaperResult, ...] = (
    PaperResult("Table 1, Fig. 2(a-b)", "BERT-Small→Base", "bert_small_base", "LiGO first, 44.7%", First(),
                "Figure 2 and Table 1 — BERT"),
    PaperResult("Fig. 2(c)", "BERT-Small→Large", "bert_small_large", "LiGO saves 30.3%", Saves(),
                "Figure 2 and Table 1 — BERT"),
    PaperResult("Fig. 2(c)", "BERT-Base→Large", "bert_base_large", "LiGO saves 45.2%", Saves(),
                "Figure 2 and Table 1 — BERT"),
    PaperResult("Fig. 3(a-b)", "RoBERTa-Small→Base", "roberta_small_base", "LiGO first, 47.2%", First(),
                "Figure 3 — RoBERTa and GPT-2"),
    PaperResult("Fig. 3(c)", "GPT2-Base→Medium", "gpt2_base_medium", "LiGO ~22 points over StackBERT",
                Ahead("stackbert"), "Figure 3 — RoBERTa and GPT-2"),
    PaperResult("Table 2, Fig. 4", "DeiT-S→B", "deit_s_b", "LiGO first, 55.4%", First(),
                "Figure 4 and Table 2 — DeiT"),
    PaperResult("Fig. 5", "BERT-Small→Base", "bert_small_base", "+4.7 / +7.4 / +8.2 over LiGO",
                Adds("ligo", STRATEGIES), FIGURE5),
    PaperResult("Fig. 5 (copy start)", "BERT-Small→Base", "bert_small_base", "as above",
                Adds("ligo_copy", STRATEGIES), FIGURE5),
    PaperResult("Fig. 6(a)", "depth only", "bert_depth_only", "LiGO first, 51.7%", First(),
                "Figure 6 — depth-only and width-only growth"),
    PaperResult("Fig. 6(b)", "width only", "bert_width_only", "LiGO first, 41.6%", First(),
                "Figure 6 — depth-only and width-only growth"),
    PaperResult("Table 3", "BERT-Small→Base", "bert_small_base", "100 → 10,000 fit steps: 44.7 → 38.9%",
                FitSteps(), "Table 3 — number of LiGO growing steps"),
    PaperResult("Table 4", "configurations", "bert_small_base", "Table 4's models",
                Static("the registry's paper scale (`python run.py --list --scale paper`)", "yes"),
                "Table 4 — model configurations"),
    PaperResult("Fig. 7", "small model trained briefly", "bert_small_base", "LiGO saves 35.2%",
                Saves("-smallshort"), "Figure 7 — growing from a briefly trained small model (App. C.1)"),
    PaperResult("Fig. 8", "CaiT-XS→S", "cait_xs_s", "LiGO first, 52.6%", First(), "Figure 8 — CaiT (App. C.2)"),
    PaperResult("Table 6", "AdapterFusion", "bert_small_base", "LiGO 82.88 (GLUE)",
                Static("not produced below paper scale (no embedded adapter suite)", "--"),
                "Table 6 — AdapterFusion fine-tuning (App. C.4)"),
    PaperResult("App. C.5", "GPT2-Medium→1.5B", "gpt2_medium_xl", "LiGO saves ~39%", Saves(),
                "App. C.5 — GPT2-Medium → GPT2-1.5B"),
    PaperResult("§3.2 (learning)", "BERT-Small→Base", "bert_small_base", "the fit learns the operator",
                Learns(), "LiGO's learning"),
    PaperResult("§3.2 (learning)", "RoBERTa-Small→Base", "roberta_small_base", "the fit learns the operator",
                Learns(), "LiGO's learning"),
    PaperResult("§3.2 (learning)", "GPT2-Base→Medium", "gpt2_base_medium", "the fit learns the operator",
                Learns(), "LiGO's learning"),
    PaperResult("§3.2 (learning)", "DeiT-S→B", "deit_s_b", "the fit learns the operator",
                Learns(), "LiGO's learning"),
)


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def anchor(heading: str) -> str:
    """The GitHub anchor of a Markdown heading (lower case, spaces to '-', punctuation dropped)."""
    kept = "".join(ch for ch in heading.lower() if ch.isalnum() or ch in " -_")
    return kept.replace(" ", "-")


def verdict_table(seeds: pd.DataFrame, runs: pd.DataFrame, checks, scale: str,
                  reproduce: str = "../../REPRODUCE.md") -> pd.DataFrame:
    """One row per paper result whose pair has runs at `scale` (Static rows always): the paper's claim, what the
    records show, the regime, whether it reproduces, and the section that says why (a link into REPRODUCE.md).
    `seeds`: the savings per run (analysis/savings.all_savings)."""
    summary = summarize(seeds)
    rows = []
    for p in PAPER_RESULTS:
        static = isinstance(p.claim, Static)
        has_runs = (not summary.empty and ((summary["task"] == p.task) & (summary["scale"] == scale)).any())
        if not (static or has_runs):
            continue
        v = p.claim.judge(summary, runs, p.task, scale, seeds)
        if v is None:
            continue
        regime = "--" if static else regime_status(checks, p.task, scale)
        reproduced = v.reproduced
        if not static and regime != "PASS" and reproduced not in ("--",):
            reproduced = f"{UNTESTED}; reads: {reproduced}"
        rows.append({"Paper result": f"{p.name}: {p.pair}", "Paper": p.paper, "Records": v.result,
                     "Regime": regime, "Reproduced": reproduced,
                     "Why": f"[{p.section.split(' — ')[0]}]({reproduce}#{anchor(p.section)})"})
    return pd.DataFrame(rows, columns=["Paper result", "Paper", "Records", "Regime", "Reproduced", "Why"])
