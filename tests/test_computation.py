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


@pytest.mark.parametrize("method", ["net2net", "ligo"])
def test_the_run_logs_its_fingerprint_at_step_0(method, tmp_path):
    import run
    from runs.record import load_run
    out = tmp_path / method
    args = ["--method", method, "--task", "bert_small_base", "--scale", "tiny", "--quiet", "--out", str(out),
            "--steps", "2", "--set", "fit_steps=0"] if method == "ligo" else \
        ["--method", method, "--task", "bert_small_base", "--scale", "tiny", "--quiet", "--out", str(out), "--steps", "2"]
    assert run.main(args) == 0
    first = load_run(out).metrics[0]
    assert first["step"] == 0 and len(first["computation"]) == 40
    if method == "ligo":       # LiGO at fit 0 is Net2Net: the same computation as the net2net run
        assert run.main(["--method", "net2net", "--task", "bert_small_base", "--scale", "tiny", "--quiet",
                         "--out", str(tmp_path / "n"), "--steps", "2"]) == 0
        assert load_run(tmp_path / "n").metrics[0]["computation"] == first["computation"]
