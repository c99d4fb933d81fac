"""Contract tests for every registered model family (a new family is covered for free)."""
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from models import FAMILIES, build_model, from_canonical, get_family, to_canonical
from models.flops import backward_flops

from helpers import fake_batch
from tasks import get_task, list_tasks

TINY = {"bert": "bert_small_base", "roberta": "roberta_small_base", "gpt2": "gpt2_base_medium",
        "llama": "llama_small_base", "vit": "deit_s_b", "cait": "cait_xs_s"}


def test_every_family_has_a_tiny_task():
    assert set(TINY) == set(FAMILIES)


def specs():
    for family, task in TINY.items():
        t = get_task(task, "tiny")
        yield pytest.param(t.small, id=f"{family}-small")
        yield pytest.param(t.large, id=f"{family}-large")
        yield pytest.param(t.large.with_(layers=3, ffn=100), id=f"{family}-custom")


@pytest.mark.parametrize("spec", specs())
def test_round_trip_is_exact(spec):
    torch.manual_seed(0)
    model = build_model(spec)
    again = from_canonical(to_canonical(model))
    a, b = model.state_dict(), again.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert get_family(spec.family).spec_of(again) == spec


@pytest.mark.parametrize("spec", specs())
def test_canonical_axes_match_shapes(spec):
    canon = to_canonical(build_model(spec))
    kv = spec.kv * spec.head_dim         # grouped-query attention (Llama): fewer key/value heads
    sizes = {"D": spec.hidden, "Q": spec.hidden, "K": kv, "V": kv, "F": spec.ffn, "H": spec.heads}
    for section, _, key, t in canon.items():
        axes = canon.axes(section, key)
        assert len(axes) == t.dim(), (section, key)
        for size, tag in zip(t.shape, axes):
            if tag is not None:
                assert size == sizes[tag[0]], (section, key, tag)


@pytest.mark.parametrize("spec", specs())
def test_parameter_names_name_every_canonical_key_and_parameter(spec):
    """The map MSG finds its modules by: every canonical key, every parameter, and each weight's module is the one
    whose `weight` that parameter is. Families without it (ViT, CaiT) say so."""
    model = build_model(spec)
    family = get_family(spec.family)
    if spec.family in ("vit", "cait"):
        with pytest.raises(NotImplementedError, match=f"the {spec.family} family does not map"):
            family.parameter_names(spec)
        return
    names, params = family.parameter_names(spec), dict(model.named_parameters())
    assert set(names) == {(section, layer, key) for section, layer, key, _ in to_canonical(model).items()}
    assert set(names.values()) == set(params)
    for (section, layer, group), module in family.canonical_modules(model).items():
        weight = names.get((section, layer, f"{group}.weight"), names.get((section, layer, group)))
        if weight is not None:
            assert module.weight is params[weight], (section, layer, group)


@pytest.mark.parametrize("family", sorted(TINY))
def test_analytic_training_flops_match_flop_counter(family):
    spec = get_task(TINY[family], "tiny").large
    torch.manual_seed(0)
    model = build_model(spec).train()
    batch = fake_batch(spec)
    fam = get_family(family)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        fam.loss(model, batch).backward()
    fwd = fam.batch_flops(spec, batch)      # the head on the positions the loss decodes (MLM: masked only)
    analytic = fwd.total + backward_flops(fwd)
    assert analytic == counter.get_total_flops()


PAPER_PARAMS = {  # published sizes (BERT/RoBERTa with their MLM heads, no pooler)
    ("bert_small_base", "large"): 110e6, ("bert_base_large", "large"): 335e6,
    ("roberta_small_base", "large"): 125e6, ("gpt2_base_medium", "small"): 124e6,
    ("gpt2_base_medium", "large"): 355e6, ("gpt2_medium_xl", "large"): 1558e6,
    ("deit_s_b", "small"): 22e6, ("deit_s_b", "large"): 86.6e6,
    ("cait_xs_s", "small"): 26.6e6, ("cait_xs_s", "large"): 46.9e6,
}
TABLE4 = {  # paper Table 4: layers, hidden, heads, vocab (or image size), sequence length (or patch size)
    "bert_small_base": ((6, 512, 8, 30522, 128), (12, 768, 12, 30522, 128)),
    "roberta_small_base": ((6, 512, 8, 50265, 128), (12, 768, 12, 50265, 128)),
    "gpt2_base_medium": ((12, 768, 12, 50257, 1024), (24, 1024, 16, 50257, 1024)),
    "deit_s_b": ((12, 384, 6, 224, 16), (12, 768, 12, 224, 16)),
}


