"""Memory that stays flat: peak resident memory of the trainer, and how fast it grows per step.

For each task (one per family), the trainer (`runs.trainer.train`, the scratch method: the task's large model from
its own init, exactly as a run trains it) runs N steps and then, in another fresh process, 4N steps, at the given
scale on the CPU (or a GPU), logging rows as the recipe does and evaluating at the end. Each run is its own process,
so one run's heap never carries into the next. Each step, after the optimizer step, the process's resident set size
(/proc/self/statm) is sampled, and on a GPU the device memory torch has allocated.

Reported per task:
- peak: the process's peak resident set size from the start of training to its end (Linux: /proc/self/clear_refs
  "5" resets the high-water mark VmHWM just before `train`), for the N-step and the 4N-step run;
- growth after warm-up: the least-squares slope of the resident size over steps N..4N of the 4N-step run, in MB
  per 1,000 steps (the first N steps are the warm-up: the optimizer's state, the first evaluation, the
  allocator's first pages); and the same from the two peaks, (peak(4N) - peak(N)) / 3N;
- on a GPU, the same slope of torch.cuda.memory_allocated and its peak (max_memory_allocated).

The trainer gives the heap's free pages back at every logged row (runs/allocator.py), so its resident size rises
between two rows and falls at each: the slope over N..4N includes that rise when the window holds few rows, and the
resident size at the row steps (`rss_at_step_mb` at multiples of log_every, sampled before the row's release) is the
envelope to read. A flat trainer's envelope grows by ~0 MB per 1,000 steps; what a long run would add is the slope
times its steps (at the paper's 400K steps, 1 MB per 1,000 steps is 0.4 GB).

`--glibc-defaults` measures the trainer without that release (GROWBENCH_GLIBC_DEFAULTS=1, which runs/allocator.py
honours): the "before" of the fix.

Run: HF_HUB_OFFLINE=1 python bench/perf/memory.py [--steps 25] [--tasks bert_small_base ...] [--scale mini]
     [--threads 1] [--device cpu] [--glibc-defaults]
Writes bench/results/memory-<device type>.json (or --out). DeiT's Fashion-MNIST (Debian's dataset-fashion-mnist)
may be missing: that task is skipped with a one-line note.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from bench.cli import check_result_file, checked_device, non_negative_int, positive_int, refused_as_one_line  # noqa: E402
from bench.result_file import REPO, RESULTS, write_result  # noqa: E402
from bench.perf.resident import MB, peak_mb, reset_peak, resident_mb  # noqa: E402
from runs.cli import OneLineArgumentParser  # noqa: E402

# one task per family: the pairs of the README and of the paper's tables
TASKS = ("bert_small_base", "roberta_small_base", "gpt2_base_medium", "llama_small_base", "deit_s_b")
SEED = 0


def slope_per_1000(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of (step, MB) points, in MB per 1,000 steps (None with fewer than two steps)."""
    if len({s for s, _ in points}) < 2:
        return None
    n = len(points)
    ms = sum(s for s, _ in points) / n
    mv = sum(v for _, v in points) / n
    num = sum((s - ms) * (v - mv) for s, v in points)
    den = sum((s - ms) ** 2 for s, _ in points)
    return 1000 * num / den


def bench_task(task_name: str, scale: str, n: int, steps: int):
    """The task at `scale` with a recipe of `steps` steps: the recipe's rows (every log_every steps, where the trainer
    releases the heap's free pages), one evaluation at the end (the recipe's every eval_every steps would make the
    short runs mostly evaluation), the warm-up capped at `n` (the mini recipes warm up for 100 steps)."""
    from tasks import get_task
    task = get_task(task_name, scale=scale)
    r = task.recipe
    return task.with_(recipe=r.with_(steps=steps, eval_every=steps, warmup=min(r.warmup, n)))


def child(task_name: str, scale: str, n: int, steps: int, device_name: str, threads: int) -> dict:
    """One run of the trainer in this (fresh) process: per-step resident (and device) memory."""
    import torch

    from methods import get_method
    from models import get_family
    from runs import allocator
    from runs.ledger import FlopsLedger
    from runs.record import RunWriter
    from runs.trainer import train
    if threads:
        torch.set_num_threads(threads)
    device = torch.device(device_name)
    task = bench_task(task_name, scale, n, steps)
    data = task.pretrain_data()
    torch.manual_seed(SEED)
    model = get_family(task.family).build(task.large)
    method = get_method("scratch")
    samples: list[tuple[int, float, float | None]] = []
    cuda = device.type == "cuda"
    set_step = method.set_step

    def sampled(model_, step, total):       # called by the trainer after every optimizer step
        samples.append((step, resident_mb(), torch.cuda.memory_allocated(device) / MB if cuda else None))
        return set_step(model_, step, total)
    method.set_step = sampled
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    before = resident_mb()
    exact = reset_peak()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        writer = RunWriter(Path(tmp), {"bench": "memory"})
        try:
            train(model, task, method, data, FlopsLedger(), writer, seed=SEED, device=device, progress=False)
        finally:
            writer.close()
    seconds = time.perf_counter() - start
    trained = [(s, rss, dev) for s, rss, dev in samples if s >= 1]
    after_warmup = [(s, rss) for s, rss, _ in trained if s >= n]
    row = {"task": task_name, "family": task.family, "model": task.large.short(), "steps": steps,
           "batch": task.recipe.batch_size, "seq": task.recipe.seq_len if data.kind == "text" else None,
           "log_every": task.recipe.log_every, "seconds": round(seconds, 1), "rss_before_train_mb": round(before, 1),
           "peak_rss_mb": round(peak_mb(), 1), "peak_exact": exact,
           "rss_at_step_mb": {str(s): round(rss, 1) for s, rss, _ in trained if s in (1, n, 2 * n, 3 * n, 4 * n)},
           "rss_growth_mb_per_1000_steps": slope_per_1000(after_warmup),
           "allocator": allocator.describe(), "torch_threads": torch.get_num_threads(), "device": str(device)}
    if cuda:
        row["peak_allocated_mb"] = round(torch.cuda.max_memory_allocated(device) / MB, 1)
        row["allocated_growth_mb_per_1000_steps"] = slope_per_1000([(s, dev) for s, _, dev in trained if s >= n])
    return row


