"""DeiT's recipe at paper scale (issue 42): the paper trains DeiT and CaiT "with their default hyper-parameters", which
are facebookresearch/deit main.py's; the registry's paper vision tasks carry them (tasks/registry.py DEIT_PAPER) and
tasks/data/vision.py, the image loss and the timm families apply them through timm. Mini and tiny keep their own
recipe, and their records do not change. Runs here are a paper-scale DeiT at a size the CPU trains in a second, on a
generated ImageFolder."""
import json
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from methods import get_method
from models import get_family
from runs.experiment import check_grown, run_experiment
from helpers import write_image_folder
from runs.record import load_run
from tasks import get_task
from tasks.data.image_recipe import RA_EPOCH_MULTIPLE
from tasks.registry import make_task
from tasks.task import AUGMENT_FIELDS

CLASSES = 4
# facebookresearch/deit main.py's argparse defaults, by our field names
DEIT_MAIN = {"auto_augment": "rand-m9-mstd0.5-inc1", "color_jitter": 0.3, "train_interpolation": "bicubic",
             "re_prob": 0.25, "re_mode": "pixel", "re_count": 1, "mixup": 0.8, "cutmix": 1.0, "mixup_prob": 1.0,
             "mixup_switch_prob": 0.5, "mixup_mode": "batch", "smoothing": 0.1, "repeated_aug": 3}


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory):
    """An ImageFolder of random RGB images: 6 per class to train on (24), 2 per class held out."""
    return write_image_folder(tmp_path_factory.mktemp("imagenet"), [f"class{c}" for c in range(CLASSES)],
                              {"train": 6, "val": 2}, (20, 24))


def deit_task(folder, small_layers=1, **recipe):
    """A paper-scale DeiT task (DeiT's recipe, drop path 0.1 as deit_s_b has it) at a CPU size, on `folder`."""
    sizes = dict(image_size=16, patch_size=4, classes=CLASSES, drop_path=0.1)
    recipe = {**dict(steps=4, batch_size=8, warmup=1, eval_every=2, eval_batches=1, log_every=1), **recipe}
    task = make_task("vit", dict(layers=small_layers, hidden=32, heads=1, **sizes),
                     dict(layers=2, hidden=64, heads=2, **sizes), scale="paper", name="deit_fixture", **recipe)
    return task.with_(data_path=str(folder))


def rng_states():
    return torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate()


def same_states(a, b) -> bool:
    return torch.equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and a[2] == b[2]


def test_paper_tasks_carry_deits_recipe_and_mini_keeps_its_own():
    for name in ("deit_s_b", "cait_xs_s"):
        task = get_task(name, "paper")
        for recipe in (task.recipe, task.small_recipe):
            assert recipe.augmentation() == DEIT_MAIN
            # main.py's optimiser: lr 5e-4 x batch/512, wd 0.05, 5 warm-up epochs of 1,251 steps, cosine, no clipping
            assert (recipe.lr, recipe.weight_decay, recipe.warmup, recipe.schedule, recipe.grad_clip) == (
                5e-4 * recipe.batch_size / 512, 0.05, 5 * 1_251, "cosine", 0.0)
        assert task.small.drop_path == task.large.drop_path == 0.1
        assert task.to_dict()["recipe"]["mixup"] == 0.8 and task.to_dict()["large"]["drop_path"] == 0.1
    for name in ("deit_s_b", "cait_xs_s"):
        for scale in ("mini", "tiny"):
            task = get_task(name, scale)
            assert not task.recipe.augments and task.large.drop_path == 0
            record = task.to_dict()
            assert not set(AUGMENT_FIELDS) & (set(record["recipe"]) | set(record["small_recipe"]))
            assert "drop_path" not in record["large"]


