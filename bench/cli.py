"""What the benchmark scripts' command lines share: counts that must be positive, and bad input (an unknown
task, scale or method, a value the recipe refuses) as one `error:` line and a non-zero exit before anything is
measured or written, never a traceback or a result file of error rows."""
from __future__ import annotations

import argparse
from contextlib import contextmanager


def integer_at_least(low: int, why: str):
    """argparse type: an integer >= `low`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {value}")
        return value
    parse.__doc__ = f"argparse type: an integer >= {low} ({why})"
    return parse


positive_int = integer_at_least(1, "0 repeats made a median of nothing; 0 steps, no window to time")
non_negative_int = integer_at_least(0, "--threads: 0 keeps torch's default; -1 failed in every child")


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (a peak of -5 TFLOP/s made a negative MFU)."""
    import math
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def check_result_file(out) -> None:
    """The result file can be written, checked before the measurement (which may take an hour): not a folder,
    not under a file, in a folder this process may write in."""
    import os
    from pathlib import Path

    from runs.preflight import check_out
    path = Path(out).absolute()
    if path.is_dir():
        raise ValueError(f"--out {out}: a folder; give the result file's path (*.json)")
    check_out(path.parent)                 # the folder it goes in: creatable and writable (as a run directory's)
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"--out {out}: cannot write there")


def checked_device(name: str) -> str:
    """--device as run.py reads it (auto, cpu, cuda, cuda:N; a GPU asked for must be there)."""
    from runs.cli import resolve_device
    return resolve_device(name)


@contextmanager
def refused_as_one_line():
    """Around the checks of a script's input: KeyError/ValueError become `error: ...` and exit 2. Only there:
    the measurement's own errors keep their traceback."""
    try:
        yield
    except (KeyError, ValueError) as e:
        import sys
        from runs.cli import error_line      # the one format of refusals (run.py's too)
        print(error_line(e), file=sys.stderr)
        raise SystemExit(2) from None


def check_known(kind: str, names, known) -> None:
    """Every name in `names` must be one of `known` (KeyError with a close match otherwise)."""
    from models.family import unknown
    for name in names:
        if name not in known:
            raise KeyError(unknown(kind, name, known))
