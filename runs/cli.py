"""What every command line of growbench shares: run.py's, the sweeps' (bench/sweeps/cli.py) and the bench scripts'.
Refusals in one `error: ...` line (`OneLineArgumentParser`, `error_line`), a stop by a signal in one line
(`stop_line`, with runs/signals.py saying which signal), and --device read one way (`resolve_device`). Light to
import: torch only inside `resolve_device` (run.py's --help and --list, and the sweeps' plans, need no torch).
analysis/ keeps its own parser: it reads runs/record.py and runs/signals.py only (DESIGN.md §1)."""
from __future__ import annotations

import argparse
import sys

from runs.signals import stopped_by


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse with its refusals in the house's form: one `error: ...` line and exit 2. Plain argparse prints its
    whole usage block first (five lines for run.py), burying the line that says what was wrong."""

    def error(self, message):
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def resolve_device(name: str) -> str:
    """--device: `auto` is cuda when a GPU is there, else cpu; an explicit cuda without one is refused."""
    import torch
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name not in ("cpu", "cuda") and not name.startswith("cuda:"):
        raise ValueError(f"unknown device '{name}'; known: auto, cpu, cuda, cuda:N")
    index = name.partition(":")[2]
    if name.startswith("cuda:") and not index.isdigit():
        raise ValueError(f"unknown device '{name}'; known: auto, cpu, cuda, cuda:N (N a device index)")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {name} asked for, but no CUDA device is available; use --device cpu (or auto)")
    if index and int(index) >= torch.cuda.device_count():
        raise ValueError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s), "
                         f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    return name


def stop_line(message: str | None) -> str:
    """The one line for a stop: the interrupt's own message (where the run stood), with the signal named when it was
    not Ctrl-C."""
    text, by = message or "interrupted", stopped_by()
    if by:
        text = text.replace("interrupted", f"interrupted{by}", 1) if "interrupted" in text else f"{by[4:]}: {text}"
    return f"error: {text}"


def error_line(e: BaseException) -> str:
    """The one line a refused or failed run prints: an OS error by its text and path (its args[0] is only the
    errno, e.g. `17`), anything else by its message, folded onto one line."""
    if isinstance(e, OSError) and e.strerror:
        text = f"{e.filename}: {e.strerror}" if e.filename is not None else e.strerror
        if e.filename2 is not None:
            text += f" (-> {e.filename2})"
    else:
        text = str(e.args[0]) if e.args else type(e).__name__
    return "error: " + " ".join(text.split())
