"""What the benchmark scripts' command lines share: counts that must be positive, and bad input (an unknown
task, scale or method, a value the recipe refuses) as one `error:` line and a non-zero exit before anything is
measured or written, never a traceback or a result file of error rows."""
from __future__ import annotations

import argparse
from contextlib import contextmanager


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (0 repeats made a median of nothing; 0 steps, no window to time)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


@contextmanager
def refused_as_one_line():
    """Around the checks of a script's input: KeyError/ValueError become `error: ...` and exit 2. Only there:
    the measurement's own errors keep their traceback."""
    try:
        yield
    except (KeyError, ValueError) as e:
        import sys
        from run import error_line      # the one format of refusals (run.py at the repository root)
        print(error_line(e), file=sys.stderr)
        raise SystemExit(2) from None


def check_known(kind: str, names, known) -> None:
    """Every name in `names` must be one of `known` (KeyError with a close match otherwise)."""
    from models.family import unknown
    for name in names:
        if name not in known:
            raise KeyError(unknown(kind, name, known))
