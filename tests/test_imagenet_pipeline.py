"""Tests of the ImageNet image path (tasks/data/imagenet.py): batches from files against the PIL path, and the GPU
loader's split (uint8 in the workers, the float work of DeiT's recipe on the device after the copy). Fixtures are
small JPEG/PNG folders written to tmp_path; the GPU test skips without one (bench/device_call.sh runs it: bench/README.md section 11)."""
import numpy as np
import pytest
import torch

from helpers import same_batch as _same
from tasks.data import imagenet as imagenet_mod
from tasks.data import load_pretrain_data


def _smooth_image_folder(root, size=(60, 80)):
    """Smooth colour fields (where resampling methods agree to within a few levels, unlike noise) as RGB, gray and
    CMYK JPEGs and a PNG named .jpg: the kinds ImageNet's train set holds."""
    from PIL import Image
    y, x = np.mgrid[0:size[0], 0:size[1]]
    for split in ("train", "val"):
        for c, cls in enumerate(("cat", "dog")):
            (root / split / cls).mkdir(parents=True)
            for k, mode in enumerate(("RGB", "L", "CMYK", "PNG")):
                rgb = np.stack([128 + 100 * np.sin(x / (7.0 + k + c)), 128 + 100 * np.cos(y / (5.0 + k)),
                                (x + y) * (1.5 + c) % 256], -1).astype(np.uint8)
                image, path = Image.fromarray(rgb), root / split / cls / f"{k}.jpg"
                if mode == "PNG":
                    image.save(path, format="PNG")
                else:
                    image.convert(mode).save(path, quality=95)
    return root


def test_imagenet_training_batches_from_files_match_the_pil_path(tmp_path, monkeypatch):
    """Training batches of an ImageFolder decode with torchvision and crop/flip the uint8 tensor (issue 42: 2.2x
    cheaper a image than PIL + ToTensor): the same crops and flips as the PIL path, pixels within resampling error,
    every kind of file decoded as PIL decodes it; DeiT's per-image recipe (timm, PIL only) keeps the PIL path."""
    import copy

    from torchvision.transforms.v2.functional import pil_to_tensor
    from PIL import Image
    root = _smooth_image_folder(tmp_path)
    for path in sorted((root / "train").rglob("*.jpg")):
        assert torch.equal(imagenet_mod.decode_rgb(str(path)), pil_to_tensor(Image.open(path).convert("RGB")))
    data = load_pretrain_data("imagenet", "image", path=str(root), image_size=32)
    pil = copy.copy(data)
    pil.files = None
    calls = []
    real = imagenet_mod.decode_rgb
    monkeypatch.setattr(imagenet_mod, "decode_rgb", lambda p: calls.append(p) or real(p))
    for step in range(3):
        fast, slow = data.train_batch(step, 8, seed=0), pil.train_batch(step, 8, seed=0)
        assert torch.equal(fast["labels"], slow["labels"]) and fast["pixel_values"].dtype == torch.float32
        gap = (fast["pixel_values"] - slow["pixel_values"]).abs()
        other = (fast["pixel_values"] - pil.train_batch(step, 8, seed=1)["pixel_values"]).abs()
        # normalised units: one level of 255 is 0.017; the same crops, resampled by PIL or by torch
        assert float(gap.max()) < 0.05 and float(gap.mean()) < 0.005 and float(other.mean()) > 0.5
    assert len(calls) == 3 * 8
    calls.clear()
    assert _same(data.eval_batches(4, 1)[0], pil.eval_batches(4, 1)[0]) and not calls   # held out: PIL path
    deit = data.with_augmentation(DEIT_PER_IMAGE)
    deit.train_batch(0, 8, seed=0)
    assert not calls
    # the float conversion and normalisation of the stacked uint8 crops give the floats converting each crop gives,
    # and those ToTensor + Normalize give the crop as a PIL image (what the PIL path, and timm's transform, do)
    import torchvision.transforms as T
    crops = torch.stack([data.tensor_crop(real(str(p))) for p in sorted((root / "train").rglob("*.jpg"))])
    assert crops.dtype == torch.uint8
    assert torch.equal(data.to_float(crops), torch.stack([data.to_float(c) for c in crops]))
    pil_float = T.Compose([T.ToTensor(), T.Normalize(data.mean, data.std)])
    assert torch.equal(data.to_float(crops), torch.stack([pil_float(Image.fromarray(c.permute(1, 2, 0).numpy()))
                                                          for c in crops]))


