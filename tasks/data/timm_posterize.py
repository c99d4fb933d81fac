"""timm's posterize op as Pillow behaved when DeiT was trained (tasks/data/imagenet.py wraps the ops of its DeiT
training transform with it)."""
from __future__ import annotations


class PosterizeKeepingZeroBits:
    """timm's posterize op, also at 0 bits kept: what Pillow gave when DeiT was trained (every bit cleared, a black
    image) where the Pillow installed here (13) raises ValueError. DeiT's RandAugment (rand-m9-mstd0.5-inc1) asks for 0
    bits whenever its magnitude, drawn from N(9, 0.5), reaches 10 on a posterize op: about one image in 700, so most
    paper-scale batches of 1,024 would stop the run. A module-level class, so a DataLoader can pickle it."""

    def __init__(self, posterize):
        self.posterize = posterize

    def __call__(self, img, bits_to_keep, **kwargs):
        if bits_to_keep <= 0:
            return img.point(lambda _: 0)
        return self.posterize(img, bits_to_keep, **kwargs)


def posterize_keeping_zero_bits(transform):
    """`transform` (a timm training Compose) with every posterize op of its auto-augment wrapped (see above)."""
    from timm.data import auto_augment
    for t in getattr(transform, "transforms", ()):
        ops = list(getattr(t, "ops", ())) + [op for sub in getattr(t, "policy", ()) for op in sub]   # Rand/AutoAugment
        for op in ops:
            if getattr(op, "aug_fn", None) is auto_augment.posterize:
                op.aug_fn = PosterizeKeepingZeroBits(op.aug_fn)
    return transform
