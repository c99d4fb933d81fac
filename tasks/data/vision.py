"""Image pretraining data for the vision transformers (DeiT, CaiT): classification batches.

Three sources, smallest first: scikit-learn's handwritten digits (8x8 gray, 10 classes, 1797 images,
embedded: the tiny scale), Debian's Fashion-MNIST (28x28 gray, 10 classes, 60k/10k: the mini scale,
from the idx files of `dataset-fashion-mnist`), and ImageNet-1k (the paper) as an ImageFolder with
train/ and val/ or through `datasets`. The small sources sit in memory as uint8 and are scaled,
resized and normalised per batch; ImageNet is decoded per batch with the standard DeiT-style
resize/crop/flip/normalise transforms, the random ones seeded per image from (seed, step, position)
under forked RNGs so batches stay a pure function of their arguments (see tasks/data/__init__.py).

DeiT's recipe (a task's recipe fields, tasks/task.py; `with_augmentation`) adds, for training batches only:
timm's per-image augmentation (`timm.data.create_transform`: RandAugment, colour jitter, random erasing; decoded
images only), timm's Mixup/CutMix and label smoothing (soft targets [B, classes] that sum to 1), and DeiT's
repeated augmentation in the index stream. Held-out batches keep hard labels and the plain evaluation transform.
A GPU run's loader stops where timm's prefetcher does (uint8 images after the per-image draws) and the float work,
random erasing and mixing included, runs on the device after the copy (`for_transfer`, `on_device`).
"""
from __future__ import annotations

import copy
import gzip
import random
import struct
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from . import PretrainData, batch_indices, derive_seed, epoch_permutation, to_device
from .timm_posterize import posterize_keeping_zero_bits

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"  # where Debian's dataset-fashion-mnist installs it
DIGITS_VALID_FRACTION = 0.2  # the last 20% of load_digits is held out
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                         "Ankle boot")   # the data set's own names for labels 0-9
IMAGENET_SIZE = 224
IMAGENET_EVAL_CROP = 0.875  # resize to size/0.875 then centre-crop, as DeiT and timm do


# DeiT's RASampler keeps an epoch at the data set's length rounded down to a multiple of 256 (its
# num_selected_samples, summed over the processes), so an epoch shows about N / repeats distinct images, each
# `repeats` times; below 256 images (test fixtures) the epoch is the data set's length.
RA_EPOCH_MULTIPLE = 256
# the recipe fields that turn on timm's per-image transform (create_transform), which needs decoded images; 0 or "": off
PER_IMAGE = ("auto_augment", "color_jitter", "re_prob")


@contextmanager
def seeded_global_rngs(device=None):
    """Yields a function of a seed that seeds torch's, numpy's and Python's global generators; all three are restored
    on exit. timm draws from all three (RandAugment: `random` and `np.random`; random erasing: `random` and torch; Mixup:
    `np.random`), and a batch must be a pure function of (seed, step) that leaves the caller's streams untouched.
    `device`: where torch's draws happen; a GPU's generator is then forked and seeded too (random erasing on the
    device draws its noise there), the CPU's alone otherwise."""
    gpus = [torch.device(device)] if device is not None and torch.device(device).type == "cuda" else []
    numpy_state, python_state = np.random.get_state(), random.getstate()
    try:
        with torch.random.fork_rng(devices=gpus):
            yield lambda seed: seed_all(seed, gpus)
    finally:
        np.random.set_state(numpy_state)
        random.setstate(python_state)


def seed_all(seed: int, gpus=()) -> None:
    # the CPU generator and the forked GPUs' alone: torch.manual_seed would reseed every GPU's, which
    # fork_rng(devices=[]) does not restore (and costs ~0.35 ms a call, against ~5 us)
    torch.default_generator.manual_seed(seed)
    for gpu in gpus:
        torch.cuda.default_generators[torch.cuda.current_device() if gpu.index is None else gpu.index].manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


