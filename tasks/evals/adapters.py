"""GLUE with adapters instead of full fine-tuning: paper Table 6 (Appendix C.4, AdapterFusion, Pfeiffer et
al. 2021), through AdapterHub's `adapters` package.

Status: not available with this project's stack. `adapters` 1.3.0 (the newest release) requires
transformers ~= 4.57.6, while growbench runs on transformers 5.x; installed beside transformers 5 it
fails on import (it imports `HfFolder`, which huggingface_hub 1.x removed). Installing it would
downgrade transformers for the whole project, so the suite is registered (so that `--suite adapters`
is a known name and gives this reason) but raises until an `adapters` release supports transformers 5.
The suite's task names are GLUE's; the recipe would be GLUE's (paper §4.1) with the encoder frozen.
"""
from __future__ import annotations

from tasks.evals.registry import register_suite
from tasks.evals.glue import PAPER_TASKS, TASKS

REQUIRES = "transformers~=4.57.6"


def adapters_status() -> str | None:
    """None when `adapters` imports alongside the installed transformers, else why not (one line)."""
    try:
        import adapters  # noqa: F401
    except ImportError as e:   # not installed, or installed against another transformers
        import transformers
        return (f"the adapters suite needs AdapterHub's `adapters` package, which does not work with transformers "
                f"{transformers.__version__} (adapters 1.3.0 requires {REQUIRES}; importing it here fails: "
                f"{type(e).__name__}: {e}); paper Table 6 cannot be reproduced on this stack")
    return None


@register_suite("adapters", {"text": tuple(TASKS)}, {"text": PAPER_TASKS}, unavailable=lambda: adapters_status())
def run_adapters(pretrained, names: list[str], options, log=print) -> dict:
    """GLUE with AdapterFusion-style adapters (paper Table 6): needs `adapters`, see the module docstring."""
    reason = adapters_status()
    if reason is not None:
        raise RuntimeError(reason)
    raise RuntimeError("the `adapters` package imports, but growbench's adapter fine-tuning is not written yet "
                       "(written against transformers 5, which no adapters release supports)")
