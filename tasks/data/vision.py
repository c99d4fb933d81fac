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
The batch-level recipe and its seeding are in image_recipe.py, ImageNet in imagenet.py; this module holds the
small sources and chooses among them.
"""
from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from .base import PretrainData
from .image_recipe import PER_IMAGE, ImagePretrainData
from .imagenet import ImageNetData, load_imagenet_data

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"  # where Debian's dataset-fashion-mnist installs it
DIGITS_VALID_FRACTION = 0.2  # the last 20% of load_digits is held out
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                         "Ankle boot")   # the data set's own names for labels 0-9


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
