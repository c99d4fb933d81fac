"""Grow time and peak memory of every registered growth method on the paper-scale pairs.

For each pair (BERT-Base -> BERT-Large, GPT-2 Base -> Medium, DeiT-S -> DeiT-B; paper Table 4 sizes) and each
method in the registry, a fresh Python process builds the small model (random weights: growing costs the same
whatever the values) and times `method.grow(small, task)` -- the initialisation only. LiGO grows with its
initial operator (the 100-step operator fit is not part of this measurement; its cost is bench/perf/ligo_fit_cost.py's).
KI's grow is the large model's random init (its teacher is the small model it is handed); MSLT's is its first
stage's model; scratch's is the random init every saving is measured against.

Peak memory: the process's peak resident set size during grow, above its resident size just before (Linux:
/proc/self/clear_refs "5" resets the high-water mark VmHWM, which is read after grow). A fresh process per
(pair, method), so peaks never mix. The grown model itself (fp32) is part of the peak; its size is listed too.

Run: HF_HUB_OFFLINE=1 python bench/perf/grow_cost.py [--pairs bert_base_large ...] [--methods ligo ...] [--threads 1]
Writes bench/results/grow_cost.json (or --out).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.cli import check_known, check_result_file, non_negative_int, refused_as_one_line  # noqa: E402
from bench.perf.resident import reset_peak, status_kib  # noqa: E402
from bench.result_file import REPO, RESULTS, write_result  # noqa: E402
from runs.cli import OneLineArgumentParser  # noqa: E402

PAIRS = ("bert_base_large", "gpt2_base_medium", "deit_s_b")
def child(pair: str, method_name: str, threads: int) -> dict:
    """One measurement in this (fresh) process."""
    import gc

    import torch

    from methods import get_method
    from models import get_family
    from tasks import get_task
    if threads:
        torch.set_num_threads(threads)
    task = get_task(pair, scale="paper")
    family = get_family(task.family)
    torch.manual_seed(0)
    small = family.build(task.small).eval()
    method = get_method(method_name)
    gc.collect()
    exact = reset_peak()
    before = status_kib("VmRSS")
    start = time.perf_counter()
    large = method.grow(small, task)
    seconds = time.perf_counter() - start
    peak = status_kib("VmHWM")
    params = sum(p.numel() for p in large.parameters())
    return {"pair": pair, "method": method_name, "small": task.small.short(), "large": task.large.short(),
            "grow_s": seconds, "peak_rss_delta_mib": (peak - before) / 1024, "rss_before_mib": before / 1024,
            "peak_exact": exact, "large_params": params, "large_fp32_mib": params * 4 / 2**20,
            "small_params": sum(p.numel() for p in small.parameters()), "torch_threads": torch.get_num_threads(),
            "device": "cpu"}


def main(argv=None):
    from methods import METHODS
    ap = OneLineArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", nargs="+", default=list(PAIRS))
    ap.add_argument("--methods", nargs="+", default=sorted(METHODS))
    ap.add_argument("--threads", type=non_negative_int, default=1, help="torch threads in each measurement (0: default)")
    ap.add_argument("--out", default=str(RESULTS / "grow_cost.json"))
    ap.add_argument("--child", nargs=2, metavar=("PAIR", "METHOD"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(*args.child, args.threads)), flush=True)
        return
    with refused_as_one_line():      # a typo was a row of 'error' in the result file, and exit 0
        check_known("pair", args.pairs, PAIRS)
        check_known("method", args.methods, METHODS)
        check_result_file(args.out)
    from methods import refusal
    from tasks import get_task
    rows = []
    for pair in args.pairs:
        for name in args.methods:
            why = refusal(name, get_task(pair, scale="paper"))
            if why:     # a pair the method refuses to grow (LEMON: post-LN BERT in depth) is a row saying so
                rows.append({"pair": pair, "method": name, "not_applicable": why})
                print(f"{pair:17s} {name:14s} not applicable: {why}", flush=True)
                continue
            cmd = [sys.executable, __file__, "--child", pair, name, "--threads", str(args.threads)]
            done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
            lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
            if done.returncode != 0 or not lines:
                err = (done.stderr.strip().splitlines() or ["no output"])[-1]
                row = {"pair": pair, "method": name, "error": err}
                print(f"{pair:17s} {name:14s} failed: {err}", flush=True)
            else:
                row = json.loads(lines[-1][len("RESULT "):])
                print(f"{pair:17s} {name:14s} grow {row['grow_s']:7.2f} s   peak +{row['peak_rss_delta_mib']:7.0f} MiB "
                      f"(grown model {row['large_fp32_mib']:.0f} MiB fp32)", flush=True)
            rows.append(row)
    failed = [f"{r['pair']} {r['method']}" for r in rows if "error" in r]
    if failed:      # a result file of error rows would replace the committed one: nothing is written
        print(f"error: {len(failed)} measurement(s) failed ({', '.join(failed)}); nothing written", file=sys.stderr)
        return 1
    write_result(args.out, {"rows": rows, "threads": args.threads})
    return 0


if __name__ == "__main__":
    sys.exit(main())
