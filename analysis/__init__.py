"""Run records -> DataFrames -> the paper's savings tables and figures (pure functions + one CLI).

    python -m analysis --runs records/mini --out results/mini

`load` reads records (and reports incomplete or corrupt ones), `savings` computes the cost to reach scratch's
final quality and the savings (seed s against scratch seed s), `identical` finds labels that are one
computation, `regime` checks each task's learning regime, `tables` and `figures` render them in the paper's
layout. Nothing here imports
models/, methods/ or tasks/; of runs/ only the record reader (see analysis/load.py for why).
"""
from analysis.frames import curves_frame, runs_frame
from analysis.load import Problem, load_runs
from analysis.savings import all_savings, cost_to_reach, seed_savings, summarize, target_metric

__all__ = ["Problem", "all_savings", "cost_to_reach", "curves_frame", "load_runs", "runs_frame", "seed_savings",
           "summarize", "target_metric"]
