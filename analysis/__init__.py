"""Run records -> DataFrames -> the paper's savings tables and figures (pure functions + one CLI).

    python -m analysis --runs records/mini --out results/mini

`load` reads records (and reports incomplete or corrupt ones), `savings` computes the cost to reach scratch's
final quality and the savings (seed s against scratch seed s), `identical` finds labels that are one
computation, `regime` checks each task's learning regime, `tables` and `figures` render them in the paper's
layout. Nothing here imports
models/, methods/ or tasks/; of runs/ only the record reader (see analysis/load.py for why).
"""
import importlib

# where each name lives; imported on first use (PEP 562), so that importing one light module of the package (run.py's
# analysis.reference for a scale without committed records) does not load pandas
_HOME = {"curves_frame": "analysis.frames", "runs_frame": "analysis.frames", "Problem": "analysis.load",
         "load_runs": "analysis.load", "all_savings": "analysis.savings", "cost_to_reach": "analysis.savings",
         "seed_savings": "analysis.savings", "summarize": "analysis.savings", "target_metric": "analysis.savings"}
__all__ = sorted(_HOME)


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'analysis' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)
