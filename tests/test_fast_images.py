"""The uint8 training path of a resized ImageNet copy (tasks/data/imagenet_fast.py, tasks/data/resized_copy.py) keeps
DeiT's augmentation: timm's draws on the tensor, and augmented batches whose statistics match timm's own pipeline on
the original images."""
from pathlib import Path

import torch

from tasks.data import load_pretrain_data
from tasks.data.image_recipe import seeded_global_rngs
from tasks.data.imagenet import decode_rgb
from tasks.data.imagenet_fast import decode_jpeg_rgb, uint8_train_transform
from tasks.data.resized_copy import write_resized_copy
from tasks.data.timm_posterize import posterize_keeping_zero_bits

# DeiT's per-image recipe (tasks/task.py's field names) without random erasing and mixing, which act on the float
# batch after the per-image part, the same way on either path (ImageNetData.on_device)
DEIT = {"auto_augment": "rand-m9-mstd0.5-inc1", "color_jitter": 0.3, "train_interpolation": "bicubic",
        "re_prob": 0.0, "re_mode": "pixel", "re_count": 1, "mixup": 0.0, "cutmix": 0.0, "mixup_prob": 1.0,
        "mixup_switch_prob": 0.5, "mixup_mode": "batch", "smoothing": 0.0, "repeated_aug": 1}
TIMM_OPTIONS = dict(is_training=True, auto_augment="rand-m9-mstd0.5-inc1", color_jitter=0.3, interpolation="bicubic",
                    re_prob=0.0)


def photo_like_folder(root, n: int, size=(500, 375), classes: int = 4):
    """An ImageFolder of `n` training JPEGs of ImageNet's typical size, the ones bench/perf/pipeline.py measures."""
    from bench.perf.pipeline import write_image_folder
    write_image_folder(root, n, classes=classes, size=size)
    return root


def timm_reference(paths, size: int, passes: int, seed: int) -> torch.Tensor:
    """timm's DeiT training transform (as timm's prefetcher takes it: uint8, before normalisation) on the PIL images,
    `passes` times over, each image seeded apart: [passes x len(paths), 3, size, size]."""
    from PIL import Image
    from timm.data import create_transform
    transform = posterize_keeping_zero_bits(create_transform(size, use_prefetcher=True, **TIMM_OPTIONS))
    images = [Image.open(p).convert("RGB") for p in paths]
    out = []
    with seeded_global_rngs() as seed_all:
        for k in range(passes * len(images)):
            seed_all(seed * 100_003 + k)
            out.append(transform(images[k % len(images)]))
    return torch.stack(out)


def test_the_uint8_transform_draws_timms_boxes_flips_and_ops(tmp_path):
    """On the original images and the same seeds, the uint8 transform makes timm's augmented images: the same boxes,
    flips and RandAugment ops (timm's draws), resampled by torchvision's uint8 kernel instead of PIL's, so within a
    few levels of 255 image by image; with other seeds, the images differ by tens of levels."""
    root = photo_like_folder(tmp_path, 12, size=(120, 90))
    paths = sorted(str(p) for p in (root / "train").rglob("*.jpg"))
    transform = uint8_train_transform(64, TIMM_OPTIONS, posterize_keeping_zero_bits)
    reference, other = timm_reference(paths, 64, 2, seed=0), timm_reference(paths, 64, 2, seed=1)
    fast = []
    with seeded_global_rngs() as seed_all:
        for k in range(2 * len(paths)):
            seed_all(k)
            fast.append(transform(decode_rgb(paths[k % len(paths)])))
    fast = torch.stack(fast)
    assert fast.dtype == torch.uint8 and fast.shape == reference.shape == (24, 3, 64, 64)
    gap = (fast.float() - reference.float()).abs().mean((1, 2, 3))
    apart = (other.float() - reference.float()).abs().mean((1, 2, 3))
    assert float(gap.median()) < 2 and float(gap.max()) < 8, gap
    assert float(apart.median()) > 20, apart
    # simplejpeg's decode of a JPEG is torchvision's (both libjpeg-turbo)
    assert all(torch.equal(decode_jpeg_rgb(p), decode_rgb(p)) for p in paths[:4])


