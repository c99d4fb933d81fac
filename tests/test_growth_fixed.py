"""Fixed growth operators (LiGO paper §3.1, Appendix A): StackBERT, interpolation, Net2Net FPI, bert2BERT AKI.

Checks the weights each operator defines, Net2Net's function preservation (exact for integer width ratios,
reported deviation otherwise), the grown models' parameter layout, and the errors on impossible pairs.
"""
import importlib
from types import SimpleNamespace

import pytest
import torch

from methods import get_method
from methods.depth import depth_weights, interpolate_sources, stack_sources
from methods.width import copy_counts, index_map, net2net_maps, selection
from models import ModelSpec, build_model, to_canonical
from models.canonical import mix_depth

FAMILY_MODULES = {"bert": "models.bert", "gpt2": "models.gpt2", "vit": "models.vit", "cait": "models.cait"}
SMALL = {
    "bert-tied": ModelSpec("bert", 2, 64, 2, vocab=97, positions=32),
    "bert-untied": ModelSpec("bert", 2, 64, 2, vocab=97, positions=32, tie_embeddings=False),
    "gpt2-tied": ModelSpec("gpt2", 2, 64, 2, vocab=97, positions=32),
    "vit": ModelSpec("vit", 2, 64, 2, image_size=16, patch_size=4, classes=10),
    "cait": ModelSpec("cait", 2, 64, 2, class_layers=1, image_size=16, patch_size=4, classes=10),
}
FIXED = ["stackbert", "interpolation", "net2net", "bert2bert"]


def needs_family(spec):
    try:
        importlib.import_module(FAMILY_MODULES[spec.family])
    except ImportError as e:  # adapters are written alongside; skip rather than fail while they are missing
        pytest.skip(f"{spec.family} adapter not importable: {e}")


def pretrained_like(spec, seed=0):
    """A small model whose norms and biases are not at their init (1, 0), so copying mistakes show."""
    needs_family(spec)
    torch.manual_seed(seed)
    model = build_model(spec)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 or "gamma" in name:
                p.add_(0.2 * torch.randn_like(p))
    return model.eval()


def task(small, large):
    return SimpleNamespace(small=small, large=large, family=small.family)


# -- depth ----------------------------------------------------------------------------------------------
def test_sources():
    assert stack_sources(3, 6) == [0, 1, 2, 0, 1, 2]
    assert interpolate_sources(3, 6) == [0, 0, 1, 1, 2, 2]
    assert stack_sources(3, 5) == [0, 1, 2, 0, 1]
    assert interpolate_sources(3, 5) == [0, 0, 1, 1, 2]
    assert interpolate_sources(4, 4) == [0, 1, 2, 3]
    w = depth_weights([0, 0, 1, 1, 2], 3)
    assert w.shape == (5, 3) and torch.equal(w.sum(1), torch.ones(5)) and w[3, 1] == 1
    with pytest.raises(ValueError, match="depth growth"):
        stack_sources(4, 2)


@pytest.mark.parametrize("name,rule", [("stackbert", stack_sources), ("interpolation", interpolate_sources)])
@pytest.mark.parametrize("layers", [(3, 5), (2, 4)])
def test_depth_methods_copy_exact_blocks(name, rule, layers):
    small_spec = ModelSpec("bert", layers[0], 64, 2, vocab=97, positions=32)
    small = pretrained_like(small_spec)
    large = get_method(name).grow(small, task(small_spec, small_spec.with_(layers=layers[1])))
    a, b = to_canonical(small), to_canonical(large)
    sources = rule(*layers)
    for l, j in enumerate(sources):
        for key, t in b.blocks[l].items():
            assert torch.equal(t, a.blocks[j][key]), (name, l, key)
    assert all(torch.equal(b.embed[k], a.embed[k]) for k in a.embed)
    assert all(torch.equal(b.head[k], a.head[k]) for k in a.head)
    # Proposition 1 (depth half): LiGO's mix_depth with one-hot weights gives the same blocks
    mixed = mix_depth(a, lambda key: depth_weights(sources, layers[0]))
    assert all(torch.equal(mixed.blocks[l][k], b.blocks[l][k]) for l in range(layers[1]) for k in b.blocks[l])


