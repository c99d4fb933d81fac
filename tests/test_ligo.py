"""LiGO (Wang et al., ICLR 2023): Proposition 1 (App. A) for its copy start (`ligo_copy`), on weights that have
learned (the `trained` fixture: random init keeps logits near zero, where a model k times too confident looks
right); the §3.3 tyings by their formulas; the operator fit lowering the large model's loss on every family and
beating the Net2Net init it starts from; FLOPs charged; every official-code option."""
import importlib
import os
import types

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from helpers import learnable_batches, logits_of, relative_logit_gap  # noqa: E402

import methods  # noqa: E402,F401  (registers every method)
from methods.depth import interpolate_sources, stack_sources  # noqa: E402
from methods.ligo_operator import LigoOperator, pinv_transposed  # noqa: E402
from methods.registry import get_method  # noqa: E402
from methods.width import net2net_width  # noqa: E402
from models import ModelSpec, get_family  # noqa: E402
from models.flops import backward_flops  # noqa: E402
from runs.ledger import FlopsLedger  # noqa: E402

FAMILIES = ("bert", "roberta", "gpt2", "vit", "cait")
for _f in ("bert", "gpt2", "vit", "cait"):
    importlib.import_module(f"models.{_f}")      # registers the family (bert.py registers roberta too)
TEXT = dict(vocab=64, positions=16)
IMAGE = dict(image_size=8, patch_size=2, in_chans=1, classes=10)


def spec(family, layers, hidden, heads, **kw):
    extra = IMAGE if family in ("vit", "cait") else TEXT
    return ModelSpec(family, layers, hidden, heads, **({"class_layers": 1} if family == "cait" else {}), **extra, **kw)


# the configurations users run: every family, tied output layers (the text default) and untied ones
CONFIGS = {"bert": {}, "bert-untied": dict(tie_embeddings=False), "roberta": {}, "gpt2": {},
           "gpt2-untied": dict(tie_embeddings=False), "vit": {}, "cait": {}}
# (small, large) shapes: depth x2 and width x1.5 (the paper's BERT ratio, not an integer: Net2Net does not keep
# LayerNorm statistics there) and width-only x2 (integer: Net2Net preserves the function, so LiGO must too)
GROWTHS = {"x1.5+depth": ((2, 32, 2), (4, 48, 3)), "x2 width": ((2, 32, 2), (2, 64, 4))}


def pair(config, growth):
    family = config.split("-")[0]
    (s, l), kw = GROWTHS[growth], CONFIGS[config]
    return spec(family, *s, **kw), spec(family, *l, **kw)


def task_of(small, large):
    return types.SimpleNamespace(small=small, large=large, family=large.family)


def probe(s, seed=99):
    return next(learnable_batches(s, batch=8, seed=seed))


def assert_states_equal(a, b, skip=()):
    a, b = a.state_dict(), b.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        if not any(s in k for s in skip):
            assert torch.equal(a[k], b[k]), k


def test_the_fixture_has_learned(trained):
    """The premise of every test below: confident logits, far from random init's."""
    for config in ("bert", "gpt2", "vit"):
        small, _ = pair(config, "x2 width")
        model = trained(small)
        fresh = get_family(small.family).build(small).eval()
        batch = probe(small)
        assert logits_of(model, batch).abs().max() > 4 * logits_of(fresh, batch).abs().max()


