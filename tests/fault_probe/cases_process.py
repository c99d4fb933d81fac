"""Fault-probe cases on processes (tests/fault_probe/__main__.py): runs and sweeps stopped by SIGINT, SIGTERM or SIGHUP, two
sweeps into one --out, absurd sizes under a memory cap, bad --out values, and leftovers of killed writes."""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import time
from pathlib import Path

from tests.fault_probe.harness import (LONG_ARGS, SWEEP_ARGS, TEMPLATE_ARGS, TINY, TRACEBACK, Outcome, Probe, case, changes,
                                 ignore_sigxfsz, incomplete_copy, judge_refusal, judge_signal, judge_success, snapshot)


# ---------------------------------------------------------------------------------------------------------------
# signals

def checkpointed(run: Path, rows: int = 6):
    def ready():
        m = run / "metrics.jsonl"
        return (run / "checkpoint.pt").exists() and m.exists() and m.read_text().count("\n") >= rows
    return ready


def signal_run(p: Probe, signum: int, name: str):
    run = p.dir(name) / "run"
    res = p.runpy(*LONG_ARGS, "--out", str(run), until=checkpointed(run), send=signum, timeout=240)
    verdict = judge_signal(res, signum)
    if verdict[0] == "clean" and not (run / "checkpoint.pt").exists():
        verdict = ("wrote-something", "no checkpoint kept")
    return res, {}, verdict


@case("signals")
def case_run_sigint(p: Probe):
    return signal_run(p, signal.SIGINT, "run-sigint")


@case("signals")
def case_run_sigterm(p: Probe):
    return signal_run(p, signal.SIGTERM, "run-sigterm")


@case("signals")
def case_run_sighup(p: Probe):
    return signal_run(p, signal.SIGHUP, "run-sighup")


def signal_sweep(p: Probe, signum: int, name: str):
    out = p.dir(name) / "sweep"
    run = out / "deit_s_b-tiny" / "scratch-s0"
    res = p.run(["-m", "bench.sweeps", *SWEEP_ARGS, "--out", str(out)], until=lambda: (run / "config.json").exists(),
                send=signum, timeout=240)
    return res, {}, judge_signal(res, signum)


@case("signals")
def case_sweep_sigint(p: Probe):
    return signal_sweep(p, signal.SIGINT, "sweep-sigint")


@case("signals")
def case_sweep_sigterm(p: Probe):
    return signal_sweep(p, signal.SIGTERM, "sweep-sigterm")


@case("signals")
def case_two_sweeps_one_out(p: Probe):
    """Two sweeps on one --out at once: the second must wait for the first or refuse in one line, no tracebacks."""
    out = p.dir("two-sweeps") / "sweep"
    args = ["-m", "bench.sweeps", *SWEEP_ARGS, "--out", str(out)]
    t0 = time.perf_counter()
    a, b = p.popen(args), p.popen(args)
    (ao, ae), (bo, be) = a.communicate(timeout=300), b.communicate(timeout=300)
    ra = Outcome(a.returncode, ao.decode(), ae.decode(), time.perf_counter() - t0)
    rb = Outcome(b.returncode, bo.decode(), be.decode(), time.perf_counter() - t0)
    both = Outcome(ra.rc or rb.rc, ra.stdout + rb.stdout, rb.stderr + ra.stderr, ra.seconds)
    if TRACEBACK in ra.stderr + rb.stderr:
        return both, {}, ("traceback", f"exits {ra.rc}, {rb.rc}")
    if "FAILED" in ra.stdout + rb.stdout:        # a sweep logs a failed run with the last lines of its traceback
        failed = next(line for line in (ra.stdout + rb.stdout).splitlines() if "FAILED" in line)
        return both, {}, ("traceback", f"exits {ra.rc}, {rb.rc}: {failed[-120:]}")
    if ra.rc == rb.rc == 0:
        return both, {}, ("clean", "both succeeded")
    refused = [r for r in (ra, rb) if r.rc != 0]
    if len(refused) == 1 and len(refused[0].error_lines) == 1 and refused[0].rc == 2:
        return both, {}, ("clean", "one refused")
    return both, {}, ("wrong-exit", f"exits {ra.rc}, {rb.rc}")


# ---------------------------------------------------------------------------------------------------------------
# absurd sizes (memory capped, so that a run that tries does not take the machine with it)

def memory_cap():
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))