def test_mix_depth_is_the_weighted_sum_of_small_blocks_forward_and_backward():
    """LiGO's depth operator, dense weights: block l = sum_j w[l, j] block j, and the gradients a loss on every
    large block sends to w and to the small blocks are the explicit sum's (the blocks are unbound, not indexed)."""
    small_spec = ModelSpec("bert", 3, 64, 2, vocab=97, positions=32)
    a = to_canonical(pretrained_like(small_spec))
    blocks = [{k: t.detach().clone().requires_grad_(True) for k, t in b.items()} for b in a.blocks]
    a.blocks = blocks
    w = torch.rand(5, 3, generator=torch.Generator().manual_seed(3)).requires_grad_(True)
    mixed = mix_depth(a, lambda key: w)
    probe = torch.Generator().manual_seed(4)
    directions = [{k: torch.randn(t.shape, generator=probe) for k, t in b.items()} for b in mixed.blocks]
    loss = sum((t * directions[l][k]).sum() for l, b in enumerate(mixed.blocks) for k, t in b.items())
    got = torch.autograd.grad(loss, [w, *[t for b in blocks for t in b.values()]])
    explicit = sum((sum(w[l, j] * blocks[j][k] for j in range(3)) * directions[l][k]).sum()
                   for l in range(5) for k in blocks[0])
    want = torch.autograd.grad(explicit, [w, *[t for b in blocks for t in b.values()]])
    assert len(mixed.blocks) == 5 and all(torch.allclose(g, h, rtol=1e-5, atol=1e-5) for g, h in zip(got, want))
    assert all(torch.allclose(mixed.blocks[l][k], sum(w[l, j] * blocks[j][k] for j in range(3)), atol=1e-6)
               for l in range(5) for k in blocks[0])


def test_depth_method_composes_width_and_records_it():
    s = SMALL["bert-tied"]
    m = get_method("stackbert")
    large = m.grow(pretrained_like(s), task(s, s.with_(layers=4, hidden=128, heads=4, ffn=512)))
    assert large.config.hidden_size == 128 and large.config.num_hidden_layers == 4
    comp = m.describe()["composition"]
    assert comp["width"] == "net2net" and m.artifacts()["growth.json"]["width"] == "net2net"
    assert m.describe() == get_method("stackbert").describe()     # the record's settings do not depend on growing
    assert m.stages(None, 5)[0].reset_optimizer
    with pytest.raises(ValueError, match="cannot serve as a width operator"):
        get_method("stackbert", width="scratch").grow(pretrained_like(s), task(s, s.with_(hidden=128, heads=4, ffn=512)))


# -- width operator ----------------------------------------------------------------------------------------
def test_index_maps_and_selection():
    gen = torch.Generator().manual_seed(0)
    g = index_map(4, 12, gen)
    assert torch.equal(g[:4], torch.arange(4)) and torch.equal(copy_counts(g, 4), torch.full((4,), 3))
    g = index_map(4, 6, gen)
    assert sorted(copy_counts(g, 4).tolist()) == [1, 1, 2, 2]       # non-integer: floor/ceil copies
    out, inn = selection(g, 4)
    assert torch.equal(inn.T @ out, torch.eye(4))                   # copies sum back to the original input
    a = net2net_maps(SMALL["bert-tied"], SMALL["bert-tied"].with_(hidden=128, heads=4, ffn=512), torch.Generator().manual_seed(3))
    b = net2net_maps(SMALL["bert-tied"], SMALL["bert-tied"].with_(hidden=128, heads=4, ffn=512), torch.Generator().manual_seed(3))
    assert torch.equal(a.residual, b.residual) and set(a.heads) == {("blocks", 0), ("blocks", 1)}
    assert len(a.heads["blocks", 0]) == 4 and len(a.ffn["blocks", 1]) == 512


@pytest.mark.parametrize("key", list(SMALL))
def test_net2net_integer_width_preserves_function(key):
    s = SMALL[key]
    small = pretrained_like(s)
    m = get_method("net2net")
    m.grow(small, task(s, s.with_(hidden=128, heads=4, ffn=512)))       # head_dim 32 kept, ffn x2
    dev = m.artifacts()["growth.json"]["function_deviation"]
    assert dev < 1e-4, f"{key}: max |logit diff| {dev}"
    # the check itself can fail: the uniform (unbalanced) map breaks LayerNorm statistics
    m2 = get_method("net2net", index_map="uniform", seed=1)
    m2.grow(small, task(s, s.with_(hidden=128, heads=4, ffn=512)))
    assert m2.report["function_deviation"] > 1e-3


def test_net2net_non_integer_ratio_reports_deviation():
    s = SMALL["bert-tied"]
    m = get_method("net2net")
    m.grow(pretrained_like(s), task(s, s.with_(hidden=96, heads=3, ffn=384)))
    report = m.artifacts()["growth.json"]
    assert report["integer_ratio"] is False and report["width_only"] is True
    assert report["function_deviation"] > 1e-4


def test_net2net_is_seeded_not_global():
    s = SMALL["bert-tied"]
    small, t = pretrained_like(s), task(s, s.with_(layers=4, hidden=96, heads=3, ffn=384))
    torch.manual_seed(1)
    a = get_method("net2net", noise=0.01).grow(small, t).state_dict()
    torch.manual_seed(2)
    b = get_method("net2net", noise=0.01).grow(small, t).state_dict()
    c = get_method("net2net", noise=0.01, seed=5).grow(small, t).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a)


