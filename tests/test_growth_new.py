"""HyperCloning (Samragh et al. 2024) and G_stack (Du et al. 2024): the defining property of each, on weights that
have learned (tests/conftest.py `trained`), on every family each claims."""
import math

import pytest
import torch

from helpers import learnable_batches, logits_of, relative_logit_gap
from methods import get_method
from methods.g_stack import guideline_tokens
from models import from_canonical, to_canonical
from dataclasses import replace
from tasks import get_task, make_task

FAMILIES = ["bert", "roberta", "gpt2", "llama", "vit", "cait"]


def pair(family, small, large):
    extra = dict(class_layers=1) if family == "cait" else {}
    kv = ({"kv_heads": small["heads"] // 2}, {"kv_heads": large["heads"] // 2}) if family == "llama" else ({}, {})
    return make_task(family, small={**small, **extra, **kv[0]}, large={**large, **extra, **kv[1]}, scale="tiny")


def probe(task):
    return next(learnable_batches(task.small, batch=4, seed=5))


# -- HyperCloning ------------------------------------------------------------------------------------------------
def test_hypercloning_tiles_every_space():
    """Large unit i clones small unit i mod n1: embeddings [E, E], norms [w, w], and a cloned input divided by its
    copy count (W_large = [[W/2, W/2], [W/2, W/2]]), key/value heads tiled like the query heads."""
    task = pair("llama", dict(layers=1, hidden=64, heads=4), dict(layers=1, hidden=128, heads=8))
    torch.manual_seed(0)
    small = task.build_small()
    a, b = to_canonical(small), to_canonical(get_method("hypercloning").grow(small, task))
    assert torch.equal(b.embed["token"], a.embed["token"].repeat(1, 2))
    assert torch.equal(b.head["norm.weight"], a.head["norm.weight"].repeat(2))
    assert torch.equal(b.head["decoder.weight"], a.head["decoder.weight"].repeat(1, 2) / 2)
    for key in ("q", "k", "v", "o", "gate", "fc1", "fc2"):
        w = a.blocks[0][f"{key}.weight"]
        assert torch.equal(b.blocks[0][f"{key}.weight"], w.repeat(2, 2) / 2), key
    assert torch.equal(b.blocks[0]["norm1.weight"], a.blocks[0]["norm1.weight"].repeat(2))


@pytest.mark.parametrize("family", FAMILIES)
def test_hypercloning_noise_breaks_symmetry_and_keeps_the_function(family, trained):
    """With the symmetry-breaking noise (10 dB: a tenth of each slice's power), the two clones of every input
    column differ, by + N and - N, and the logits of a small model that has learned are still kept."""
    task = pair(family, dict(layers=2, hidden=64, heads=2), dict(layers=2, hidden=128, heads=4))
    small = trained(task.small)
    clean = get_method("hypercloning").grow(small, task)
    method = get_method("hypercloning", snr_db=10.0)
    noisy = method.grow(small, task)
    assert relative_logit_gap(small, noisy, probe(task)) <= 1e-4
    assert method.report["function_deviation"] < 1e-3 and method.report["integer_ratio"]
    w0, w = to_canonical(clean).blocks[0]["fc2.weight"], to_canonical(noisy).blocks[0]["fc2.weight"]
    n1 = w.shape[1] // 2
    assert torch.equal(w0[:, :n1], w0[:, n1:])                     # without noise the clones are twins
    eps = w[:, :n1] - w0[:, :n1]
    assert torch.allclose(w[:, n1:] - w0[:, n1:], -eps, atol=1e-6)  # + N on one clone, - N on the other
    snr = 10 * math.log10(float(w0[:, :n1].pow(2).mean() / eps.pow(2).mean()))
    assert 9 < snr < 11
    emb = next(iter(to_canonical(noisy).embed.values()))
    assert torch.equal(emb, next(iter(to_canonical(clean).embed.values())))    # embeddings get no noise


def test_hypercloning_non_integer_ratio_is_reported_and_group_changes_refused(trained):
    task = get_task("llama_small_base", "tiny")           # 64 -> 96: tiled floor/ceil, RMSNorm sees new statistics
    method = get_method("hypercloning")
    method.grow(trained(task.small), task)
    assert method.report["integer_ratio"] is False and method.report["function_deviation"] > 1e-4
    bad = make_task("llama", small=dict(layers=1, hidden=64, heads=4, kv_heads=2),
                    large=dict(layers=1, hidden=128, heads=8, kv_heads=2), scale="tiny")
    with pytest.raises(ValueError, match=r"hypercloning clones whole key/value groups.*\(4/2 -> 8/2\)"):
        get_method("hypercloning").grow(bad.build_small(), bad)


# -- G_stack -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["llama", "gpt2", "bert"])
@pytest.mark.parametrize("g", [2, 4])
def test_g_stack_stacks_the_whole_small_model(family, g, trained):
    """Blocks k L1 .. (k+1) L1 - 1 are the small model's blocks for every k < g, embeddings and head are the small
    model's, so the bottom L1 blocks under the head *are* the trained small model (logits equal bit for bit)."""
    task = pair(family, dict(layers=2, hidden=64, heads=2), dict(layers=2 * g, hidden=64, heads=2))
    small = trained(task.small)
    method = get_method("g_stack")
    large = method.grow(small, task)
    a, b = to_canonical(small), to_canonical(large)
    for l, block in enumerate(b.blocks):
        assert all(torch.equal(t, a.blocks[l % 2][k]) for k, t in block.items()), l
    assert all(torch.equal(b.embed[k], a.embed[k]) for k in a.embed)
    assert all(torch.equal(b.head[k], a.head[k]) for k in a.head)
    bottom = from_canonical(replace(b, spec=b.spec.with_(layers=2), blocks=b.blocks[:2]))
    assert torch.equal(logits_of(bottom, probe(task)), logits_of(small, probe(task)))
    assert relative_logit_gap(small, large, probe(task)) > 1e-3       # not function-preserving: copies add again
    assert method.report["growth_factor"] == g and method.report["width"] is None


def test_g_stack_refuses_partial_stacks_and_a_wrong_growth_factor():
    task = make_task("gpt2", small=dict(layers=2, hidden=64, heads=2), large=dict(layers=5, hidden=64, heads=2),
                     scale="tiny")
    with pytest.raises(ValueError, match=r"g_stack .* multiple of the small one \(2 -> 5 layers\)"):
        get_method("g_stack").grow(task.build_small(), task)
    task = get_task("llama_small_base", "tiny")
    with pytest.raises(ValueError, match=r"g_stack growth_factor=4, but this pair grows depth 1 -> 2 \(g = 2\)"):
        get_method("g_stack", growth_factor=4).grow(task.build_small(), task)


def test_g_stack_growth_timing_is_the_small_models_budget():
    task = get_task("llama_small_base", "tiny")
    r = task.small_recipe
    method = get_method("g_stack")
    assert method.small_recipe(task) == r
    method.grow(task.build_small(), task)
    assert method.report["growth_tokens"] == r.steps * r.batch_size * r.seq_len
    assert method.report["width"] == "net2net"                       # the tiny pair grows width too: composed
    timed = get_method("g_stack", growth_tokens=1000)
    assert timed.small_recipe(task).steps == math.ceil(1000 / (r.batch_size * r.seq_len))
    short = get_method("g_stack", growth_tokens=100).small_recipe(task)       # shorter than the warmup: clamped
    assert (short.steps, short.warmup) == (1, 1)
    # the paper's guideline (README of the official code): Llama2-7B on 2T tokens -> d = 11.11B tokens
    assert guideline_tokens(7e9, 6 * 7e9 * 2e12) == pytest.approx(11.11e9, rel=0.02)
