"""Faults that must lose nothing and say one line (issue 43): --overwrite deletes only what a run writes and survives
an interrupt; a killed write's temporaries are cleaned; SIGTERM/SIGHUP stop a run, a sweep or an analysis as Ctrl-C
does, with exit 128 + the signal; two sweeps on one --out wait for each other; an analysis is written aside and
swapped in, so a failure leaves --out as it was; records of the wrong JSON types are left out with one line.
tests/fault_probe/__main__.py runs these classes end to end as subprocesses."""
import errno
import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

import run
from records import SCRATCH, write_run
from runs.atomic import atomic_path, write_json_atomic
from runs.record import ARTIFACTS, CONFIG, METRICS, RUN_ENTRIES, SUMMARY, clear_run, is_leftover, load_run
from runs.signals import STOP_SIGNALS, signals_held

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--task", "bert_small_base", "--scale", "tiny", "--quiet", "--steps", "2"]


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def fake_run(d: Path) -> Path:
    """A directory holding every kind of file a run writes (contents do not matter to clear_run)."""
    d.mkdir(parents=True)
    for name in RUN_ENTRIES:
        if name == "model":
            (d / name).mkdir()
            (d / name / "config.json").write_text("{}")
        else:
            (d / name).write_text("x")
    (d / f".checkpoint.pt.{dead_pid()}.tmp").write_text("half")
    return d


# --- --overwrite: only the run's own files, and an interrupt leaves something every command takes up ----------------

def test_clear_run_deletes_what_a_run_writes_and_keeps_the_rest(tmp_path):
    d = fake_run(tmp_path / "run")
    (d / "notes.txt").write_text("mine")
    nested = fake_run(d / "nested")
    (d / ".lock").write_text("pid 1")
    assert clear_run(d) == ["nested/", "notes.txt"]
    assert sorted(p.name for p in d.iterdir()) == [".lock", "nested", "notes.txt"]
    assert len(list(nested.iterdir())) == len(RUN_ENTRIES) + 1            # the nested run untouched


def test_clear_run_interrupted_after_its_renames_leaves_only_a_folder_readers_ignore(tmp_path, monkeypatch):
    from analysis.load import find_run_dirs
    from runs import record
    from runs.preflight import inspect_out
    d = fake_run(tmp_path / "runs" / "run")

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(record.shutil, "rmtree", interrupted)
    with pytest.raises(KeyboardInterrupt):
        clear_run(d)
    monkeypatch.undo()
    left = [p.name for p in d.iterdir()]
    assert len(left) == 1 and is_leftover(left[0]) and (d / left[0] / CONFIG).exists()
    assert inspect_out(d, resume=False, overwrite=True) == ("new", None)    # not "holds ... but no config.json"
    assert find_run_dirs(tmp_path / "runs") == []                          # the moved record is no run
    assert clear_run(d) == [] and list(d.iterdir()) == []                   # the next one finishes the job


def test_signals_held_delays_ctrl_c_to_the_end_of_the_block():
    reached = []
    # Python's own Ctrl-C handler: a suite started in the background (`pytest &`) inherits SIGINT ignored, which
    # signals_held rightly leaves ignored, and then there is nothing to delay
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with signals_held():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
                reached.append(True)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert reached == [True]


def test_run_entries_name_every_artifact_a_shipped_method_saves():
    """clear_run deletes by name: an artifact missing from runs.record.ARTIFACTS would survive --overwrite."""
    saved = set()
    for path in [*(ROOT / "methods").glob("*.py"), ROOT / "runs" / "strategies.py"]:
        for body in re.findall(r"def artifacts\(self\).*?(?=\n    def |\nclass |\Z)", path.read_text(), re.S):
            saved |= set(re.findall(r"\"([\w.-]+\.(?:json|pt))\"", body))
    assert saved and saved <= set(ARTIFACTS), saved - set(ARTIFACTS)


