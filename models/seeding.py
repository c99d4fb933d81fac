"""Seeding the generator dropout draws from, for the two training loops that need it per micro-batch: the
trainer (runs/trainer.py) and LiGO's operator fit (methods/ligo.py). Lives with the models because both
layers import them; `runs` may not be imported from `methods`."""
from __future__ import annotations

import torch


def seed_dropout(seed: int, device: torch.device) -> None:
    """Seed the generator dropout draws from on `device`. Not torch.manual_seed: before CUDA is initialised it
    queues a lazy seeding of every accelerator type with a captured stack trace, ~0.5 ms per call."""
    torch.default_generator.manual_seed(seed)
    if device.type == "cuda":
        with torch.cuda.device(device):
            torch.cuda.manual_seed(seed)
