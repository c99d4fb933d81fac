"""Same computation, same fingerprint (runs/computation.py): the methods that reduce to one another on a pair are
recognised as one computation, and the ones that differ in their initial weights, stage plan, extra loss or seed
are not."""
import pytest

from methods import get_method
from runs.computation import initial_fingerprint
from tasks import get_task, make_task

# depth x2 from 2 layers (the tiny registry pairs start from 1 layer, where stacking and interpolation coincide)
PAIRS = {"bert": make_task("bert", dict(layers=2, hidden=32, heads=2), dict(layers=4, hidden=48, heads=3), "tiny"),
         "deit": make_task("vit", dict(layers=2, hidden=32, heads=2), dict(layers=2, hidden=64, heads=4), "tiny")}


def fingerprints(pair, methods, trained, seed=0):
    task = PAIRS[pair]
    small = trained(task.small)
    return {m: initial_fingerprint(task, get_method(m, task=task), seed, small) for m in methods}


def test_stackbert_is_net2net_when_the_pair_grows_in_width_and_depth(trained):
    fp = fingerprints("bert", ["stackbert", "net2net", "interpolation", "bert2bert", "mslt", "direct_copy"],
                      trained)
    assert fp["stackbert"] == fp["net2net"]
    others = [fp[m] for m in ("interpolation", "bert2bert", "mslt", "direct_copy")]
    assert len(set(others)) == 4 and fp["net2net"] not in others


def test_depth_methods_reduce_to_their_width_operator_on_a_width_only_pair(trained):
    fp = fingerprints("deit", ["stackbert", "interpolation", "mslt", "net2net", "bert2bert", "direct_copy"],
                      trained)
    assert fp["stackbert"] == fp["interpolation"] == fp["mslt"] == fp["net2net"]
    assert len({fp["net2net"], fp["bert2bert"], fp["direct_copy"]}) == 3


def test_distillation_and_seed_make_another_computation(trained):
    task = get_task("bert_small_base", "tiny")
    small = trained(task.small)
    scratch = initial_fingerprint(task, get_method("scratch"), 0, None)
    ki = initial_fingerprint(task, get_method("ki"), 0, small)          # the same random init as scratch
    assert ki != scratch
    assert initial_fingerprint(task, get_method("scratch"), 1, None) != scratch
    assert initial_fingerprint(task, get_method("scratch"), 0, None) == scratch
    shorter = task.with_(recipe=task.recipe.with_(steps=task.recipe.steps - 1))
    assert initial_fingerprint(shorter, get_method("scratch"), 0, None) != scratch


@pytest.mark.parametrize("method", ["net2net", "ligo_copy"])
def test_the_run_logs_its_fingerprint_at_step_0(method, tmp_path):
    import run
    from runs.record import load_run
    out = tmp_path / method
    args = ["--method", method, "--task", "bert_small_base", "--scale", "tiny", "--quiet", "--out", str(out),
            "--steps", "2", "--set", "fit_steps=0"] if method == "ligo_copy" else \
        ["--method", method, "--task", "bert_small_base", "--scale", "tiny", "--quiet", "--out", str(out), "--steps", "2"]
    assert run.main(args) == 0
    first = load_run(out).metrics[0]
    assert first["step"] == 0 and len(first["computation"]) == 40
    if method == "ligo_copy":       # LiGO's copy start at fit 0 is Net2Net: the same computation as the net2net run
        assert run.main(["--method", "net2net", "--task", "bert_small_base", "--scale", "tiny", "--quiet",
                         "--out", str(tmp_path / "n"), "--steps", "2"]) == 0
        assert load_run(tmp_path / "n").metrics[0]["computation"] == first["computation"]


def test_a_pair_copies_the_small_model_another_pair_pretrained(tmp_path, monkeypatch):
    """bert_small_base and bert_small_large grow from one BERT-Small (same spec, data, recipe and seed): the second
    pair copies the first's weights and pretraining record instead of pretraining it again, under its own task
    name (the analysis files the record there) and marked as the same computation; the weights are the first's
    byte for byte."""
    import torch

    import runs.small_model as small_model
    from analysis.load import identity, load_runs
    from runs import out_dirs
    from runs.computation import weights_digest
    from runs.experiment import pretrain_small
    from runs.record import load_run
    monkeypatch.setattr(out_dirs, "OUT_ROOT", tmp_path)
    base, large = get_task("bert_small_base", "tiny"), get_task("bert_small_large", "tiny")
    logs = []
    first, _ = small_model.resolve_small(base, 0, None, torch.device("cpu"), logs.append, False, pretrain_small)
    src, dst = small_model.small_cache_dir(base, 0), small_model.small_cache_dir(large, 0)
    (src / "eval.json").write_text('{"task": "bert_small_base:small"}')     # names the task it evaluated for
    second, info = small_model.resolve_small(large, 0, None, torch.device("cpu"), logs.append, False,
                                             lambda *a: pytest.fail("pretrained a second time"))
    assert "copied" in logs[-1] and not (dst / "eval.json").exists() and info["path"] == str(dst) != str(src)
    assert weights_digest(first) == weights_digest(second)
    copy, original = load_run(dst), load_run(src)
    assert copy.config["task"]["name"] == "bert_small_large:small"
    assert copy.config["same_computation_as"] == f"small/{src.name}" and copy.metrics == original.metrics
    assert copy.summary == original.summary and info["pretrain_flops"] == original.summary["flops"]
    runs, problems = load_runs(tmp_path)
    assert sorted(identity(r)[:3] for r in runs) == [("bert_small_base", "tiny", "small"),
                                                     ("bert_small_large", "tiny", "small")] and not problems