def statistics(pixels: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per image and channel of uint8 [N, 3, H, W]: mean, standard deviation and mean horizontal gradient (detail)."""
    x = pixels.double()
    return {"mean": x.mean((2, 3)), "std": x.std((2, 3)), "detail": (x[..., 1:] - x[..., :-1]).abs().mean((2, 3))}


def histogram(pixels: torch.Tensor, bins: int = 32) -> torch.Tensor:
    """Per-channel intensity histograms of all the images, each normalised to sum to 1: [3, bins]."""
    return torch.stack([torch.histc(pixels[:, c].double(), bins, 0, 256) for c in range(3)]) / pixels[:, 0].numel()


def test_augmented_batches_of_a_resized_copy_keep_deits_distribution(tmp_path):
    """256 augmented 224 x 224 images through the data layer's uint8 path on a 256-short-side copy (as a GPU run's
    loader sends them), against timm's create_transform(224, rand-m9-mstd0.5-inc1, bicubic, re_prob 0) on the
    original 500 x 375 images.

    Tolerances. Each image's statistic is paired with the reference's for the same source image and the same seed:
    the seeds give mostly the same boxes, flips and ops (timm's draws; the box's position is drawn on the copy's
    smaller range, which can shift the later draws, and then the pair is two independent draws). Whatever the draws,
    a pair's difference has mean 0 when the two paths make the same distribution, so the mean paired difference of
    the per-channel mean and standard deviation must be within 4 standard errors of 0 (a false alarm about once in
    16,000) and within 3 levels of 255 (a bias a viewer would not see; the per-image means spread over tens of
    levels). The pooled per-channel histograms (32 bins) must be no further apart (total variation) than timm's own
    with other seeds, plus 0.02.

    Detail (the mean horizontal gradient) is what a copy at 256 gives up, and the transform does not: a crop smaller
    than the copy's short side is enlarged from fewer source pixels, and the resize smooths pixel-level grain. timm's
    own transform on the copy, same seeds, has the uint8 path's detail to within 3% (the same draws on the same
    pixels; measured 1.000); against the originals the copy keeps more than 60% of it on these images (measured
    68%: independent grain of 15 levels on every pixel, the worst case; the loss is that of any resampled copy and
    shrinks with a larger --short-side: 81% at 320)."""
    n, passes, size = 32, 8, 224
    root = photo_like_folder(tmp_path / "original", n)
    copy_root = tmp_path / "copy"
    write_resized_copy(root, copy_root, short_side=256, quality=90)
    data = load_pretrain_data("imagenet", "image", path=str(copy_root), image_size=size)
    sent = data.with_augmentation(DEIT).for_transfer()
    assert sent.resized_copy and sent.file_transform is not None
    fast, order = [], []
    for step in range(passes):           # one batch is one epoch here: every image once, in the epoch's order
        fast.append(sent.train_batch(step, n, seed=0)["pixel_values"])
        order.append(sent.train_indices(step, n, seed=0))
    fast = torch.cat(fast)
    assert fast.dtype == torch.uint8 and fast.shape == (n * passes, 3, size, size)
    copies = [data.files["train"](i)[0] for i in range(n)]
    originals = [str(root / Path(p).relative_to(copy_root)) for p in copies]
    reference, timm_on_copy = (paired_reference(paths, order, size) for paths in (originals, copies))
    other = timm_reference(originals, size, passes, seed=1)        # timm against itself: the histograms' yardstick
    ours, theirs = statistics(fast), statistics(reference)
    for name in ("mean", "std"):
        d = ours[name] - theirs[name]                              # [N, 3] paired differences
        se = d.std(0) / len(d) ** 0.5
        assert bool((d.mean(0).abs() < 4 * se).all()) and bool((d.mean(0).abs() < 3).all()), (name, d.mean(0), se)
    tv = 0.5 * (histogram(fast) - histogram(reference)).abs().sum(1)
    tv_self = 0.5 * (histogram(other) - histogram(reference)).abs().sum(1)
    assert bool((tv < tv_self + 0.02).all()), (tv, tv_self)
    detail = ours["detail"].mean()
    assert abs(float(detail / statistics(timm_on_copy)["detail"].mean()) - 1) < 0.03
    assert 0.6 < float(detail / theirs["detail"].mean()) <= 1.0


def paired_reference(paths, order, size: int) -> torch.Tensor:
    """timm's transform on image `paths[i]` for each item of the batches' `order`, seeded as the data layer seeds
    that item (ImageNetData.make_batch: (seed, step, 1), then the position)."""
    from PIL import Image
    from timm.data import create_transform
    from tasks.data import derive_seed
    transform = posterize_keeping_zero_bits(create_transform(size, use_prefetcher=True, **TIMM_OPTIONS))
    images = {i: Image.open(p).convert("RGB") for i, p in enumerate(paths)}
    out = []
    with seeded_global_rngs() as seed_all:
        for step, indices in enumerate(order):
            for k, i in enumerate(indices):
                seed_all(derive_seed(derive_seed(0, step, 1), k))
                out.append(transform(images[int(i)]))
    return torch.stack(out)


def test_a_resized_copy_trains_through_the_uint8_path_on_the_host_and_the_device_alike(tmp_path, monkeypatch):
    """Under DeiT's whole recipe (random erasing, Mixup/CutMix, smoothing), a resized copy's training batches decode
    with simplejpeg and take the uint8 path; the host's float batch is what a GPU run's loader sends, completed by
    `on_device`, bit for bit; a batch is a pure function of (seed, step), also from a loader's worker; the original
    folder keeps timm's PIL path."""
    from tasks.data import imagenet as imagenet_mod
    from tasks.data.loader import train_loader
    root = photo_like_folder(tmp_path / "original", 8, size=(120, 90), classes=2)
    write_resized_copy(root, tmp_path / "copy", short_side=48)
    recipe = {**DEIT, "re_prob": 0.25, "mixup": 0.8, "cutmix": 1.0, "smoothing": 0.1}
    data = load_pretrain_data("imagenet", "image", path=str(tmp_path / "copy"), image_size=32).with_augmentation(recipe)
    original = load_pretrain_data("imagenet", "image", path=str(root), image_size=32).with_augmentation(recipe)
    assert original.file_transform is None and data.file_transform is not None
    calls = []
    monkeypatch.setattr(imagenet_mod, "decode_jpeg_rgb", lambda p: calls.append(p) or decode_jpeg_rgb(p))
    sent = data.for_transfer()
    for step in range(2):
        host, raw = data.train_batch(step, 8, seed=3), sent.train_batch(step, 8, seed=3)
        assert raw["pixel_values"].dtype == torch.uint8 and host["labels"].shape == (8, 2)
        done = data.on_device(raw, "cpu")
        assert set(done) == set(host) and all(torch.equal(done[k], host[k]) for k in host)
        assert torch.equal(host["pixel_values"], data.train_batch(step, 8, seed=3)["pixel_values"])
    assert len(calls) == 2 * 3 * 8          # every training image decoded by simplejpeg
    pairs = list(train_loader(data, 8, seed=3, start_step=0, total_steps=2, workers=1))
    assert all(torch.equal(batch["pixel_values"], data.train_batch(i, 8, seed=3)["pixel_values"]) for i, batch in pairs)