def repeated_indices(n: int, step: int, batch_size: int, seed: int, repeats: int) -> np.ndarray:
    """DeiT's repeated augmentation (samplers.RASampler) as one index stream: epoch e walks the permutation of
    (seed, e) with each index repeated `repeats` times in a row, cut to the epoch length DeiT keeps
    (RA_EPOCH_MULTIPLE). The copies of an image sit side by side, so they land in one batch, each with its own
    augmentation (every image is seeded apart, ImageNetData.make_batch). What differs from DeiT's multi-GPU sampler:
    DeiT deals this stream out round-robin over its GPUs, so an image's copies sit on neighbouring ranks in one
    global step, while here a (micro-)batch is a run of consecutive positions, so the copies share a micro-batch
    (one straddles two when the batch size is not a multiple of `repeats`); each epoch's permutation is seeded by
    (seed, epoch), DeiT's by the epoch alone; DeiT pads the stream to a multiple of its GPU count, which one stream
    does not need. Which images an epoch shows, how often, and the epoch's length are DeiT's."""
    if n <= 0:
        raise ValueError("training split is empty")
    epoch_len = n // RA_EPOCH_MULTIPLE * RA_EPOCH_MULTIPLE or n
    pos = np.arange(step * batch_size, (step + 1) * batch_size, dtype=np.int64)
    epochs, within = pos // epoch_len, pos % epoch_len
    out = np.empty(batch_size, dtype=np.int64)
    for e in np.unique(epochs):
        sel = epochs == e
        out[sel] = epoch_permutation(n, seed, int(e))[within[sel] // repeats]
    return out


class ImagePretrainData(PretrainData):
    """What every image source shares: the batch-level part of DeiT's recipe (Mixup/CutMix, label smoothing, repeated
    augmentation), off until `with_augmentation` turns it on."""

    kind = objective = "image"
    augment: dict | None = None       # the recipe's augmentation fields (tasks.task.Recipe.augmentation)
    decodes_images = False            # whether timm's per-image transforms can run (they take PIL images)

    def with_augmentation(self, augment: dict) -> "ImagePretrainData":
        """A copy that trains with DeiT's recipe `augment`; its held-out batches are the same as this one's."""
        data = copy.copy(self)
        data.augment = dict(augment)
        data.__dict__.pop("_eval_cache", None)
        data._configure()
        return data

    def _configure(self) -> None:
        """Build what the recipe needs (a subclass adds its per-image transform)."""
        from timm.data import Mixup
        a = self.augment
        # timm's Mixup does the label smoothing too (its targets are smoothed one-hots, mixed), as in DeiT main.py
        self.mixer = (Mixup(mixup_alpha=a["mixup"], cutmix_alpha=a["cutmix"], prob=a["mixup_prob"],
                            switch_prob=a["mixup_switch_prob"], mode=a["mixup_mode"],
                            label_smoothing=a["smoothing"], num_classes=self.num_classes)
                      if a["mixup"] > 0 or a["cutmix"] > 0 else None)

    @property
    def repeats(self) -> int:
        return self.augment["repeated_aug"] if self.augment else 1

    def train_indices(self, step: int, batch_size: int, seed: int) -> np.ndarray:
        """The item indices of training batch `step` (repeated augmentation's stream when it is on)."""
        if self.repeats == 1:
            return batch_indices(self.n_train, step, batch_size, seed)
        return repeated_indices(self.n_train, step, batch_size, seed, self.repeats)

    def train_batch(self, step: int, batch_size: int, seed: int) -> dict[str, torch.Tensor]:
        if self.repeats == 1:
            return super().train_batch(step, batch_size, seed)
        # PretrainData.train_batch with the repeated stream: the same per-step seed
        return self.make_batch("train", self.train_indices(step, batch_size, seed), derive_seed(seed, step, 1))

    def mix(self, split: str, batch: dict[str, torch.Tensor], rng_seed: int) -> dict[str, torch.Tensor]:
        """A training batch under the recipe's Mixup/CutMix and label smoothing: soft targets [B, classes]; anything
        else unchanged (held-out batches keep their hard labels, and a recipe without these its integer labels)."""
        if split != "train" or not self.augment:
            return batch
        x, y = batch["pixel_values"], batch["labels"]
        if self.mixer is not None:
            # timm's Mixup draws lambda, the switch and the box from numpy's global RNG: seed it from the batch's
            # seed, restore the caller's (tasks/data/__init__.py: a batch is a pure function of (seed, step))
            with seeded_global_rngs() as seed:
                seed(rng_seed)
                x, y = self.mixer(x, y)
        elif self.augment["smoothing"]:
            from timm.data.mixup import mixup_target
            y = mixup_target(y, self.num_classes, lam=1.0, smoothing=self.augment["smoothing"])
        return {**batch, "pixel_values": x, "labels": y}


def check_augmentation(source: str, augment: dict, key: str = "") -> None:
    """Refuse, in one line, a part of DeiT's recipe that `source` cannot take or a policy timm does not know (checked
    when a task is made, before anything is loaded or written). `key`: how the recipe is named ("small_recipe.")."""
    on = [f"{key}{name}={augment[name]}" for name in PER_IMAGE if augment[name]]
    if on and not SOURCES[source].decodes_images:
        raise ValueError(f"{', '.join(on)}: timm's per-image augmentation works on decoded images (the imagenet "
                         f"source), and {source} is held as tensors; leave it out (mixup, cutmix, smoothing and "
                         "repeated_aug apply to any image source)")
    if augment["auto_augment"]:
        from timm.data import create_transform
        try:
            create_transform(32, is_training=True, auto_augment=augment["auto_augment"])
        except Exception as e:      # timm's parser raises several kinds (AssertionError, KeyError, ValueError)
            raise ValueError(f"{key}auto_augment={augment['auto_augment']} is not a policy timm knows "
                             f"({type(e).__name__}: {e}); e.g. rand-m9-mstd0.5-inc1 (DeiT's)") from None


class TensorImageData(ImagePretrainData):
    """A small gray-scale dataset held in memory: uint8 images [N, H, W] per split, integer labels."""

    in_chans = 1

    def __init__(self, images: dict[str, torch.Tensor], labels: dict[str, torch.Tensor], scale: float,
                 num_classes: int, image_size: int | None, label_names: tuple[str, ...] | None = None):
        self.images, self.labels, self.scale = images, labels, scale
        self.label_names = tuple(label_names or (str(i) for i in range(num_classes)))
        self.native_size = images["train"].shape[-1]
        self.image_size = image_size or self.native_size
        self.num_classes = num_classes
        self.n_train, self.n_valid = len(images["train"]), len(images["valid"])
        # Normalise with the training split's own statistics (one gray channel), as DeiT does for ImageNet.
        train = images["train"].float() / scale
        self.mean, self.std = float(train.mean()), float(train.std())

    def make_batch(self, split: str, indices: np.ndarray, rng_seed: int) -> dict[str, torch.Tensor]:
        idx = torch.as_tensor(indices, dtype=torch.long)
        x = self.images[split][idx].float().div_(self.scale).unsqueeze(1)  # [B, 1, H, W] in [0, 1]
        if self.image_size != self.native_size:
            # antialias only matters when shrinking; it is a no-op guard when growing
            x = F.interpolate(x, size=(self.image_size, self.image_size), mode="bilinear", align_corners=False,
                              antialias=self.image_size < self.native_size)
        return self.mix(split, {"pixel_values": (x - self.mean) / self.std, "labels": self.labels[split][idx].clone()},
                        rng_seed)

    def preprocessing(self) -> dict:
        """make_batch in timm's pretrained_cfg terms, for a gray image of this set's stored pixels (PIL mode "L"):
        timm's ToTensor reads them as value / 255 where make_batch takes value / scale (digits are 0-16), so the
        mean and std move to that range; the whole image is resized (bilinear), never cropped."""
        to_8bit = self.scale / 255.0
        return {"mean": [self.mean * to_8bit], "std": [self.std * to_8bit], "interpolation": "bilinear",
                "crop_pct": 1.0, "crop_mode": "center", "label_names": list(self.label_names)}


def load_digits_data(image_size: int | None = None) -> TensorImageData:
    from sklearn.datasets import load_digits
    digits = load_digits()
    images = torch.from_numpy(digits.images.astype(np.uint8))  # values 0..16
    labels = torch.from_numpy(digits.target.astype(np.int64))
    n_valid = int(len(images) * DIGITS_VALID_FRACTION)
    cut = len(images) - n_valid  # deterministic split: no shuffling, so every run holds out the same images
    return TensorImageData({"train": images[:cut], "valid": images[cut:]}, {"train": labels[:cut], "valid": labels[cut:]},
                           scale=16.0, num_classes=10, image_size=image_size)


def _read_idx(file: Path) -> np.ndarray:
    """An idx file (the MNIST format: zero, zero, dtype code, ndim, big-endian dims, data)."""
    with (gzip.open if file.suffix == ".gz" else open)(file, "rb") as f:
        data = f.read()
    if data[:2] != b"\x00\x00" or data[2] != 0x08:
        raise ValueError(f"{file} is not an unsigned-byte idx file")
    ndim = data[3]
    dims = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


FASHION_MNIST_FILES = ("train-images-idx3", "train-labels-idx1", "t10k-images-idx3", "t10k-labels-idx1")


def _fashion_file(root: Path, prefix: str) -> Path:
    for name in (f"{prefix}-ubyte.gz", f"{prefix}-ubyte"):
        if (root / name).exists():
            return root / name
    raise FileNotFoundError(
        f"Fashion-MNIST not found: looked for {prefix}-ubyte[.gz] in {root}; install it with "
        f"`apt-get install dataset-fashion-mnist` (puts it in {FASHION_MNIST_DIR}) or pass path=DIR holding the idx files")


def load_fashion_mnist_data(path: str | None = None, image_size: int | None = None) -> TensorImageData:
    root = Path(path or FASHION_MNIST_DIR).expanduser()
    find = lambda prefix: _fashion_file(root, prefix)  # noqa: E731
    arrays = {split: (_read_idx(find(f"{p}-images-idx3")), _read_idx(find(f"{p}-labels-idx1")))
              for split, p in (("train", "train"), ("valid", "t10k"))}
    return TensorImageData({s: torch.from_numpy(a[0].copy()) for s, a in arrays.items()},
                           {s: torch.from_numpy(a[1].astype(np.int64)) for s, a in arrays.items()},
                           scale=255.0, num_classes=10, image_size=image_size, label_names=FASHION_MNIST_CLASSES)


class ImageNetData(ImagePretrainData):
    """ImageNet-style RGB data decoded per batch; `items[split](i)` returns (PIL image, label)."""

    in_chans = 3
    decodes_images = True

    def __init__(self, items: dict, lengths: dict[str, int], num_classes: int, image_size: int | None,
                 label_names: list[str] | None = None, files: dict | None = None):
        import torchvision.transforms as T
        import torchvision.transforms.v2 as V
        from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
        self.items, self.num_classes, self.label_names = items, num_classes, label_names
        self.files = files                       # split -> (i -> (image file, label)): an ImageFolder on disk
        self.image_size = size = image_size or IMAGENET_SIZE
        self.n_train, self.n_valid = lengths["train"], lengths["valid"]
        self.mean, self.std = IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
        norm = [T.ToTensor(), T.Normalize(self.mean, self.std)]
        bicubic = T.InterpolationMode.BICUBIC
        crop = [T.RandomResizedCrop(size, interpolation=bicubic), T.RandomHorizontalFlip()]
        self.transforms = {
            "train": T.Compose([*crop, *norm]),
            "valid": T.Compose([T.Resize(int(size / IMAGENET_EVAL_CROP), interpolation=bicubic), T.CenterCrop(size), *norm]),
        }
        # the training transform without its float tail, for a GPU run's loader (for_transfer): the same draws, the
        # image as uint8 (ToTensor and Normalize draw nothing; to_float does their arithmetic after the copy)
        self.uint8_transform = T.Compose([*crop, T.PILToTensor()])
        self.plain = self.transforms, self.uint8_transform     # what _configure goes back to without timm's transform
        # The same crop and flip on the uint8 tensor torchvision's libjpeg-turbo decode gives, then one float
        # conversion of the 224 x 224 crop: on a 16-core GPU machine the PIL path made 248 images per CPU second
        # (ToTensor's conversion of the PIL image alone ~1.3 ms), 0.88x of what a 45%-MFU DeiT-B step takes
        # (bench/README.md section 10). Training batches from image files only, and only while no timm per-image
        # transform (which takes PIL images) is on; held-out batches keep the PIL path that timm's evaluation and
        # the exported preprocessing describe. The float conversion and normalisation run once on the stacked uint8
        # batch: the same elementwise ops, so the same floats bit for bit, without a float32 copy of each crop to
        # stack (3%: 3.07 against 3.16 ms an image, 500 x 375 JPEGs, batches of 64, medians of 8 alternated rounds
        # on 2 loaded cores, 2026-11-27), and the one place a uint8 batch exists for the GPU to normalise later.
        self.tensor_crop = V.Compose([V.RandomResizedCrop(size, interpolation=bicubic, antialias=True),
                                      V.RandomHorizontalFlip()])
        self.sends_uint8 = False         # for_transfer: training batches leave the recipe's float work to the GPU

    @property
    def timm_per_image(self) -> bool:
        """Whether the recipe turns on timm's per-image transform (which takes PIL images)."""
        return bool(self.augment) and any(self.augment[name] for name in PER_IMAGE)

    def _configure(self) -> None:
        super()._configure()
        a = self.augment
        self.transforms, self.uint8_transform = self.plain
        if self.timm_per_image:
            from timm.data import create_transform
            # DeiT's datasets.build_transform: timm's ImageNet training transform (random resized crop, flip,
            # RandAugment, random erasing after normalisation) with main.py's options; and the same transform as timm
            # makes it for its prefetcher (use_prefetcher: the same draws up to RandAugment, the image as uint8,
            # no float conversion, normalisation or random erasing), which a GPU run's loader sends (for_transfer)
            options = dict(is_training=True, auto_augment=a["auto_augment"] or None, color_jitter=a["color_jitter"],
                           interpolation=a["train_interpolation"], re_prob=a["re_prob"], re_mode=a["re_mode"],
                           re_count=a["re_count"])
            train = create_transform(self.image_size, **options)
            self.transforms = {**self.transforms, "train": posterize_keeping_zero_bits(train)}
            self.uint8_transform = posterize_keeping_zero_bits(
                create_transform(self.image_size, use_prefetcher=True, **options))

    def to_float(self, pixels: torch.Tensor) -> torch.Tensor:
        """uint8 pixels [..., 3, H, W] as the model's input: ToTensor's and Normalize's arithmetic (divide by 255,
        subtract the mean, divide by the std), so a stacked batch, on any device, gets the floats the PIL path
        gives each image, bit for bit."""
        from torchvision.transforms.functional import normalize
        return normalize(pixels.to(torch.float32).div(255), self.mean, self.std)

    def for_transfer(self) -> "ImageNetData":
        """The data as a GPU run's loader makes its training batches: the stacked uint8 images after the per-image
        draws (crop, flip and, under DeiT's recipe, RandAugment), with the batch's seed; `on_device` does the float
        work after the copy, as timm's prefetcher does: conversion and normalisation, random erasing, Mixup/CutMix
        and label smoothing. A quarter of the bytes to pin and copy, and that work off the workers (crop/flip from
        files 1.49x / 1.36x less CPU an image at 341 x 256 / 500 x 375; bench/README section 10)."""
        data = copy.copy(self)
        data.sends_uint8 = True
        return data

    def on_device(self, batch: dict[str, torch.Tensor], device) -> dict[str, torch.Tensor]:
        """A batch of `for_transfer`'s on `device`, completed there: the floats `train_batch` gives, bit for bit,
        where the recipe has no random erasing; with random erasing, whose draws here come after the whole batch's
        RandAugment draws rather than after each image's (and, on a GPU, its noise from the GPU's generator), a
        batch from the same distribution, the same for the same (seed, step), as with timm's prefetcher."""
        if "augment_seed" not in batch:
            return to_device(batch, device)
        seed = int(batch["augment_seed"])        # read on the host, before the copy: no wait for the device
        sent = to_device({k: v for k, v in batch.items() if k != "augment_seed"}, device)
        pixels = self.to_float(sent["pixel_values"])
        if self.timm_per_image and self.augment["re_prob"] > 0:
            from timm.data.random_erasing import RandomErasing
            a = self.augment
            erase = RandomErasing(a["re_prob"], mode=a["re_mode"], max_count=a["re_count"], device=pixels.device)
            with seeded_global_rngs(pixels.device) as seed_rngs:
                seed_rngs(derive_seed(seed, 4))
                pixels = erase(pixels)
        return self.mix("train", {**sent, "pixel_values": pixels}, seed)

    def make_batch(self, split: str, indices: np.ndarray, rng_seed: int) -> dict[str, torch.Tensor]:
        # the random transforms draw from the global RNGs: each image is seeded from (batch seed, its position), inside
        # one fork that is restored after (saving numpy's state costs ~0.25 ms: once a batch, not once an image), so
        # callers' randomness is untouched, the batch is reproducible, each image's draws are its own, and an image
        # repeated in a batch (repeated augmentation) is augmented differently each time
        transform, pixels, labels = self.transforms[split], [], []
        from_files = split == "train" and self.files is not None and not self.timm_per_image
        sends_uint8 = split == "train" and self.sends_uint8
        if sends_uint8:
            transform = self.uint8_transform
        with seeded_global_rngs() as seed:
            for k, i in enumerate(indices):
                if from_files:
                    path, label = self.files[split](int(i))
                    image = decode_rgb(path)
                else:
                    image, label = self.items[split](int(i))
                seed(derive_seed(rng_seed, k))
                pixels.append(self.tensor_crop(image) if from_files else transform(image.convert("RGB")))
                labels.append(label)
        batch = {"pixel_values": torch.stack(pixels), "labels": torch.tensor(labels, dtype=torch.long)}
        if sends_uint8:      # the float work after the copy (on_device), drawing from this batch's seed
            return {**batch, "augment_seed": torch.tensor(rng_seed, dtype=torch.int64)}
        if from_files:
            batch["pixel_values"] = self.to_float(batch["pixel_values"])
        return self.mix(split, batch, rng_seed)

    def preprocessing(self) -> dict:
        """The "valid" transform in timm's pretrained_cfg terms (timm's eval transform is the same one)."""
        from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
        names = {"label_names": list(self.label_names)} if self.label_names else {}
        return {"mean": list(IMAGENET_DEFAULT_MEAN), "std": list(IMAGENET_DEFAULT_STD), "interpolation": "bicubic",
                "crop_pct": IMAGENET_EVAL_CROP, "crop_mode": "center", **names}


def decode_rgb(path: str) -> torch.Tensor:
    """An image file as a uint8 [3, H, W] tensor (libjpeg-turbo for JPEGs; gray and CMYK converted to RGB); a file
    torchvision cannot decode falls back to PIL, as ImageFolder's loader reads it."""
    from torchvision.io import ImageReadMode, decode_image
    try:
        return decode_image(path, mode=ImageReadMode.RGB)
    except RuntimeError:
        from PIL import Image
        from torchvision.transforms.v2.functional import pil_to_tensor
        with Image.open(path) as image:
            return pil_to_tensor(image.convert("RGB"))


def load_imagenet_data(path: str | None = None, image_size: int | None = None) -> ImageNetData:
    if path is not None:
        from torchvision.datasets import ImageFolder
        root = Path(path).expanduser()
        if not (root / "train").is_dir() or not (root / "val").is_dir():
            raise FileNotFoundError(f"ImageNet folder {root} needs train/ and val/ subdirectories (ImageFolder layout)")
        folders = {"train": ImageFolder(str(root / "train")), "valid": ImageFolder(str(root / "val"))}
        if folders["train"].classes != folders["valid"].classes:
            raise ValueError(f"train/ and val/ under {root} have different class folders")

        def getter(folder):
            return lambda i: (folder.loader(folder.samples[i][0]), folder.samples[i][1])

        def file_getter(folder):
            return lambda i: folder.samples[i]
        return ImageNetData({s: getter(f) for s, f in folders.items()}, {s: len(f) for s, f in folders.items()},
                            len(folders["train"].classes), image_size, label_names=folders["train"].classes,
                            files={s: file_getter(f) for s, f in folders.items()})
    from datasets import load_dataset  # the paper's data through the hub (gated: needs an accepted licence)
    splits = {"train": load_dataset("ILSVRC/imagenet-1k", split="train"),
              "valid": load_dataset("ILSVRC/imagenet-1k", split="validation")}

    def hub_getter(ds):
        def get(i):
            row = ds[i]  # one row access decodes the image once
            return row["image"], row["label"]
        return get
    labels = splits["train"].features["label"]
    return ImageNetData({s: hub_getter(d) for s, d in splits.items()}, {s: len(d) for s, d in splits.items()},
                        labels.num_classes, image_size, label_names=labels.names)


def check_image_path(source: str, path: str | None) -> None:
    """Refuse, in one line, a local path this image source cannot read (checked before a run starts): the
    embedded digits take none, the others need a directory. Without a path, Fashion-MNIST must be where its
    Debian package puts it (ImageNet's default comes from the hub, checked when it loads)."""
    if path is None and source == "fashion_mnist":
        path = FASHION_MNIST_DIR
    if path is None:
        return
    if source == "digits":
        raise ValueError(f"data_path {path}: the digits data set is embedded (scikit-learn) and reads no local "
                         "files; leave data_path out (Fashion-MNIST and ImageNet tasks take one)")
    p = Path(path).expanduser()
    if p.is_file():
        need = {"fashion_mnist": "the Fashion-MNIST idx files", "imagenet": "train/ and val/ (ImageFolder layout)"}
        raise ValueError(f"data_path {p} is a file; {source} needs a directory holding {need[source]}")
    if source == "fashion_mnist":
        for prefix in FASHION_MNIST_FILES:
            _fashion_file(p, prefix)
    elif not ((p / "train").is_dir() and (p / "val").is_dir()):
        raise FileNotFoundError(f"ImageNet folder {p} needs train/ and val/ subdirectories (ImageFolder layout)")


SOURCES = {"digits": TensorImageData, "fashion_mnist": TensorImageData, "imagenet": ImageNetData}


def load_image_data(source: str, *, image_size: int | None = None, path: str | None = None) -> PretrainData:
    check_image_path(source, path)
    if source == "digits":
        return load_digits_data(image_size)
    if source == "fashion_mnist":
        return load_fashion_mnist_data(path, image_size)
    if source == "imagenet":
        return load_imagenet_data(path, image_size)
    raise ValueError(f"unknown image source {source!r}; known: digits, fashion_mnist, imagenet")