def run_child(task: str, args, steps: int) -> dict:
    cmd = [sys.executable, __file__, "--child", task, str(steps), "--steps", str(args.steps), "--scale", args.scale,
           "--threads", str(args.threads), "--device", args.device]
    env = {**os.environ, **({"GROWBENCH_GLIBC_DEFAULTS": "1"} if args.glibc_defaults else {})}
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        err = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"task": task, "steps": steps, "error": err}
    return json.loads(lines[-1][len("RESULT "):])


def fmt(value, spec: str = ".0f") -> str:
    return "-" if value is None else format(value, spec)


def main(argv=None) -> int:
    ap = OneLineArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", default=list(TASKS))
    ap.add_argument("--steps", type=positive_int, default=25, help="N: each task runs N and 4N steps; growth is "
                    "measured over steps N..4N (default 25: the five mini tasks in ~15 minutes on one idle core)")
    ap.add_argument("--scale", default="mini")
    ap.add_argument("--threads", type=non_negative_int, default=1, help="torch threads in each run (0: torch's default)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--glibc-defaults", action="store_true", help="the trainer without its release of the "
                    "heap's free pages (GROWBENCH_GLIBC_DEFAULTS=1): the trainer before runs/allocator.py")
    ap.add_argument("--out", default=None, help="result file (default bench/results/memory-<device type>.json)")
    ap.add_argument("--child", nargs=2, metavar=("TASK", "STEPS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        task, steps = args.child[0], int(args.child[1])
        print("RESULT " + json.dumps(child(task, args.scale, args.steps, steps, args.device, args.threads)), flush=True)
        return 0
    with refused_as_one_line():
        import torch
        from tasks import get_task
        device = checked_device(args.device)
        kind = torch.device(device).type
        out = Path(args.out) if args.out else RESULTS / f"memory-{kind}.json"
        check_result_file(out)
        tasks = [get_task(t, scale=args.scale) for t in args.tasks]       # an unknown task or scale: one line
    args.device = device
    rows, skipped = [], []
    for task in tasks:
        try:            # DeiT's Fashion-MNIST is a Debian package a machine may lack: a note, not a failure
            task.check_data()
        except (FileNotFoundError, ValueError) as e:
            skipped.append({"task": task.name, "reason": str(e)})
            print(f"{task.name}: skipped, {e}", flush=True)
            continue
        runs = {}
        for steps in (args.steps, 4 * args.steps):
            runs[steps] = run_child(task.name, args, steps)
            if "error" in runs[steps]:
                print(f"{task.name} {steps} steps: failed: {runs[steps]['error']}", flush=True)
        short, long = runs[args.steps], runs[4 * args.steps]
        row = {"task": task.name, "runs": list(runs.values())}
        if "error" not in short and "error" not in long:
            row.update(peak_rss_mb={str(args.steps): short["peak_rss_mb"], str(4 * args.steps): long["peak_rss_mb"]},
                       rss_growth_mb_per_1000_steps=long["rss_growth_mb_per_1000_steps"],
                       peak_growth_mb_per_1000_steps=(long["peak_rss_mb"] - short["peak_rss_mb"]) / (3 * args.steps) * 1000)
            if kind == "cuda":
                row.update(peak_allocated_mb=long["peak_allocated_mb"],
                           allocated_growth_mb_per_1000_steps=long["allocated_growth_mb_per_1000_steps"])
            gpu = (f", allocated peak {fmt(row.get('peak_allocated_mb'))} MB, "
                   f"{fmt(row.get('allocated_growth_mb_per_1000_steps'), '.1f')} MB/1000 steps" if kind == "cuda" else "")
            print(f"{task.name:20s} peak RSS {short['peak_rss_mb']:7.0f} MB ({args.steps} steps) "
                  f"{long['peak_rss_mb']:7.0f} MB ({4 * args.steps} steps); growth after step {args.steps}: "
                  f"{fmt(row['rss_growth_mb_per_1000_steps'], '.1f')} MB/1000 steps (from the peaks "
                  f"{row['peak_growth_mb_per_1000_steps']:.1f}){gpu}", flush=True)
        rows.append(row)
    failed = [f"{r['task']} {run['steps']}" for r in rows for run in r["runs"] if "error" in run]
    if failed:      # a result file of error rows would replace the committed one: nothing is written
        print(f"error: {len(failed)} measurement(s) failed ({', '.join(failed)}); nothing written", file=sys.stderr)
        return 1
    write_result(out, {"scale": args.scale, "n": args.steps, "device": device, "threads": args.threads,
                       "glibc_defaults": args.glibc_defaults, "rows": rows, "skipped": skipped})
    return 0


if __name__ == "__main__":
    sys.exit(main())
