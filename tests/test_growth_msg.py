"""MSG (Yao et al., ICLR 2024): masks from 0 to 1 over new units and layers. Its defining property -- the small
model's function exactly at mask 0, whatever the new weights -- on weights that have learned (tests/conftest.py
`trained`), on every family it grows, with depth and width growth together; and the ramp's end is the plain model."""
import pytest
import torch

import run
from helpers import learnable_batches, relative_logit_gap
from methods import get_method
from models import from_canonical, to_canonical
from runs.record import load_run
from tasks import get_task, make_task

TEXT = ["bert", "roberta", "gpt2", "llama"]


def pair(family, layers=(2, 4)):
    kv = (dict(kv_heads=1), dict(kv_heads=2)) if family == "llama" else ({}, {})
    return make_task(family, small=dict(layers=layers[0], hidden=64, heads=2, **kv[0]),
                     large=dict(layers=layers[1], hidden=128, heads=4, **kv[1]), scale="tiny")


def probe(task):
    return next(learnable_batches(task.small, batch=4, seed=5))


@pytest.mark.parametrize("family", TEXT)
def test_msg_at_mask_zero_is_the_small_model_and_the_masks_do_it(family, trained):
    """Depth x2 and width x2 at once (grouped-query Llama included): the logits of a small model that has learned,
    to 1e-4 of their scale. The same weights without masks (the plain large model) are far from them: the masks,
    not the weights, preserve the function (the new units are random)."""
    task = pair(family)
    small = trained(task.small)
    method = get_method("msg", task=task)
    large = method.grow(small, task)
    assert relative_logit_gap(small, large, probe(task)) <= 1e-4
    assert method.report["function_deviation"] < 1e-3
    unmasked = from_canonical(to_canonical(large))
    assert relative_logit_gap(small, unmasked, probe(task)) > 0.05


def test_msg_writes_the_small_weights_into_the_leading_slices(trained):
    """Every tensor's leading slice is the small one's (new layer l: small layer l - L1); the rest is the large model's
    own initialisation, so the new units are not copies: direct copy's weights, exactly."""
    task = pair("llama")
    small = trained(task.small)
    s, g = to_canonical(small), to_canonical(get_method("msg", task=task).grow(small, task))
    for layer, block in enumerate(g.blocks):
        for key, t in block.items():
            source = s.blocks[layer % 2][key]
            assert torch.equal(t[tuple(slice(0, n) for n in source.shape)], source), (layer, key)
    fc1 = g.blocks[0]["fc1.weight"]
    assert not torch.equal(fc1[64:, :64], fc1[:64, :64])          # new FFN units: random, not copies
    assert torch.equal(g.embed["token"][:, :64], s.embed["token"])
    torch.manual_seed(0)
    masked = get_method("msg", task=task).grow(small, task)
    torch.manual_seed(0)
    copied = get_method("direct_copy").grow(small, task)        # the same weights: only the masks differ
    assert all(torch.equal(a, b) for a, b in zip(masked.state_dict().values(), copied.state_dict().values()))


def test_msg_ramp_ends_in_the_plain_large_model(trained):
    """m = step / ramp_steps: mid-ramp the function is neither the small model's nor the plain model's; at the end the
    hooks are gone and the model is exactly the plain large model. Only then does it compute the large model."""
    task = pair("gpt2")
    small = trained(task.small)
    method = get_method("msg", task=task, ramp_steps=4)
    large = method.grow(small, task)
    plain = from_canonical(to_canonical(large))
    assert [method.mask(t) for t in (0, 2, 4, 9)] == [0.0, 0.5, 1.0, 1.0]
    assert [method.computes_large(t, 8) for t in (0, 3, 4)] == [False, False, True]
    method.set_step(large, 2, 8)
    assert relative_logit_gap(small, large, probe(task)) > 1e-3
    assert relative_logit_gap(plain, large, probe(task)) > 1e-3
    method.set_step(large, 4, 8)
    assert relative_logit_gap(plain, large, probe(task)) == 0.0
    assert not large._forward_hooks and all(not m._forward_hooks and not m._forward_pre_hooks
                                            for m in large.modules() if m is not large)


def test_msg_records_the_ramp_as_not_the_large_model(tmp_path, capsys):
    """Rows logged while the masks ramp are not the large model at its full architecture (savings skip them)."""
    out = tmp_path / "run"
    assert run.main(["--method", "msg", "--task", "llama_small_base", "--scale", "tiny", "--quiet", "--out", str(out),
                     "--set", "ramp_steps=3"]) == 0
    rows = load_run(out).metrics
    assert [(r["step"], r["full_model"]) for r in rows] == [(0, False), (2, False), (4, True), (6, True), (8, True)]
    assert load_run(out).config["method"]["config"]["ramp_steps"] == 3


@pytest.mark.parametrize("family", ["vit", "cait"])
def test_msg_refuses_families_whose_inputs_are_parameters(family):
    task = get_task({"vit": "deit_s_b", "cait": "cait_xs_s"}[family], "tiny")
    with pytest.raises(ValueError, match=r"^msg masks module outputs.*class token"):
        get_method("msg", task=task).check_pair(task)


def test_msg_refuses_a_ramp_longer_than_the_run(tmp_path, capsys):
    args = ["--method", "msg", "--task", "gpt2_base_medium", "--scale", "tiny", "--out", str(tmp_path / "never"),
            "--steps", "4", "--set", "ramp_steps=5"]
    assert run.main(args) == 2
    assert "ramp_steps must be between 1 and the run's 4 steps" in capsys.readouterr().err
    assert not (tmp_path / "never").exists()
    bad = make_task("llama", small=dict(layers=1, hidden=64, heads=4, kv_heads=2),
                    large=dict(layers=1, hidden=128, heads=8, kv_heads=2), scale="tiny")
    with pytest.raises(ValueError, match="msg grows grouped-query attention by whole key/value groups"):
        get_method("msg", task=bad).check_pair(bad)
