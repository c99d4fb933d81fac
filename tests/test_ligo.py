"""LiGO (Wang et al., ICLR 2023): Proposition 1 (App. A) exactly, the §3.3 tying by its formula, the operator
fit lowering the large model's loss on every family, FLOPs charged, and every official-code option."""
import importlib
import os
import types

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import methods  # noqa: E402,F401  (registers every method)
from methods.depth import interpolate_sources, stack_sources  # noqa: E402
from methods.ligo_operator import LigoOperator  # noqa: E402
from methods.registry import get_method  # noqa: E402
from methods.width import net2net_width  # noqa: E402
from models import ModelSpec, get_family  # noqa: E402
from models.flops import backward_flops  # noqa: E402
from runs.ledger import FlopsLedger  # noqa: E402

FAMILIES = ("bert", "gpt2", "vit", "cait")
for _f in FAMILIES:
    importlib.import_module(f"models.{_f}")      # registers the family
TEXT = dict(vocab=64, positions=16)
IMAGE = dict(image_size=8, patch_size=2, in_chans=1, classes=10)
PAIRS = {  # family -> (small, large): depth x2, width x1.5, head_dim kept (16)
    "bert": (ModelSpec("bert", 2, 32, 2, **TEXT), ModelSpec("bert", 4, 48, 3, **TEXT)),
    "gpt2": (ModelSpec("gpt2", 2, 32, 2, **TEXT), ModelSpec("gpt2", 4, 48, 3, **TEXT)),
    "vit": (ModelSpec("vit", 2, 32, 2, **IMAGE), ModelSpec("vit", 4, 48, 3, **IMAGE)),
    "cait": (ModelSpec("cait", 2, 32, 2, class_layers=1, **IMAGE),
             ModelSpec("cait", 4, 48, 3, class_layers=1, **IMAGE)),
}
SEQUENCE = torch.randperm(63, generator=torch.Generator().manual_seed(7))[:16] + 1


def task_of(small, large):
    return types.SimpleNamespace(small=small, large=large, family=large.family)


def build(spec, seed=0):
    torch.manual_seed(seed)
    return get_family(spec.family).build(spec)


def batches(spec, batch=16, seed=0):
    """Learnable synthetic data: a repeated sentence with masked tokens set to 0 (MLM), counting sequences
    (CLM: next = current + 1), or class templates plus noise (images)."""
    g = torch.Generator().manual_seed(seed)
    templates = torch.randn(10, 1, 8, 8, generator=torch.Generator().manual_seed(123))
    while True:
        if spec.family in ("vit", "cait"):
            y = torch.randint(0, 10, (batch,), generator=g)
            yield {"pixel_values": templates[y] + 0.5 * torch.randn(batch, 1, 8, 8, generator=g), "labels": y}
            continue
        if spec.family == "gpt2":
            ids = (torch.randint(1, spec.vocab, (batch, 1), generator=g) + torch.arange(16)) % (spec.vocab - 1) + 1
            yield {"input_ids": ids, "labels": ids.clone()}
            continue
        ids = SEQUENCE.expand(batch, 16)        # MLM: one repeated sentence, position -> token
        masked = torch.rand(batch, 16, generator=g) < 0.2
        yield {"input_ids": ids.masked_fill(masked, 0), "labels": ids.masked_fill(~masked, -100)}


def pretrained_small(spec, steps=40):
    model, data = build(spec), batches(spec, seed=1)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(steps):
        loss = get_family(spec.family).loss(model, next(data))
        opt.zero_grad(), loss.backward(), opt.step()
    return model.eval()


def assert_states_equal(a, b, skip=()):
    a, b = a.state_dict(), b.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        if not any(s in k for s in skip):
            assert torch.equal(a[k], b[k]), k


# -- Proposition 1: with fixed coefficients LiGO *is* stacking, interpolation and Net2Net -------------------
# One-hot depth and 0/1 (or 1/count) width matrices make every materialised entry a single product
# x * 1 or x * (1/c) plus exact zeros, the same product the fixed methods compute, so equality is bitwise.
@pytest.mark.parametrize("order", ["width_first", "depth_first"])
@pytest.mark.parametrize("depth", ["stackbert", "interpolation"])
def test_prop1_depth_only(depth, order):
    small, large = ModelSpec("bert", 2, 32, 2, **TEXT), ModelSpec("bert", 5, 32, 2, **TEXT)
    model, task = build(small), task_of(small, large)
    expected = get_method(depth).grow(model, task)
    # through the method's own init (fit_steps=0) and through the explicit fixed operator
    assert_states_equal(get_method("ligo", fit_steps=0, depth_init=depth, order=order).grow(model, task), expected)
    sources = (stack_sources if depth == "stackbert" else interpolate_sources)(2, 5)
    canon = get_family("bert").to_canonical(model)
    op = LigoOperator.from_fixed(canon, large, depth_sources=sources, order=order)
    assert_states_equal(get_family("bert").from_canonical(op(canon)), expected)


