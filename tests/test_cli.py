"""The CLI end to end at tiny scale: every paper task runs, records are readable, bad input is refused."""
import subprocess
import sys
from pathlib import Path

import pytest

import run
from runs.record import SAME_RESULT, load_run
from tasks import list_tasks

ROOT = Path(__file__).resolve().parents[1]


def call(*args) -> int:
    return run.main(list(args))


@pytest.mark.parametrize("task", list_tasks())
def test_scratch_tiny_runs_for_every_task(task, tmp_path, capsys):
    out = tmp_path / "run"
    assert call("--method", "scratch", "--task", task, "--scale", "tiny", "--out", str(out), "--quiet") == 0
    assert f"record: {out}" in capsys.readouterr().out
    record = load_run(out)
    assert record.complete and record.method == "scratch" and record.task == task
    flops = [row["flops"] for row in record.metrics]
    assert flops[0] == 0 and all(b > a for a, b in zip(flops, flops[1:]))
    assert record.summary["flops"] == flops[-1]
    assert [r["step"] for r in record.metrics if "eval_loss" in r][-1] == record.config["task"]["recipe"]["steps"]
    assert (out / "model").is_dir()


def test_growth_method_pretrains_and_caches_the_small_model(tmp_path, capsys):
    args = ("--method", "stackbert", "--task", "bert_depth_only", "--scale", "tiny", "--quiet")
    assert call(*args, "--out", str(tmp_path / "a")) == 0
    assert "pretraining the small model first" in capsys.readouterr().err
    assert call(*args, "--out", str(tmp_path / "b")) == 0
    assert "pretraining the small model first" not in capsys.readouterr().err
    first, second = (load_run(tmp_path / d).config["small"] for d in "ab")
    assert second["source"] == "cache" and second["pretrain_flops"] > 0
    # both grew from the one cache entry; the record says which run paid for its pretraining
    assert first["path"] == second["path"] and first["pretrain_flops"] == second["pretrain_flops"]
    assert (first["obtained"], second["obtained"]) == ("pretrained by this run", "found in the cache")
    # and which pretraining of it: how the cache entry's record ended, its final eval included
    ended = load_run(Path(first["path"])).summary
    assert first["pretrain_result"] == second["pretrain_result"] == {k: ended[k] for k in SAME_RESULT if k in ended}
    assert first["pretrain_result"]["eval_loss"] > 0


def test_small_recipe_settings_change_the_small_models_pretraining_only(tmp_path, capsys):
    """A plain recipe key changes the growth run; `small_recipe.KEY` the small model's pretraining, which is
    then pretrained anew (the cache key holds the small recipe) and recorded in the run's config."""
    args = ("--method", "stackbert", "--task", "bert_depth_only", "--scale", "tiny", "--quiet")
    assert call(*args, "--out", str(tmp_path / "a")) == 0
    capsys.readouterr()
    assert call(*args, "--set", "small_recipe.warmup=1", "--set", "lr=3e-4", "--out", str(tmp_path / "b")) == 0
    assert "pretraining the small model first" in capsys.readouterr().err
    default, changed = (load_run(tmp_path / d).config["task"] for d in "ab")
    assert changed["small_recipe"]["warmup"] == 1 != default["small_recipe"]["warmup"]
    assert changed["recipe"]["warmup"] == default["recipe"]["warmup"]
    assert changed["recipe"]["lr"] == 3e-4 and changed["small_recipe"]["lr"] == default["small_recipe"]["lr"]


def test_list_names_methods_and_tasks(capsys):
    assert call("--list") == 0
    text = capsys.readouterr().out
    assert "scratch" in text and "bert_small_base" in text and "cait_xs_s" in text
    assert "StackBERT: large block l copies small block l mod L1" in text      # a description per method
    assert "2L/128H/2 -> 4L/192H/3" in text                                    # bert_small_base at mini
    assert call("--list", "--scale", "paper") == 0 and "6L/512H/8 -> 12L/768H/12" in capsys.readouterr().out


