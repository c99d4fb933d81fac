"""ImageNet-1k (the paper's image data) as an ImageFolder on disk or through `datasets`, decoded per batch with
DeiT's resize/crop/flip/normalise transforms or, under DeiT's recipe, timm's training transform; the random ones are
seeded per image from (seed, step, position) under forked RNGs (tasks/data/image_recipe.py). A GPU run's loader
stops where timm's prefetcher does (uint8 images after the per-image draws) and the float work, random erasing and
mixing included, runs on the device after the copy (`for_transfer`, `on_device`). A resized copy written by
tasks/data/resized_copy.py (its manifest says so) decodes with simplejpeg and, under DeiT's recipe, trains through the
uint8 path of tasks/data/imagenet_fast.py: timm's crop, flip and RandAugment with timm's draws, the crop resampled
on the tensor."""
from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import torch

from .base import derive_seed, to_device
from .image_recipe import PER_IMAGE, ImagePretrainData, seeded_global_rngs
from .imagenet_fast import decode_jpeg_rgb, uint8_train_transform
from .resized_copy import read_manifest
from .timm_posterize import posterize_keeping_zero_bits

IMAGENET_SIZE = 224
IMAGENET_EVAL_CROP = 0.875  # resize to size/0.875 then centre-crop, as DeiT and timm do


class ImageNetData(ImagePretrainData):
    """ImageNet-style RGB data decoded per batch; `items[split](i)` returns (PIL image, label)."""

    in_chans = 3
    decodes_images = True

    def __init__(self, items: dict, lengths: dict[str, int], num_classes: int, image_size: int | None,
                 label_names: list[str] | None = None, files: dict | None = None, resized_copy: dict | None = None):
        import torchvision.transforms as T
        import torchvision.transforms.v2 as V
        from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
        self.items, self.num_classes, self.label_names = items, num_classes, label_names
        self.files = files                       # split -> (i -> (image file, label)): an ImageFolder on disk
        self.resized_copy = resized_copy         # the manifest of a copy made by tasks/data/resized_copy.py, or None
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
        # batch (to_float): the same elementwise ops, so the same floats bit for bit, without a float32 copy of each
        # crop to stack (3%: 3.07 against 3.16 ms an image, 500 x 375 JPEGs, batches of 64, medians of 8 alternated
        # rounds on 2 loaded cores).
        self.tensor_crop = V.Compose([V.RandomResizedCrop(size, interpolation=bicubic, antialias=True),
                                      V.RandomHorizontalFlip()])
        self.file_transform = self.tensor_crop   # training images from files (decoded uint8) -> uint8; None: PIL path
        self.sends_uint8 = False         # for_transfer: training batches leave the recipe's float work to the GPU

    @property
    def timm_per_image(self) -> bool:
        """Whether the recipe turns on timm's per-image transform (which takes PIL images)."""
        return bool(self.augment) and any(self.augment[name] for name in PER_IMAGE)

    def _configure(self) -> None:
        super()._configure()
        a = self.augment
        self.transforms, self.uint8_transform = self.plain
        self.file_transform = self.tensor_crop
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
            # from files, timm's PIL path, the exact reference; from a resized copy, the same stages and draws on
            # uint8 tensors, random erasing after the float conversion on the batch (on_device): the CPU it saves is
            # in bench/README.md section 10
            self.file_transform = (uint8_train_transform(self.image_size, options, posterize_keeping_zero_bits)
                                   if self.resized_copy else None)

    def decode_file(self, path: str) -> torch.Tensor:
        """A training image file as uint8 [3, H, W]: simplejpeg for a resized copy (RGB JPEGs throughout), else
        torchvision's decode (any file ImageFolder reads)."""
        return decode_jpeg_rgb(path) if self.resized_copy else decode_rgb(path)

    def to_float(self, pixels: torch.Tensor) -> torch.Tensor:
        """uint8 pixels [..., 3, H, W] as the model's input: ToTensor's and Normalize's arithmetic (divide by 255,
        subtract the mean, divide by the std), so a stacked batch, on any device, gets the floats the PIL path
        gives each image, bit for bit."""
        from torchvision.transforms.functional import normalize
        # 255 as a tensor on the pixels' device: CUDA divides by a CPU scalar as a multiplication by its reciprocal
        # (ATen's div_true_kernel_cuda), up to one ulp off ToTensor's division on the host; a device tensor gets
        # the true division (with the scalar, the GPU test's bit-for-bit check failed on an H200)
        return normalize(pixels.to(torch.float32).div(torch.full((), 255.0, device=pixels.device)), self.mean, self.std)

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
            return super().on_device(batch, device)
        seed = int(batch["augment_seed"])        # read on the host, before the copy: no wait for the device
        sent = to_device({k: v for k, v in batch.items() if k != "augment_seed"}, device)
        pixels = self.to_float(sent["pixel_values"])
        if self.augment and self.augment["re_prob"] > 0:     # random erasing is timm's per-image transform's last step
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
        from_files = split == "train" and self.files is not None and self.file_transform is not None
        sends_uint8 = split == "train" and self.sends_uint8
        if sends_uint8:
            transform = self.uint8_transform
        with seeded_global_rngs() as seed:
            for k, i in enumerate(indices):
                if from_files:
                    path, label = self.files[split](int(i))
                    image = self.decode_file(path)
                else:
                    image, label = self.items[split](int(i))
                seed(derive_seed(rng_seed, k))
                pixels.append(self.file_transform(image) if from_files else transform(image.convert("RGB")))
                labels.append(label)
        batch = {"pixel_values": torch.stack(pixels), "labels": torch.tensor(labels, dtype=torch.long)}
        if sends_uint8 or from_files:     # the float work after the copy (on_device), drawing from this batch's seed
            batch = {**batch, "augment_seed": torch.tensor(rng_seed, dtype=torch.int64)}
            # on the host, that same work here: the floats a GPU run's batch becomes, bit for bit
            return batch if sends_uint8 else self.on_device(batch, "cpu")
        return self.mix(split, batch, rng_seed)

    def preprocessing(self) -> dict:
        """The "valid" transform in timm's pretrained_cfg terms (timm's eval transform is the same one)."""
        names = {"label_names": list(self.label_names)} if self.label_names else {}
        return {"mean": list(self.mean), "std": list(self.std), "interpolation": "bicubic",
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
                            files={s: file_getter(f) for s, f in folders.items()}, resized_copy=read_manifest(root))
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
