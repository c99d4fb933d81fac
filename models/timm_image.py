"""What the two timm image families (ViT/DeiT and CaiT) share: the classification loss on
`pixel_values`/`labels` batches and timm-style export (safetensors weights + a config.json of the spec).

Kept apart from `family.py` because only families whose model is called as `model(pixel_values)` and
rebuilt from a `ModelSpec` alone fit it; the HF text families export with `save_pretrained` instead.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from models.family import Family
from models.spec import ModelSpec


class TimmImageFamily(Family):
    objective = "image"

    # -- training ----------------------------------------------------------------------------------------
    def logits(self, model, batch):
        return model(batch["pixel_values"])

    def compute_loss(self, call, batch):
        return F.cross_entropy(call(batch["pixel_values"]), batch["labels"])

    # -- export --------------------------------------------------------------------------------------------
    def export(self, model, directory: Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(directory / "model.safetensors"))
        (directory / "config.json").write_text(json.dumps(self.spec_of(model).to_dict(), indent=2) + "\n")

    def load(self, directory: Path):
        directory = Path(directory)
        model = self.build(ModelSpec(**json.loads((directory / "config.json").read_text())))
        model.load_state_dict(load_file(str(directory / "model.safetensors")))
        return model
