"""Handing the C heap's free pages back to the system during training, so that a long run's resident memory stays
flat instead of growing step after step.

The cause, by measurement (bench/perf/memory.py; the figures are in bench/results/memory-cpu.json and the issue's report).
On glibc the trainer's resident memory grew every step while the bytes malloc had handed out stayed flat: mallinfo2's
`uordblks` (in use) stayed level and `fordblks` (free, inside the heap) grew by what the resident size grew. Nothing
of ours was kept: the count of live tensors and Python objects was the same from step to step
(tests/test_memory.py). A masked LM's head decodes only the masked positions, a different count every batch
(models/bert.py), so some of every step's tensors have a size no earlier step had. PyTorch takes CPU tensors from
posix_memalign; glibc before 2.38 frees the small pieces memalign cuts off a chunk into the per-thread cache (tcache),
where the heap cannot merge them with their free neighbours (glibc bug 30723, fixed in 2.38), so freed tensors leave
holes that stay apart, a slightly larger tensor fits none of them, and the heap grows. With masks of a fixed count,
or with the cache off (GLIBC_TUNABLES=glibc.malloc.tcache_count=0:glibc.malloc.mxfast=0, which only the environment
of a starting process can set), the resident size stayed flat.

The fix: `malloc_trim(0)` after every logged row (runs/trainer.py). glibc's malloc_trim(3): "Since glibc 2.8 this
function frees memory in all arenas and in all chunks with whole free pages", that is madvise(MADV_DONTNEED) on the
free pages inside the heap, not only at its top: the holes stop being resident, and a page a later step reuses comes
back on first touch. Between two rows the resident size can still grow by what those steps fragment; at each row it
falls back. Not chosen, though documented too: a fixed M_MMAP_THRESHOLD (mallopt(3); setting it turns off glibc's
dynamic threshold, which the first large tensor freed raises to that tensor's size, after which every tensor comes
from the heap). At 128 KiB it kept the curve flat, but each large tensor became a fresh mmap, page-faulted in every
step, and a mini BERT step took much more CPU time (bench/README.md section 15); at 1 or 4 MiB the growth stayed.

Where not. malloc_trim is glibc's: on macOS, musl or Windows there is nothing to call and `release_free_heap` does
nothing. GROWBENCH_GLIBC_DEFAULTS=1 in the environment turns it off (bench/perf/memory.py --glibc-defaults measures the
trainer without it).
"""
from __future__ import annotations

import ctypes
import functools
import os
import platform

OFF = "GROWBENCH_GLIBC_DEFAULTS"     # set to 1: leave glibc's heap alone


@functools.cache
def _glibc():
    """(glibc's malloc_trim, glibc's version), or None where the C library is not glibc (or has no malloc_trim)."""
    if platform.system() != "Linux":
        return None
    name, version = platform.libc_ver()
    if name != "glibc":
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim      # the process's own C library
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim, version


def enabled() -> bool:
    """Whether `release_free_heap` acts here: glibc, and not turned off by GROWBENCH_GLIBC_DEFAULTS=1."""
    return _glibc() is not None and os.environ.get(OFF, "").strip().lower() not in ("1", "true", "yes")


def release_free_heap() -> bool:
    """Give the free pages inside the C heap back to the system (glibc malloc_trim(0)); the memory in use is not
    touched. False where nothing was done (not glibc, or turned off)."""
    if not enabled():
        return False
    trim, _ = _glibc()
    trim(0)
    return True


def describe() -> dict:
    """What this process does about its heap, for a benchmark's result file."""
    found = _glibc()
    if found is None:
        return {"libc": platform.libc_ver()[0] or platform.system(), "release": "none (not glibc)"}
    return {"libc": f"glibc {found[1]}",
            "release": "malloc_trim(0) after every logged row" if enabled() else f"off ({OFF}=1)"}
