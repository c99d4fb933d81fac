"""The fault probe's harness (tests/fault_probe/__main__.py): a case registry, file-system snapshots and their differences, the
Probe that runs `python ...` as a subprocess in a temporary folder (with a signal sent when a condition holds), and
the judges that classify what a command said, how it exited and what it left on disk (clean, silent, traceback,
wrote-something, wrong-exit)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

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


def incomplete_copy(p: Probe, name: str, with_checkpoint: bool = True) -> Path:
    """A copy of the template record cut short: no summary.json (and no checkpoint unless `with_checkpoint`)."""
    run = p.dir(name) / "run"
    shutil.copytree(p.template(), run, ignore=shutil.ignore_patterns(".lock", *(() if with_checkpoint
                                                                                 else ("checkpoint.pt",))))
    (run / "summary.json").unlink()
    return run
