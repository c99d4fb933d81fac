"""The small models the repository ships (runs/shipped.py): each is its cache entry under today's key, the
computation of the committed record it names, weights that score what that record says; a run without --small
grows from one instead of pretraining, and falls back to pretraining where this machine's tokenizer differs."""
import json
import re
import shutil
from pathlib import Path

import pytest
import torch

import run
from models import get_family
from runs import shipped, small_model
from runs.atomic import read_json
from runs.record import CONFIG, SUMMARY, load_run, result_differences
from runs.trainer import evaluate
from tasks import get_task
from tasks.scales import DEFAULT_SCALE

ROOT = Path(__file__).resolve().parents[1]
ENTRY_NAME = re.compile(r"^(?P<task>[a-z0-9_]+)-(?P<scale>[a-z]+)-s(?P<seed>\d+)-(?P<digest>[0-9a-f]{10})$")
SHIPPED = small_model.SHIPPED_ROOT
ENTRIES = sorted(p for p in SHIPPED.iterdir() if p.is_dir()) if SHIPPED.is_dir() else []


def entry_task(entry: Path):
    m = ENTRY_NAME.match(entry.name)
    assert m, f"{entry.name}: not a small-model cache entry's name (<task>-<scale>-s<seed>-<digest>)"
    return get_task(m["task"], m["scale"]), int(m["seed"])


def test_the_readme_job_grows_from_a_shipped_small_model():
    """`python run.py --method ligo --task bert_small_base` (regime, seed 0) finds its small model shipped."""
    cache = small_model.small_cache_dir(get_task("bert_small_base", DEFAULT_SCALE), 0)
    assert small_model.shipped_entry(cache) is not None


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_a_shipped_entry_is_todays_cache_entry_of_a_committed_record(entry):
    """Named by the key the task's small model hashes to today (a recipe or spec change renames the cache entry,
    and this fails until the model is shipped again), and the computation of the committed record it names."""
    task, seed = entry_task(entry)
    assert small_model.small_cache_dir(task, seed).name == entry.name
    record = ROOT / read_json(entry / CONFIG)["shipped_as"]
    assert ROOT / "records" in record.parents                                    # a committed record
    assert result_differences(entry, record) == []
    assert not (entry / "checkpoint.pt").exists()


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_shipped_weights_score_the_recorded_eval_loss(entry):
    """The weights are the ones the record's final evaluation scored: the same eval batches give its loss, well
    below the unigram cross-entropy (weights that have learned, not a placeholder)."""
    task, seed = entry_task(entry)
    family = get_family(task.family)
    model = family.load(entry / "model")
    assert family.spec_of(model) == task.small
    data = task.small_task().pretrain_data()
    batches = data.eval_batches(task.small_recipe.batch_size, task.small_recipe.eval_batches)
    loss = evaluate(model, family, batches, torch.device("cpu"), bf16=False)["eval_loss"]
    summary, config = read_json(entry / SUMMARY), read_json(entry / CONFIG)
    assert loss == pytest.approx(summary["eval_loss"], rel=1e-5, abs=0)
    assert loss < config["reference"]["unigram_ce"] - 1.0


ARGS = ("--method", "stackbert", "--task", "bert_depth_only", "--scale", "tiny", "--seed", "7", "--quiet")


@pytest.fixture
def shipped_tiny(tmp_path, monkeypatch, capsys):
    """A tiny task's small model pretrained by a run, shipped into a temporary root as the committed record's
    computation, and the cache emptied, as on a fresh clone."""
    assert run.main([*ARGS, "--out", str(tmp_path / "pretrained-here")]) == 0
    cache = small_model.small_cache_dir(get_task("bert_depth_only", "tiny"), 7)
    record = tmp_path / "records" / "small-s7"
    record.mkdir(parents=True)
    shutil.copy2(cache / SUMMARY, record / SUMMARY)
    root = tmp_path / "shipped"
    monkeypatch.setattr(small_model, "SHIPPED_ROOT", root)
    entry = shipped.ship(cache, record, root)
    shutil.rmtree(cache)
    capsys.readouterr()
    return tmp_path, entry, cache


def test_a_run_grows_from_the_shipped_model_as_from_its_own_pretraining(shipped_tiny, capsys):
    tmp_path, entry, cache = shipped_tiny
    assert run.main([*ARGS, "--out", str(tmp_path / "from-shipped")]) == 0
    err = capsys.readouterr().err
    assert "pretraining the small model first" not in err and f"the one the repository ships in {entry}" in err
    here, there = (load_run(tmp_path / d) for d in ("pretrained-here", "from-shipped"))
    assert there.config["small"]["obtained"] == "shipped with the repository"
    assert there.config["small"]["path"] == here.config["small"]["path"] == str(cache)
    assert there.summary["eval_loss"] == here.summary["eval_loss"]
    assert [r.get("train_loss") for r in there.metrics] == [r.get("train_loss") for r in here.metrics]


def test_a_shipped_model_of_another_vocabulary_is_not_used(shipped_tiny, capsys):
    """Where this machine's tokenizer numbers the tokens otherwise, the shipped embeddings would be read against
    the wrong ids: the run says so and pretrains the small model itself."""
    tmp_path, entry, cache = shipped_tiny
    tokenizer = json.loads((entry / "model" / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    a, b = sorted(vocab, key=vocab.get)[-2:]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (entry / "model" / "tokenizer.json").write_text(json.dumps(tokenizer))
    assert run.main([*ARGS, "--out", str(tmp_path / "not-shipped")]) == 0
    err = capsys.readouterr().err
    assert f"not using the shipped small model {entry}" in err and "pretraining the small model first" in err
    assert load_run(tmp_path / "not-shipped").config["small"]["obtained"] == "pretrained by this run"


def test_ship_refuses_another_computation_and_writes_nothing(tmp_path):
    cache, record, root = tmp_path / "cache" / "t-tiny-s0-0123456789", tmp_path / "record", tmp_path / "shipped"
    (cache / "model").mkdir(parents=True)
    record.mkdir()
    (cache / SUMMARY).write_text(json.dumps({"step": 10, "flops": 1.0, "units": 4, "eval_loss": 3.5}))
    (record / SUMMARY).write_text(json.dumps({"step": 10, "flops": 1.0, "units": 4, "eval_loss": 3.25}))
    with pytest.raises(ValueError, match="eval_loss 3.5 vs 3.25"):
        shipped.ship(cache, record, root)
    assert not root.exists()
    with pytest.raises(ValueError, match="no complete small-model cache entry"):
        shipped.ship(tmp_path / "absent", record, root)
    with pytest.raises(ValueError, match="no committed record"):
        shipped.ship(cache, tmp_path / "absent", root)
    assert not root.exists()