def test_overwrite_keeps_a_users_notes_and_says_so(tmp_path, capsys):
    out = write_run(tmp_path, "scratch", SCRATCH)        # an old record, in the real format
    (out / "notes.txt").write_text("mine")
    assert run.main(["--method", "scratch", *TINY, "--out", str(out), "--overwrite"]) == 0
    assert (out / "notes.txt").read_text() == "mine" and load_run(out).complete
    assert "kept what it did not write: notes.txt" in capsys.readouterr().err


# --- temporaries of killed writers ----------------------------------------------------------------------------------

def test_a_dead_writers_temporary_is_removed_by_the_next_write_a_live_ones_is_not(tmp_path):
    stale, live = tmp_path / f".summary.json.{dead_pid()}.tmp", tmp_path / ".summary.json.1.tmp"   # pid 1 lives
    stale.write_text("half"), live.write_text("other")
    write_json_atomic(tmp_path / SUMMARY, {"step": 1})
    assert not stale.exists() and live.exists() and json.loads((tmp_path / SUMMARY).read_text()) == {"step": 1}


def test_a_new_writer_removes_a_killed_checkpoint_save(tmp_path):
    from runs.record import RunWriter
    stale = tmp_path / f".checkpoint.pt.{dead_pid()}.tmp"
    stale.write_text("half")
    RunWriter(tmp_path, {"task": {}, "method": {}}).close()
    assert not stale.exists()


def test_a_failed_atomic_write_leaves_no_temporary(tmp_path):
    with pytest.raises(OSError):
        with atomic_path(tmp_path / "f.json") as tmp:
            tmp.write_text("x")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert list(tmp_path.iterdir()) == []


# --- SIGTERM / SIGHUP handled as Ctrl-C ------------------------------------------------------------------------------

@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_run_py_stops_on_a_signal_in_one_line_with_128_plus_its_number(signum, monkeypatch, capsys):
    from runs.preflight import RunInterrupted

    def train_main(args):
        try:
            os.kill(os.getpid(), signum)
            time.sleep(5)
        except KeyboardInterrupt:       # what run_experiment does with it
            raise RunInterrupted("interrupted at step 3; continue with --resume") from None
    monkeypatch.setattr(run, "train_main", train_main)
    # the disposition a run started from a terminal inherits: pytest itself may run under nohup, whose ignored
    # SIGHUP a run keeps ignoring (the next test), and then this signal would never stop it
    terminal_default = signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL
    inherited = signal.signal(signum, terminal_default)
    try:
        before = {s: signal.getsignal(s) for s in STOP_SIGNALS}
        assert run.main(["--method", "scratch", *TINY]) == 128 + signum
        assert {s: signal.getsignal(s) for s in STOP_SIGNALS} == before      # handlers given back
    finally:
        signal.signal(signum, inherited)
    name = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
    assert capsys.readouterr().err == f"error: interrupted{name} at step 3; continue with --resume\n"


def test_an_ignored_hangup_stays_ignored(monkeypatch):
    """nohup ignores SIGHUP: a run started under it must go on when the terminal closes."""
    seen = []
    monkeypatch.setattr(run, "train_main", lambda args: seen.append(signal.getsignal(signal.SIGHUP)) or 0)
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        assert run.main(["--method", "scratch", *TINY]) == 0
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert seen == [signal.SIG_IGN]


# --- sweeps: a signal names the run it stopped in; two on one --out wait; --out '' refused ---------------------------

SWEEP = dict(names=["deit"], scale="tiny", seeds=[0], only=["scratch"], device="cpu")


def test_a_sweep_stopped_by_sigterm_says_where_in_one_line(tmp_path, monkeypatch, capsys):
    from bench.sweeps import cli as sweeps
    from runs.preflight import RunInterrupted

    def train(*args, **kw):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except KeyboardInterrupt:
            raise RunInterrupted("interrupted at step 1; continue with --resume") from None
    monkeypatch.setattr(sweeps, "train", train)
    out = tmp_path / "sweep"
    assert sweeps.main(["deit", "--scale", "tiny", "--seeds", "0", "--methods", "scratch", "--device", "cpu",
                        "--out", str(out)]) == 143
    err = capsys.readouterr().err
    assert err == (f"error: interrupted by SIGTERM at step 1 in {out / 'deit_s_b-tiny' / 'scratch-s0'} (run 1 of 1); "
                   "run the same command again to go on (complete runs are skipped, this one resumed)\n")
    assert not (out / ".sweep.lock").exists()