# -- Proposition 1: with fixed coefficients LiGO *is* Net2Net, stacking, interpolation ------------------------
@pytest.mark.parametrize("growth", sorted(GROWTHS))
@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("tying", ["pinv", "untied"])
def test_the_copy_start_at_fit_0_is_net2net(config, growth, tying, trained):
    """The default operator (tying="pinv") and App. A's untied one, before any fit, give Net2Net's grown model:
    every tensor bit for bit, the norm feeding a tied output layer included (its 1/count is the IN side of the
    tied decoder)."""
    small, large = pair(config, growth)
    model, task = trained(small), task_of(small, large)
    expected = get_method("net2net").grow(model, task)
    grown = get_method("ligo_copy", fit_steps=0, tying=tying).grow(model, task)
    assert_states_equal(grown, expected)
    assert relative_logit_gap(expected, grown, probe(large)) <= 1e-4


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_the_copy_start_at_fit_0_preserves_function_where_net2net_does(config, trained):
    """Width x2 keeps every unit's copy count equal, so LayerNorm statistics and hence the logits are kept: the
    default LiGO reproduces the small model, tied heads too. The paper's literal tying (A = B) sums the copied
    inputs instead of averaging them and scales a tied head's logits: on learned weights that is far off."""
    small, large = pair(config, "x2 width")
    model, task = trained(small), task_of(small, large)
    batch = probe(small)
    assert relative_logit_gap(model, get_method("ligo_copy", fit_steps=0).grow(model, task), batch) <= 1e-4
    assert relative_logit_gap(model, get_method("ligo_copy", fit_steps=0, tying="literal").grow(model, task), batch) > 0.1


@pytest.mark.parametrize("order", ["width_first", "depth_first"])
@pytest.mark.parametrize("depth", ["stackbert", "interpolation"])
def test_prop1_depth(depth, order, trained):
    """Depth-only growth: LiGO with one-hot w is stacking / interpolation, through the method's init and through
    an explicit fixed operator."""
    small, large = spec("bert", 2, 32, 2), spec("bert", 5, 32, 2)
    model, task = trained(small), task_of(small, large)
    expected = get_method(depth).grow(model, task)
    assert_states_equal(get_method("ligo_copy", fit_steps=0, depth_init=depth, order=order).grow(model, task), expected)
    sources = (stack_sources if depth == "stackbert" else interpolate_sources)(2, 5)
    canon = get_family("bert").to_canonical(model)
    op = LigoOperator.from_fixed(canon, large, depth_sources=sources, order=order)
    assert_states_equal(get_family("bert").from_canonical(op(canon)), expected)


@pytest.mark.parametrize("order", ["width_first", "depth_first"])
@pytest.mark.parametrize("tying", ["pinv", "untied"])
def test_prop1_fixed_operator_and_orders(order, tying, trained):
    """Both orders (the paper's width-first, the official depth-first) and an explicit fixed Net2Net operator with
    another seed give Net2Net with that seed, stacking included, on a tied BERT."""
    small, large = pair("bert", "x1.5+depth")
    model, task = trained(small), task_of(small, large)
    expected = get_method("net2net", seed=3).grow(model, task)
    assert_states_equal(get_method("ligo_copy", fit_steps=0, seed=3, order=order, tying=tying).grow(model, task), expected)
    canon = get_family("bert").to_canonical(model)
    op = LigoOperator.from_fixed(canon, large, stack_sources(2, 4),
                                 net2net_width(small, large, torch.Generator().manual_seed(3)),
                                 tying=tying, order=order)
    assert_states_equal(get_family("bert").from_canonical(op(canon)), expected)


def test_prop1_stackbert_with_net2net_width(trained):
    small, large = pair("bert", "x2 width")
    large = large.with_(layers=4)
    model, task = trained(small), task_of(small, large)
    assert_states_equal(get_method("ligo_copy", fit_steps=0).grow(model, task), get_method("stackbert").grow(model, task))


