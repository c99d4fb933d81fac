"""`ligo` is the official code's LiGO (VITA-Group/LiGO ligo.py, its README's BERT grow command): the grown
model is computed here again with the official formulas, written independently of methods/ligo_operator.py, from the
operator's own coefficients, on a tiny BERT pair grown in depth and width from weights that have learned:

    per large layer l and module m:   W = sum_j c[l, m][j] W_j      b = sum_j c_bias[l, m][j] b_j
    FusedLinear (in, then out):       W <- cat([W, W C_in^T], 1);   W <- cat([W, C_out W], 0);   b <- cat([b, C_out b])
    FusedLayeredNorm:                 w <- cat([w, C w]),  b <- cat([b, C b])
    FusedEmbedding:                   E <- cat([E, E C_e^T], 1)

with C_e one matrix for the residual stream and, per large layer, one each for queries, keys, values and the FFN
(o reads the values' C, fc2 the FFN's). And the draws are the official ones: depth "stackbert_noisy" (U(0, 0.03), 1 at
l mod L1, normalised), width "rand" (U(0, 1) rows normalised to sum 1), separate bias coefficients, and a fit whose
lr warms up over 100x its steps."""
import pytest
import torch

from methods import get_method
from models import get_family
from tasks import make_task

TASK = make_task("bert", dict(layers=2, hidden=32, heads=2), dict(layers=4, hidden=48, heads=3), "tiny")


def official_block(small, op, l, key, axes):
    """Large block l's tensor `key` by the official formulas (docstring)."""
    name, _, kind = key.rpartition(".")
    depth = op.depth[f"{name}_bias" if kind == "bias" else name][l] if name else op.depth[key][l]
    t = sum(depth[j] * small.blocks[j][key] for j in range(len(small.blocks)))
    expand = {"in": None, "out": None}
    for axis, (space, role) in enumerate(axes):
        C = op.width["D" if space == "D" else f"blocks{l}_{space}"]
        expand[role] = (axis, C)
    if expand["in"] is not None:            # FusedLinear.get_params: the in-dimension first
        axis, C = expand["in"]
        t = torch.cat([t, t @ C.T], 1)
    axis, C = expand["out"]
    return torch.cat([t, C @ t], 0)


def official_outside(tensor, axes, op):
    """Embeddings (their D axis expanded as FusedEmbedding does) and the head (its D axes as FusedLinear /
    FusedLayeredNorm; our head transform shares the residual stream's C, the documented difference)."""
    C = op.width["D"]
    for axis, tag in enumerate(axes):
        if tag is None:
            continue
        t = tensor.movedim(axis, -1)
        tensor = torch.cat([t, t @ C.T], -1).movedim(-1, axis)
    return tensor


def test_official_init_is_the_official_formulas(trained):
    small_model = trained(TASK.small)
    method = get_method("ligo", task=TASK, fit_steps=0)
    large = get_family("bert").to_canonical(method.grow(small_model, TASK))
    small = get_family("bert").to_canonical(small_model)
    op = method.operator
    with torch.no_grad():
        for l, block in enumerate(large.blocks):
            for key, t in block.items():
                expected = official_block(small, op, l, key, small.axes("blocks", key))
                torch.testing.assert_close(t, expected, rtol=1e-5, atol=1e-6, msg=f"layer {l} {key}")
        for section in ("embed", "head"):
            for key, t in getattr(large, section).items():
                expected = official_outside(getattr(small, section)[key], small.axes(section, key), op)
                torch.testing.assert_close(t, expected, rtol=1e-5, atol=1e-6, msg=f"{section} {key}")


def test_official_draws_and_fit_schedule():
    method = get_method("ligo", task=TASK, fit_steps=7)
    assert method.config.fit_warmup_steps == 700          # 10,000 warm-up steps over the README's 100
    small = get_family("bert").to_canonical(get_family("bert").build(TASK.small))
    op = method.build_operator(small, TASK)
    L1, L2 = TASK.small.layers, TASK.large.layers
    for key, w in op.depth.items():
        torch.testing.assert_close(w.sum(-1), torch.ones(L2))
        assert torch.equal(w.argmax(-1), torch.arange(L2) % L1), key
        top = w.max(-1).values
        assert ((top >= 1 / (1 + 0.03 * (L1 - 1))) & (top < 1)).all(), key       # 1 among U(0, 0.03), normalised
    assert "q_bias" in op.depth and not torch.equal(op.depth["q"], op.depth["q_bias"])
    for key, C in op.width.items():
        assert (C >= 0).all() and torch.allclose(C.sum(-1), torch.ones(C.shape[0]), atol=1e-6), key
    # per large layer, each attention space and the FFN its own matrix (depth first), one for the residual stream
    assert {k for k in op.width if k.startswith("blocks")} == {f"blocks{l}_{s}" for l in range(L2)
                                                               for s in ("Q", "K", "V", "F")}


def test_official_fit_barely_moves_the_operator(trained):
    """The official command's fit ends at 1% of its peak lr: the operator moves by about that much."""
    from helpers import learnable_batches

    from runs.ledger import FlopsLedger
    small_model = trained(TASK.small)
    method = get_method("ligo", task=TASK, fit_steps=5)
    before = {k: v.detach().clone() for k, v in method.build_operator(
        get_family("bert").to_canonical(small_model), TASK).state_dict().items()}
    method.fit(small_model, TASK, learnable_batches(TASK.large, batch=8), FlopsLedger())
    moved = max(float((method.operator.state_dict()[k] - v).abs().max()) for k, v in before.items())
    assert 0 < moved <= 5 * 2e-4 * 5 / 500 * 1.01     # Adam moves a coefficient by at most ~lr a step
    with pytest.raises(ValueError, match="fit_warmup_steps must be"):
        get_method("ligo", fit_warmup_steps=-1)