def test_a_gpu_loader_sends_uint8_images_and_the_device_makes_the_same_floats(tmp_path):
    """Training batches as a GPU run's loader makes them (`for_transfer`): uint8 pixels, a quarter of the bytes, and
    the batch's seed; `on_device` turns them into train_batch's batch bit for bit (here the device is the CPU; on a
    GPU the same elementwise ops), from files and from decoded images, plain or under DeiT's recipe without random
    erasing: RandAugment in the workers, Mixup/CutMix and label smoothing after the copy. Held-out batches and the
    data the trainer holds are unchanged."""
    import copy
    root = _smooth_image_folder(tmp_path)
    data = load_pretrain_data("imagenet", "image", path=str(root), image_size=32)
    decoded = copy.copy(data)
    decoded.files = None                 # the hub's already-decoded images: the PIL path
    mixing = {**DEIT_PER_IMAGE, "re_prob": 0.0, "mixup": 0.8, "cutmix": 1.0, "smoothing": 0.1}
    for held in (data, decoded, data.with_augmentation(mixing), decoded.with_augmentation(mixing),
                 data.with_augmentation({**mixing, "auto_augment": "", "color_jitter": 0.0})):
        sent = held.for_transfer()
        assert sent is not held and not held.sends_uint8
        for step in range(2):
            raw, want = sent.train_batch(step, 8, seed=0), held.train_batch(step, 8, seed=0)
            assert raw["pixel_values"].dtype == torch.uint8 and raw["pixel_values"].shape == want["pixel_values"].shape
            assert raw["labels"].shape == (8,)                      # hard labels: mixed after the copy
            done = held.on_device(raw, "cpu")
            assert set(done) == set(want) and all(torch.equal(done[k], want[k]) for k in want)
        assert held.on_device(want, "cpu")["pixel_values"] is want["pixel_values"]      # floats pass through
        assert _same(sent.eval_batches(4, 1)[0], held.eval_batches(4, 1)[0])
        assert sent.eval_batches(4, 1)[0]["pixel_values"].dtype == torch.float32
    assert want["labels"].shape == (8, 2) and not torch.equal(want["labels"], want["labels"].round())   # soft: mixed
    digits = load_pretrain_data("digits", "image")
    assert digits.for_transfer() is digits
    assert _same(digits.on_device(b := digits.train_batch(0, 4, 0), "cpu"), b)


def test_random_erasing_moves_to_the_device_with_its_draws_seeded_by_the_batch(tmp_path):
    """Under DeiT's recipe with random erasing, a GPU run's workers stop after RandAugment (timm's prefetcher
    transform) and `on_device` erases, as timm's PrefetchLoader does: every image of a batch erased at probability 1,
    each in one rectangle and nowhere else, the same for the same (seed, step), the caller's random streams left as
    they were; what came before the erasing is the batch without it, bit for bit."""
    root = _smooth_image_folder(tmp_path)
    data = load_pretrain_data("imagenet", "image", path=str(root), image_size=32)
    erasing = data.with_augmentation({**DEIT_PER_IMAGE, "re_prob": 1.0}).for_transfer()
    plain = data.with_augmentation({**DEIT_PER_IMAGE, "re_prob": 0.0}).for_transfer()
    for step in range(2):
        raw, raw_plain = erasing.train_batch(step, 8, seed=0), plain.train_batch(step, 8, seed=0)
        assert _same(raw, raw_plain)             # the workers' part does not depend on the erasing
        done, again = erasing.on_device(raw, "cpu"), erasing.on_device(erasing.train_batch(step, 8, seed=0), "cpu")
        assert torch.equal(done["pixel_values"], again["pixel_values"])
        changed = (done["pixel_values"] != plain.on_device(raw_plain, "cpu")["pixel_values"]).any(1)   # [B, H, W]
        for image in changed:
            rows, cols = image.any(1).nonzero().flatten(), image.any(0).nonzero().flatten()
            assert len(rows) and len(cols)
            box = image[rows.min():rows.max() + 1, cols.min():cols.max() + 1]
            assert box.float().mean() > 0.99 and int(image.sum()) == int(box.sum())    # a rectangle of noise
    import random
    state = random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state()
    erasing.on_device(raw, "cpu")
    assert random.getstate() == state[0] and np.array_equal(np.random.get_state()[1], state[1])
    assert torch.equal(torch.get_rng_state(), state[2])         # the caller's streams untouched


# the recipe fields tasks.task.Recipe.augmentation hands a data set: DeiT's per-image transform on, mixing off
DEIT_PER_IMAGE = {"auto_augment": "rand-m9-mstd0.5-inc1", "color_jitter": 0.3, "train_interpolation": "bicubic",
                  "re_prob": 0.25, "re_mode": "pixel", "re_count": 1, "mixup": 0.0, "cutmix": 0.0, "mixup_prob": 1.0,
                  "mixup_switch_prob": 0.5, "mixup_mode": "batch", "smoothing": 0.0, "repeated_aug": 1}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (bench/README.md section 11 runs it on a lent one)")
def test_on_a_gpu_the_device_part_of_deits_recipe_is_seeded_and_leaves_the_callers_streams(tmp_path):
    """On a GPU: without random erasing, the completed batch is the host's floats and soft labels bit for bit (the
    same elementwise ops); with it, the same batch twice for the same (seed, step), and the GPU's generator, which the
    erasing's noise draws from, restored after."""
    root = _smooth_image_folder(tmp_path)
    data = load_pretrain_data("imagenet", "image", path=str(root), image_size=32)
    mixing = data.with_augmentation({**DEIT_PER_IMAGE, "re_prob": 0.0, "mixup": 0.8, "cutmix": 1.0, "smoothing": 0.1})
    raw, want = mixing.for_transfer().train_batch(0, 8, seed=0), mixing.train_batch(0, 8, seed=0)
    done = mixing.on_device(raw, "cuda")
    for k in want:
        assert done[k].is_cuda and torch.equal(done[k].cpu(), want[k]), \
            f"{k}: up to {(done[k].cpu().double() - want[k].double()).abs().max():.3g} off the host's"
    erasing = data.with_augmentation({**DEIT_PER_IMAGE, "re_prob": 1.0}).for_transfer()
    raw = erasing.train_batch(0, 8, seed=0)
    before = torch.cuda.get_rng_state()
    first = erasing.on_device(raw, "cuda")["pixel_values"]
    assert torch.equal(torch.cuda.get_rng_state(), before)
    assert torch.equal(first, erasing.on_device(raw, "cuda")["pixel_values"])
    assert not torch.equal(first.cpu(), erasing.on_device(raw, "cpu")["pixel_values"])    # the GPU's own noise
