"""Fault probe: bad input and faults of every class, each built in a temporary folder at the tiny
scale, run as a subprocess, and judged by what it said, how it exited and what it left on disk.

    HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 python -m tests.fault_probe [--repo DIR] [--only SUBSTRING ...]
        [--out bench/results/fault_probe.json]

--repo runs another checkout's code (a `git worktree` of an earlier commit: the probe sets cwd and PYTHONPATH to
it), so that one probe measures the code before and after a change. Classes: bad records (analysis of a record
of the wrong JSON types or contradicting itself), resume identity, overwrite, analysis crashes, signals, absurd
sizes, bad --out, leftovers of killed writes. Every case is classified:

    clean            what should happen happened: a refusal in one `error:` line with the right exit code and
                     nothing written, or (for the cases that must succeed) success with the promised result
    silent           accepted what it should have refused, or stopped without a word
    traceback        a Python traceback on stderr
    wrote-something  refused or stopped, but files were created, changed or deleted that should not have been
                     (or a killed write left a half-written or stale file that a later command trips on)
    wrong-exit       one clear line, but the exit code is not the one promised (130 for Ctrl-C, 128+N for a signal)

Prints a table (case, class, exit code, first stderr line, what changed) and the counts; writes --out as JSON.
A case takes a few seconds (a subprocess importing torch, two training steps); the whole probe a few minutes.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]

# importing the case modules registers their cases, in this order (the order of the printed table and of --out)
from tests.fault_probe import cases_records as fault_cases_records  # noqa: E402,F401,I001
from tests.fault_probe import cases_process as fault_cases_process  # noqa: E402,F401,I001
from tests.fault_probe.harness import CASES, Probe  # noqa: E402


def run_all(repo: Path, only: list[str] | None, keep: bool) -> list[dict]:
    work = Path(tempfile.mkdtemp(prefix="fault-probe-"))
    probe = Probe(repo, work)
    rows = []
    try:
        for c in CASES:
            if only and not any(o in c.name or o in c.kind for o in only):
                continue
            t0 = time.perf_counter()
            try:
                res, diff, (verdict, note) = c.fn(probe)
            except Exception as e:       # the probe's own set-up failed: say so, go on
                rows.append({"case": c.name, "class": c.kind, "verdict": "probe-error", "rc": None,
                             "first_stderr": f"{type(e).__name__}: {e}"[:300], "note": "", "wrote": {}})
                print(f"  {c.name}: probe error {type(e).__name__}: {e}", file=sys.stderr)
                continue
            row = {"case": c.name, "class": c.kind, "verdict": verdict, "rc": res.rc,
                   "first_stderr": res.first_line[:300], "error_line": (res.error_lines or [""])[0][:300],
                   "note": note, "seconds": round(time.perf_counter() - t0, 1),
                   "wrote": {k: [str(Path(x).relative_to(work)) if x.startswith(str(work)) else x for x in v][:8]
                             for k, v in diff.items() if v}}
            rows.append(row)
            print(f"{verdict:15s} {c.name:38s} rc={res.rc!s:4s} {row['first_stderr'][:110]}", flush=True)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")
    return rows


def main(argv=None) -> int:
    from bench.result_file import write_result
    p = argparse.ArgumentParser(prog="python -m tests.fault_probe", description=__doc__.split("\n")[0])
    p.add_argument("--repo", type=Path, default=HERE, help="checkout whose code is probed (default: this one)")
    p.add_argument("--only", nargs="+", help="cases whose name or class contains one of these")
    p.add_argument("--out", default=str(HERE / "bench" / "results" / "fault_probe.json"))
    p.add_argument("--keep", action="store_true", help="keep the temporary folder (to look at what was written)")
    p.add_argument("--update", action="store_true", help="with --only: replace those cases in the existing --out "
                   "file (the others kept as they were) and count again")
    args = p.parse_args(argv)
    if not args.out.strip():
        print("error: --out is empty; give a file", file=sys.stderr)
        return 2
    repo = args.repo.resolve()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    t0 = time.perf_counter()
    rows = run_all(repo, args.only, args.keep)
    extra = {}
    if args.update and Path(args.out).is_file():
        fresh = {r["case"]: r for r in rows}
        earlier = json.loads(Path(args.out).read_text())
        extra = {"updated": sorted({*earlier.get("updated", []), *fresh}), "updated_commit": commit,
                 "full_run": earlier.get("full_run", {k: earlier.get(k) for k in ("commit", "seconds", "created")})}
        rows = [fresh.pop(r["case"], r) for r in earlier["cases"]] + list(fresh.values())
    counts = {}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    print(f"\n{len(rows)} cases in {time.perf_counter() - t0:.0f} s: "
          + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    write_result(args.out, {"repo": str(repo), "commit": commit, "counts": counts, "cases": rows,
                            "seconds": round(time.perf_counter() - t0, 1), **extra})
    return 0


if __name__ == "__main__":
    sys.exit(main())