def test_batches_are_a_pure_function_of_seed_and_step_with_soft_targets(image_folder):
    data = deit_task(image_folder).pretrain_data()
    before = rng_states()
    batch = data.train_batch(1, 8, seed=0)
    assert same_states(before, rng_states())            # torch, numpy and random untouched
    again = data.train_batch(1, 8, seed=0)
    assert all(torch.equal(batch[k], again[k]) for k in batch)
    other = data.train_batch(2, 8, seed=0)
    assert not torch.equal(batch["pixel_values"], other["pixel_values"])
    assert batch["pixel_values"].shape == (8, 3, 16, 16)
    targets = torch.cat([data.train_batch(s, 8, seed=0)["labels"] for s in range(4)])
    assert targets.dtype == torch.float32 and targets.shape == (32, CLASSES)
    assert torch.allclose(targets.sum(-1), torch.ones(32)) and (targets >= 0).all()
    one_hot_peak = 1 - 0.1 + 0.1 / CLASSES                 # a smoothed one-hot, unmixed
    assert (targets.max(-1).values < one_hot_peak - 1e-3).any()      # mixup/cutmix mixed some batches
    held_out = data.eval_batches(8, 1)[0]["labels"]
    assert held_out.dtype == torch.long and held_out.tolist() == sorted(held_out.tolist())   # hard labels, in order


def test_repeated_augmentation_shows_each_image_three_times_with_different_augmentations(image_folder):
    data = deit_task(image_folder).pretrain_data()
    assert data.n_train == 24 < RA_EPOCH_MULTIPLE        # an epoch of 24 positions: the first 8 images, 3 times each
    epoch = np.concatenate([data.train_indices(s, 8, seed=0) for s in range(3)])
    assert np.array_equal(epoch, np.repeat(epoch[::3], 3)) and len(set(epoch.tolist())) == 8
    assert not np.array_equal(np.concatenate([data.train_indices(s, 8, seed=0) for s in range(3, 6)]), epoch)
    plain = deit_task(image_folder, repeated_aug=1, mixup=0.0, cutmix=0.0, smoothing=0.0).pretrain_data()
    first = plain.make_batch("train", epoch[:3], rng_seed=7)["pixel_values"]    # one image, three copies
    assert not torch.equal(first[0], first[1]) and not torch.equal(first[1], first[2])


def test_soft_target_loss_is_plain_cross_entropy_without_mixing_or_smoothing(image_folder):
    family = get_family("vit")
    task = deit_task(image_folder, mixup=0.0, cutmix=0.0, smoothing=0.0, repeated_aug=1)
    batch = task.pretrain_data().train_batch(0, 8, seed=0)
    assert batch["labels"].dtype == torch.long         # no soft targets without mixing or smoothing
    torch.manual_seed(0)
    model = task.build_large().eval()                   # eval: drop path off, one function of the weights
    logits = model(batch["pixel_values"])
    plain = family.loss(model, batch)
    assert torch.equal(plain, F.cross_entropy(logits, batch["labels"]))
    one_hot = F.one_hot(batch["labels"], CLASSES).float()
    assert torch.allclose(family.loss(model, {**batch, "labels": one_hot}), plain, atol=1e-6)
    # smoothing alone: timm's smoothed one-hots, on which the soft loss is the label-smoothed cross-entropy
    smoothed = deit_task(image_folder, mixup=0.0, cutmix=0.0, repeated_aug=1).pretrain_data().train_batch(0, 8, seed=0)
    assert torch.equal(smoothed["labels"].argmax(-1), batch["labels"])
    from timm.loss import LabelSmoothingCrossEntropy
    soft = family.loss(model, {**batch, "labels": smoothed["labels"]})
    assert torch.allclose(soft, F.cross_entropy(logits, batch["labels"], label_smoothing=0.1), atol=1e-6)
    assert torch.allclose(soft, LabelSmoothingCrossEntropy(0.1)(logits, batch["labels"]), atol=1e-6)