@pytest.mark.parametrize("name", sorted(TABLE4))
def test_paper_specs_match_table_4(name):
    task = get_task(name, "paper")
    for spec, want in zip((task.small, task.large), TABLE4[name]):
        fifth = spec.patch_size if spec.image_size else task.recipe.seq_len
        fourth = spec.image_size or spec.vocab
        assert (spec.layers, spec.hidden, spec.heads, fourth, fifth) == want


@pytest.mark.parametrize("name,which", sorted(PAPER_PARAMS))
def test_paper_scale_parameter_counts_on_meta_device(name, which):
    spec = getattr(get_task(name, "paper"), which)
    with torch.device("meta"):
        model = get_family(spec.family).build(spec)
    count = sum(p.numel() for p in model.parameters())
    assert count == pytest.approx(PAPER_PARAMS[name, which], rel=0.01)
    assert all(p.is_meta for p in model.parameters())


@pytest.mark.parametrize("name", list_tasks())
def test_mini_scale_keeps_paper_shape_ratios(name):
    paper, mini = get_task(name, "paper"), get_task(name, "mini")
    assert mini.small.head_dim == mini.large.head_dim
    depth = lambda t: t.large.layers / t.small.layers
    assert depth(mini) == depth(paper)
    width = lambda t: t.large.hidden / t.small.hidden
    assert width(mini) == pytest.approx(width(paper), rel=0.1)


def test_a_pairs_large_only_recipe_changes_leave_its_small_models_pretraining_as_the_familys():
    """GPT2-Medium -> GPT2-1.5B trains its large model 15K steps (paper App. C.5), from a fully pretrained
    GPT2-Medium: the small model's recipe is the one its family's other pairs pretrain with."""
    from tasks.registry import PAIR_LARGE_RECIPE_CHANGES, PAIR_RECIPE_CHANGES, PAIRS, make_task
    for (name, scale), changes in PAIR_LARGE_RECIPE_CHANGES.items():
        family, sizes, _ = PAIRS[name]
        without = make_task(family, *sizes[scale], scale=scale, name=name,
                            **dict(PAIR_RECIPE_CHANGES.get((name, scale), ())))    # the pair without the table
        task = get_task(name, scale)
        assert task.recipe == without.recipe.with_(**dict(changes)) != without.recipe, name
        assert task.small_recipe == without.small_recipe, name
    assert get_task("gpt2_medium_xl", "paper").recipe.steps == 15_000


def test_a_pairs_own_recipe_changes_reach_its_small_model_and_keep_shared_scratch_runs_shared():
    """PAIR_RECIPE_CHANGES give a pair its own warm-up at mini. The small model pretrains with the same change (the
    paper trains both models with one recipe), the family's other pairs keep theirs, and the two pairs that grow
    into the 8-layer BERT still train one scratch model (Figure 2(c) draws one scratch curve for both)."""
    from runs.computation import NOT_READ_WITHOUT_SMALL
    from tasks.registry import PAIR_RECIPE_CHANGES
    assert PAIR_RECIPE_CHANGES, "no pair has its own recipe: this test checks nothing"
    for (name, scale), changes in PAIR_RECIPE_CHANGES.items():
        task = get_task(name, scale)
        for key, value in changes:
            assert getattr(task.recipe, key) == value and getattr(task.small_recipe, key) == value, (name, key)
    plain = get_task("bert_small_base", "mini")
    assert plain.recipe.warmup != get_task("bert_depth_only", "mini").recipe.warmup
    seen_by_scratch = lambda name: {k: v for k, v in get_task(name, "mini").to_dict().items()  # noqa: E731
                                    if k not in NOT_READ_WITHOUT_SMALL}
    assert seen_by_scratch("bert_small_large") == seen_by_scratch("bert_base_large")