# -- the tyings, by their formulas ---------------------------------------------------------------------------
@pytest.mark.parametrize("tying", ["pinv", "literal", "untied"])
@pytest.mark.parametrize("order", ["width_first", "depth_first"])
def test_tying_formula(order, tying):
    small = ModelSpec("bert", 2, 32, 2, tie_embeddings=False, **TEXT)
    large = ModelSpec("bert", 3, 48, 3, tie_embeddings=False, **TEXT)
    canon = get_family("bert").to_canonical(get_family("bert").build(small))
    op = LigoOperator(canon, large, order=order, tying=tying)
    torch.manual_seed(5)
    with torch.no_grad():
        for p in op.parameters():
            p.normal_()
    out = op(canon)
    B = lambda space, layer=None: op.width_matrix(op.slot_key(space, "out", "blocks", layer))  # noqa: E731
    # pinv: A = B (B^T B)^-1; literal (§3.3 as printed): A = B; untied: a separate free matrix
    A = {"pinv": lambda space, layer=None: pinv_transposed(B(space, layer)),
         "literal": B,
         "untied": lambda space, layer=None: op.width_matrix("D_in" if space == "D" else f"blocks{layer}_{space}_in")
         }[tying]
    E = B("D")
    assert (tying == "literal") == torch.equal(A("D"), E)
    if tying == "pinv":   # A^T B = I: an input expanded by B is read back exactly
        torch.testing.assert_close(A("D").T @ E, torch.eye(32), atol=1e-4, rtol=0)
        assert torch.equal(op.in_matrix("D"), A("D"))
    for l in range(3):
        def expect(key, rows, cols):
            """sum_j w[l, j] rows_j W_j cols_j^T, width per small layer j (width_first) or per large l."""
            w = op.depth_coefficients(key)[l]
            if order == "width_first":
                return sum(w[j] * rows(j) @ canon.blocks[j][key] @ cols(j).T for j in range(2))
            mixed = sum(w[j] * canon.blocks[j][key] for j in range(2))
            return rows(l) @ mixed @ cols(l).T
        got = out.blocks[l]
        close = lambda a, b: torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)  # noqa: E731
        close(got["q.weight"], expect("q.weight", lambda j: B("Q", j), lambda j: A("D")))
        close(got["v.weight"], expect("v.weight", lambda j: B("V", j), lambda j: A("D")))
        # the consuming side of o and fc2 reads the V and F spaces
        close(got["o.weight"], expect("o.weight", lambda j: E, lambda j: A("V", j)))
        close(got["fc1.weight"], expect("fc1.weight", lambda j: B("F", j), lambda j: A("D")))
        close(got["fc2.weight"], expect("fc2.weight", lambda j: E, lambda j: A("F", j)))
        # biases and norms: their layer's out-expansion only
        for key, rows in (("q.bias", lambda j: B("Q", j)), ("fc1.bias", lambda j: B("F", j)),
                          ("norm1.weight", lambda j: E), ("norm2.bias", lambda j: E), ("o.bias", lambda j: E)):
            w = op.depth_coefficients(key)[l]
            want = (sum(w[j] * rows(j) @ canon.blocks[j][key] for j in range(2)) if order == "width_first"
                    else rows(l) @ sum(w[j] * canon.blocks[j][key] for j in range(2)))
            close(got[key], want)
    torch.testing.assert_close(out.embed["token"], canon.embed["token"] @ E.T)
    torch.testing.assert_close(out.embed["norm.weight"], E @ canon.embed["norm.weight"])
    torch.testing.assert_close(out.head["decoder.weight"], canon.head["decoder.weight"] @ A("D").T, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out.head["transform.weight"], E @ canon.head["transform.weight"] @ A("D").T,
                               rtol=1e-4, atol=1e-4)


def test_tied_head_norm_takes_the_in_side():
    """With a tied decoder, the transform norm is expanded by the IN matrix of D (Net2Net's 1/count at init)."""
    small, large = spec("bert", 2, 32, 2), spec("bert", 2, 64, 4)
    canon = get_family("bert").to_canonical(get_family("bert").build(small))
    op = LigoOperator(canon, large).init_()
    out = op(canon)
    torch.testing.assert_close(out.head["transform_norm.weight"], op.in_matrix("D") @ canon.head["transform_norm.weight"])
    torch.testing.assert_close(out.head["transform_norm.weight"], 0.5 * op.width_matrix("D") @ canon.head["transform_norm.weight"])