def test_a_paper_recipe_run_records_deits_recipe_and_resumes_exactly(image_folder, tmp_path, monkeypatch):
    method = get_method("scratch")
    whole = run_experiment(deit_task(image_folder), method, out=tmp_path / "whole", progress=False, log=lambda m: None)
    config = json.loads((whole / "config.json").read_text())
    assert {k: config["task"]["recipe"][k] for k in DEIT_MAIN} == DEIT_MAIN
    assert config["task"]["large"]["drop_path"] == 0.1 and config["task"]["recipe"]["grad_clip"] == 0.0

    task = deit_task(image_folder)
    data, real = task.pretrain_data(), task.pretrain_data().train_batch

    def crash_at_step_3(step, batch_size, seed):
        if step == 3:
            raise RuntimeError("simulated crash")
        return real(step, batch_size, seed)
    monkeypatch.setattr(data, "train_batch", crash_at_step_3)
    broken = tmp_path / "broken"
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_experiment(task, method, out=broken, progress=False, log=lambda m: None)
    assert not (broken / "summary.json").exists()
    run_experiment(deit_task(image_folder), method, out=broken, resume=True, progress=False, log=lambda m: None)
    rows = lambda out: [{k: v for k, v in r.items() if k != "wall"} for r in load_run(out).metrics]  # noqa: E731
    assert rows(broken) == rows(whole) and len(rows(whole)) == 5


def test_growth_keeps_drop_path_and_the_flops_ledger_ignores_it(image_folder):
    """Growth methods build the large model from its spec and copy weights (drop path has none): the grown model has
    the task's rate. timm's DropPath computes each branch in full and masks it, so a training forward with drop path
    costs what one without it costs (counted by torch), and the analytic formula does not read the rate."""
    from torch.utils.flop_counter import FlopCounterMode
    task = deit_task(image_folder, small_layers=2)      # width alone (2L/32 -> 2L/64); below, width and depth too
    family = get_family("vit")
    for name in ("net2net", "stackbert", "ligo", "lemon"):
        for t in (task, deit_task(image_folder)):
            torch.manual_seed(0)
            grown = get_method(name, task=t).grow(t.build_small(), t)
            check_grown(grown, family, t, get_method(name, task=t))
            assert family.spec_of(grown) == t.large and family.spec_of(grown).drop_path == 0.1
    x = torch.randn(4, 3, 16, 16)
    counts = []
    for rate in (0.0, 0.5):
        model = family.build(task.large.with_(drop_path=rate)).train()
        with FlopCounterMode(display=False) as counter:
            model(x).sum().backward()
        counts.append(counter.get_total_flops())
    assert counts[0] == counts[1] > 0
    without = task.large.with_(drop_path=0)
    assert family.forward_flops(task.large, 4, 0).total == family.forward_flops(without, 4, 0).total


@pytest.mark.parametrize("build, message", [
    (lambda f: get_task("bert_small_base", "tiny").with_(recipe=get_task("bert_small_base", "tiny").recipe.with_(
        mixup=0.8)), "mixup=0.8: DeiT's augmentation is for image tasks, and bert_small_base trains bert on text"),
    (lambda f: deit_task(f, batch_size=7), "recipe batch_size 7 is odd: mixup/cutmix need an even batch size"),
    (lambda f: deit_task(f, re_prob=1.5), r"recipe re_prob must be in \[0, 1\]"),
    (lambda f: deit_task(f, mixup_prob=-0.1), r"recipe mixup_prob must be in \[0, 1\]"),
    (lambda f: deit_task(f, smoothing=1.0), r"recipe smoothing must be in \[0, 1\)"),
    (lambda f: deit_task(f, mixup=0.0, cutmix=0.0, mixup_mode="elem"),
     "recipe mixup_mode=elem acts only with mixup or cutmix on, and they are off"),
    (lambda f: deit_task(f, repeated_aug=0), "recipe repeated_aug must be an integer >= 1"),
    (lambda f: deit_task(f, auto_augment="fancy"), "auto_augment=fancy is not a policy timm knows"),
    (lambda f: get_task("deit_s_b", "mini").with_(recipe=get_task("deit_s_b", "mini").recipe.with_(re_prob=0.25)),
     "re_prob=0.25: timm's per-image augmentation works on decoded images"),
    (lambda f: make_task("vit", dict(layers=1, hidden=32, heads=1, drop_path=0.05),
                         dict(layers=2, hidden=32, heads=1, drop_path=0.1), scale="tiny"),
     r"drop_path differs between small \(0.05\) and large \(0.1\)"),
])
def test_where_the_recipe_cannot_apply_it_is_refused_in_one_line(image_folder, build, message):
    with pytest.raises(ValueError, match=message) as refused:
        build(image_folder)
    assert "\n" not in str(refused.value)


