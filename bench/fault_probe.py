"""Fault probe (issue 43): bad input and faults of every class, each built in a temporary folder at the tiny
scale, run as a subprocess, and judged by what it said, how it exited and what it left on disk.

    HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 python bench/fault_probe.py [--repo DIR] [--only SUBSTRING ...]
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
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

TRACEBACK = "Traceback (most recent call last)"
TINY = ["--task", "bert_small_base", "--scale", "tiny", "--quiet"]
TEMPLATE_ARGS = ["--method", "scratch", *TINY, "--steps", "4", "--set", "eval_every=2", "--set", "log_every=1"]
LONG_ARGS = ["--method", "scratch", *TINY, "--steps", "400", "--set", "eval_every=5", "--set", "log_every=1"]
SWEEP_ARGS = ["deit", "--scale", "tiny", "--seeds", "0", "--methods", "scratch"]


@dataclass
class Outcome:
    rc: int | None
    stdout: str
    stderr: str
    seconds: float

    @property
    def first_line(self) -> str:
        return next((line for line in self.stderr.splitlines() if line.strip()), "")

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("error")]


@dataclass
class Case:
    name: str
    kind: str
    fn: object
    result: dict = field(default_factory=dict)


CASES: list[Case] = []


def case(kind: str):
    def register(fn):
        CASES.append(Case(fn.__name__.removeprefix("case_").replace("_", "-"), kind, fn))
        return fn
    return register


def snapshot(*roots: Path) -> dict[str, tuple]:
    """Every path under `roots` with its size and modification time (directories by their mere presence)."""
    seen = {}
    for root in roots:
        root = Path(root)
        if not root.exists():
            continue
        for p in [root, *root.rglob("*")]:
            try:
                st = p.lstat()
            except OSError:
                continue
            seen[str(p)] = ("dir",) if p.is_dir() and not p.is_symlink() else (st.st_size, st.st_mtime_ns)
    return seen


def changes(before: dict, after: dict, ignore=(".lock",)) -> dict[str, list[str]]:
    keep = lambda p: Path(p).name not in ignore      # noqa: E731  (a lock file held open is no record)
    return {"created": sorted(p for p in after if p not in before and keep(p)),
            "changed": sorted(p for p in after if p in before and after[p] != before[p] and keep(p)
                              and after[p] != ("dir",)),
            "deleted": sorted(p for p in before if p not in after and keep(p))}


def any_change(diff: dict) -> bool:
    return any(diff.values())


def ignore_sigxfsz():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


class Probe:
    def __init__(self, repo: Path, work: Path):
        self.repo, self.work = repo, work
        self.env = {**os.environ, "PYTHONPATH": str(repo), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
                    "TOKENIZERS_PARALLELISM": "false", "GROWBENCH_OUT": str(work / "gbout"),
                    "PYTHONWARNINGS": "ignore"}
        self._template: Path | None = None
        self._n = 0

    def dir(self, name: str) -> Path:
        self._n += 1
        d = self.work / f"{self._n:02d}-{name}"
        d.mkdir(parents=True)
        return d

    def popen(self, args: list, cwd: Path | None = None, env: dict | None = None, preexec=None, **kw):
        def child_setup():
            # as at a terminal: a background job ignores SIGINT, one under nohup SIGHUP, and children inherit that
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(signum, signal.SIG_DFL)
            if preexec:
                preexec()
        return subprocess.Popen([sys.executable, *args], cwd=cwd or self.repo, env={**self.env, **(env or {})},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=child_setup, **kw)

    def run(self, args: list, timeout: float = 300, until=None, send=None, **kw) -> Outcome:
        """Run `python args`; with `until` (a predicate polled every 20 ms), send the signal `send` once it holds."""
        t0 = time.perf_counter()
        proc = self.popen(args, **kw)
        if until is not None:
            deadline = time.time() + timeout
            while proc.poll() is None and time.time() < deadline and not until():
                time.sleep(0.02)
            if proc.poll() is None:
                proc.send_signal(send)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        return Outcome(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"),
                       time.perf_counter() - t0)

    def runpy(self, *args, **kw) -> Outcome:
        return self.run(["run.py", *args], **kw)

    def analysis(self, runs: Path, out: Path, **kw) -> Outcome:
        return self.run(["-m", "analysis", "--runs", str(runs), "--out", str(out), "--formats", "png"], **kw)

    def template(self) -> Path:
        """A complete 4-step scratch record (evaluated at steps 0, 2, 4), made once; cases get copies."""
        if self._template is None:
            t = self.work / "template" / "bert_small_base-tiny" / "scratch-s0"
            res = self.runpy(*TEMPLATE_ARGS, "--out", str(t))
            if res.rc != 0:
                raise SystemExit(f"the template run failed ({res.rc}): {res.stderr[-2000:]}")
            self._template = t
        return self._template

    def record_copy(self, name: str) -> tuple[Path, Path]:
        """(runs root, run directory): a copy of the template under a fresh root, filed as the sweeps file it."""
        root = self.dir(name) / "runs"
        run = root / "bert_small_base-tiny" / "scratch-s0"
        shutil.copytree(self.template(), run, ignore=shutil.ignore_patterns("checkpoint.pt", "model", ".lock"))
        return root, run


def judge_refusal(res: Outcome, diff: dict, rcs=(1, 2)) -> tuple[str, str]:
    """A refusal: one `error:` line, an exit code in `rcs`, nothing written."""
    if TRACEBACK in res.stderr:
        return "traceback", ""
    if res.rc == 0:
        return "silent", "accepted (exit 0)"
    if not res.error_lines:
        return "silent", f"exit {res.rc} without an error line"
    if any_change(diff):
        return "wrote-something", ""
    if len(res.error_lines) != 1 or res.rc not in rcs:
        return "wrong-exit", f"expected exit {'/'.join(map(str, rcs))} and one error line"
    return "clean", ""


def judge_success(res: Outcome, problem: str | None = None) -> tuple[str, str]:
    if TRACEBACK in res.stderr:
        return "traceback", ""
    if res.rc != 0:
        return "wrote-something" if problem is None else "silent", f"exit {res.rc}; {problem or 'expected success'}"
    return ("silent", problem) if problem else ("clean", "")


def judge_signal(res: Outcome, signum: int, diff: dict | None = None) -> tuple[str, str]:
    """A run or sweep stopped by `signum`: one error line, exit 128 + signum (the shell's convention)."""
    want = 128 + signum
    if TRACEBACK in res.stderr:
        return "traceback", f"exit {res.rc}"
    if res.rc == 0:
        return "silent", "finished before the signal (machine too fast?)"
    if not res.error_lines:
        return "silent", f"exit {res.rc} without a word"
    if diff is not None and any_change(diff):
        return "wrote-something", ""
    if res.rc != want or len(res.error_lines) != 1:
        return "wrong-exit", f"exit {res.rc}, expected {want}"
    return "clean", ""


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

def incomplete_copy(p: Probe, name: str, with_checkpoint: bool = True) -> Path:
    run = p.dir(name) / "run"
    shutil.copytree(p.template(), run, ignore=shutil.ignore_patterns(".lock", *(() if with_checkpoint
                                                                                 else ("checkpoint.pt",))))
    (run / "summary.json").unlink()
    return run


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


# ---------------------------------------------------------------------------------------------------------------

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
    p = argparse.ArgumentParser(prog="python bench/fault_probe.py", description=__doc__.split("\n")[0])
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
