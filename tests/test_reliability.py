"""Reliability: a run killed with SIGKILL or stopped with Ctrl-C resumes to exactly the numbers of an uninterrupted
run, also when killed after its last step; same seed, same numbers; non-finite losses stop cleanly; one process
per run directory (a second is refused naming the first; a crashed holder blocks nothing); a full disk is one
line; and bad input of every kind (the table) is refused with one line and touches nothing."""
import os
import re
import resource
import shutil
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
SCRATCH = ["--method", "scratch", *TINY]
STABLE = ("wall",)   # everything but wall-clock time must be equal


def numbers(out: Path) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in STABLE} for row in load_run(out).metrics]


LONG = ["--method", "scratch", *TINY, "--steps", "60", "--set", "eval_every=5", "--set", "log_every=1"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The 60-step run the killed and interrupted ones must reproduce."""
    out = tmp_path_factory.mktemp("whole") / "run"
    assert run.main([*LONG, "--out", str(out)]) == 0
    return out


def sigint_as_at_a_terminal():
    """Ctrl-C's default action in the child: a shell starts background jobs (`pytest ... &`) with SIGINT ignored,
    and Python keeps an ignored SIGINT ignored, so the Ctrl-C test would see its run finish and skip."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def child(out: Path, **kw) -> subprocess.Popen:
    # the child uses this process's thread count: a float sum split over other threads rounds differently
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(torch.get_num_threads())}
    return subprocess.Popen([sys.executable, str(ROOT / "run.py"), *LONG, "--out", str(out)], env=env,
                            stdout=subprocess.DEVNULL, preexec_fn=sigint_as_at_a_terminal, **kw)


def test_kill_and_resume_matches_uninterrupted_run(uninterrupted, tmp_path):
    broken = tmp_path / "broken"
    proc = child(broken, stderr=subprocess.DEVNULL)
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
    assert run.main([*LONG, "--out", str(broken), "--resume"]) == 0
    assert numbers(broken) == numbers(uninterrupted)
    steps = [r["step"] for r in load_run(broken).metrics]
    assert steps == sorted(set(steps))              # no line lost or duplicated
    assert load_run(broken).summary["flops"] == load_run(uninterrupted).summary["flops"]
    # the resume is in the record: the step it went on from (the checkpoint's, the last row kept), its environment
    config = load_run(broken).config
    (resumed,) = config["resumed"]
    assert resumed["step"] in steps and 0 < resumed["step"] < 60
    assert resumed["environment"]["threads"] == config["environment"]["threads"]