def test_noise_touches_only_new_units():
    s = SMALL["bert-untied"]
    small, t = pretrained_like(s), task(s, s.with_(hidden=128, heads=4, ffn=512))
    clean = to_canonical(get_method("net2net").grow(small, t))
    noisy = to_canonical(get_method("net2net", noise=0.1).grow(small, t))
    q, q0 = noisy.blocks[0]["fc1.weight"], clean.blocks[0]["fc1.weight"]   # [F, D]: 512 x 128 from 256 x 64
    assert torch.equal(q[:256, :64], q0[:256, :64])
    assert not torch.equal(q[256:], q0[256:]) and not torch.equal(q[:256, 64:], q0[:256, 64:])


def test_aki_takes_new_units_from_the_next_layer():
    s = ModelSpec("bert", 3, 64, 2, vocab=97, positions=32)
    canon = to_canonical(pretrained_like(s))
    large = s.with_(hidden=128, heads=4, ffn=512)
    fpi = get_method("net2net").grow_width(canon, large)
    aki = get_method("bert2bert").grow_width(canon, large)
    for key, n1 in (("fc1.weight", 256), ("q.weight", 64), ("norm1.weight", 64), ("o.weight", 64)):
        assert torch.equal(aki.blocks[0][key][:n1], fpi.blocks[0][key][:n1]), key     # old units: own layer
        assert torch.equal(aki.blocks[0][key][n1:], fpi.blocks[1][key][n1:]), key     # new units: layer above
        assert torch.equal(aki.blocks[2][key], fpi.blocks[2][key]), key                # last layer: FPI
    assert all(torch.equal(aki.embed[k], fpi.embed[k]) for k in fpi.embed)


# -- layout and errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FIXED)
@pytest.mark.parametrize("key", ["bert-tied", "gpt2-tied", "vit", "cait"])
def test_grown_model_has_large_layout(name, key):
    s = SMALL[key]
    large_spec = s.with_(layers=3, hidden=96, heads=3, ffn=300)
    grown = get_method(name).grow(pretrained_like(s), task(s, large_spec))
    torch.manual_seed(0)
    want = {n: p.shape for n, p in build_model(large_spec).named_parameters()}
    assert {n: p.shape for n, p in grown.named_parameters()} == want


@pytest.mark.parametrize("name", FIXED)
def test_bad_pairs_raise(name):
    s = SMALL["bert-tied"]
    small = pretrained_like(s)
    with pytest.raises(ValueError, match="shrinks in layers"):
        get_method(name).grow(small, task(s, s.with_(layers=1)))
    with pytest.raises(ValueError, match="mismatched families"):
        get_method(name).grow(small, SimpleNamespace(small=s, large=s.with_(family="gpt2"), family="bert"))
    with pytest.raises(ValueError, match="does not match task.small"):
        get_method(name).grow(small, task(s.with_(hidden=32), s.with_(hidden=128, heads=4, ffn=512)))
    if name in ("net2net", "bert2bert"):
        with pytest.raises(ValueError, match=r"head_dim fixed \(32 -> 64\)"):
            get_method(name).grow(small, task(s, s.with_(hidden=128)))


# -- direct copy (Wei et al. 2016; LiGO Figure 6(b)) ---------------------------------------------------------
@pytest.mark.parametrize("name", ["bert-tied", "gpt2-tied", "vit", "cait"])
def test_direct_copy_puts_small_weights_in_the_leading_block_and_keeps_the_fresh_init_elsewhere(name):
    small_spec = SMALL[name]
    large_spec = small_spec.with_(layers=4, hidden=96, heads=3, ffn=384)
    small = pretrained_like(small_spec)
    torch.manual_seed(11)
    grown = to_canonical(get_method("direct_copy").grow(small, task(small_spec, large_spec)))
    torch.manual_seed(11)
    fresh = to_canonical(build_model(large_spec.with_(layers=small_spec.layers)))
    canon = to_canonical(small)
    for section, layer, key, t in grown.items():
        src = layer % small_spec.layers if section == "blocks" else layer      # depth by stacking
        s = (getattr(canon, section)[src] if src is not None else getattr(canon, section))[key]
        f = (getattr(fresh, section)[src] if src is not None else getattr(fresh, section))[key]
        lead = tuple(slice(0, n) for n in s.shape)
        assert torch.equal(t[lead], s), (section, layer, key)
        rest = torch.ones_like(t, dtype=torch.bool)
        rest[lead] = False
        assert torch.equal(t[rest], f[rest]), (section, layer, key)
