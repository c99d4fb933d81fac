"""The one way a benchmark writes its figures: JSON under bench/results with the environment, the exact
command and the time, so a committed number can always be traced to what produced it."""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]     # the repository's root
RESULTS = REPO / "bench" / "results"          # where every benchmark's figures are committed


def environment() -> dict:
    env = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}
    try:        # imported here: grow_cost.py measures its children before its own process loads torch
        import numpy
        import torch
        env.update(torch=torch.__version__, cuda=torch.version.cuda, numpy=numpy.__version__)
    except ImportError:
        pass
    return env


def write_result(out: Path | str, result: dict) -> Path:
    """Add environment, command and creation time to `result`, write it to `out` as JSON, say where."""
    out = Path(out)
    result = {**result, "environment": environment(),
              "command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
              "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return out