def test_second_process_is_refused_and_ctrl_c_resumes_exactly(uninterrupted, tmp_path, capsys):
    """Two processes on one run directory: the second gets one line naming the first (which goes on
    undisturbed); Ctrl-C then stops the first with exit 130 and where it stood, and --resume finishes the
    run with exactly the uninterrupted numbers."""
    out = tmp_path / "run"
    proc = child(out, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        lock = out / ".lock"
        if (out / "checkpoint.pt").exists() and lock.exists() and f"pid {proc.pid} " in lock.read_text():
            break
        time.sleep(0.02)
    assert run.main([*LONG, "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    proc.send_signal(signal.SIGINT)
    _, child_err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.skip("the run finished before it could be interrupted (machine too fast for this test)")
    assert len(err.splitlines()) == 1 and f"error: run directory {out} is in use by pid {proc.pid} on host" in err
    assert proc.returncode == 130, child_err
    assert re.fullmatch(r"error: interrupted at step \d+; continue with --resume", child_err.strip()), child_err
    assert not (out / "summary.json").exists()
    assert run.main([*LONG, "--out", str(out), "--resume"]) == 0
    assert numbers(out) == numbers(uninterrupted)


def test_a_crashed_lock_holder_does_not_block(tmp_path, capsys):
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from runs.lock import RunLock; "
                               "RunLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(120)", str(out)],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert run.main([*SCRATCH, "--out", str(out)]) == 2
        assert f"is in use by pid {holder.pid} " in capsys.readouterr().err
        assert sorted(p.name for p in out.iterdir()) == [".lock"]       # refused: nothing written
    finally:
        holder.kill()                                  # SIGKILL: the kernel drops its lock
        holder.wait()
    assert run.main([*SCRATCH, "--out", str(out)]) == 0 and load_run(out).complete


def test_killed_after_the_last_step_resume_checks_and_overwrite(tmp_path, capsys):
    """A run killed between its final checkpoint and summary.json finishes on --resume exactly as it would
    have; --resume refuses another seed, small model or recipe; --overwrite leaves nothing of the old run."""
    args = ["--method", "ligo", *TINY, "--set", "eval_every=2"]
    out = tmp_path / "run"
    assert run.main([*args, "--out", str(out)]) == 0
    whole, operator = load_run(out), (out / "ligo_operator.pt").read_bytes()
    assert torch.load(out / "checkpoint.pt", weights_only=False)["state"]["step"] == whole.config["task"]["recipe"]["steps"]
    (out / "summary.json").unlink()
    shutil.rmtree(out / "model")                       # the kill came before the export too
    assert run.main([*args, "--out", str(out), "--resume"]) == 0
    again = load_run(out)
    assert again.summary == whole.summary and again.metrics == whole.metrics
    assert (out / "ligo_operator.pt").read_bytes() == operator          # the fit's operator is not replaced
    from transformers import AutoTokenizer
    assert AutoTokenizer.from_pretrained(out / "model").model_max_length == 32     # the model's positions
    capsys.readouterr()

    (out / "summary.json").unlink()
    before = snapshot(out)
    cached_small = Path(whole.config["small"]["path"]) / "model"
    for extra, needle in ((["--seed", "3"], "seed 0, not 3; resume needs the same --seed"),
                          (["--small", str(cached_small)], "grown from the cached small model; resume needs the same"),
                          (["--set", "lr=0.5"], "another configuration (differs in: recipe.lr")):
        assert run.main([*args, "--out", str(out), "--resume", *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, err
    assert snapshot(out) == before
    assert run.main([*args, "--out", str(out), "--resume"]) == 0

    (out / "eval.json").write_text("{}")             # as an evaluation would have left it
    assert run.main(["--evaluate", str(out), "--set", "epochs=0"]) == 2
    assert "evaluation epochs must be a number > 0, got 0" in capsys.readouterr().err
    damaged = tmp_path / "damaged"
    shutil.copytree(out, damaged)
    (damaged / "config.json").write_text("{not json")
    for call in (["--evaluate", str(damaged)], [*args, "--out", str(damaged), "--resume"]):
        assert run.main(call) == 2
        assert f"error: {damaged / 'config.json'}: not valid JSON" in capsys.readouterr().err
    assert run.main(["--method", "scratch", *TINY, "--out", str(out), "--overwrite"]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [".lock", "checkpoint.pt", "config.json", "metrics.jsonl", "model", "summary.json"])
    assert load_run(out).method == "scratch"


def test_a_full_disk_is_one_line_and_leaves_no_temporary(tmp_path, capsys):
    """A write that fails (here: a file-size limit, as a full disk does) names the file, exits non-zero and
    leaves no temporary file; the partial record can be resumed."""
    from tasks import get_task
    get_task("bert_small_base", "tiny").pretrain_data()      # the data caches exist before the limit
    out = tmp_path / "run"
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)    # the write fails (EFBIG) instead of killing us
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, hard))
    try:
        code = run.main([*SCRATCH, "--out", str(out)])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    err = capsys.readouterr().err.strip()
    assert code == 1 and err == f"error: {out / 'checkpoint.pt'}: File too large", err
    assert not list(out.rglob("*.tmp")) and not (out / "summary.json").exists()
    assert run.main([*SCRATCH, "--out", str(out), "--resume"]) == 0 and load_run(out).complete


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
    assert f"the last good checkpoint {out / 'checkpoint.pt'} is kept" in err
    # before the first evaluation there is no checkpoint: the line does not name one
    early = tmp_path / "early"
    assert run.main(["--method", "nan_at_step_3", *TINY, "--set", "eval_every=4", "--out", str(early)]) == 1
    err = capsys.readouterr().err
    assert "no checkpoint was written yet" in err and not (early / "checkpoint.pt").exists()


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


def bad_inputs(base: Path) -> None:
    """Files the table's cases point at, made inside the snapshotted directory so that 'unchanged' covers them."""
    (base / "empty.txt").write_text("")
    (base / "binary.dat").write_bytes(bytes(range(256)) * 8)
    (base / "five.txt").write_text("one two three four five\n")
    (base / "afile").write_text("a file\n")
    (base / "exported").mkdir()                             # a user's model directory: config.json, not a run's
    (base / "exported" / "config.json").write_text('{"model_type": "bert"}')
    (base / "orphan").mkdir()                               # checkpoint and metrics without their config.json
    (base / "orphan" / "checkpoint.pt").write_bytes(b"weights")
    (base / "orphan" / "metrics.jsonl").write_text('{"step": 4}\n')
    (base / "arun").mkdir()                                 # a run's record
    (base / "arun" / "config.json").write_text('{"method": {"name": "scratch"}}')
    (base / "arun" / "metrics.jsonl").write_text('{"step": 0}\n')


BAD = [  # (arguments, what the one-line error must say); {tmp}: the test's directory, --out {tmp}/out if none given
    (["--method", "lgo", *TINY], "did you mean 'ligo'"),
    (["--method", "scratch", "--task", "bert_smal_base", "--scale", "tiny"], "unknown task"),
    (["--method", "scratch", "--task", "bert_small_base", "--scale", "big"], "unknown scale 'big'"),
    ([*SCRATCH, "--set", "learning_rate=1"], "unknown key 'learning_rate'"),
    ([*SCRATCH, "--set", "=3"], "malformed --set '=3'"),
    ([*SCRATCH, "--set", "batch_size=four"], "expected int"),
    (["--method", "stackbert", *TINY, "--small", "{wrong}/gpt2"], "holds a gpt2 model, but task bert_small_base grows a bert model"),
    (["--method", "stackbert", *TINY, "--small", "{wrong}/bert3"], "holds bert 3L/64H/2 heads"),
    (["--method", "stackbert", *TINY, "--small", "{wrong}/nowhere"], "no such directory"),
    ([*SCRATCH, "--set", "large.layers=0"], "layers must be positive"),
    ([*SCRATCH, "--set", "small.layers=3"], "shrinks in layers"),
    ([*SCRATCH, "--set", "large.heads=5"], "heads (5) must divide hidden (96)"),
    (["--method", "scratch", "--task", "deit_s_b", "--scale", "mini", "--quiet", "--set", "data_path={wrong}/none"],
     "fashion"),
    # recipe values: refused before anything is written (they used to train uphill, record NaN or crash later)
    ([*SCRATCH, "--set", "grad_clip=-1"], "grad_clip must be a finite number >= 0"),
    ([*SCRATCH, "--set", "grad_accum=0"], "grad_accum must be an integer >= 1, got 0"),
    ([*SCRATCH, "--set", "eval_batches=0"], "eval_batches must be an integer >= 1"),
    ([*SCRATCH, "--set", "steps=-5"], "steps must be an integer >= 0"),
    ([*SCRATCH, "--set", "warmup=-1"], "warmup must be an integer >= 0"),
    ([*SCRATCH, "--set", "warmup=9"], "warmup (9) must not exceed steps (8)"),
    ([*SCRATCH, "--set", "eval_every=-5"], "eval_every must be an integer >= 1"),
    ([*SCRATCH, "--set", "eval_every=0"], "eval_every must be an integer >= 1"),
    ([*SCRATCH, "--set", "log_every=0"], "log_every must be an integer >= 1"),
    ([*SCRATCH, "--set", "seq_len=64"], "seq_len (64) exceeds the positions"),
    ([*SCRATCH, "--set", "adam_betas=0.5"], "adam_betas must be a pair"),
    ([*SCRATCH, "--set", "adam_betas=0.9,1.5"], "adam_betas must be a pair"),
    ([*SCRATCH, "--set", "batch_size=0"], "batch_size must be an integer >= 1"),
    ([*SCRATCH, "--set", "batch_size=-1"], "batch_size must be an integer >= 1"),
    ([*SCRATCH, "--set", "lr=-1"], "lr must be a finite number > 0"),
    ([*SCRATCH, "--set", "lr=nan"], "lr must be a finite number > 0"),
    ([*SCRATCH, "--set", "adam_eps=0"], "adam_eps must be a finite number > 0"),
    ([*SCRATCH, "--set", "weight_decay=-0.1"], "weight_decay must be a finite number >= 0"),
    ([*SCRATCH, "--set", "schedule=bogus"], "schedule must be one of linear"),
    ([*SCRATCH, "--set", "schedule=reduce_lr_on_plateau"], "schedule must be one of linear"),
    ([*SCRATCH, "--seed", "-1"], "--seed must be an integer in [0, 2**63), got -1"),
    ([*SCRATCH, "--seed", str(2**70)], "--seed must be an integer in [0, 2**63)"),
    ([*SCRATCH, "--set", "layer_drop=0.1", "--set", "layer_drop_gamma=nan"],
     "layer_drop_gamma must be a finite number"),
    ([*SCRATCH, "--set", "layer_drop=0.1", "--set", "layer_drop_gamma=inf"],
     "layer_drop_gamma must be a finite number"),
    (["--method", "mslt", *TINY, "--steps", "1", "--set", "warmup=0"], "mslt needs at least 2 steps"),
    # settings that were silently dropped or overruled
    ([*SCRATCH, "--set", "steps=6", "--steps", "4"], "--steps and --set steps=... both set the run's steps"),
    ([*SCRATCH, "--set", "eval.lr=1e-4"], "--set eval.* settings need --eval"),
    ([*SCRATCH, "--small", "{wrong}/bert3"], "method 'scratch' grows from no small model"),
    ([*SCRATCH, "--set", "layer_drop="], "--set layer_drop= has no value"),
    # downstream data that is not there is found before the model trains, not after
    ([*SCRATCH, "--eval", "--suite", "glue", "--only", "sst2", "--set", "eval.data_dir={tmp}"],
     "SST-2/train.tsv not found"),
    ([*SCRATCH, "--eval", "--suite", "squad", "--set", "eval.data_dir={tmp}"], "train-v1.1.json not found"),
    (["--method", "scratch", "--task", "deit_s_b", "--scale", "tiny", "--quiet", "--eval", "--suite", "transfer",
      "--only", "cifar10", "--set", "eval.data_dir={tmp}"], "cifar10/train not found"),
    # paths
    ([*SCRATCH, "--set", "data_path="], "data_path is empty"),
    ([*SCRATCH, "--set", "data_path={tmp}/empty.txt"], "empty.txt holds no text"),
    ([*SCRATCH, "--set", "data_path={tmp}/binary.dat"], "binary.dat is not a UTF-8 text file"),
    ([*SCRATCH, "--set", "data_path={tmp}/five.txt"], "five.txt holds one line of text"),
    ([*SCRATCH, "--set", "data_path={tmp}/missing.txt"], "missing.txt does not exist"),
    ([*SCRATCH, "--set", "tokenizer=no-such-tokenizer"], "tokenizer 'no-such-tokenizer' cannot be loaded"),
    (["--method", "scratch", "--task", "deit_s_b", "--scale", "tiny", "--quiet", "--set", "data_path=README.md"],
     "digits data set is embedded"),
    ([*SCRATCH, "--out", ""], "--out is empty"),
    ([*SCRATCH, "--out", "{tmp}/afile"], "afile is a file, not a directory"),
    ([*SCRATCH, "--out", "{tmp}/afile/run"], "afile is a file, not a directory"),
    ([*SCRATCH, "--out", "{tmp}/exported"], "is not a run directory"),
    ([*SCRATCH, "--out", "{tmp}/exported", "--overwrite"], "is not a run directory"),
    ([*SCRATCH, "--out", "{tmp}/orphan", "--resume"], "holds checkpoint.pt, metrics.jsonl but no config.json"),
    ([*SCRATCH, "--out", "{tmp}/orphan", "--overwrite"], "holds checkpoint.pt, metrics.jsonl but no config.json"),
    ([*SCRATCH, "--resume", "--overwrite"], "contradict each other"),
    # accepted, then failing after the small model trained and leaving a half-written run, or silently wrong
    (["--method", "hypercloning", "--task", "llama_small_base", "--scale", "tiny", "--quiet", "--set", "snr_db=abc"],
     "--set snr_db=abc: expected float"),
    (["--method", "net2net", *TINY, "--set", "index_map=foo"], "net2net index_map must be one of balanced"),
    (["--method", "ligo", *TINY, "--set", "seed=-1"], "ligo seed must be an integer in [0, 2**63), got -1"),
    ([*SCRATCH, "--set", "small.ffn=-4"], "--set small.ffn=-4: the small model's ffn must be positive"),
    ([*SCRATCH, "--set", "large.vocab=-1"], "vocab must be >= 0"),
    ([*SCRATCH, "--set", "large.class_layers=2", "--set", "small.class_layers=2"], "the bert family has no use for it"),
    (["--method", "scratch", "--task", "deit_s_b", "--scale", "tiny", "--quiet", "--set", "large.vocab=100",
      "--set", "small.vocab=100"], "the vit family has no use for it"),
    # refused when the tokenizer is trained (nothing cached; runs.preflight.check_vocab where it was cached before)
    ([*SCRATCH, "--set", "large.vocab=5", "--set", "small.vocab=5"], "5 is smaller than the"),
    (["--method", "stackbert", *TINY, "--set", "small_recipe.steps=0"], "give small_recipe.steps >= 1"),
    ([*SCRATCH, "--set", "lr=1e-3", "--set", "lr=2e-3"], "--set lr given twice"),
    ([*SCRATCH, "--fsdp"], "--fsdp shards the model over torchrun's processes"),
    ([*SCRATCH, "--resume", "--out", "{tmp}/nowhere"], "nothing to resume"),
    ([*SCRATCH, "--eval", "--set", "eval.seeds=0,0"], "seeds must be distinct integers"),
    ([*SCRATCH, "--eval", "--set", "eval.data_dir={tmp}/nowhere"], "no such directory"),
    (["--evaluate", str(ROOT / "records" / "mini" / "bert_small_base-mini" / "ligo-s0"), "--steps", "3"],
     "trains nothing: drop --out, --steps"),
]


@pytest.mark.parametrize("args,needle", BAD, ids=[b[1][:30] for b in BAD])
def test_bad_input_table(args, needle, wrong_models, tmp_path, capsys):
    bad_inputs(tmp_path)
    args = [a.replace("{wrong}", str(wrong_models)).replace("{tmp}", str(tmp_path)) for a in args]
    if "--out" not in args:
        args += ["--out", str(tmp_path / "out")]
    before, cache = snapshot(tmp_path), temporaries()
    assert run.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and needle.lower() in err.lower(), err
    assert snapshot(tmp_path) == before and temporaries() == cache


def temporaries() -> set:
    """Temporary files in the tokenizer/token-id cache: a refused corpus must leave none behind."""
    root = Path(os.environ.get("GROWBENCH_CACHE") or "~/.cache/growbench").expanduser()
    return set(root.rglob("*.tmp"))


def test_resume_refuses_corrupt_checkpoint_and_other_task(tmp_path, capsys):
    out = tmp_path / "r"
    assert run.main(["--method", "scratch", *TINY, "--steps", "4", "--set", "eval_every=2", "--out", str(out)]) == 0
    (out / "summary.json").unlink()
    (out / "checkpoint.pt").write_bytes(b"not a checkpoint")
    before = snapshot(out)
    assert run.main(["--method", "scratch", *TINY, "--steps", "4", "--out", str(out), "--resume"]) == 2
    assert "another configuration (differs in: recipe.eval_every)" in capsys.readouterr().err
    assert run.main(["--method", "scratch", *TINY, "--steps", "4", "--set", "eval_every=2", "--out", str(out),
                     "--resume"]) == 2
    assert "corrupt checkpoint" in capsys.readouterr().err
    assert run.main(["--method", "scratch", "--task", "gpt2_base_medium", "--scale", "tiny", "--quiet",
                     "--out", str(out), "--resume"]) == 2
    assert "another task" in capsys.readouterr().err
    assert snapshot(out) == before


def test_resume_compares_method_settings_not_what_growing_recorded(tmp_path, capsys):
    """A depth method's record once kept the block sources it grew (they are growth.json's): written when the sweep
    grew the method to look for a twin before training. Such a record resumes; another width operator does not."""
    import json
    out = tmp_path / "r"
    args = ["--method", "interpolation", *TINY, "--steps", "4", "--set", "eval_every=2", "--out", str(out)]
    assert run.main(args) == 0
    (out / "summary.json").unlink()
    config = json.loads((out / "config.json").read_text())
    config["method"]["composition"]["applied"] = json.loads((out / "growth.json").read_text())
    (out / "config.json").write_text(json.dumps(config))
    before = snapshot(out)
    assert run.main(args + ["--set", "width=direct_copy", "--resume"]) == 2
    assert "differs in: config.width" in capsys.readouterr().err
    assert snapshot(out) == before
    assert run.main(args + ["--resume"]) == 0
    assert load_run(out).summary["step"] == 4


OTHER_CLIS = [  # (module, arguments, what the one-line error must say): refused before anything is written
    ("analysis", ["--runs", str(ROOT / "records" / "mini"), "--out", "{tmp}/afile"], "afile: it is a file"),
    ("analysis", ["--runs", "{tmp}/afile", "--out", "{tmp}/results"], "afile: a file, not a directory"),
    ("analysis", ["--runs", str(ROOT / "records" / "mini"), "--out", "{tmp}/results", "--formats", "png", "jpgx"],
     "--formats jpgx: not a figure format"),
    # a folder no analysis wrote (a user's files could be overwritten), the current one by an empty path, a run
    ("analysis", ["--runs", str(ROOT / "records" / "mini"), "--out", "{tmp}/exported"], "holds files that no earlier"),
    ("analysis", ["--runs", str(ROOT / "records" / "mini"), "--out", ""], "--out: an empty path"),
    ("analysis", ["--runs", "", "--out", "{tmp}/results"], "--runs: an empty path"),
    ("analysis", ["--runs", str(ROOT / "records" / "mini"), "--out", "{tmp}/arun/results"], "inside the run record"),
    ("bench.sweeps.cli", ["bert", "--methods", "ligoo", "--dry-run"], "did you mean 'ligo'"),
    ("bench.sweeps.cli", ["bertt", "--dry-run"], "unknown sweep 'bertt'; did you mean 'bert'"),
    ("bench.sweeps.cli", ["recipes", "--runs", "ligo-warmupO", "--dry-run"],
     "unknown run label 'ligo-warmupO'; did you mean 'ligo-warmup0'"),
    ("bench.sweeps.cli", [], "no sweep named"),
    ("bench.sweeps.cli", ["bert", "--out", "{tmp}/arun/sweep", "--dry-run"], "inside the run record"),
    # what would fail each run after training (or fail every run) is refused before the first one
    ("bench.sweeps.cli", ["bert", "--set", "nosuchkey=1", "--out", "{tmp}/sw", "--dry-run"], "unknown --set key"),
    ("bench.sweeps.cli", ["bert", "--set", "fit_steps=3", "--out", "{tmp}/sw", "--dry-run"],
     "an option of ligo, ligo_copy, not of method 'scratch'"),
    ("bench.sweeps.cli", ["bert", "--eval", "nosuite", "--out", "{tmp}/sw", "--dry-run"], "unknown suite 'nosuite'"),
    ("bench.sweeps.cli", ["bert", "--eval", "mini", "--set", "eval.sedes=0", "--out", "{tmp}/sw", "--dry-run"],
     "unknown evaluation option 'sedes'; did you mean 'seeds'"),
    ("bench.sweeps.cli", ["bert", "--set", "eval.seeds=0", "--out", "{tmp}/sw", "--dry-run"],
     "--set eval.* settings need --eval SUITE"),
    ("bench.sweeps.cli", ["bert", "--out", "{tmp}/afile", "--dry-run"], "afile is a file"),
    ("bench.sweeps.cli", ["bert", "--set", "data_path={tmp}/missing.txt", "--out", "{tmp}/sw", "--dry-run"],
     "missing.txt does not exist"),
]


@pytest.mark.parametrize("module,args,needle", OTHER_CLIS, ids=[c[2][:30] for c in OTHER_CLIS])
def test_analysis_and_sweep_clis_refuse_bad_input(module, args, needle, tmp_path, capsys):
    import importlib
    bad_inputs(tmp_path)
    before = snapshot(tmp_path)
    main = importlib.import_module(f"{module}.__main__" if module == "analysis" else module).main
    assert main([a.replace("{tmp}", str(tmp_path)) for a in args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and needle in err, err
    assert snapshot(tmp_path) == before


BENCH_CLIS = [  # (benchmark module, arguments, what its error must say): refused before anything is measured
    ("throughput", ["--task", "bert_smal_base"], "did you mean 'bert_small_base'"),
    ("throughput", ["--scale", "big"], "unknown scale 'big'"),
    ("throughput", ["--repeats", "0"], "--repeats: must be an integer >= 1, got 0"),
    ("ligo_init_quality", ["--tasks", "gpt2_base_mediun"], "did you mean 'gpt2_base_medium'"),
    ("grow_cost", ["--pairs", "bert_base_larg"], "unknown pair 'bert_base_larg'"),
    ("grow_cost", ["--methods", "ligoo"], "did you mean 'ligo'"),
    ("ligo_fit_cost", ["--repeats", "0"], "--repeats: must be an integer >= 1"),
    ("gpu_mfu", ["--device", "cpu", "--steps", "-3"], "--steps: must be an integer >= 1, got -3"),
    ("depth_probe", ["--task", "bert_depth_onl"], "did you mean 'bert_depth_only'"),
    ("depth_probe", ["--task", "deit_s_b"], "deit_s_b is a vision task"),
    ("depth_probe", ["--layers", "2", "0"], "--layers: must be an integer >= 1, got 0"),
    ("depth_probe", ["--width", "small"], "bert_depth_only does not grow width"),
    ("depth_probe", ["--width", "half"], "invalid choice: 'half'"),
    # threads, devices, seeds and peaks: each failed inside the measurement (or every grow_cost child) before
    ("grow_cost", ["--threads", "-1"], "--threads: must be an integer >= 0, got -1"),
    ("throughput", ["--threads", "-1"], "--threads: must be an integer >= 0, got -1"),
    ("throughput", ["--device", "bogus"], "unknown device 'bogus'"),
    ("ligo_fit_cost", ["--device", "cuda:x"], "unknown device 'cuda:x'"),
    ("ligo_init_quality", ["--seed", "-1"], "--seed must be an integer in [0, 2**63), got -1"),
    ("mlm_targets", ["--seed", "-1"], "--seed must be an integer in [0, 2**63), got -1"),
    ("depth_probe", ["--seed", "-1"], "--seed must be an integer in [0, 2**63), got -1"),
    ("budgets", ["--seed", "-1", "--device", "cpu"], "--seed must be an integer in [0, 2**63), got -1"),
    ("gpu_mfu", ["--device", "cpu", "--peak-tflops", "-5"], "--peak-tflops: must be a finite number > 0, got -5"),
]
BENCH_SCRIPTS = sorted({c[0] for c in BENCH_CLIS} | {"gpu_mfu", "budgets", "mlm_targets"})


def bench_main(name: str):
    """The `main` of bench's script `name`, in whichever room of bench/ holds it (perf/ or experiments/)."""
    import importlib
    import importlib.util
    rooms = [f"bench.{room}.{name}" for room in ("perf", "experiments")]
    found = [module for module in rooms if importlib.util.find_spec(module)]
    assert len(found) == 1, f"{name}: in {found or 'none'} of {rooms}"
    return importlib.import_module(found[0]).main


@pytest.mark.parametrize("module,args,needle", BENCH_CLIS, ids=[f"{c[0]}-{c[2][:20]}" for c in BENCH_CLIS])
def test_benchmark_clis_refuse_bad_input_in_one_line_and_write_nothing(module, args, needle, tmp_path, capsys):
    """A task typo was a KeyError traceback, --repeats 0 a StatisticsError after the measurement, a grow_cost
    typo a result file of error rows and exit 0."""
    main = bench_main(module)
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--out", str(tmp_path / "result.json")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0], err
    assert not any(tmp_path.iterdir())


PARSER_ERRORS = [  # (module, arguments, what the line must say): argparse's own refusals, each one line, no usage block
    ("run", ["--seed", "abc"], "argument --seed: invalid int value: 'abc'"),
    ("run", ["--method", "ligo", "--bogus"], "unrecognized arguments: --bogus"),
    ("run", ["--set"], "argument --set: expected one argument"),
    ("bench.sweeps.cli", ["bert", "--seeds", "x"], "argument --seeds: invalid int value: 'x'"),
    ("analysis.__main__", ["--runs", "{tmp}"], "the following arguments are required: --out"),
    ("bench.perf.throughput", ["--repeats", "x"], "argument --repeats: 'x' is not an integer"),
    ("bench.perf.budgets", ["--only", "everything"], "argument --only: invalid choice: 'everything'"),
]


@pytest.mark.parametrize("module,args,needle", PARSER_ERRORS, ids=[f"{c[0]}-{c[2][:24]}" for c in PARSER_ERRORS])
def test_argument_errors_are_one_line(module, args, needle, tmp_path, capsys):
    """A mistyped flag printed argparse's usage block (five lines for run.py) above the line that says what was
    wrong; every command line now refuses as its own checks do: one `error:` line naming the problem and --help."""
    import importlib
    main = importlib.import_module(module).main
    before = snapshot(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main([a.replace("{tmp}", str(tmp_path)) for a in args])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0] and "--help" in err[0], err
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("module", BENCH_SCRIPTS)
def test_benchmark_result_file_is_checked_before_the_measurement(module, tmp_path, capsys):
    """--out a folder (or under a file) was a traceback after the measurement, its result lost."""
    main = bench_main(module)
    (tmp_path / "afile").write_text("mine")
    for out, needle in ((tmp_path, "a folder; give the result file's path"),
                        (tmp_path / "afile" / "r.json", "afile is a file, not a directory")):
        with pytest.raises(SystemExit) as exit_:
            main(["--device", "cpu", "--out", str(out)] if module in ("gpu_mfu", "budgets") else ["--out", str(out)])
        assert exit_.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert needle in err[-1], err
    assert [p.name for p in tmp_path.iterdir()] == ["afile"] and (tmp_path / "afile").read_text() == "mine"


def test_grow_cost_writes_no_result_when_a_measurement_failed(tmp_path, monkeypatch, capsys):
    """A failing child was an "error" row in the result file (which replaces the committed one) and exit 0."""
    import subprocess

    import bench.perf.grow_cost as grow_cost
    monkeypatch.setattr(grow_cost.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, "", "boom\n"))
    out = tmp_path / "grow.json"
    assert grow_cost.main(["--pairs", "deit_s_b", "--methods", "scratch", "--out", str(out)]) == 1
    assert "1 measurement(s) failed (deit_s_b scratch); nothing written" in capsys.readouterr().err
    assert not out.exists()


def test_grow_cost_records_a_pair_the_method_refuses_as_not_applicable(tmp_path, capsys):
    """LEMON refuses post-LN BERT in depth: a row that says so (the method's own reason), not a failed measurement."""
    import json

    import bench.perf.grow_cost as grow_cost
    out = tmp_path / "grow.json"
    assert grow_cost.main(["--pairs", "bert_base_large", "--methods", "lemon", "--out", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["method"] == "lemon" and "cannot grow post-LN bert in depth" in row["not_applicable"]


DAMAGED_RUNS = [({"summary.json": "{}"}, "summary.json but no config.json"),
                ({"config.json": "{bad", "summary.json": "{}"}, "config.json: not valid JSON"),
                ({"config.json": "{bad"}, "config.json: not valid JSON"),
                ({"model.pt": "weights"}, "no config.json: not a run record")]


@pytest.mark.parametrize("files,needle", DAMAGED_RUNS)
def test_sweep_refuses_a_damaged_run_directory_before_any_run(files, needle, tmp_path, capsys):
    """A complete record without its config (or with a damaged one) was a traceback or a message naming no file,
    and only when its turn came; now the plan is refused, naming the directory, and nothing there is touched."""
    from bench.sweeps.cli import main
    damaged = tmp_path / "bert_small_base-regime" / "stackbert-s0"        # the default scale
    damaged.mkdir(parents=True)
    for name, text in files.items():
        (damaged / name).write_text(text)
    before = snapshot(tmp_path)
    assert main(["bert", "--out", str(tmp_path), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and needle in err and str(damaged) in err, err
    assert snapshot(tmp_path) == before


def test_small_model_cache_key_follows_the_data_and_the_tokenizer(tmp_path):
    """A growth run on a local corpus must not grow from a small model pretrained on another one."""
    from runs.small_model import small_cache_dir
    from tasks import get_task
    task = get_task("bert_small_base", "tiny")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("one corpus\nof two lines\n")
    local = small_cache_dir(task.with_(data_path=str(corpus)), 0)
    assert local != small_cache_dir(task, 0)
    corpus.write_text("another corpus, edited\nof two lines\n")
    assert small_cache_dir(task.with_(data_path=str(corpus)), 0) != local
    saved = tmp_path / "tokenizer"
    saved.mkdir()
    (saved / "tokenizer.json").write_text("{}")
    first = small_cache_dir(task.with_(tokenizer=str(saved)), 0)
    (saved / "tokenizer.json").write_text('{"edited": true}')
    assert small_cache_dir(task.with_(tokenizer=str(saved)), 0) != first


def test_every_allowed_schedule_is_one_the_trainer_can_drive():
    from transformers import SchedulerType, get_scheduler
    from tasks.task import SCHEDULES
    for name in SCHEDULES:
        assert name in {t.value for t in SchedulerType}
        optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
        scheduler = get_scheduler(name, optimizer, num_warmup_steps=2, num_training_steps=8)
        for _ in range(8):
            optimizer.step()
            scheduler.step()         # as the trainer calls it: no metric


def test_os_errors_print_their_reason_and_path_not_their_number():
    assert run.error_line(FileExistsError(17, "File exists", "/x/run")) == "error: /x/run: File exists"
    assert run.error_line(FileNotFoundError("no such thing\nsecond line")) == "error: no such thing second line"


def test_device_names_are_checked_against_the_machine(monkeypatch):
    """`cuda:abc` was let through to torch.device (a traceback), `cuda:7` on a one-GPU machine to the first
    tensor moved; both are refused in one line, as a cuda without a GPU is. (A GPU is simulated: the check
    reads only is_available and device_count.)"""
    import torch

    from runs.cli import resolve_device
    assert resolve_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="unknown device 'cuda:abc'"):
        resolve_device("cuda:abc")
    with pytest.raises(ValueError, match="unknown device 'gpu'"):
        resolve_device("gpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert [resolve_device(name) for name in ("auto", "cuda", "cuda:0")] == ["cuda", "cuda", "cuda:0"]
    with pytest.raises(ValueError, match="this machine has 1 CUDA device"):
        resolve_device("cuda:7")