def test_a_small_model_of_another_computation_is_not_copied(tmp_path, monkeypatch):
    """Only the same pretraining is copied: another recipe has another cache key, and an entry under the same key
    whose logged fingerprint is not this pretraining's (a record edited or made by other code) is passed over."""
    import json

    import torch

    import runs.small_model as small_model
    from runs import out_dirs
    from runs.experiment import pretrain_small
    monkeypatch.setattr(out_dirs, "OUT_ROOT", tmp_path)
    base, large = get_task("bert_small_base", "tiny"), get_task("bert_small_large", "tiny")
    small_model.resolve_small(base, 0, None, torch.device("cpu"), lambda msg: None, False, pretrain_small)
    assert small_model.pretrained_for_another_task(large, 0) == small_model.small_cache_dir(base, 0)
    other_recipe = large.with_(small_recipe=large.small_recipe.with_(lr=large.small_recipe.lr / 2))
    assert small_model.pretrained_for_another_task(other_recipe, 0) is None
    assert small_model.pretrained_for_another_task(large, 1) is None
    metrics = small_model.small_cache_dir(base, 0) / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    rows[0]["computation"] = "0" * 40
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert small_model.pretrained_for_another_task(large, 0) is None


def test_a_small_model_pretrained_first_for_a_grown_recipe_run_is_copied_for_the_plain_pair(tmp_path, monkeypatch):
    """The first run of a seed to need the small model may be a grown-recipe variant (`ligo-warmup0`): the preset
    changed the large recipe, which the pretraining never trains with. Its record says the task's own recipe, and
    another pair (or the small-continued control) with the same small model copies it instead of pretraining again
    (2026-11-27: bert_small_base's control pretrained BERT-Small a second time because the cache entry's record
    named `grown_recipe: warmup0_paper_lr`)."""
    import torch

    import runs.small_model as small_model
    from runs import out_dirs
    from runs.experiment import pretrain_small
    from runs.record import load_run
    from tasks.grown_recipes import apply_grown_recipe
    monkeypatch.setattr(out_dirs, "OUT_ROOT", tmp_path)
    base, large = get_task("bert_small_base", "tiny"), get_task("bert_small_large", "tiny")
    grown = apply_grown_recipe(base, "warmup0", True, set())
    assert grown.recipe != base.recipe and grown.small_task().to_dict() == base.small_task().to_dict()
    _, first = small_model.resolve_small(grown, 0, None, torch.device("cpu"), lambda msg: None, False, pretrain_small)
    record = load_run(small_model.small_cache_dir(grown, 0)).config["task"]
    assert "grown_recipe" not in record and "grown_changes" not in record
    assert small_model.pretrained_for_another_task(large, 0) == small_model.small_cache_dir(grown, 0)
    _, copied = small_model.resolve_small(large, 0, None, torch.device("cpu"), lambda msg: None, False, pretrain_small)
    assert (first["obtained"], copied["obtained"]) == ("pretrained by this run", "copied from another pair's pretraining")


def test_a_pretraining_record_that_names_a_grown_recipe_is_still_the_same_computation(tmp_path, monkeypatch):
    """Cache entries made before the small task dropped the preset (2026-11-26/27) name it in their record, and
    their logged fingerprint was made under that record: they hold the same weights, so they are copied too."""
    import torch

    import runs.small_model as small_model
    from methods import get_method
    from runs import out_dirs
    from runs.experiment import run_experiment
    from tasks.grown_recipes import apply_grown_recipe
    monkeypatch.setattr(out_dirs, "OUT_ROOT", tmp_path)
    base, large = get_task("bert_small_base", "tiny"), get_task("bert_small_large", "tiny")
    grown = apply_grown_recipe(base, "warmup0", True, set())
    as_recorded_then = grown.small_task().with_(grown_recipe=grown.grown_recipe, grown_changes=grown.grown_changes)
    cache = small_model.small_cache_dir(base, 0)
    run_experiment(as_recorded_then, get_method("scratch"), seed=0, device=torch.device("cpu"), out=cache,
                   progress=False, log=lambda msg: None)
    assert small_model.pretrained_for_another_task(large, 0) == cache