def absurd(p: Probe, name: str, *settings: str):
    out = p.dir(name) / "run"
    before = snapshot(out.parent, p.work / "gbout")
    res = p.runpy("--method", "scratch", *TINY, "--steps", "2", *[a for s in settings for a in ("--set", s)],
                  "--out", str(out), preexec=memory_cap, timeout=180)
    diff = changes(before, snapshot(out.parent, p.work / "gbout"))
    return res, diff, judge_refusal(res, diff)


@case("absurd sizes")
def case_size_vocab_1e12(p: Probe):
    return absurd(p, "vocab", "small.vocab=1000000000000", "large.vocab=1000000000000")


@case("absurd sizes")
def case_size_layers_1e8(p: Probe):
    return absurd(p, "layers", "large.layers=100000000")


@case("absurd sizes")
def case_size_hidden_1e7(p: Probe):
    return absurd(p, "hidden", "large.hidden=10000002")          # divisible by the 3 heads


@case("absurd sizes")
def case_size_batch_1e9(p: Probe):
    return absurd(p, "batch", "batch_size=1000000000")


# ---------------------------------------------------------------------------------------------------------------
# bad --out, leftovers

@case("bad --out")
def case_sweeps_out_empty(p: Probe):
    cwd = p.dir("sweep-empty-out")
    before = snapshot(cwd)
    res = p.run(["-m", "bench.sweeps", *SWEEP_ARGS, "--out", ""], cwd=cwd,
                env={"PYTHONPATH": str(p.repo)}, timeout=240)
    diff = changes(before, snapshot(cwd))
    return res, diff, judge_refusal(res, diff)


@case("bad --out")
def case_sweeps_out_inside_run(p: Probe):
    run = incomplete_copy(p, "sweep-in-run")
    before = snapshot(run)
    res = p.run(["-m", "bench.sweeps", *SWEEP_ARGS, "--out", str(run / "sweep")], timeout=240)
    diff = changes(before, snapshot(run))
    return res, diff, judge_refusal(res, diff)


@case("bad --out")
def case_run_out_not_utf8(p: Probe):
    d = p.dir("not-utf8")
    before = snapshot(d)
    res = p.run([b"run.py", *[a.encode() for a in TEMPLATE_ARGS], b"--out", os.fsencode(str(d)) + b"/r\xff"])
    diff = changes(before, snapshot(d))
    return res, diff, judge_refusal(res, diff)


@case("bad --out")
def case_run_out_under_file(p: Probe):
    d = p.dir("under-file")
    (d / "f").write_text("x")
    before = snapshot(d)
    res = p.runpy(*TEMPLATE_ARGS, "--out", str(d / "f" / "run"))
    diff = changes(before, snapshot(d))
    return res, diff, judge_refusal(res, diff)


@case("bad --out")
def case_analysis_out_empty(p: Probe):
    root, run = p.record_copy("analysis-empty-out")
    before = snapshot(root.parent)
    res = p.run(["-m", "analysis", "--runs", str(root), "--out", ""], cwd=root.parent)
    diff = changes(before, snapshot(root.parent))
    return res, diff, judge_refusal(res, diff)


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@case("leftovers")
def case_stale_checkpoint_temporary(p: Probe):
    """A checkpoint save killed mid-write leaves .checkpoint.pt.<pid>.tmp: the next start must remove it."""
    run = incomplete_copy(p, "stale-tmp")
    stale = run / f".checkpoint.pt.{dead_pid()}.tmp"
    stale.write_bytes(b"\0" * 1000)
    res = p.runpy(*TEMPLATE_ARGS, "--out", str(run), "--resume")
    if res.rc != 0 or TRACEBACK in res.stderr:
        return res, {}, judge_success(res)
    return res, {}, ("wrote-something", f"{stale.name} left for good") if stale.exists() else ("clean", "")


@case("leftovers")
def case_data_cache_disk_full(p: Probe):
    """A fresh tokenizer cache on a 'full disk' (a file-size limit): one line naming a file, no traceback."""
    d = p.dir("cache-full")

    def limit():
        ignore_sigxfsz()
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, resource.RLIM_INFINITY))
    res = p.runpy("--method", "scratch", "--task", "gpt2_base_medium", "--scale", "tiny", "--quiet", "--steps", "2",
                  "--out", str(d / "run"), env={"GROWBENCH_CACHE": str(d / "cache")}, preexec=limit)
    verdict = judge_refusal(res, {}, rcs=(1,))        # a full disk fails the run (exit 1, README), not bad input
    if verdict[0] == "clean" and "/" not in res.error_lines[0]:
        verdict = ("wrong-exit", "no file named")
    return res, {}, verdict
