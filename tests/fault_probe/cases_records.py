"""Fault-probe cases on records (tests/fault_probe/__main__.py): analysis of a record of the wrong JSON types or
contradicting itself, resuming from a checkpoint or record that is not this run's, --overwrite, and analysis
crashed, killed, interrupted or out of disk in the middle of writing."""
from __future__ import annotations

import json
import resource
import shutil
import signal
import time
from pathlib import Path

from tests.fault_probe.harness import (TEMPLATE_ARGS, TINY, TRACEBACK, Outcome, Probe, case, changes, ignore_sigxfsz,
                                 incomplete_copy, judge_refusal, judge_signal, judge_success, snapshot)


# ---------------------------------------------------------------------------------------------------------------
# bad records: analysis of one record, mutated; it must be left out with one line (no complete run -> exit 1)

def mutate_json(path: Path, fn) -> None:
    obj = json.loads(path.read_text())
    obj = fn(obj) or obj
    path.write_text(json.dumps(obj))


def mutate_metrics(path: Path, fn) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows = fn(rows) or rows
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def set_path(obj, keys: str, value):
    *head, last = keys.split(".")
    for k in head:
        obj = obj[k]
    obj[last] = value


BAD_RECORDS = {
    # name: (file, mutation)
    "config-task-is-list": ("config.json", lambda c: set_path(c, "task", ["bert_small_base"])),
    "config-task-name-number": ("config.json", lambda c: set_path(c, "task.name", 7)),
    "config-method-is-string": ("config.json", lambda c: set_path(c, "method", "scratch")),
    "config-seed-string": ("config.json", lambda c: set_path(c, "seed", "zero")),
    "config-small-is-list": ("config.json", lambda c: set_path(c, "small", [1, 2])),
    "config-reference-is-list": ("config.json", lambda c: set_path(c, "reference", [4.2])),
    "config-recipe-is-list": ("config.json", lambda c: set_path(c, "task.recipe", [1, 2])),
    "config-distributed-string": ("config.json", lambda c: set_path(c, "distributed", "ddp")),
    "config-method-config-list": ("config.json", lambda c: set_path(c, "method.config", [0])),
    "config-other-family": ("config.json", lambda c: set_path(c, "task.family", "vit")),
    "summary-is-list": ("summary.json", lambda s: [s]),
    "summary-flops-string": ("summary.json", lambda s: set_path(s, "flops", str(s["flops"]))),
    "summary-wall-string": ("summary.json", lambda s: set_path(s, "wall", "fast")),
    "metrics-row-is-list": ("metrics.jsonl", lambda rows: rows[:1] + [list(rows[1].items())] + rows[2:]),
    "metrics-flops-string": ("metrics.jsonl", lambda rows: set_path(rows[1], "flops", str(rows[1]["flops"]))),
    "metrics-step-string": ("metrics.jsonl", lambda rows: set_path(rows[1], "step", "1")),
    "metrics-full-model-string": ("metrics.jsonl", lambda rows: set_path(rows[-1], "full_model", "yes")),
    "metrics-flops-decrease": ("metrics.jsonl", lambda rows: set_path(rows[-1], "flops", rows[1]["flops"] / 2)),
    "metrics-eval-loss-negative": ("metrics.jsonl", lambda rows: set_path(rows[2], "eval_loss", -1.0)),
    "metrics-twins-list": ("metrics.jsonl", lambda rows: set_path(rows[2], "twins", [0.1])),
    "summary-step-disagrees": ("summary.json", lambda s: set_path(s, "step", 3)),
    "eval-tasks-is-list": ("eval.json", lambda e: {"suites": {"mini": {"tasks": ["sst2"]}}}),
    "eval-metrics-string": ("eval.json", lambda e: {"suites": {"mini": {"tasks": {"sst2": {"metrics": "90"}}}}}),
    "eval-suites-is-list": ("eval.json", lambda e: {"suites": ["mini"]}),
}


