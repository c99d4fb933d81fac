"""Where runs go when no --out is given, and where the small-model cache lives: one place, read at call time
(`out_dirs.OUT_ROOT`), so that a test or a script that moves it moves it for every caller."""
from __future__ import annotations

import os
from pathlib import Path


def out_root(environ=os.environ, cwd: Path | None = None) -> Path:
    """Where runs go by default: $GROWBENCH_OUT, else `runs/out` under the current directory (where the command
    runs, not inside the installed package); the small-model cache is its `cache/small/`."""
    given = environ.get("GROWBENCH_OUT")
    return Path(given).expanduser().absolute() if given else Path(cwd or Path.cwd()).absolute() / "runs" / "out"


OUT_ROOT = out_root()
