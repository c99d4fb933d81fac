"""Where runs go and what they say about themselves (issue 44): the default root is the current directory's runs/out
($GROWBENCH_OUT overrides it); a run of other settings in its default directory is refused naming --out; the first
line of a grown run names the small model it grew from; every exported model/ has a model card from the record; and
a sweep's log carries no transformers weight-loading bars."""
import json

import pytest

from methods import get_method
from runs import out_dirs
from runs.experiment import run_experiment
from runs.out_dirs import out_root
from runs.preflight import record_state
from runs.record import RunExistsError
from tasks import get_task


def tiny_task(steps=2):
    task = get_task("deit_s_b", "tiny")
    return task.with_(recipe=task.recipe.with_(steps=steps, eval_every=steps, log_every=1))


def test_the_default_root_is_runs_out_in_the_current_directory(tmp_path):
    assert out_root({}, tmp_path) == tmp_path / "runs" / "out"
    assert out_root({"GROWBENCH_OUT": str(tmp_path / "elsewhere")}, tmp_path / "cwd") == tmp_path / "elsewhere"


def test_other_settings_in_the_default_directory_are_refused_naming_out(tmp_path, monkeypatch):
    monkeypatch.setattr(out_dirs, "OUT_ROOT", tmp_path)
    task = tiny_task()
    quiet = dict(progress=False, log=lambda m: None)
    out = run_experiment(task, get_method("scratch", task=task), **quiet)
    assert out.parent.parent == tmp_path
    before = record_state(out)
    longer = tiny_task(steps=3)
    for flags in ({}, {"resume": True}):
        with pytest.raises(RunExistsError, match=r"other settings \(differs in: recipe.eval_every, recipe.steps\); "
                                                 r"pass --out DIR to keep both, or --overwrite"):
            run_experiment(longer, get_method("scratch", task=longer), **quiet, **flags)
    assert record_state(out) == before                       # nothing written
    with pytest.raises(RunExistsError, match="pass --resume to continue it or --overwrite"):   # the same settings
        run_experiment(task, get_method("scratch", task=task), **quiet)
    run_experiment(longer, get_method("scratch", task=longer), overwrite=True, **quiet)      # asked for: replaced
    assert json.loads((out / "summary.json").read_text())["step"] == 3


def test_a_grown_run_names_its_small_model_and_its_export_has_a_card(tmp_path):
    task = tiny_task()
    said = []
    out = run_experiment(task, get_method("net2net", task=task), out=tmp_path / "run", progress=False, log=said.append)
    config = json.loads((out / "config.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    cache = config["small"]["path"]
    assert f"small model: cache entry {cache}" in said
    card = (out / "model" / "README.md").read_text()
    for fact in ("library_name: timm", "`net2net`", f"cache entry `{cache}`", "`deit_s_b` at `tiny` scale",
                 "Data: digits", f"{summary['units']:,} images in 2 steps", f"{summary['eval_loss']:.4f}",
                 f"{summary['eval_acc']:.4f}", f"FLOPs: {summary['flops']:.3e}", "- growbench ", "python "):
        assert fact in card, fact
    # the export carries the data's own normalisation (tests/test_exports.py runs timm's transform on it)
    exported = json.loads((out / "model" / "config.json").read_text())["pretrained_cfg"]
    data = task.pretrain_data()
    assert exported["mean"] == [pytest.approx(data.mean * data.scale / 255)] and exported["input_size"][0] == 1
    said.clear()
    given = run_experiment(task, get_method("net2net", task=task), out=tmp_path / "given", small=f"{cache}/model",
                           progress=False, log=said.append)
    assert f"small model: --small {cache}/model" in said
    assert "given with --small" in (given / "model" / "README.md").read_text()


def test_sweeps_turn_off_transformers_weight_bars(tmp_path, capfd):
    """bench.sweeps runs its runs in this process: loading a small BERT and exporting one must print no bar."""
    import transformers

    from bench.sweeps.cli import main
    from models import get_family
    spec = get_task("bert_small_base", "tiny").small
    family = get_family("bert")
    try:
        assert main(["deit", "--scale", "tiny", "--methods", "scratch", "--seeds", "0", "--dry-run",
                     "--out", str(tmp_path / "sweep")]) == 0
        capfd.readouterr()
        family.export(family.build(spec), tmp_path / "bert")
        family.load(tmp_path / "bert")
        err = capfd.readouterr().err
    finally:
        transformers.utils.logging.enable_progress_bar()
    assert "Loading weights" not in err and "Writing model shards" not in err and "%|" not in err
