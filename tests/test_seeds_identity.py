"""Seeds that seed and runs that carry their identity (issue 43): a run's --seed is its growth method's seed unless
one is set; a checkpoint names its run and its last logged step, and --resume refuses one of another run or a
record whose rows do not reach it; --out inside another run, absurd sizes, a config of the wrong types and a
non-UTF-8 --out are refused in one line before anything is written."""
import json

import pytest
import torch

import run
from methods import get_method
from runs.record import load_run
from tasks import make_task

TINY = ["--task", "bert_small_base", "--scale", "tiny", "--quiet"]
SMALL = dict(layers=2, hidden=32, heads=2)
# the methods with a seed, each on a pair where it draws (HyperCloning only with noise, on an integer ratio)
DRAWS = {"ligo": (dict(fit_steps=0), dict(layers=4, hidden=48, heads=3)),
         "lemon": ({}, dict(layers=4, hidden=48, heads=3)),
         "net2net": ({}, dict(layers=4, hidden=48, heads=3)),
         "stackbert": ({}, dict(layers=4, hidden=48, heads=3)),          # its width operator's draws
         "hypercloning": (dict(snr_db=20.0), dict(layers=2, hidden=64, heads=4))}


def grown(method, task, small):
    torch.manual_seed(0)           # as run_experiment does before grow: only the method's own seed differs
    return method.grow(small, task).state_dict()


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_the_run_seed_seeds_the_methods_draws_unless_set(name, trained):
    options, large = DRAWS[name]
    task = make_task("gpt2", small=SMALL, large=large, scale="tiny")
    method = get_method(name, task=task, **options)
    at = {seed: grown(method.for_run(seed), task, trained(task.small)) for seed in (0, 1)}
    default = grown(get_method(name, task=task, **options), task, trained(task.small))
    # seed 0 draws what every seed drew before (the committed seed-0 records stay this computation)
    assert all(torch.equal(at[0][k], default[k]) for k in default)
    assert any(not torch.equal(at[0][k], at[1][k]) for k in default), f"{name}: seed 1 drew what seed 0 drew"
    described = method.for_run(1).describe()
    assert described["config"]["seed"] == 1 and described["seed_source"] == "run"
    fixed = get_method(name, task=task, seed=5, **options)
    assert fixed.for_run(1).describe()["config"]["seed"] == 5 and fixed.for_run(1).describe()["seed_source"] == "set"


def test_methods_without_a_seed_are_unchanged_by_the_run_seed():
    method = get_method("scratch")
    assert method.for_run(3) is method and "seed_source" not in method.describe()


def test_the_record_says_the_methods_seed_and_where_it_came_from(tmp_path):
    args = ["--method", "net2net", *TINY, "--steps", "0", "--seed", "1"]
    assert run.main([*args, "--out", str(tmp_path / "run")]) == 0
    assert run.main([*args, "--set", "seed=5", "--out", str(tmp_path / "set")]) == 0
    derived, chosen = (load_run(tmp_path / d).config for d in ("run", "set"))
    assert derived["seed"] == chosen["seed"] == 1
    assert (derived["method"]["config"]["seed"], derived["method"]["seed_source"]) == (1, "run")
    assert (chosen["method"]["config"]["seed"], chosen["method"]["seed_source"]) == (5, "set")


# -- a checkpoint carries its run's identity and its last logged step ------------------------------------------
SCRATCH = ["--method", "scratch", *TINY, "--steps", "8", "--set", "eval_every=2"]


def snapshot(path):
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def killed_after_its_last_checkpoint(out, *extra):
    """A complete run whose summary is gone: --resume continues it from checkpoint.pt (at the last step)."""
    assert run.main([*SCRATCH, *extra, "--out", str(out)]) == 0
    (out / "summary.json").unlink()
    return out


def assert_refused(args, needle, out, capsys):
    capsys.readouterr()
    before = snapshot(out)
    assert run.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and needle in err, err
    assert snapshot(out) == before


def test_a_run_logs_rows_where_logged_steps_says(tmp_path):
    """check_checkpoint's rule for where rows are is the trainer's: a run's rows are exactly logged_steps."""
    from runs.preflight import logged_steps
    from tasks import get_task
    out = tmp_path / "run"
    assert run.main(["--method", "scratch", *TINY, "--steps", "10", "--set", "log_every=3", "--set", "eval_every=4",
                     "--out", str(out)]) == 0
    recipe = get_task("bert_small_base", "tiny").recipe.with_(steps=10, log_every=3, eval_every=4)
    rows, evals = logged_steps(recipe, 10)
    assert [r["step"] for r in load_run(out).metrics] == rows == [0, 3, 4, 6, 8, 9, 10]
    assert evals == [r["step"] for r in load_run(out).metrics if "eval_loss" in r and r["step"] > 0]


def test_resume_refuses_a_checkpoint_of_another_run(tmp_path, capsys):
    mine = killed_after_its_last_checkpoint(tmp_path / "mine", "--set", "lr=3e-4")
    other = killed_after_its_last_checkpoint(tmp_path / "other")          # the task's lr: another computation
    checkpoint = torch.load(mine / "checkpoint.pt", weights_only=False)
    assert checkpoint["logged_step"] == 8 and len(checkpoint["run"]) == 40
    (mine / "checkpoint.pt").write_bytes((other / "checkpoint.pt").read_bytes())
    assert_refused([*SCRATCH, "--set", "lr=3e-4", "--out", str(mine), "--resume"], "was written by another run", mine, capsys)
    # a run of the same settings is the same computation: its checkpoint continues this one exactly
    same = killed_after_its_last_checkpoint(tmp_path / "same")
    (same / "checkpoint.pt").write_bytes((other / "checkpoint.pt").read_bytes())
    assert run.main([*SCRATCH, "--out", str(same), "--resume"]) == 0
    assert load_run(same).summary["eval_loss"] == load_run(other).metrics[-1]["eval_loss"]


