"""Reliability: a run killed with SIGKILL resumes to exactly the numbers of an uninterrupted run; same seed,
same numbers; non-finite losses stop cleanly; bad input is refused with one line and touches nothing."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import run
from methods import GrowthMethod, register_method
from methods.registry import METHODS
from models import build_model, get_family
from runs.record import load_run

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--task", "bert_small_base", "--scale", "tiny", "--quiet"]
STABLE = ("wall",)   # everything but wall-clock time must be equal


def numbers(out: Path) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in STABLE} for row in load_run(out).metrics]


def test_kill_and_resume_matches_uninterrupted_run(tmp_path):
    args = ["--method", "scratch", *TINY, "--steps", "60", "--set", "eval_every=5", "--set", "log_every=1"]
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    assert run.main([*args, "--out", str(whole)]) == 0
    # the child uses this process's thread count: a float sum split over other threads rounds differently
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(torch.get_num_threads())}
    proc = subprocess.Popen([sys.executable, str(ROOT / "run.py"), *args, "--out", str(broken)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    # kill once a checkpoint exists and the run has logged past it: a mid-interval crash
    while time.time() < deadline and proc.poll() is None:
        metrics = broken / "metrics.jsonl"
        if (broken / "checkpoint.pt").exists() and metrics.exists() and metrics.read_text().count("\n") >= 18:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait()
    if proc.returncode == 0:
        pytest.skip("the run finished before it could be killed (machine too fast for this test)")
    assert not (broken / "summary.json").exists()
    assert run.main([*args, "--out", str(broken), "--resume"]) == 0
    assert numbers(broken) == numbers(whole)
    steps = [r["step"] for r in load_run(broken).metrics]
    assert steps == sorted(set(steps))              # no line lost or duplicated
    assert load_run(broken).summary["flops"] == load_run(whole).summary["flops"]


def test_same_seed_same_numbers(tmp_path):
    args = ["--method", "scratch", *TINY]
    assert run.main([*args, "--out", str(tmp_path / "a")]) == 0
    assert run.main([*args, "--out", str(tmp_path / "b")]) == 0
    assert run.main([*args, "--out", str(tmp_path / "c"), "--seed", "1"]) == 0
    assert numbers(tmp_path / "a") == numbers(tmp_path / "b")
    assert numbers(tmp_path / "a") != numbers(tmp_path / "c")


if "nan_at_step_3" not in METHODS:
    @register_method("nan_at_step_3")
    class NanAtStep3(GrowthMethod):
        """Test method: random init whose loss turns NaN at step 3."""
        needs_small = False

        def grow(self, small, task):
            return build_model(task.large)

        def extra_loss(self, model, batch, task_loss, step, total_steps, ledger):
            return task_loss * float("nan") if step == 3 else task_loss


def test_non_finite_loss_stops_with_message_and_keeps_checkpoint(tmp_path, capsys):
    out = tmp_path / "nan"
    code = run.main(["--method", "nan_at_step_3", *TINY, "--set", "eval_every=2", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "loss became nan at step 3" in err and len(err.strip().splitlines()) == 1
    assert torch.load(out / "checkpoint.pt", weights_only=False)["state"]["step"] == 2
    assert not (out / "summary.json").exists()


def snapshot(path: Path) -> dict:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()} \
        if path.exists() else {}


@pytest.fixture(scope="module")
def wrong_models(tmp_path_factory):
    """An exported GPT-2 (wrong family) and an exported BERT of the wrong size."""
    base = tmp_path_factory.mktemp("wrong")
    gpt = get_family("gpt2").build(get_family("bert").spec_of(build_model(
        __import__("tasks").get_task("bert_small_base", "tiny").small)).with_(family="gpt2"))
    gpt.save_pretrained(base / "gpt2")
    from tasks import get_task
    bert = build_model(get_task("bert_small_base", "tiny").small.with_(layers=3))
    bert.save_pretrained(base / "bert3")
    return base


BAD = [  # (arguments, what the one-line error must say)
    (["--method", "lgo", *TINY], "did you mean 'ligo'"),
    (["--method", "scratch", "--task", "bert_smal_base", "--scale", "tiny"], "unknown task"),
    (["--method", "scratch", "--task", "bert_small_base", "--scale", "big"], "unknown scale 'big'"),
    (["--method", "scratch", *TINY, "--set", "learning_rate=1"], "unknown key 'learning_rate'"),
    (["--method", "scratch", *TINY, "--set", "=3"], "malformed --set '=3'"),
    (["--method", "scratch", *TINY, "--set", "batch_size=four"], "expected int"),
    (["--method", "stackbert", *TINY, "--small", "{wrong}/gpt2"], "holds a gpt2 model, but task bert_small_base grows a bert model"),
    (["--method", "stackbert", *TINY, "--small", "{wrong}/bert3"], "holds bert 3L/64H/2 heads"),
    (["--method", "stackbert", *TINY, "--small", "{wrong}/nowhere"], "no such directory"),
    (["--method", "scratch", *TINY, "--set", "large.layers=0"], "layers must be positive"),
    (["--method", "scratch", *TINY, "--set", "small.layers=3"], "shrinks in layers"),
    (["--method", "scratch", *TINY, "--set", "large.heads=5"], "heads (5) must divide hidden (96)"),
    (["--method", "scratch", "--task", "deit_s_b", "--scale", "mini", "--quiet", "--set", "data_path={wrong}/none"],
     "fashion"),
]


@pytest.mark.parametrize("args,needle", BAD, ids=[b[1][:30] for b in BAD])
def test_bad_input_table(args, needle, wrong_models, tmp_path, capsys):
    args = [a.replace("{wrong}", str(wrong_models)) for a in args]
    out = tmp_path / "out"
    before = snapshot(tmp_path)
    assert run.main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and needle.lower() in err.lower(), err
    assert snapshot(tmp_path) == before


def test_resume_refuses_corrupt_checkpoint_and_other_task(tmp_path, capsys):
    out = tmp_path / "r"
    assert run.main(["--method", "scratch", *TINY, "--steps", "4", "--set", "eval_every=2", "--out", str(out)]) == 0
    (out / "summary.json").unlink()
    (out / "checkpoint.pt").write_bytes(b"not a checkpoint")
    before = snapshot(out)
    assert run.main(["--method", "scratch", *TINY, "--steps", "4", "--out", str(out), "--resume"]) == 2
    assert "another configuration (differs in: recipe)" in capsys.readouterr().err
    assert run.main(["--method", "scratch", *TINY, "--steps", "4", "--set", "eval_every=2", "--out", str(out),
                     "--resume"]) == 2
    assert "corrupt checkpoint" in capsys.readouterr().err
    assert run.main(["--method", "scratch", "--task", "gpt2_base_medium", "--scale", "tiny", "--quiet",
                     "--out", str(out), "--resume"]) == 2
    assert "another task" in capsys.readouterr().err
    assert snapshot(out) == before
