"""Llama adapter: exact canonical round trip with grouped-query attention, the canonical tags of GQA and the gated
FFN, the differentiable state map, FLOPs equal to FlopCounterMode, paper-scale sizes, export, and growth on it."""
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from helpers import learnable_batches, relative_logit_gap
from methods import get_method
from models import ModelSpec, get_family
from models.canonical import IN, OUT, space_size
from models.flops import backward_flops
from tasks import get_task, make_task

SPECS = {
    "gqa-untied": ModelSpec("llama", 2, 64, 4, ffn=192, vocab=97, positions=32, kv_heads=2, tie_embeddings=False),
    "gqa-tied": ModelSpec("llama", 2, 64, 4, ffn=192, vocab=97, positions=32, kv_heads=1),
    "mha-odd": ModelSpec("llama", 3, 96, 3, ffn=200, vocab=97, positions=32, tie_embeddings=False),
}
FAM = get_family("llama")


def build(spec, seed=0):
    torch.manual_seed(seed)
    return FAM.build(spec).eval()


def batch_for(spec, batch=3, seq=16):
    ids = torch.randint(0, spec.vocab, (batch, seq), generator=torch.Generator().manual_seed(1))
    return {"input_ids": ids, "labels": ids.clone()}


@pytest.mark.parametrize("name", SPECS)
def test_round_trip_is_exact(name):
    spec = SPECS[name]
    model = build(spec)
    assert FAM.spec_of(model) == spec and FAM.owns(model)
    canon = FAM.to_canonical(model)
    assert canon.num_params() == sum(p.numel() for p in model.parameters())
    a, b = model.state_dict(), FAM.from_canonical(canon).state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("name", SPECS)
def test_canonical_layout(name):
    spec = SPECS[name]
    canon = FAM.to_canonical(build(spec))
    assert set(canon.embed) == {"token"}                       # rotary: no position tensor
    assert set(canon.blocks[0]) == {f"{k}.weight" for k in ("q", "k", "v", "o", "gate", "fc1", "fc2", "norm1", "norm2")}
    assert ("decoder.weight" in canon.head) == (not spec.tie_embeddings)
    kv = spec.kv * spec.head_dim
    assert canon.blocks[0]["k.weight"].shape == canon.blocks[0]["v.weight"].shape == (kv, spec.hidden)
    assert space_size(spec, "K") == kv and space_size(spec, "Q") == spec.hidden
    assert canon.axes("blocks", "o.weight") == (("D", OUT), ("Q", IN))      # o reads the query heads' outputs
    assert canon.axes("blocks", "gate.weight") == (("F", OUT), ("D", IN))
    for section, _, key, t in canon.items():
        for size, tag in zip(t.shape, canon.axes(section, key)):
            if tag is not None:
                assert size == space_size(spec, tag[0]), (section, key)


@pytest.mark.parametrize("name", SPECS)
def test_functional_call_matches_and_is_differentiable(name):
    spec = SPECS[name]
    model, batch = build(spec), batch_for(spec)
    canon = FAM.to_canonical(model)
    call = lambda state: torch.func.functional_call(model, state, (), {"input_ids": batch["input_ids"]}).logits
    with torch.no_grad():
        torch.testing.assert_close(call(FAM.state_from_canonical(canon)), FAM.logits(model, batch), rtol=0, atol=0)
        scaled = canon.map(lambda section, layer, key, t: t * 1.5)
        torch.testing.assert_close(call(FAM.state_from_canonical(scaled)),
                                   FAM.logits(FAM.from_canonical(scaled).eval(), batch), rtol=0, atol=0)
    leaves = [canon.blocks[0]["k.weight"].requires_grad_(), canon.blocks[0]["gate.weight"].requires_grad_(),
              canon.embed["token"].requires_grad_()]
    FAM.loss(model, batch, params=FAM.state_from_canonical(canon)).backward()
    assert all(t.grad is not None and t.grad.abs().sum() > 0 for t in leaves)