@pytest.mark.parametrize("lost,needle", [
    ([4], "lacks the rows of step(s) 4 up to"),                   # a gap the analysis would read across
    ([6, 8], "lacks the rows of step(s) 6, 8 up to"),             # a complete run cut: it "resumed" to n/a
])
def test_resume_refuses_rows_that_do_not_reach_the_checkpoint(lost, needle, tmp_path, capsys):
    out = killed_after_its_last_checkpoint(tmp_path / "run")
    rows = (out / "metrics.jsonl").read_text().splitlines(keepends=True)
    (out / "metrics.jsonl").write_text("".join(r for r in rows if json.loads(r)["step"] not in lost))
    assert_refused([*SCRATCH, "--out", str(out), "--resume"], needle, out, capsys)


def test_resume_refuses_a_checkpoint_older_than_the_record_and_notes_one_without_identity(tmp_path, capsys):
    out = killed_after_its_last_checkpoint(tmp_path / "run")
    checkpoint = torch.load(out / "checkpoint.pt", weights_only=False)
    older = {**checkpoint, "logged_step": 4, "state": {**checkpoint["state"], "step": 4}}
    torch.save(older, out / "checkpoint.pt")
    assert_refused([*SCRATCH, "--out", str(out), "--resume"], "goes on to step 8, past the evaluation after", out, capsys)
    # written before checkpoints carried their run: continued, and said so
    torch.save({k: v for k, v in checkpoint.items() if k not in ("run", "logged_step")}, out / "checkpoint.pt")
    capsys.readouterr()
    assert run.main([*SCRATCH, "--out", str(out), "--resume"]) == 0
    assert "predates checkpoints that name their run" in capsys.readouterr().err
    assert load_run(out).summary["step"] == 8


# -- paths, sizes and records refused before anything is written ---------------------------------------------
def test_out_inside_another_run_is_refused(tmp_path, capsys):
    record = tmp_path / "run"
    record.mkdir()
    for name in ("config.json", "metrics.jsonl"):      # what makes a directory a run record (enclosing_record)
        (record / name).write_text("{}\n")
    for nested in (record / "mine", record / "model" / "mine"):
        assert_refused([*SCRATCH, "--out", str(nested)], f"is inside the run record {record}", tmp_path, capsys)


def test_out_that_is_not_utf8_is_refused(tmp_path, capsys):
    bad = str(tmp_path) + "/run-\udcff"            # how Python hands over argv bytes that are not UTF-8
    assert_refused([*SCRATCH, "--out", bad], "is not valid UTF-8", tmp_path, capsys)


@pytest.mark.parametrize("sizes,needle", [
    (["large.layers=100000000"], "the large model (bert 100000000L/96H"),        # out of memory, after the record
    (["large.vocab=1000000000000", "small.vocab=1000000000000"],                 # aborted in the tokenizer's Rust
     "needs at least 2.56e+14 bytes for its float32 weights alone, more than this machine's"),
    (["batch_size=1000000000"],                                                   # numpy MemoryError, after the record
     "a micro-batch of batch_size 1000000000 needs at least"),
])
def test_absurd_sizes_are_refused_before_anything_is_written(sizes, needle, tmp_path, capsys):
    settings = [a for s in sizes for a in ("--set", s)]
    assert_refused([*SCRATCH, *settings, "--out", str(tmp_path / "run")], needle, tmp_path, capsys)


@pytest.fixture(scope="module")
def interrupted_record(tmp_path_factory):
    return killed_after_its_last_checkpoint(tmp_path_factory.mktemp("types") / "run")


@pytest.mark.parametrize("edit,needle", [
    (lambda c: c.update(distributed=[1]), "distributed is an array ([1]), not an object or null"),   # a traceback
    (lambda c: c.update(seed="0"), 'seed is a string ("0"), not an integer'),           # read 'seed 0, not 0'
    (lambda c: c["method"].update(config=[]), "method.config is an array"),
    (lambda c: c.update(small=3), "small is an integer (3), not an object or null"),
])
def test_resume_refuses_a_config_of_the_wrong_json_types(edit, needle, interrupted_record, tmp_path, capsys):
    import shutil
    out = tmp_path / "run"
    shutil.copytree(interrupted_record, out)
    config = json.loads((out / "config.json").read_text())
    edit(config)
    (out / "config.json").write_text(json.dumps(config))
    assert_refused([*SCRATCH, "--out", str(out), "--resume"], needle, out, capsys)


def test_a_cached_small_model_of_another_vocabulary_is_refused(tmp_path):
    """The small-model cache is keyed by the tokenizer's name: a cached model whose saved tokenizer numbers tokens
    otherwise than the tokenizer the run reads its data with (a trained tokenizer retrained since) is refused in one
    line instead of being grown with its embeddings read against the wrong ids."""
    import json as _json
    from runs.small_model import check_cached_tokenizer
    from tasks import get_task
    task = get_task("bert_small_base", scale="tiny")
    cache = tmp_path / "entry"
    task.pretrain_data().tokenizer.save_pretrained(cache / "model")
    check_cached_tokenizer(task, cache)                       # the same vocabulary: accepted
    file = cache / "model" / "tokenizer.json"
    saved = _json.loads(file.read_text())
    vocab = saved["model"]["vocab"]
    a, b = sorted(vocab, key=vocab.get)[10:12]                 # two ordinary tokens swap their ids
    vocab[a], vocab[b] = vocab[b], vocab[a]
    file.write_text(_json.dumps(saved))
    with pytest.raises(ValueError, match="pretrained with another wordpiece vocabulary"):
        check_cached_tokenizer(task, cache)
