"""The verdict: one line per result of the paper, every number computed from the records an analysis reads.

Each `PaperResult` names the paper's claim in a few words (the paper's own numbers: constants of the paper, not of
the records), the pair it was measured on, a `Claim` that judges the records (analysis/claims.py: how a difference,
a saving and a computation are counted), and the REPRODUCE.md section that says why. The regime checks
(analysis/regime.py) decide whether a pair tests a claim at all: a pair whose checks do not all pass is no test, and
its line says what the records show and "untested (regime)", never yes or no.

`verdict_table` returns the lines as a DataFrame of short cells; analysis/__main__.py writes it as verdict.md.
Nothing here names a record or a number of ours: change a record and the line changes with it.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from analysis.claims import Adds, Ahead, Claim, First, FitSteps, Learns, Saves, Static
from analysis.savings import summarize

UNTESTED = "untested (regime)"


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
