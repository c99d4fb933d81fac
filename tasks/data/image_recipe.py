"""The batch-level part of DeiT's training recipe, shared by every image source (tasks/data/vision.py): Mixup/CutMix
and label smoothing through timm, DeiT's repeated augmentation in the index stream, and the seeded use of the global
random generators that timm's augmentations draw from, so that a batch stays a pure function of (seed, step)."""
from __future__ import annotations

import copy
import random
from contextlib import contextmanager

import numpy as np
import torch

from .base import PretrainData, batch_indices, derive_seed, epoch_permutation

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
