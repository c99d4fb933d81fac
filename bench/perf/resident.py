"""A process's resident memory as the kernel reports it (Linux /proc; elsewhere what getrusage gives), for the
benchmarks that measure it (bench/perf/grow_cost.py, bench/perf/memory.py)."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

MB = 2 ** 20
STATUS = Path("/proc/self/status")


def status_kib(field: str) -> int:
    """A field of /proc/self/status in KiB (VmRSS: resident now, VmHWM: its high-water mark)."""
    return int(re.search(rf"{field}:\s+(\d+)", STATUS.read_text()).group(1))


def reset_peak() -> bool:
    """Reset the kernel's high-water mark of resident memory (VmHWM) to the current size; False where it cannot."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def resident_mb() -> float:
    """The resident set size now (Linux /proc/self/statm; elsewhere the peak so far, which is all getrusage gives)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MB
    except OSError:
        import resource
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / (MB if sys.platform == "darwin" else 1024)       # bytes on macOS, KiB on Linux


def peak_mb() -> float:
    """The high-water mark of resident memory since the start or the last reset_peak, in MB."""
    try:
        return status_kib("VmHWM") / 1024
    except (OSError, AttributeError):
        return resident_mb()