def test_mixing_applies_to_the_in_memory_sources_too():
    tiny = get_task("deit_s_b", "tiny")
    plain = tiny.pretrain_data().train_batch(0, 16, seed=0)
    mixed_task = tiny.with_(recipe=tiny.recipe.with_(mixup=0.8, cutmix=1.0, smoothing=0.1))
    mixed = mixed_task.pretrain_data().train_batch(0, 16, seed=0)
    assert plain["labels"].dtype == torch.long and mixed["labels"].shape == (16, 10)
    assert torch.allclose(mixed["labels"].sum(-1), torch.ones(16))
    assert not torch.equal(mixed["pixel_values"], plain["pixel_values"])


def test_randaugment_at_full_magnitude_posterizes_to_black_instead_of_stopping_the_run(image_folder):
    """DeiT's RandAugment reaches magnitude 10 (N(9, 0.5), clipped), where timm's increasing posterize keeps 0 bits:
    Pillow made that a black image when DeiT was trained, the Pillow installed here raises. At m10 every posterize
    draw keeps 0 bits: batches are made, and the op gives a black image."""
    data = deit_task(image_folder, auto_augment="rand-m10-inc1").pretrain_data()
    for step in range(12):                              # 96 images, ~6 of them posterized at 0 bits
        assert torch.isfinite(data.train_batch(step, 8, seed=0)["pixel_values"]).all()
    ops = [op for t in data.transforms["train"].transforms for op in getattr(t, "ops", ()) if "Posterize" in op.name]
    image = Image.fromarray(np.full((8, 8, 3), 200, dtype=np.uint8))
    assert ops and all(np.asarray(op.aug_fn(image, 0)).max() == 0 for op in ops)


def test_min_lr_ends_a_cosine_at_deits_floor_and_stays_out_of_records_at_0():
    """DeiT's --min-lr 1e-5: the paper vision recipe's cosine decays to it (the trainer's make_scheduler), other
    schedules refuse it in one line, and a recipe without it records no min_lr (older records keep matching)."""
    import torch
    from runs.trainer import make_scheduler
    from tasks import get_task
    from tasks.task import Recipe
    paper = get_task("deit_s_b", scale="paper")
    assert paper.recipe.min_lr == 1e-5 and paper.to_dict()["recipe"]["min_lr"] == 1e-5
    assert "min_lr" not in get_task("deit_s_b", scale="mini").to_dict()["recipe"]
    recipe = Recipe(10, 2, 1e-3, 2, schedule="cosine", min_lr=1e-5)
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=recipe.lr)
    scheduler = make_scheduler(optimizer, recipe, 10)
    lrs = []
    for _ in range(10):
        optimizer.step()
        scheduler.step()
        lrs.append(scheduler.get_last_lr()[0])
    assert abs(lrs[-1] - 1e-5) < 1e-12 and max(lrs) == pytest.approx(1e-3) and min(lrs) >= 1e-5 - 1e-12
    with pytest.raises(ValueError, match="min_lr 1e-05 needs schedule cosine"):
        Recipe(10, 2, 1e-3, 2, schedule="linear", min_lr=1e-5)