@pytest.mark.parametrize("name", SPECS)
def test_training_flops_equal_the_counter(name):
    """Exactly: k/v at kv_heads x head_dim, three FFN matrices, scores over every query head, the LM head on every
    position; RMSNorm, SiLU and the rotary rotation are elementwise."""
    spec = SPECS[name]
    model, batch = build(spec).train(), batch_for(spec)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        FAM.loss(model, batch).backward()
    fwd = FAM.batch_flops(spec, batch)
    assert fwd.total + backward_flops(fwd) == counter.get_total_flops()


def test_paper_pair_is_a_125m_to_350m_llama():
    task = get_task("llama_small_base", "paper")
    with torch.device("meta"):
        n = [sum(p.numel() for p in FAM.build(s).parameters()) for s in (task.small, task.large)]
    assert n == [123_489_024, 336_118_784]
    assert task.large.layers == 2 * task.small.layers and task.large.hidden / task.small.hidden == pytest.approx(4 / 3)
    for t in (get_task("llama_small_base", s) for s in ("paper", "mini", "tiny")):
        assert t.small.kv_heads < t.small.heads and t.small.group == t.large.group
        assert t.small.head_dim == t.large.head_dim and not t.large.tie_embeddings


def test_export_load(tmp_path):
    spec = SPECS["gqa-untied"]
    model = build(spec)
    FAM.export(model, tmp_path)
    loaded = FAM.load(tmp_path).eval()
    assert FAM.spec_of(loaded) == spec
    with torch.no_grad():
        torch.testing.assert_close(FAM.logits(loaded, batch_for(spec)), FAM.logits(model, batch_for(spec)),
                                   rtol=0, atol=0)


def test_records_of_other_families_are_unchanged_by_kv_heads():
    """kv_heads is left out of a spec's dict where it is not used: cache keys and fingerprints of the other
    families' runs stay what they were."""
    assert "kv_heads" not in get_task("gpt2_base_medium", "tiny").to_dict()["large"]
    assert ModelSpec("llama", 1, 64, 4, kv_heads=4).kv_heads == 0            # one per query head: not GQA
    assert get_task("llama_small_base", "tiny").to_dict()["large"]["kv_heads"] == 3
    with pytest.raises(ValueError, match="must divide heads"):
        ModelSpec("llama", 1, 64, 4, kv_heads=3)


@pytest.mark.parametrize("name", ["net2net", "ligo_copy"])
def test_net2net_and_ligo_copy_init_preserve_a_trained_gqa_llama(name, trained):
    """Whole key/value groups are copied (group size kept), so every copied query head reads a copy of its own
    value head; RMSNorm keeps its mean square under balanced copies. LiGO's copy start before its fit is Net2Net."""
    task = make_task("llama", small=dict(layers=2, hidden=64, heads=4, kv_heads=2, ffn=128),
                     large=dict(layers=2, hidden=128, heads=8, kv_heads=4, ffn=256), scale="tiny")
    small = trained(task.small)
    large = get_method(name, fit_steps=0).grow(small, task) if name == "ligo_copy" else get_method(name).grow(small, task)
    assert relative_logit_gap(small, large, next(learnable_batches(task.small, batch=4, seed=5))) <= 1e-4


def test_changing_the_group_size_is_refused_by_copying_methods():
    task = make_task("llama", small=dict(layers=1, hidden=64, heads=4, kv_heads=2),
                     large=dict(layers=1, hidden=128, heads=8, kv_heads=2), scale="tiny")
    with pytest.raises(ValueError, match=r"net2net.*key/value groups.*\(4/2 -> 8/2\)"):
        get_method("net2net").grow(build(task.small), task)
    with pytest.raises(ValueError, match=r"^ligo_copy's width_init='net2net': .*\(4/2 -> 8/2\); use width_init='random'"):
        get_method("ligo_copy").check_pair(task)
    # LiGO's learned operator itself has no such constraint: from its random init it grows the pair
    large = get_method("ligo", fit_steps=0).grow(build(task.small), task)
    assert get_family("llama").spec_of(large) == task.large
