"""Memory that stays flat (issue 64): the trainer keeps nothing per step, and it gives the C heap's free pages back
at every logged row (runs/allocator.py). Mechanisms only, no timing: bench/perf/memory.py measures the curves."""
import ctypes
import gc
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from methods import get_method
from models import get_family
from runs import allocator
from runs.ledger import FlopsLedger
from runs.record import RunWriter
from runs.trainer import train
from tasks import get_task

ROOT = Path(__file__).resolve().parents[1]


def tiny_run(task_name: str, steps: int, at_step=None, eval_every: int = 4, log_every: int = 2):
    """The trainer on `task_name` at tiny scale for `steps` steps; `at_step(step)` after every optimizer step."""
    task = get_task(task_name, "tiny")
    task = task.with_(recipe=task.recipe.with_(steps=steps, eval_every=eval_every, log_every=log_every))
    method = get_method("scratch")
    if at_step is not None:
        set_step = method.set_step

        def hooked(model, step, total):
            at_step(step)
            return set_step(model, step, total)
        method.set_step = hooked
    torch.manual_seed(0)
    model = get_family(task.family).build(task.large)
    with tempfile.TemporaryDirectory() as tmp:
        writer = RunWriter(Path(tmp), {"test": "memory"})
        try:
            train(model, task, method, task.pretrain_data(), FlopsLedger(), writer, seed=0, device=torch.device("cpu"),
                  progress=False)
        finally:
            writer.close()


def live_counts() -> tuple[int, int]:
    """(live tensors, Python objects the collector tracks), after a collection."""
    gc.collect()
    objects = gc.get_objects()
    return sum(1 for o in objects if isinstance(o, torch.Tensor)), len(objects)


@pytest.mark.parametrize("task_name", ["bert_small_base", "gpt2_base_medium"])
def test_the_trainer_keeps_nothing_per_step(task_name):
    """No more live tensors and Python objects after step 2k than after step k: no history of losses,
    batches or graphs piles up. k and 2k sit alike between rows and evaluations (both multiples of eval_every),
    past the first evaluations and checkpoints (whose own objects are collected in the steps after them), and the
    masked LM's batches mask a different count each step."""
    k = 16
    counts = {}
    tiny_run(task_name, 2 * k + 8, at_step=lambda step: counts.__setitem__(step, live_counts()) if step in (k, 2 * k)
             else None)
    (tensors_k, objects_k), (tensors_2k, objects_2k) = counts[k], counts[2 * k]
    assert tensors_2k == tensors_k, f"{tensors_2k - tensors_k} more live tensors after step {2 * k} than after {k}"
    # not always equal: under pytest a few objects of the run's start (warnings, imports) are collected later
    assert objects_2k <= objects_k, f"{objects_2k - objects_k} more Python objects after step {2 * k} than after {k}"


def test_the_trainer_releases_the_free_heap_at_every_row(monkeypatch):
    """malloc_trim runs once a logged row (the rows of steps 2, 4, 6, 8 here), not once a step."""
    steps_at_release, current = [], {"step": 0}
    monkeypatch.setattr(allocator, "release_free_heap", lambda: steps_at_release.append(current["step"]) or True)
    tiny_run("bert_small_base", 8, at_step=lambda step: current.__setitem__("step", step), log_every=2)
    assert steps_at_release == [2, 4, 6, 8]


def resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


needs_glibc = pytest.mark.skipif(not allocator.enabled(), reason="glibc's malloc_trim: Linux with glibc only")


@needs_glibc
def test_release_gives_back_free_pages_inside_the_heap():
    """What the trainer relies on: pages freed in the middle of the heap (a live block above them, so that trimming
    only the top could not give them back) stop being resident. 64 KiB blocks come from the heap, not from mmap
    (glibc's threshold starts at 128 KiB and only rises)."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    block, count = 64 * 1024, 4096                  # 256 MiB
    blocks = [libc.malloc(block) for _ in range(count)]
    assert all(blocks)
    for b in blocks:
        ctypes.memset(b, 1, block)                  # resident now
    for b in blocks[:-1]:
        libc.free(b)                                # all but the last, which pins the heap's top
    before = resident_mb()
    assert allocator.release_free_heap()
    released = before - resident_mb()
    libc.free(blocks[-1])
    assert released > 0.75 * block * (count - 1) / 2**20, f"only {released:.0f} MB of 256 MB freed went back"


def test_release_does_nothing_where_it_cannot_or_is_turned_off(monkeypatch):
    """Not glibc (macOS, musl): no malloc_trim to call, no error; GROWBENCH_GLIBC_DEFAULTS=1: glibc left alone."""
    monkeypatch.setattr(allocator, "_glibc", lambda: None)
    assert allocator.release_free_heap() is False
    assert allocator.describe()["release"] == "none (not glibc)"
    monkeypatch.undo()
    monkeypatch.setenv(allocator.OFF, "1")
    assert allocator.release_free_heap() is False
    if allocator._glibc() is not None:
        assert allocator.describe()["release"] == f"off ({allocator.OFF}=1)"


@pytest.mark.parametrize("args, needle", [(["--tasks", "bert_smal_base"], "unknown task"), (["--steps", "0"], "--steps"),
                                          (["--scale", "huge"], "huge")])
def test_memory_benchmark_refuses_bad_input_in_one_line(args, needle, tmp_path, capsys):
    from bench.perf import memory
    out = tmp_path / "memory.json"
    with pytest.raises(SystemExit) as stop:
        memory.main([*args, "--out", str(out)])
    assert stop.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], lines
    assert not out.exists()


def test_memory_benchmark_measures_a_tiny_run(tmp_path):
    """One task at tiny scale, N=4: both runs measured, each in its own process, a result written with them."""
    out = tmp_path / "memory.json"
    done = subprocess.run([sys.executable, "bench/perf/memory.py", "--tasks", "gpt2_base_medium", "--scale", "tiny",
                           "--steps", "4", "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    (row,) = result["rows"]
    assert [r["steps"] for r in row["runs"]] == [4, 16]
    assert set(row["peak_rss_mb"]) == {"4", "16"} and all(v > 0 for v in row["peak_rss_mb"].values())
    assert row["rss_growth_mb_per_1000_steps"] is not None
    assert row["runs"][1]["allocator"]["release"] == allocator.describe()["release"]
