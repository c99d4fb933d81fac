"""GPT-2 and ViT/DeiT adapters: exact canonical round trip, differentiable state, FLOPs, paper-scale sizes."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode
from transformers.loss.loss_utils import LOSS_MAPPING

import models.cait  # noqa: F401  (registers cait)
import models.gpt2  # noqa: F401  (registers gpt2)
import models.vit  # noqa: F401  (registers vit)
from helpers import learnable_batches
from models.canonical import BLOCK_AXES, space_size
from models.family import get_family
from models.flops import backward_flops
from models.spec import ModelSpec

SEQ = 16
SPECS = {
    "gpt2-tied": ModelSpec("gpt2", 2, 64, 2, vocab=97, positions=32),
    "gpt2-untied": ModelSpec("gpt2", 2, 64, 2, vocab=97, positions=32, tie_embeddings=False),
    "gpt2-odd": ModelSpec("gpt2", 3, 96, 3, ffn=200, vocab=97, positions=32, tie_embeddings=False),
    "vit": ModelSpec("vit", 2, 64, 2, image_size=16, patch_size=4, in_chans=3, classes=10),
    "vit-odd": ModelSpec("vit", 3, 96, 3, ffn=200, image_size=16, patch_size=4, in_chans=3, classes=10),
}


def build(spec, seed=0):
    torch.manual_seed(seed)
    return get_family(spec.family).build(spec).eval()


def batch_for(spec, batch=2):
    g = torch.Generator().manual_seed(1)
    if spec.family == "vit":
        return {"pixel_values": torch.randn(batch, spec.in_chans, spec.image_size, spec.image_size, generator=g),
                "labels": torch.randint(0, spec.classes, (batch,), generator=g)}
    ids = torch.randint(0, spec.vocab, (batch, SEQ), generator=g)
    return {"input_ids": ids, "labels": ids.clone()}


@pytest.mark.parametrize("name", SPECS)
def test_round_trip_is_exact(name):
    spec = SPECS[name]
    fam = get_family(spec.family)
    model = build(spec)
    assert fam.spec_of(model) == spec and fam.owns(model)
    canon = fam.to_canonical(model)
    assert canon.num_params() == sum(p.numel() for p in model.parameters())
    rebuilt = fam.from_canonical(canon)          # a fresh model of another seed, then overwritten
    a, b = model.state_dict(), rebuilt.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    # with `like`, the clone of the model is overwritten
    again = fam.from_canonical(canon, like=model).state_dict()
    assert all(torch.equal(a[k], again[k]) for k in a)


@pytest.mark.parametrize("name", SPECS)
def test_canonical_shapes(name):
    spec = SPECS[name]
    canon = get_family(spec.family).to_canonical(build(spec))
    fixed = {"vocab": spec.vocab, "classes": spec.classes}
    for section, layer, key, t in canon.items():
        axes = canon.axes(section, key)
        assert len(axes) == t.dim(), (section, key)
        for size, tag in zip(t.shape, axes):
            if tag is not None:
                assert size == space_size(spec, tag[0]), (section, layer, key)
    for block in canon.blocks:
        assert set(block) <= set(BLOCK_AXES)
        for k in ("q", "k", "v", "o"):
            assert block[f"{k}.weight"].shape == (spec.hidden, spec.hidden)
        assert block["fc1.weight"].shape == (spec.ffn, spec.hidden)
        assert block["fc2.weight"].shape == (spec.hidden, spec.ffn)
    if spec.family == "gpt2":
        assert canon.embed["token"].shape == (fixed["vocab"], spec.hidden)
        assert canon.embed["position"].shape == (spec.positions, spec.hidden)
        assert ("decoder.weight" in canon.head) == (not spec.tie_embeddings)
        assert canon.tied_head_norm == ("norm" if spec.tie_embeddings else None)
    else:
        n = (spec.image_size // spec.patch_size) ** 2
        assert canon.embed["patch.weight"].shape == (spec.hidden, spec.in_chans * spec.patch_size ** 2)
        assert canon.embed["cls"].shape == (1, spec.hidden)
        assert canon.embed["position"].shape == (n + 1, spec.hidden)
        assert canon.head["classifier.weight"].shape == (fixed["classes"], spec.hidden)
        assert canon.tied_head_norm is None


@pytest.mark.parametrize("name", SPECS)
def test_functional_call_matches_and_is_differentiable(name):
    spec = SPECS[name]
    fam = get_family(spec.family)
    model = build(spec)
    batch = batch_for(spec)
    canon = fam.to_canonical(model)
    # the canonical state, swapped in by functional_call, must reproduce the model's own forward exactly
    with torch.no_grad():
        ref = fam.logits(model, batch)
        out = _functional_logits(fam, model, fam.state_from_canonical(canon), batch)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    # perturbed weights really are swapped in (a tied GPT-2 head must follow the token embedding)
    scaled = canon.map(lambda section, layer, key, t: t * 1.5)
    with torch.no_grad():
        out = _functional_logits(fam, model, fam.state_from_canonical(scaled), batch)
        ref = fam.logits(fam.from_canonical(scaled).eval(), batch)   # fresh models start in train mode
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    # a gradient reaches a canonical tensor through the state map
    leaf = canon.blocks[0]["q.weight"].requires_grad_()
    emb = canon.embed["token" if spec.family == "gpt2" else "patch.weight"].requires_grad_()
    state = fam.state_from_canonical(canon)
    fam.loss(model, batch, params=state).backward()     # the Family's own functional path
    for t in (leaf, emb):
        assert t.grad is not None and t.grad.abs().sum() > 0


def _functional_logits(fam, model, state, batch):
    if fam.name == "vit":
        return torch.func.functional_call(model, state, (batch["pixel_values"],))
    return torch.func.functional_call(model, state, (), {"input_ids": batch["input_ids"]}).logits


@pytest.mark.parametrize("name", SPECS)
def test_training_flops_match_counter(name):
    spec = SPECS[name]
    fam = get_family(spec.family)
    model = build(spec).train()
    batch = batch_for(spec, batch=3)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        fam.loss(model, batch).backward()
    fwd = fam.forward_flops(spec, 3, SEQ)
    analytic = fwd.total + backward_flops(fwd)
    assert analytic == counter.get_total_flops()


PAPER = [  # published parameter counts (GPT-2 with tied head; DeiT from Touvron et al. 2021, timm)
    (ModelSpec("gpt2", 12, 768, 12, vocab=50257, positions=1024), 124_439_808),
    (ModelSpec("gpt2", 24, 1024, 16, vocab=50257, positions=1024), 354_823_168),
    (ModelSpec("vit", 12, 384, 6, image_size=224, patch_size=16, classes=1000), 22_050_664),
    (ModelSpec("vit", 12, 768, 12, image_size=224, patch_size=16, classes=1000), 86_567_656),
]


@pytest.mark.parametrize("spec,published", PAPER, ids=["gpt2-base", "gpt2-medium", "deit-s", "deit-b"])
def test_paper_scale_builds_on_meta(spec, published):
    with torch.device("meta"):
        model = get_family(spec.family).build(spec)
    n = sum(p.numel() for p in model.parameters())
    assert abs(n / published - 1) < 0.01, n
    assert get_family(spec.family).spec_of(model) == spec


@pytest.mark.parametrize("name", ["gpt2-untied", "vit-odd"])
def test_export_load(name, tmp_path):
    spec = SPECS[name]
    fam = get_family(spec.family)
    model = build(spec)
    fam.export(model, tmp_path)
    loaded = fam.load(tmp_path).eval()
    assert fam.spec_of(loaded) == spec
    a, b = model.state_dict(), loaded.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    batch = batch_for(spec)
    with torch.no_grad():
        torch.testing.assert_close(fam.logits(loaded, batch), fam.logits(model, batch), rtol=0, atol=0)


@pytest.mark.parametrize("family", ["vit", "cait"])
def test_a_timm_model_gets_exactly_the_ffn_width_asked_where_the_plain_ratio_rounds_down(family):
    hidden, ffn = 22, 30                    # 22 * (30 / 22) == 29.999...: timm's int() would build 29 units
    assert int(hidden * (ffn / hidden)) < ffn
    extra = dict(class_layers=1) if family == "cait" else {}
    spec = ModelSpec(family, 1, hidden, 2, ffn=ffn, image_size=8, patch_size=4, in_chans=3, classes=5, **extra)
    model = get_family(family).build(spec)
    assert model.blocks[0].mlp.fc1.out_features == ffn


def test_gpt2_names_its_causal_lm_loss_so_transformers_does_not_warn(trained, tmp_path):
    """transformers warns ("`loss_type=None` ... unrecognized") whenever a model's loss_type is not in its loss
    table, and GPT2LMHeadModel's class name matches no entry; built and reloaded models name the loss, and it is
    still the next-token cross-entropy (checked on a trained model, whose logits are far from uniform)."""
    family = get_family("gpt2")
    model = trained(SPECS["gpt2-tied"]).eval()
    family.export(model, tmp_path)
    for m in (model, family.load(tmp_path).eval(), family.build(SPECS["gpt2-tied"])):
        assert m.loss_type in LOSS_MAPPING and m.loss_function is LOSS_MAPPING["ForCausalLM"]
    batch = next(learnable_batches(SPECS["gpt2-tied"], seed=1))     # the data it learned
    loss = model(**batch).loss
    logits = model(input_ids=batch["input_ids"]).logits
    shifted = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), batch["labels"][:, 1:].flatten())
    torch.testing.assert_close(loss, shifted)
    assert shifted < 0.5 * torch.log(torch.tensor(97.0))      # learned: well below a uniform guess