@pytest.mark.parametrize("order", ["width_first", "depth_first"])
@pytest.mark.parametrize("tied", [False, True])
def test_prop1_net2net(tied, order):
    small, large = (ModelSpec("bert", 2, 32, 2, tie_embeddings=tied, **TEXT),
                    ModelSpec("bert", 4, 48, 3, tie_embeddings=tied, **TEXT))
    model, task = build(small), task_of(small, large)
    expected = get_method("net2net", seed=3).grow(model, task)
    grown = get_method("ligo", fit_steps=0, tie_in_out=False, seed=3, order=order).grow(model, task)
    # a tied head reuses the token embedding, so Net2Net divides the norm feeding it by the copy counts:
    # not a width matrix of any space, hence outside LiGO's operator family -- everything else is equal
    assert_states_equal(grown, expected, skip=("transform.LayerNorm",) if tied else ())
    canon = get_family("bert").to_canonical(model)
    op = LigoOperator.from_fixed(canon, large, stack_sources(2, 4),
                                 net2net_width(small, large, torch.Generator().manual_seed(3)),
                                 tie_in_out=False, order=order)
    assert_states_equal(get_family("bert").from_canonical(op(canon)), grown)


def test_prop1_stackbert_with_net2net_width():
    small, large = (ModelSpec("bert", 2, 32, 2, tie_embeddings=False, **TEXT),
                    ModelSpec("bert", 4, 64, 4, tie_embeddings=False, **TEXT))
    model, task = build(small), task_of(small, large)
    assert_states_equal(get_method("ligo", fit_steps=0, tie_in_out=False).grow(model, task),
                 get_method("stackbert").grow(model, task))


# -- the §3.3 tying, by its formula ---------------------------------------------------------------------
@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("order", ["width_first", "depth_first"])
def test_tying_formula(order, tied):
    small = ModelSpec("bert", 2, 32, 2, tie_embeddings=False, **TEXT)
    large = ModelSpec("bert", 3, 48, 3, tie_embeddings=False, **TEXT)
    canon = get_family("bert").to_canonical(build(small))
    op = LigoOperator(canon, large, order=order, tie_in_out=tied)
    torch.manual_seed(5)
    with torch.no_grad():
        for p in op.parameters():
            p.normal_()
    out = op(canon)
    B = lambda space, layer=None: op.width_matrix(op.slot_key(space, "out", "blocks", layer))  # noqa: E731
    # tied (§3.3): every in-axis takes B of the space it consumes; untied: separate A's, distinct from B
    A = (B if tied else  # noqa: E731
         lambda space, layer=None: op.width_matrix("D_in" if space == "D" else f"blocks{layer}_{space}_in"))
    E = B("D")
    assert tied == torch.equal(A("D"), E)
    for l in range(3):
        def expect(key, rows, cols):
            """sum_j w[l, j] rows_j W_j cols_j^T, width per small layer j (width_first) or per large l."""
            w = op.depth_coefficients(key)[l]
            if order == "width_first":
                return sum(w[j] * rows(j) @ canon.blocks[j][key] @ cols(j).T for j in range(2))
            mixed = sum(w[j] * canon.blocks[j][key] for j in range(2))
            return rows(l) @ mixed @ cols(l).T
        got = out.blocks[l]
        torch.testing.assert_close(got["q.weight"], expect("q.weight", lambda j: B("Q", j), lambda j: A("D")))
        torch.testing.assert_close(got["v.weight"], expect("v.weight", lambda j: B("V", j), lambda j: A("D")))
        # A_o = B_V, A_fc2 = B_F when tied
        torch.testing.assert_close(got["o.weight"], expect("o.weight", lambda j: E, lambda j: A("V", j)))
        torch.testing.assert_close(got["fc1.weight"], expect("fc1.weight", lambda j: B("F", j), lambda j: A("D")))
        torch.testing.assert_close(got["fc2.weight"], expect("fc2.weight", lambda j: E, lambda j: A("F", j)))
        # biases and norms: their layer's out-expansion only
        for key, rows in (("q.bias", lambda j: B("Q", j)), ("fc1.bias", lambda j: B("F", j)),
                          ("norm1.weight", lambda j: E), ("norm2.bias", lambda j: E), ("o.bias", lambda j: E)):
            w = op.depth_coefficients(key)[l]
            want = (sum(w[j] * rows(j) @ canon.blocks[j][key] for j in range(2)) if order == "width_first"
                    else rows(l) @ sum(w[j] * canon.blocks[j][key] for j in range(2)))
            torch.testing.assert_close(got[key], want)
    torch.testing.assert_close(out.embed["token"], canon.embed["token"] @ E.T)
    torch.testing.assert_close(out.embed["norm.weight"], E @ canon.embed["norm.weight"])
    torch.testing.assert_close(out.head["decoder.weight"], canon.head["decoder.weight"] @ A("D").T)  # A_out = B_emb
    torch.testing.assert_close(out.head["transform.weight"], E @ canon.head["transform.weight"] @ A("D").T)