def bad_record_case(name: str, file: str, fn):
    def run_case(p: Probe):
        root, run = p.record_copy(name)
        path = run / file
        if file == "eval.json":
            path.write_text("{}")
        (mutate_metrics if file.endswith(".jsonl") else mutate_json)(path, fn)
        out = root.parent / "analysis"
        before = snapshot(root.parent)
        res = p.analysis(root, out)
        diff = changes(before, snapshot(root.parent))
        if TRACEBACK in res.stderr:
            return res, diff, ("traceback", "")
        named = any(str(run) in line for line in res.stderr.splitlines())
        if file == "eval.json":        # the run stays, its downstream scores are left out with a line
            ok = res.rc == 0 and named
            return res, diff, ("clean", "") if ok else ("silent", "eval.json not reported")
        if res.rc == 0:
            return res, diff, ("silent", "record used" + ("" if named else ", not reported"))
        if not named:
            return res, diff, ("silent", f"exit {res.rc}, record not named")
        return res, diff, ("wrote-something", "") if (out.exists() and any(out.iterdir())) else ("clean", "")
    run_case.__name__ = f"case_record_{name}"
    return run_case


for _name, (_file, _fn) in BAD_RECORDS.items():
    case("bad record")(bad_record_case(_name, _file, _fn))


@case("bad record")
def case_record_valid_control(p: Probe):
    root, run = p.record_copy("valid")
    out = root.parent / "analysis"
    res = p.analysis(root, out)
    return res, {}, judge_success(res)


@case("bad record")
def case_record_eval_json_corrupt(p: Probe):
    root, run = p.record_copy("evalcorrupt")
    (run / "eval.json").write_text("{\"suites\": ")
    res = p.analysis(root, root.parent / "analysis")
    named = any(str(run) in line and "eval.json" in line for line in res.stderr.splitlines())
    return res, {}, judge_success(res, None if named else "a corrupt eval.json dropped without a word")


@case("bad record")
def case_record_metrics_gap(p: Probe):
    """The middle evaluation row removed: the curve has a gap of steps the record never explains."""
    root, run = p.record_copy("gap")
    mutate_metrics(run / "metrics.jsonl", lambda rows: [r for r in rows if r["step"] not in (1, 2)])
    res = p.analysis(root, root.parent / "analysis")
    if TRACEBACK in res.stderr:
        return res, {}, ("traceback", "")
    return res, {}, ("silent", "a gap of steps accepted") if res.rc == 0 else ("clean", "")


# ---------------------------------------------------------------------------------------------------------------
# resume identity

@case("resume identity")
def case_resume_foreign_checkpoint(p: Probe):
    """--resume with a checkpoint copied from another run (another lr): must be refused."""
    run = incomplete_copy(p, "foreign-ckpt")
    other = run.parent / "other"
    res = p.runpy(*TEMPLATE_ARGS, "--set", "lr=0.003", "--out", str(other))
    assert res.rc == 0, res.stderr
    shutil.copy2(other / "checkpoint.pt", run / "checkpoint.pt")
    before = snapshot(run)
    res = p.runpy(*TEMPLATE_ARGS, "--out", str(run), "--resume")
    return res, changes(before, snapshot(run)), judge_refusal(res, changes(before, snapshot(run)))


@case("resume identity")
def case_resume_after_rows_lost(p: Probe):
    """A complete run with its summary and last rows removed: --resume must not 'finish' it without them."""
    run = incomplete_copy(p, "rows-lost")
    mutate_metrics(run / "metrics.jsonl", lambda rows: rows[:2])
    before = snapshot(run)
    res = p.runpy(*TEMPLATE_ARGS, "--out", str(run), "--resume")
    diff = changes(before, snapshot(run))
    if res.rc == 0:
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        steps = [r["step"] for r in rows]
        whole = steps == list(range(0, 5)) and "n/a" not in res.stdout
        return res, diff, ("clean", "rows made again") if whole else ("silent", f"resumed to steps {steps}")
    return res, diff, judge_refusal(res, diff)


@case("resume identity")
def case_resume_config_wrong_types(p: Probe):
    run = incomplete_copy(p, "resume-types")
    mutate_json(run / "config.json", lambda c: set_path(c, "task", "bert_small_base"))
    before = snapshot(run)
    res = p.runpy(*TEMPLATE_ARGS, "--out", str(run), "--resume")
    diff = changes(before, snapshot(run))
    return res, diff, judge_refusal(res, diff)