def test_list_reads_the_registries_without_importing_torch():
    """--list parses the registries' source (runs/catalog.py) instead of importing them (~9 s of torch and
    transformers): it must not import them, and what it reads must be what the imported registries hold."""
    code = "import sys, run; run.main(['--list']); sys.exit(bool({'torch', 'transformers'} & set(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "ligo" in proc.stdout, proc.stderr
    from methods import METHODS
    from runs import catalog
    from tasks import PAIRS, SCALES, get_task
    shipped = {n: cls for n, cls in METHODS.items() if cls.__module__.startswith("methods.")}   # not test methods
    described = {n: catalog.summary(vars(cls).get("__doc__") or sys.modules[cls.__module__].__doc__)
                 for n, cls in shipped.items()}
    assert catalog.methods() == described and all(described.values())
    scales, pairs = catalog.tasks()
    assert scales == SCALES and set(pairs) == set(PAIRS)
    for name, (family, sizes) in pairs.items():
        for scale in SCALES:
            task = get_task(name, scale)
            assert family == task.family
            for read, spec in zip(sizes[scale], (task.small, task.large)):
                assert (read["layers"], read["hidden"], read["heads"]) == (spec.layers, spec.hidden, spec.heads)
                assert read.get("kv_heads", 0) == spec.kv_heads


@pytest.mark.parametrize("args,needle", [
    (("--method", "scrach", "--task", "bert_small_base"), "did you mean 'scratch'"),
    (("--method", "scratch", "--task", "bert_smal_base"), "did you mean 'bert_small_base'"),
    (("--method", "scratch", "--task", "bert_small_base", "--scale", "huge"), "unknown scale 'huge'"),
    (("--method", "scratch", "--task", "bert_small_base", "--set", "lrr=1"), "did you mean 'lr'"),
    (("--method", "scratch", "--task", "bert_small_base", "--set", "lr"), "malformed --set 'lr'"),
    (("--method", "scratch", "--task", "bert_small_base", "--set", "steps=abc"), "expected int"),
    (("--method", "scratch", "--task", "bert_small_base", "--steps", "-1"), "--steps must be >= 0"),
    (("--method", "ligo", "--task", "bert_small_base", "--set", "small_recipe.lrr=1"),
     "did you mean 'small_recipe.lr'"),
    (("--method", "ligo", "--task", "bert_small_base", "--set", "small_recipe.warmup=abc"), "expected int"),
    (("--method", "ligo", "--task", "bert_small_base", "--small", "/nonexistent", "--set",
      "small_recipe.warmup=3"), "which --small skips"),
    # pairs a method cannot grow: refused by its check_pair before the small model is pretrained or a file written
    (("--method", "g_stack", "--task", "llama_small_base", "--set", "growth_factor=4"),
     "g_stack growth_factor=4, but this pair grows depth 1 -> 2 (g = 2)"),
    (("--method", "hypercloning", "--task", "llama_small_base", "--set", "large.kv_heads=2"),
     "hypercloning clones whole key/value groups"),
    (("--method", "net2net", "--task", "llama_small_base", "--set", "large.kv_heads=2"),
     "net2net grows grouped-query attention by whole key/value groups"),
    (("--method", "stackbert", "--task", "llama_small_base", "--set", "large.kv_heads=2"),     # its width operator
     "net2net grows grouped-query attention by whole key/value groups"),
    (("--method", "ligo_copy", "--task", "llama_small_base", "--set", "large.kv_heads=2"),
     "ligo_copy's width_init='net2net'"),
    (("--method", "scratch", "--task", "gpt2_base_medium", "--set", "large.kv_heads=1"),
     "gpt2 has no grouped-query attention"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(args, needle, tmp_path, capsys):
    out = tmp_path / "never"
    assert call(*args, "--scale" if "--scale" not in args else "--seed", "tiny" if "--scale" not in args else "0",
                "--out", str(out)) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and err.startswith("error: ")
    assert not out.exists()


def test_existing_run_directory_is_not_clobbered(tmp_path, capsys):
    out = tmp_path / "run"
    args = ("--method", "scratch", "--task", "bert_small_base", "--scale", "tiny", "--out", str(out), "--quiet")
    assert call(*args) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert call(*args) == 2
    assert "--resume" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_list_one_method_prints_its_options(capsys):
    assert run.main(["--list", "--method", "ligo"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ligo: LiGO")
    assert "  fit_steps            int            default 100 (mini 20, tiny 3)\n" in out
    assert "accepts an integer >= 0 (0: grow with the initial operator)" in out
    assert '"depth_first" (official code) | "width_first" (paper Alg. 1)' in out      # the line's own comment
    assert run.main(["--list", "--method", "ligo_copy"]) == 0
    assert "one-hot on l mod L1" in capsys.readouterr().out
    assert run.main(["--list", "--method", "lgo"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown method 'lgo'; did you mean 'ligo'?")