# -- fit: the large model's held-out loss goes down from the Net2Net init; FLOPs charged per step -------------
@pytest.mark.parametrize("family", FAMILIES)
def test_fit_lowers_large_loss_below_net2net(family, trained):
    small, large = pair(family, "x1.5+depth")
    task, fam = task_of(small, large), get_family(family)
    model = trained(small)
    held_out = next(learnable_batches(large, batch=64, seed=99))
    method = get_method("ligo_copy", fit_steps=20, fit_lr=1e-3)

    def held_out_loss(grown):
        with torch.no_grad():
            return float(fam.loss(grown.eval(), held_out))
    net2net = held_out_loss(get_method("net2net").grow(model, task))
    assert held_out_loss(method.grow(model, task)) == pytest.approx(net2net, rel=1e-5)   # starts at Net2Net
    method.operator = None
    ledger = FlopsLedger()
    method.fit(model, task, learnable_batches(large, seed=7), ledger)
    after = held_out_loss(method.grow(model, task))
    assert after < net2net, (net2net, after)
    assert len(method.fit_loss) == 20 and method.materialise_flops > 0
    replay = learnable_batches(large, seed=7)         # the fit's batches again: a masked LM's head cost varies

    def step_flops(batch):
        fwd = fam.batch_flops(large, batch)
        return fwd.total + backward_flops(fwd) + method.materialise_flops
    charged = [step_flops(next(replay)) for _ in range(20)]
    assert method.flops_per_step == pytest.approx(sum(charged) / 20, rel=1e-12)     # the mean step
    assert ledger.counts["fit"] == pytest.approx(sum(charged), rel=1e-12) and ledger.total > 0
    # the objective the operator was trained on is the grown model's own loss (functional_call, tied weights)
    skeleton = fam.build(large).eval()
    canon = fam.to_canonical(model)
    with torch.no_grad():
        via_params = fam.loss(skeleton, held_out, params=fam.state_from_canonical(method.operator(canon)))
    torch.testing.assert_close(via_params, torch.tensor(after), rtol=1e-5, atol=1e-5)
    art = method.artifacts()
    assert art["ligo_fit.json"]["loss"] == method.fit_loss and art["ligo_operator.pt"].keys()
    sizes = sum(t.numel() for t in art["ligo_operator.pt"].values())
    assert art["ligo_fit.json"]["operator"]["parameters"] == sizes > 0
    assert method.describe() == get_method("ligo_copy", fit_steps=20, fit_lr=1e-3).describe()   # settings, not outcomes


@pytest.mark.parametrize("config", ["bert", "gpt2-untied", "vit"])
def test_a_fit_step_materialises_once_and_sums_the_micro_batches_gradients(config, trained):
    """k micro-batches: one materialisation a step, whose backward takes the large weights' summed gradients; the
    operator's gradient is the per-micro-batch materialisation's (sum over m of J^T g_m / k), bit for bit with one
    micro-batch, to float rounding with three; the ledger charges the materialisation once a step."""
    from methods.ligo import FitSession
    small, large = pair(config, "x1.5+depth")
    fam, model = get_family(large.family), trained(small)
    batches = learnable_batches(large, batch=6, seed=5)
    micro = [next(batches) for _ in range(3)]
    for k in (1, 3):
        task = types.SimpleNamespace(small=small, large=large, family=large.family,
                                     recipe=types.SimpleNamespace(bf16=False, grad_accum=k))
        options = dict(fit_steps=2, fit_max_grad_norm=0.0)       # raw gradients, to compare
        session = FitSession(get_method("ligo_copy", **options), model, task)
        session.skeleton.eval()                      # no dropout: the reference below draws none
        calls, forward = [], session.op.forward
        session.op.forward = lambda canon, **kw: calls.append(1) or forward(canon, **kw)
        session.step(*micro[:k])
        got = [p.grad.clone() for p in session.op.parameters()]
        assert len(calls) == 1
        reference = FitSession(get_method("ligo_copy", **options), model, task)
        reference.skeleton.eval()
        for batch in micro[:k]:                      # the materialisation made anew for every micro-batch
            state = fam.state_from_canonical(reference.op(reference.canon))
            (fam.loss(reference.skeleton, batch, params=state) / k).backward()
        want = [p.grad for p in reference.op.parameters()]
        if k == 1:
            assert all(torch.equal(g, w) for g, w in zip(got, want))
        else:
            assert all(torch.allclose(g, w, rtol=1e-5, atol=1e-7) for g, w in zip(got, want))
            assert any(g.abs().max() > 0 for g in got)
        large_part = sum(fam.batch_flops(large, b).total + backward_flops(fam.batch_flops(large, b))
                         for b in micro[:k])
        assert session.step_flops(*micro[:k]) == large_part + session.materialise_flops