@case("resume identity")
def case_seed_reaches_method(p: Probe):
    """--seed 1 must change a growth method's own draws: LiGO's recorded seed must not stay the default 0."""
    out = p.dir("seed") / "run"
    res = p.runpy("--method", "ligo", *TINY, "--steps", "0", "--seed", "1", "--out", str(out))
    if res.rc != 0:
        return res, {}, judge_success(res)
    method = json.loads((out / "config.json").read_text())["method"]["config"]
    seed = method.get("seed")
    return res, {}, ("silent", f"method.config.seed {seed} under --seed 1") if seed == 0 else ("clean", "")


@case("resume identity")
def case_out_inside_another_run(p: Probe):
    run = incomplete_copy(p, "nested-out")
    inner = run / "inner"
    before = snapshot(run)
    res = p.runpy(*TEMPLATE_ARGS, "--out", str(inner))
    diff = changes(before, snapshot(run))
    return res, diff, judge_refusal(res, diff)


# ---------------------------------------------------------------------------------------------------------------
# overwrite

@case("overwrite")
def case_overwrite_keeps_foreign_files(p: Probe):
    """--overwrite replaces the run's own files; a user's notes and a run nested inside are not the old run's."""
    run = incomplete_copy(p, "overwrite-notes")
    (run / "notes.txt").write_text("my notes\n")
    shutil.copytree(run, run / "nested", ignore=shutil.ignore_patterns("nested", "checkpoint.pt", "model"))
    res = p.runpy(*TEMPLATE_ARGS, "--out", str(run), "--overwrite")
    lost = [n for n in ("notes.txt", "nested/config.json") if not (run / n).exists()]
    if TRACEBACK in res.stderr:
        return res, {}, ("traceback", "")
    if lost:
        return res, {"deleted": lost}, ("wrote-something", f"deleted {', '.join(lost)}")
    return res, {}, judge_success(res)


INTERRUPT_AFTER = """
import os, shutil, sys
from pathlib import Path
calls = [0]
def counting(fn):
    def wrapped(*a, **k):   # argv[2]: "N" interrupts the N-th file operation, "config" the one after config.json's
        calls[0] += 1
        if calls[0] == int(sys.argv[2] if sys.argv[2] != "config" else 0):
            raise KeyboardInterrupt
        result = fn(*a, **k)
        if sys.argv[2] == "config" and a and str(a[0]).endswith("config.json"):
            raise KeyboardInterrupt
        return result
    return wrapped
for mod, names in ((os, ("unlink", "remove", "rmdir", "rename", "replace")), (shutil, ("rmtree", "move"))):
    for n in names:
        setattr(mod, n, counting(getattr(mod, n)))
for n in ("unlink", "rename", "replace", "rmdir"):
    setattr(Path, n, counting(getattr(Path, n)))
from runs.record import clear_run
try:
    clear_run(Path(sys.argv[1]))
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
"""


def interrupted_clear(p: Probe, name: str, after) -> Path:
    run = incomplete_copy(p, name)
    res = p.run(["-c", INTERRUPT_AFTER, str(run), str(after)])
    assert TRACEBACK not in res.stderr, res.stderr
    return run


@case("overwrite")
def case_overwrite_interrupted_then_overwrite(p: Probe):
    """Ctrl-C during --overwrite's deletion (once config.json is gone): the same --overwrite must still work."""
    run = interrupted_clear(p, "ctrlc-clear", "config")
    res = p.runpy(*TEMPLATE_ARGS, "--out", str(run), "--overwrite")
    if res.rc != 0 and TRACEBACK not in res.stderr:
        return res, {}, ("wrote-something", "the interrupted deletion left a record every command refuses")
    return res, {}, judge_success(res)


@case("overwrite")
def case_overwrite_interrupted_then_analysis(p: Probe):
    """Ctrl-C during the deletion (once config.json is gone): analysis must not read the rest as a damaged record."""
    run = interrupted_clear(p, "ctrlc-clear-analysis", "config")
    res = p.analysis(run.parent, run.parent.parent / "analysis")
    if TRACEBACK in res.stderr:
        return res, {}, ("traceback", "")
    corrupt = [line for line in res.stderr.splitlines() if line.startswith("corrupt")]
    return res, {}, ("wrote-something", corrupt[0][:100]) if corrupt else ("clean", "")


