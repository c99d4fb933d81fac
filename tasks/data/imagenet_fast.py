"""DeiT's training transform on uint8 tensors, for a resized copy of ImageNet (tasks/data/resized_copy.py): the
JPEG decoded by libjpeg-turbo through simplejpeg, timm's random resized crop and flip with timm's own draws on the
uint8 tensor (resampled by torchvision's uint8 kernel instead of PIL's), then timm's RandAugment (or colour jitter),
which takes PIL images, on the 224 x 224 crop alone, and the result as uint8; the float conversion, normalisation
and random erasing follow on the stacked batch, on the device for a GPU run (ImageNetData.on_device).

Why this split. Under DeiT's recipe timm's transform decodes, crops and resizes with PIL, on the whole image; here
that was 0.87 + 0.75 ms of a 500 x 375 image's 2.5, against 0.30 + 0.16 ms for simplejpeg's decode of its 256
copy and the crop on the tensor; RandAugment (0.67 ms, on the 224 crop either way) stays timm's, since its ops take
PIL images and torchvision's tensor affine has no bicubic (bench/README.md section 10). The crop, the flip and
RandAugment are timm's (`create_transform(..., separate=True)`: its primary and secondary stages), so the op
choices, magnitudes and probabilities are DeiT's by construction, and for the same seeds the same boxes, flips and
ops are drawn as by timm's transform; what differs is the resampling kernel (within a few levels of 255) and, on a
resized copy, the source pixels (tests/test_fast_images.py compares the batches' statistics with timm's pipeline on
the original images)."""
from __future__ import annotations

import random

import numpy as np
import torch


def decode_jpeg_rgb(path: str) -> torch.Tensor:
    """A JPEG as a uint8 [3, H, W] tensor (a view of simplejpeg's [H, W, 3] array: channels-last memory, which
    torchvision's uint8 resize keeps); a file simplejpeg cannot decode (not a JPEG, CMYK) is read as ImageFolder
    reads it."""
    import simplejpeg
    with open(path, "rb") as f:
        data = f.read()
    try:
        return torch.from_numpy(simplejpeg.decode_jpeg(data, colorspace="RGB")).permute(2, 0, 1)
    except ValueError:
        from PIL import Image
        from torchvision.transforms.v2.functional import pil_to_tensor
        with Image.open(path) as image:
            return pil_to_tensor(image.convert("RGB"))


class TimmCropOnTensor:
    """timm's RandomResizedCropAndInterpolation on a uint8 tensor: its draws (box from `get_params`, then the
    interpolation when it is 'random'), in its order, and torchvision v2's native uint8 resize with antialiasing
    (timm's own call would convert the tensor to floats and back). A module-level class, so a DataLoader can pickle
    it."""

    def __init__(self, crop):
        self.crop = crop

    def __call__(self, pixels: torch.Tensor) -> torch.Tensor:
        from torchvision.transforms.v2.functional import resized_crop
        c = self.crop
        top, left, height, width = c.get_params(pixels, c.scale, c.ratio)
        mode = random.choice(c.interpolation) if isinstance(c.interpolation, (tuple, list)) else c.interpolation
        return resized_crop(pixels, top, left, height, width, list(c.size), interpolation=mode, antialias=True)

    def __repr__(self):
        return f"TimmCropOnTensor({self.crop!r})"


class Uint8TrainTransform:
    """timm's training transform from a uint8 tensor to a uint8 tensor: `primary` (crop and flip) on the tensor,
    `secondary` (RandAugment, colour jitter; may be empty) on a PIL image of the crop, as timm's own stages."""

    def __init__(self, primary, secondary):
        from timm.data.transforms import RandomResizedCropAndInterpolation
        self.primary = [TimmCropOnTensor(t) if isinstance(t, RandomResizedCropAndInterpolation) else t
                        for t in primary.transforms]     # the flip (torchvision's) takes tensors as it is
        self.secondary = secondary if secondary.transforms else None

    def __call__(self, pixels: torch.Tensor) -> torch.Tensor:
        for transform in self.primary:
            pixels = transform(pixels)
        if self.secondary is None:
            return pixels
        from PIL import Image
        from torchvision.transforms.v2.functional import pil_to_tensor
        return pil_to_tensor(self.secondary(Image.fromarray(np.ascontiguousarray(pixels.permute(1, 2, 0).numpy()))))

    def __repr__(self):
        return f"Uint8TrainTransform(primary={self.primary!r}, secondary={self.secondary!r})"


def uint8_train_transform(image_size: int, options: dict, wrap_secondary=lambda t: t) -> Uint8TrainTransform:
    """The uint8 transform for timm's create_transform(image_size, is_training=True, **options); `wrap_secondary`
    amends timm's secondary stage (tasks/data/timm_posterize.py's fix)."""
    from timm.data import create_transform
    primary, secondary, _ = create_transform(image_size, separate=True, **options)
    return Uint8TrainTransform(primary, wrap_secondary(secondary))