def test_a_width_matrix_that_lost_rank_is_refused_in_the_fit_and_at_growth(trained):
    """The pseudo-inverse of a rank-deficient B is undefined: checked at once outside the fit, once a step inside it
    (the solver statuses are collected unread, so a GPU is not waited for at every solve), never used silently."""
    from methods.ligo import FitSession
    from methods.ligo_operator import check_solves
    with pytest.raises(torch.linalg.LinAlgError):
        pinv_transposed(torch.zeros(4, 2))
    infos = []
    pinv_transposed(torch.zeros(4, 2), infos)                 # no check yet
    good = torch.cat([torch.eye(2), torch.ones(2, 2) / 2])
    pinv_transposed(good, infos)
    with pytest.raises(ValueError, match="lost rank"):
        check_solves(infos)
    check_solves(infos[1:])                                   # the full-rank one alone passes
    small, large = pair("bert", "x1.5+depth")
    task = types.SimpleNamespace(small=small, large=large, family="bert",
                                 recipe=types.SimpleNamespace(bf16=False, grad_accum=1))
    session = FitSession(get_method("ligo_copy", fit_steps=2), trained(small), task)
    with torch.no_grad():
        next(iter(session.op.width.values())).zero_()
    with pytest.raises(ValueError, match="lost rank"):
        session.step(next(learnable_batches(large, batch=4, seed=1)))


def test_tf32_is_on_only_inside_a_gpu_bf16_fits_materialisation_and_restored_after(trained):
    """TF32 is a process-wide flag: the fit turns it on for its materialisations only where the recipe computes in
    bf16 on a GPU, and leaves it as it found it, an error included; on the CPU, or in float32, never."""
    from methods.ligo import FitSession, fit_uses_tf32, tf32_matmuls
    flag = torch.backends.cuda.matmul
    before = flag.allow_tf32
    try:
        flag.allow_tf32 = False
        with tf32_matmuls(True):
            assert flag.allow_tf32
        assert not flag.allow_tf32
        with pytest.raises(RuntimeError), tf32_matmuls(True):
            raise RuntimeError("a failed step")
        assert not flag.allow_tf32
        with tf32_matmuls(False):
            assert not flag.allow_tf32
    finally:
        flag.allow_tf32 = before
    small, large = pair("bert", "x1.5+depth")
    for bf16 in (False, True):
        task = types.SimpleNamespace(small=small, large=large, family="bert",
                                     recipe=types.SimpleNamespace(bf16=bf16, grad_accum=1))
        assert not FitSession(get_method("ligo_copy", fit_steps=1), trained(small), task).tf32     # the CPU
    assert fit_uses_tf32(torch.device("cuda"), True)
    assert not fit_uses_tf32(torch.device("cuda"), False) and not fit_uses_tf32(torch.device("cpu"), True)


# -- options: valid models of the right shapes ---------------------------------------------------------
OPTIONS = [dict(), dict(order="depth_first"), dict(width_form="identity_prefix"), dict(separate_bias_depth=True),
           dict(tying="untied"), dict(tying="literal"),
           dict(depth_init="stackbert_noisy", width_init="random", order="depth_first", tying="literal",
                width_form="identity_prefix", separate_bias_depth=True)]


@pytest.mark.parametrize("family", ("bert", "gpt2", "vit", "cait"))
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "defaults")
def test_options_give_valid_models(family, options, trained):
    small, large = pair(family, "x1.5+depth")
    task, fam = task_of(small, large), get_family(family)
    model = trained(small)
    method = get_method("ligo_copy", fit_steps=3, fit_lr=1e-2, **options)
    method.fit(model, task, learnable_batches(large, batch=4), FlopsLedger())
    grown = method.grow(model, task)
    ref = fam.build(large)
    assert {k: v.shape for k, v in grown.named_parameters()} == {k: v.shape for k, v in ref.named_parameters()}
    assert fam.spec_of(grown) == large
    assert torch.isfinite(fam.loss(grown.eval(), next(learnable_batches(large, batch=4)))).all()
    describe = method.describe()["config"]
    assert all(describe[k] == v for k, v in options.items())
    if options.get("width_form") == "identity_prefix":
        E = method.operator.width_matrix("D")
        assert torch.equal(E[:small.hidden], torch.eye(small.hidden))      # [I; C]: only C was learned
        assert method.operator.width["D"].shape == (large.hidden - small.hidden, small.hidden)
    if options.get("separate_bias_depth"):
        assert "q_bias" in method.operator.depth and "norm1_bias" in method.operator.depth
    assert ("D_in" in method.operator.slots) == (options.get("tying") == "untied")
    if family == "cait":   # talking heads get B_H per layer; class-attention blocks their own Q/K/V/F matrices
        layers = large.layers if options.get("order") == "depth_first" else small.layers
        assert {f"blocks{layers - 1}_H", "class_blocks0_Q", "class_blocks0_F"} <= set(method.operator.slots)
        assert {"gamma1", "talk_l", "talk_w"} <= set(method.operator.depth)