# ---------------------------------------------------------------------------------------------------------------
# analysis crashes

def files_under(d: Path) -> dict[str, int]:
    return {str(f.relative_to(d)): f.stat().st_mtime_ns for f in d.rglob("*") if f.is_file()} if d.exists() else {}


def kill_when_writing(p: Probe, runs: Path, out: Path) -> Outcome:
    """Analysis killed (SIGKILL) as soon as its first output file appears (in --out or a folder beside it)."""
    parent = out.parent
    before = {q.name for q in parent.iterdir()}
    old = files_under(out)

    def writing():
        new = [q for q in parent.iterdir() if q.name not in before]
        return any(files_under(q) for q in new) or files_under(out).keys() - old.keys() or any(
            m != old.get(k) for k, m in files_under(out).items())
    return p.analysis(runs, out, until=writing, send=signal.SIGKILL)


@case("analysis crash")
def case_analysis_killed_then_again(p: Probe):
    root, run = p.record_copy("analysis-killed")
    out = root.parent / "analysis"
    kill_when_writing(p, root, out)
    res = p.analysis(root, out)
    if res.rc != 0 and TRACEBACK not in res.stderr:
        return res, {}, ("wrote-something", "the killed analysis left a folder the next one refuses")
    left = [q.name for q in root.parent.iterdir() if q.name not in ("runs", "analysis")]
    return res, {}, ("wrote-something", f"left {left}") if left else judge_success(res)


@case("analysis crash")
def case_reanalysis_killed_mixes(p: Probe):
    """An analysis killed while re-writing an earlier one's --out: old and new files must not be mixed."""
    root, run = p.record_copy("reanalysis-killed")
    out = root.parent / "analysis"
    first = p.analysis(root, out)
    assert first.rc == 0, first.stderr
    old = files_under(out)
    time.sleep(0.05)
    res = kill_when_writing(p, root, out)
    now = files_under(out)
    rewritten = [k for k in now if now[k] != old.get(k)]
    kept = [k for k in now if now[k] == old.get(k)]
    if rewritten and kept:
        return res, {"changed": rewritten}, ("wrote-something", f"{len(rewritten)} new files beside {len(kept)} old")
    return res, {"changed": rewritten}, ("clean", "old output intact" if not rewritten else "new output whole")


@case("analysis crash")
def case_analysis_disk_full(p: Probe):
    """A file-size limit (a full disk's EFBIG) under analysis --out: one line naming the path, nothing left."""
    root, run = p.record_copy("analysis-full")
    out = root.parent / "analysis"

    def limit():
        ignore_sigxfsz()
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
    before = snapshot(root.parent)
    res = p.analysis(root, out, preexec=limit)
    diff = changes(before, snapshot(root.parent))
    verdict = judge_refusal(res, diff)
    if verdict[0] == "clean" and str(out) not in res.error_lines[0]:
        verdict = ("wrong-exit", "the error line names no path under --out")
    return res, diff, verdict


@case("analysis crash")
def case_analysis_out_inside_run(p: Probe):
    root, run = p.record_copy("analysis-in-run")
    before = snapshot(root)
    res = p.analysis(root, run / "tables")
    diff = changes(before, snapshot(root))
    return res, diff, judge_refusal(res, diff)


@case("analysis crash")
def case_analysis_interrupted(p: Probe):
    """SIGTERM to an analysis while it writes: one line, exit 143, and --out as it was."""
    root, run = p.record_copy("analysis-term")
    out = root.parent / "analysis"
    parent_before = snapshot(root.parent)
    parent = out.parent
    names = {q.name for q in parent.iterdir()}
    res = p.analysis(root, out, until=lambda: any(q.name not in names for q in parent.iterdir()),
                     send=signal.SIGTERM)
    diff = changes(parent_before, snapshot(root.parent))
    return res, diff, judge_signal(res, signal.SIGTERM, diff)