def test_a_second_sweep_into_one_out_waits_for_the_first(tmp_path, monkeypatch):
    from bench.sweeps import cli as sweeps
    from runs.lock import SWEEP_LOCK, RunLock
    out = tmp_path / "sweep"
    trained = []
    monkeypatch.setattr(sweeps, "train", lambda task, method, strategies, path, *a: trained.append(path))
    monkeypatch.setattr(sweeps, "copy_small_record", lambda *a: None)      # (no record was written)
    first = RunLock(out, name=SWEEP_LOCK).acquire()           # a sweep running into `out`
    logs, result = [], {}
    second = threading.Thread(target=lambda: result.update(sweeps.run_sweep(out=out, log=logs.append, **SWEEP)))
    second.start()
    deadline = time.time() + 30
    while not any(line.startswith("waiting for pid") for line in logs) and time.time() < deadline:
        time.sleep(0.02)
    assert not trained and any(f"it runs a sweep into {out}" in line for line in logs), logs
    first.release()
    second.join(timeout=60)
    assert trained == [out / "deit_s_b-tiny" / "scratch-s0"] and result["ran"]


def test_sweeps_refuse_an_empty_out(tmp_path, monkeypatch, capsys):
    from bench.sweeps import cli as sweeps
    monkeypatch.chdir(tmp_path)
    assert sweeps.main(["deit", "--scale", "tiny", "--seeds", "0", "--methods", "scratch", "--out", ""]) == 2
    assert capsys.readouterr().err == "error: --out is empty; give the root folder of the run directories\n"
    assert list(tmp_path.iterdir()) == []


# --- analysis: written aside and swapped in ----------------------------------------------------------------------------

def analyse(runs: Path, out: Path) -> int:
    from analysis.__main__ import main
    return main(["--runs", str(runs), "--out", str(out), "--formats", "png"])


def files(d: Path) -> dict:
    return {p.name: p.read_bytes() for p in d.iterdir()} if d.exists() else {}


def test_a_failed_reanalysis_leaves_the_old_output_whole(tmp_path, monkeypatch, capsys):
    import analysis.__main__ as analysis_main
    runs, out = tmp_path / "runs", tmp_path / "out"
    write_run(runs, "scratch", SCRATCH)
    assert analyse(runs, out) == 0
    (out / "mine.txt").write_text("mine")
    before = files(out)
    real = analysis_main.write_all

    def disk_full(args, runs_list, problems, staging):
        real(args, runs_list, problems, staging)
        raise OSError(errno.ENOSPC, "No space left on device", str(staging / "report.md"))
    monkeypatch.setattr(analysis_main, "write_all", disk_full)
    capsys.readouterr()
    assert analyse(runs, out) == 1
    err = capsys.readouterr().err
    assert err.endswith(f"error: {out / 'report.md'}: No space left on device; --out {out} is as it was\n")
    assert len(err.splitlines()) == 1 and files(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "runs"]      # no staging folder left
    monkeypatch.undo()
    assert analyse(runs, out) == 0 and (out / "mine.txt").read_text() == "mine"   # a user's file goes along


