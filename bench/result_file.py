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

        from runs.hardware import cpu_model     # imports torch
        env.update(torch=torch.__version__, cuda=torch.version.cuda, numpy=numpy.__version__, cpu=cpu_model())
    except ImportError:
        pass
    return env


def command() -> str:
    """The command line that is running, as it can be typed again from the repository's root: `python -m module`
    for a module run with -m (whose argv[0] is its file's absolute path), a script's path relative to the root."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    if spec is not None and spec.name:
        program = "-m " + spec.name.removesuffix(".__main__")
    else:
        script = Path(sys.argv[0]).resolve()
        program = (script.relative_to(REPO) if script.is_relative_to(REPO) else script).as_posix()
    return " ".join(["python", program, *sys.argv[1:]])


def write_result(out: Path | str, result: dict) -> Path:
    """Add environment, command and creation time to `result`, write it to `out` as JSON, say where."""
    out = Path(out)
    result = {**result, "environment": environment(),
              "command": command(),
              "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return out