# -- fit: the large model's held-out loss goes down; FLOPs charged per step -------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_fit_lowers_large_loss(family):
    small, large = PAIRS[family]
    task, fam = task_of(small, large), get_family(family)
    model = pretrained_small(small)
    held_out = next(batches(large, batch=64, seed=99))
    method = get_method("ligo", fit_steps=25, fit_lr=3e-3)

    def held_out_loss():
        with torch.no_grad():
            return float(fam.loss(method.grow(model, task).eval(), held_out))
    before = held_out_loss()
    ledger = FlopsLedger()
    method.fit(model, task, batches(large, seed=7), ledger)
    after = held_out_loss()
    assert after < before, (before, after)
    assert len(method.fit_loss) == 25 and method.materialise_flops > 0
    fwd = fam.forward_flops(large, 16, 16)
    assert method.flops_per_step == fwd.total + backward_flops(fwd) + method.materialise_flops
    assert ledger.counts["fit"] == pytest.approx(25 * method.flops_per_step, rel=1e-12) and ledger.total > 0
    # the objective the operator was trained on is the grown model's own loss (functional_call, tied weights)
    skeleton = build(large).eval()
    canon = fam.to_canonical(model)
    with torch.no_grad():
        via_params = fam.loss(skeleton, held_out, params=fam.state_from_canonical(method.operator(canon)))
    torch.testing.assert_close(via_params, torch.tensor(after), rtol=1e-5, atol=1e-5)
    art = method.artifacts()
    assert art["ligo_fit.json"]["loss"] == method.fit_loss and art["ligo_operator.pt"].keys()


# -- options: valid models of the right shapes ---------------------------------------------------------
OPTIONS = [dict(), dict(order="depth_first"), dict(width_form="identity_prefix"), dict(separate_bias_depth=True),
           dict(tie_in_out=False), dict(depth_init="stackbert_noisy", width_init="random", order="depth_first",
                                        width_form="identity_prefix", separate_bias_depth=True)]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "defaults")
def test_options_give_valid_models(family, options):
    small, large = PAIRS[family]
    task, fam = task_of(small, large), get_family(family)
    model = build(small)
    method = get_method("ligo", fit_steps=3, fit_lr=1e-2, **options)
    method.fit(model, task, batches(large, batch=4), FlopsLedger())
    grown = method.grow(model, task)
    ref = build(large)
    assert {k: v.shape for k, v in grown.named_parameters()} == {k: v.shape for k, v in ref.named_parameters()}
    assert fam.spec_of(grown) == large
    assert torch.isfinite(fam.loss(grown.eval(), next(batches(large, batch=4)))).all()
    describe = method.describe()["config"]
    assert all(describe[k] == v for k, v in options.items())
    if options.get("width_form") == "identity_prefix":
        E = method.operator.width_matrix("D")
        assert torch.equal(E[:small.hidden], torch.eye(small.hidden))      # [I; C]: only C was learned
        assert method.operator.width["D"].shape == (large.hidden - small.hidden, small.hidden)
    if options.get("separate_bias_depth"):
        assert "q_bias" in method.operator.depth and "norm1_bias" in method.operator.depth
    if family == "cait":   # talking heads get B_H per layer; class-attention blocks their own Q/K/V/F matrices
        layers = large.layers if options.get("order") == "depth_first" else small.layers
        assert {f"blocks{layers - 1}_H", "class_blocks0_Q", "class_blocks0_F"} <= set(method.operator.slots)
        assert {"gamma1", "talk_l", "talk_w"} <= set(method.operator.depth)


def test_identity_prefix_stays_identity_after_fit():
    small, large = PAIRS["bert"]
    method = get_method("ligo", fit_steps=5, fit_lr=1e-1, width_form="identity_prefix")
    model = build(small)
    before = method.build_operator(get_family("bert").to_canonical(model), task_of(small, large)).width["D"].clone()
    method.fit(model, task_of(small, large), batches(large, batch=4), FlopsLedger())
    E = method.operator.width_matrix("D")
    assert torch.equal(E[:32], torch.eye(32)) and not torch.equal(E[32:], before)


def test_stackbert_noisy_rows_normalised_and_fit_steps_zero_skips():
    small, large = PAIRS["bert"]
    method = get_method("ligo", fit_steps=0, depth_init="stackbert_noisy", separate_bias_depth=True)
    ledger = FlopsLedger()
    method.fit(build(small), task_of(small, large), batches(large), ledger)
    assert ledger.total == 0 and method.operator is None
    method.grow(build(small), task_of(small, large))
    w = method.operator.depth["q"]
    torch.testing.assert_close(w.sum(-1), torch.ones(4))
    assert torch.equal(w.argmax(-1), torch.tensor([0, 1, 0, 1])) and (w > 0).all()
    assert not torch.equal(method.operator.depth["q"], method.operator.depth["q_bias"])
    with pytest.raises(ValueError, match="unknown order"):
        get_method("ligo", order="sideways")