def test_a_killed_analysis_blocks_nothing(tmp_path):
    """A staging folder of a dead analysis (SIGKILL) is removed by the next one; --out was never touched."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    write_run(runs, "scratch", SCRATCH)
    killed = tmp_path / f".out.analysis-{dead_pid()}.tmp"
    killed.mkdir()
    (killed / "report.md").write_text("half")
    assert analyse(runs, out) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "runs"] and (out / "report.md").exists()


def test_an_analysis_stopped_by_sigterm_writes_nothing(tmp_path, monkeypatch, capsys):
    import analysis.__main__ as analysis_main
    runs, out = tmp_path / "runs", tmp_path / "out"
    write_run(runs, "scratch", SCRATCH)

    def terminated(*args):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    monkeypatch.setattr(analysis_main, "write_all", terminated)
    assert analyse(runs, out) == 143
    assert capsys.readouterr().err.endswith(f"error: interrupted by SIGTERM; --out {out} is as it was\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]


# --- records of the wrong JSON types: left out in one line, never a traceback ----------------------------------------

def set_key(obj, dotted, value):
    *head, last = dotted.split(".")
    for k in head:
        obj = obj[k]
    obj[last] = value


@pytest.mark.parametrize("file,key,value,needle", [
    (CONFIG, "task.name", 7, "config.json task.name is a number, not a string"),
    (CONFIG, "seed", "zero", "config.json seed is a string, not an integer or null"),
    (CONFIG, "small", [1], "config.json small is a list, not an object or null"),
    (CONFIG, "reference", [4.2], "config.json reference is a list"),
    (CONFIG, "task.recipe", [1], "config.json task.recipe is a list"),
    (CONFIG, "distributed", "ddp", "config.json distributed is a string"),
    (CONFIG, "method.config", [0], "config.json method.config is a list"),
    (CONFIG, "task.family", "vit", "config.json names more than one model family (bert, vit)"),
    (SUMMARY, "wall", "fast", "summary.json wall is 'fast', not a finite number"),
    (SUMMARY, None, [1], "summary.json is a list, not an object"),
    (METRICS, 1, [["step", 1]], "metrics.jsonl line 2 is a list, not an object"),
    (METRICS, "2.eval_loss", -1.0, "eval_loss is -1.0, outside [0, inf]"),
    (METRICS, "2.twins", [0.1], "twins is [0.1], not {space: number}"),
])
def test_a_record_of_the_wrong_types_is_left_out_in_one_line(tmp_path, file, key, value, needle):
    from analysis.load import load_runs
    d = write_run(tmp_path, "scratch", SCRATCH)
    config = json.loads((d / CONFIG).read_text())
    config["task"]["large"] = {"family": "bert"}
    (d / CONFIG).write_text(json.dumps(config))
    if file == METRICS:
        rows = [json.loads(line) for line in (d / METRICS).read_text().splitlines()]
        if isinstance(key, int):
            rows[key] = value
        else:
            set_key(rows[int(key[0])], key[2:], value)
        (d / METRICS).write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        obj = json.loads((d / file).read_text())
        obj = value if key is None else (set_key(obj, key, value) or obj)
        (d / file).write_text(json.dumps(obj))
    runs, problems = load_runs(tmp_path)
    assert runs == [] and len(problems) == 1 and problems[0].kind == "corrupt", problems
    assert needle in problems[0].message, problems[0].message


@pytest.mark.parametrize("suites", [{"mini": {"tasks": ["sst2"]}}, {"mini": {"tasks": {"sst2": {"metrics": "90"}}}}])
def test_an_eval_json_of_the_wrong_shape_is_reported_and_its_scores_left_out(tmp_path, suites):
    from analysis.frames import downstream_scores
    from analysis.load import load_runs
    d = write_run(tmp_path, "scratch", SCRATCH)
    (d / "eval.json").write_text(json.dumps({"suites": suites}))
    runs, problems = load_runs(tmp_path)
    assert len(runs) == 1 and [p.kind for p in problems] == ["eval"] and "left out" in problems[0].message
    assert downstream_scores(runs[0]) == {}


def test_a_record_with_rows_lost_is_left_out_naming_the_first_missing_step(tmp_path):
    from analysis.load import load_runs
    d = write_run(tmp_path, "scratch", SCRATCH, recipe={"log_every": 1, "eval_every": 2})
    assert len(load_runs(tmp_path)[0]) == 1
    rows = (d / METRICS).read_text().splitlines()
    (d / METRICS).write_text("\n".join(rows[:2] + rows[3:]) + "\n")          # step 2's row lost
    runs, problems = load_runs(tmp_path)
    assert runs == [] and [p.message for p in problems] == [
        "metrics.jsonl lacks the row of step 2 (rows lost: the curve would bridge the gap)"]
