"""LEMON (Wang et al., ICLR 2024): lossless width and depth growth with the copies' symmetry broken, checked on weights
that have learned (tests/conftest.py `trained`) on every family it supports, and its one-line refusals."""
import json

import pytest
import torch

import run
from helpers import learnable_batches, relative_logit_gap
from methods import get_method
from methods.lemon import depth_plan
from models import to_canonical
from tasks import make_task

SMALL = dict(layers=2, hidden=64, heads=4)
LARGE = {
    "width": dict(layers=2, hidden=96, heads=6),        # x1.5, not an integer: the stream's extra units are exact too
    "width_x2": dict(layers=2, hidden=128, heads=8),
    "depth": dict(layers=3, hidden=64, heads=4),        # one new block, after the top small block
    "depth_width": dict(layers=4, hidden=96, heads=6),  # new blocks whose heads and FFN units come in copy groups
}
# pre-norm families, Llama (RMSNorm, grouped-query attention) with its untied head and tied
PRE_NORM = ["llama", "llama_tied", "gpt2", "vit", "cait"]


def pair(family, large, small=SMALL):
    extra = dict(class_layers=1) if family == "cait" else {}
    if family.startswith("llama"):
        extra["tie_embeddings"] = family == "llama_tied"
        kv = lambda spec: {"kv_heads": spec["heads"] // 2}
    else:
        kv = lambda spec: {}
    return make_task(family.partition("_")[0], small={**small, **extra, **kv(small)},
                     large={**large, **extra, **kv(large)}, scale="tiny")


def probe(task):
    return next(learnable_batches(task.small, batch=4, seed=5))


# -- function preservation ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("growth", sorted(LARGE))
@pytest.mark.parametrize("family", PRE_NORM)
def test_lemon_keeps_the_function_of_a_trained_model(family, growth, trained):
    """Logits within 1e-4 of their scale (measured: ~5e-7, float rounding), for width by x1.5 and x2, depth, both."""
    task = pair(family, LARGE[growth])
    small = trained(task.small)
    method = get_method("lemon")
    large = method.grow(small, task)
    assert relative_logit_gap(small, large, probe(task)) <= 1e-4
    assert method.report["residual"]["extra_units"] == (32 if LARGE[growth]["hidden"] == 96 else 0)


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_post_norm_width_by_an_integer_factor_is_exact(family, trained):
    task = pair(family, LARGE["width_x2"])
    small = trained(task.small)
    assert relative_logit_gap(small, get_method("lemon").grow(small, task), probe(task)) <= 1e-4


# -- symmetry breaking ----------------------------------------------------------------------------------------------
def copy_columns(w, n1):
    """Columns of the two copies of each small unit j < n2 - n1 (tiled layout: j and n1 + j)."""
    extra = w.shape[1] - n1
    return w[:, :extra], w[:, n1:n1 + extra]


def test_copies_fan_out_with_unequal_shares_unlike_net2net(trained):
    """Every unit copied twice: a copy's fan-in rows equal its source's, but its fan-out columns are an unequal share
    of the small column (Net2Net: exactly half each, twins forever), and the shares add up to the small column."""
    task = pair("gpt2", LARGE["width_x2"])
    small = trained(task.small)
    a = to_canonical(small)
    lemon = to_canonical(get_method("lemon").grow(small, task))
    net2net = to_canonical(get_method("net2net", index_map="tiled").grow(small, task))
    for key, n1 in (("fc2.weight", task.small.ffn), ("q.weight", task.small.hidden), ("o.weight", task.small.hidden)):
        w = a.blocks[0][key]
        first, second = copy_columns(net2net.blocks[0][key], n1)
        assert torch.equal(first, second), key                                   # Net2Net: twins
        first, second = (c[:w.shape[0]] for c in copy_columns(lemon.blocks[0][key], n1))   # rows of the small units
        # LEMON: every column pair differs (relative test only: a trained weight can be ~1e-8, where both shares
        # fall inside an absolute tolerance although they differ)
        assert not torch.isclose(first, second, rtol=1e-5, atol=0).any(), key
        torch.testing.assert_close(first + second, w, rtol=1e-5, atol=1e-6)      # ... and sums to the small column
        share = (first * w).sum(0) / (w * w).sum(0)                              # one scalar share per column
        torch.testing.assert_close(first, w * share, rtol=1e-4, atol=1e-6)
        assert 0.25 <= share.min() and share.max() <= 0.75 and (share - 0.5).abs().max() > 0.05
    b1 = lemon.blocks[0]["fc1.weight"]                                           # fan-in: copied exactly
    assert torch.equal(b1[:task.small.ffn], b1[task.small.ffn:])
    assert not torch.equal(lemon.blocks[0]["fc2.weight"],
                           to_canonical(get_method("lemon", seed=1).grow(small, task)).blocks[0]["fc2.weight"])


def test_new_blocks_output_zero_from_weights_that_are_not(trained):
    """Depth and width: the new blocks' o and fc2 columns over a group of copies are random with zero sum, columns of
    units without copies and the biases are zero; depth alone leaves no copies, so o and fc2 are zero."""
    task = pair("gpt2", LARGE["depth_width"])
    method = get_method("lemon")
    grown = to_canonical(method.grow(trained(task.small), task))
    assert [(p["small_block"], p["new"]) for p in method.report["plan"]] == [(0, False), (0, True), (1, False),
                                                                                  (1, True)]
    for l in (1, 3):
        for key, n1 in (("fc2.weight", task.small.ffn), ("o.weight", task.small.hidden)):
            w = grown.blocks[l][key]
            first, second = copy_columns(w, n1)
            assert first.abs().min() > 0, key
            torch.testing.assert_close(first + second, torch.zeros_like(first), rtol=0, atol=1e-6)
            assert not w[:, first.shape[1]:n1].any(), key                        # units without copies
        assert not grown.blocks[l]["fc2.bias"].any() and not grown.blocks[l]["o.bias"].any()
    task = pair("gpt2", LARGE["depth"])
    grown = to_canonical(get_method("lemon").grow(trained(task.small), task))
    assert not grown.blocks[2]["fc2.weight"].any() and not grown.blocks[2]["o.weight"].any()


def test_depth_plan_puts_new_blocks_after_the_top_small_blocks():
    assert depth_plan(1, 2) == [(0, False), (0, True)]
    assert depth_plan(3, 5) == [(0, False), (1, False), (1, True), (2, False), (2, True)]
    assert depth_plan(2, 5) == [(0, False), (0, True), (1, False), (1, True), (1, True)]
    assert depth_plan(2, 2) == [(0, False), (1, False)]


def test_lemon_serves_as_the_width_operator_of_a_depth_method(trained):
    """StackBERT with `width=lemon` on post-LN BERT: LEMON is asked for the width alone (an integer ratio: exact),
    the depth is stacking's, so the pair is not refused for growing in depth."""
    task = pair("bert", dict(layers=4, hidden=128, heads=8))
    method = get_method("stackbert", width="lemon")
    method.check_pair(task)
    small = trained(task.small)
    a, b = to_canonical(small), to_canonical(method.grow(small, task))
    first, second = copy_columns(b.blocks[2]["fc2.weight"], task.small.ffn)      # block 2 stacks block 0
    torch.testing.assert_close(first[:task.small.hidden] + second[:task.small.hidden], a.blocks[0]["fc2.weight"])
    assert not torch.isclose(first, second).any()
    with pytest.raises(ValueError, match="lemon grows a post-LN bert's hidden size losslessly only by an integer"):
        get_method("stackbert", width="lemon").check_pair(pair("bert", LARGE["depth_width"]))


# -- refusals -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family,large,needle", [
    ("bert", LARGE["depth"], "lemon cannot grow post-LN bert in depth losslessly (2 -> 3 layers)"),
    ("roberta", LARGE["width"], "lemon grows a post-LN roberta's hidden size losslessly only by an integer "
                                "factor (64 -> 96)"),
    ("gpt2", dict(layers=2, hidden=96, heads=4), "lemon copies whole heads and needs head_dim fixed (16 -> 24)"),
    ("llama", dict(layers=2, hidden=128, heads=8, kv_heads=2),
     "lemon copies whole key/value groups and needs the query heads per key/value head fixed (4/2 -> 8/2)"),
])
def test_refusals_are_one_line_before_anything_grows(family, large, needle):
    task = make_task(family, small={**SMALL, **({"kv_heads": 2} if family == "llama" else {})}, large=large,
                     scale="tiny")
    method = get_method("lemon")
    for call in (lambda: method.check_pair(task), lambda: method.grow(task.build_small(), task)):
        with pytest.raises(ValueError) as info:
            call()
        assert needle in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("args,needle", [
    (("--task", "bert_small_base"), "lemon cannot grow post-LN bert in depth losslessly (1 -> 2 layers)"),
    (("--task", "bert_width_only"), "lemon grows a post-LN bert's hidden size losslessly only by an integer factor"),
    (("--task", "llama_small_base", "--set", "large.kv_heads=2"), "lemon copies whole key/value groups"),
])
def test_cli_refuses_in_one_line_and_writes_nothing(args, needle, tmp_path, capsys):
    out = tmp_path / "never"
    assert run.main(["--method", "lemon", *args, "--scale", "tiny", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and err.startswith("error: ")
    assert not out.exists()


def test_cli_runs_lemon_on_the_llama_pair_and_records_the_growth(tmp_path):
    """llama_small_base at tiny: 1L/64 -> 2L/96 (x1.5, grouped-query attention), the small model pretrained first."""
    out = tmp_path / "run"
    assert run.main(["--method", "lemon", "--task", "llama_small_base", "--scale", "tiny", "--quiet", "--out",
                     str(out), "--steps", "2"]) == 0
    growth = json.loads((out / "growth.json").read_text())
    assert growth["function_deviation"] < 1e-4 and growth["residual"]["extra_units"] == 32
    assert [p["new"] for p in growth["plan"]] == [False, True]