def test_identity_prefix_stays_identity_after_fit(trained):
    small, large = pair("bert", "x1.5+depth")
    method = get_method("ligo_copy", fit_steps=5, fit_lr=1e-1, width_form="identity_prefix")
    model = trained(small)
    before = method.build_operator(get_family("bert").to_canonical(model), task_of(small, large)).width["D"].clone()
    method.fit(model, task_of(small, large), learnable_batches(large, batch=4), FlopsLedger())
    E = method.operator.width_matrix("D")
    assert torch.equal(E[:32], torch.eye(32)) and not torch.equal(E[32:], before)


def test_stackbert_noisy_rows_normalised_and_fit_steps_zero_skips():
    small, large = pair("bert", "x1.5+depth")
    build = get_family("bert").build
    method = get_method("ligo_copy", fit_steps=0, depth_init="stackbert_noisy", separate_bias_depth=True)
    ledger = FlopsLedger()
    method.fit(build(small), task_of(small, large), learnable_batches(large), ledger)
    assert ledger.total == 0 and method.operator is None
    method.grow(build(small), task_of(small, large))
    w = method.operator.depth["q"]
    torch.testing.assert_close(w.sum(-1), torch.ones(4))
    assert torch.equal(w.argmax(-1), torch.tensor([0, 1, 0, 1])) and (w > 0).all()
    assert not torch.equal(method.operator.depth["q"], method.operator.depth["q_bias"])
    with pytest.raises(ValueError, match="unknown order"):
        get_method("ligo_copy", order="sideways")
    with pytest.raises(ValueError, match="unknown tying 'tied'"):
        get_method("ligo_copy", tying="tied")


# -- symmetry: on a model without dropout a copy init is a fixed point; fit_noise breaks it ------------------
def _copy_spread(op, n1):
    """Largest gap between a copied unit's row of B (rows >= n1) and the row of the unit it copies."""
    E = op.width_matrix("D").detach()
    src = E[n1:].argmax(-1)
    return float((E[n1:] - E[src]).abs().max())


@pytest.mark.parametrize("noise", (0.0, 0.05))
def test_fit_noise_breaks_the_copies_symmetry_without_dropout(noise, trained):
    small, large = pair("vit", "x2 width")        # ViT has no dropout: nothing else tells a copy from its source
    model = trained(small)
    method = get_method("ligo_copy", fit_steps=10, fit_lr=1e-2, fit_noise=noise)
    ledger = FlopsLedger()
    method.fit(model, task_of(small, large), learnable_batches(large, batch=8), ledger)
    spread = _copy_spread(method.operator, small.hidden)
    if noise == 0:
        assert spread < 1e-5            # the fit moved B but kept every copy equal to its source
        assert not torch.equal(method.operator.width_matrix("D"), get_method("ligo_copy", fit_steps=0).build_operator(
            get_family("vit").to_canonical(model), task_of(small, large)).width_matrix("D"))
    else:
        assert spread > 0.1 * noise / small.hidden ** 0.5
    # fit_steps=0 never adds noise: LiGO at fit 0 stays Net2Net whatever fit_noise says
    zero = get_method("ligo_copy", fit_steps=0, fit_noise=noise).grow(model, task_of(small, large))
    assert_states_equal(zero, get_method("net2net").grow(model, task_of(small, large)))
