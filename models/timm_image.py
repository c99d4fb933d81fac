"""What the two timm image families (ViT/DeiT and CaiT) share: the classification loss on
`pixel_values`/`labels` batches and timm-style export (safetensors weights + a config.json timm reads).

Kept apart from `family.py` because only families whose model is called as `model(pixel_values)` and
rebuilt from a `ModelSpec` alone fit it; the HF text families export with `save_pretrained` instead.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from timm.loss import SoftTargetCrossEntropy

from models.family import Family
from models.spec import ModelSpec


def mlp_ratio(hidden: int, ffn: int) -> float:
    """The `mlp_ratio` that makes timm build an MLP of exactly `ffn` units: timm sizes it as int(hidden * ratio),
    and hidden * (ffn / hidden) can fall just short of ffn (11 * (15 / 11) < 15), losing a unit; nudge it up."""
    ratio = ffn / hidden
    while int(hidden * ratio) < ffn:
        ratio = math.nextafter(ratio, math.inf)
    return ratio


SOFT_TARGET_CE = SoftTargetCrossEntropy()


class TimmImageFamily(Family):
    objective = "image"

    # -- training ----------------------------------------------------------------------------------------
    def logits(self, model, batch):
        return model(batch["pixel_values"])

    def compute_loss(self, call, batch):
        logits, targets = call(batch["pixel_values"]), batch["labels"]
        if targets.is_floating_point():
            # soft targets [B, classes] (tasks/data/vision.py): DeiT's Mixup/CutMix, whose targets carry the label
            # smoothing, or label smoothing alone (timm's smoothed one-hots: on them this is exactly the label-smoothed
            # cross-entropy, timm's LabelSmoothingCrossEntropy, without handing the smoothing to the loss)
            return SOFT_TARGET_CE(logits, targets)
        return F.cross_entropy(logits, targets)

    # -- export --------------------------------------------------------------------------------------------
    timm_architecture = ""    # a registered timm model: its constructor takes timm_args(spec) as overrides

    def timm_args(self, spec: ModelSpec) -> dict:
        """The timm constructor arguments that build `spec`'s model (build() uses them too)."""
        raise NotImplementedError

    def export(self, model, directory: Path, preprocessing: dict | None = None) -> None:
        """safetensors weights + a timm-style config.json (architecture, model_args, pretrained_cfg), so that
        timm alone loads it: `timm.create_model("local-dir:DIR", pretrained=True)`; growbench reads `spec`.

        `preprocessing`: how the training data turned an image into the model's input, in timm's pretrained_cfg
        terms (mean, std, interpolation, crop_pct, label_names; tasks/data/vision.py), so that timm's own
        `create_transform(**resolve_data_config({}, model=m))` feeds the model what it was trained on. Without
        it the export says nothing about normalisation, and timm assumes ImageNet's."""
        spec = self.spec_of(model)
        pretrained_cfg = {"input_size": [spec.in_chans, spec.image_size, spec.image_size], "fixed_input_size": True,
                          "num_classes": spec.classes, "first_conv": "patch_embed.proj", "classifier": "head",
                          **(preprocessing or {})}
        for key in ("mean", "std"):
            if len(pretrained_cfg.get(key, ())) not in (0, spec.in_chans):
                raise ValueError(f"preprocessing: {len(pretrained_cfg[key])} channel {key} values for a model of "
                                 f"{spec.in_chans} input channels")
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(directory / "model.safetensors"))
        # timm builds the model with one of its registered constructors, every size set by model_args; the tag
        # marks the weights as growbench's, not the paper model the constructor is named after (timm keeps only
        # the constructor's name when it loads)
        config = {"architecture": f"{self.timm_architecture}.growbench", "num_classes": spec.classes,
                  "model_args": self.timm_args(spec), "pretrained_cfg": pretrained_cfg,
                  "family": self.name, "spec": spec.to_dict()}
        (directory / "config.json").write_text(json.dumps(config, indent=2) + "\n")

    def load(self, directory: Path):
        directory = Path(directory)
        config = json.loads((directory / "config.json").read_text())
        model = self.build(ModelSpec(**config.get("spec", config)))     # (older exports: the spec itself)
        model.load_state_dict(load_file(str(directory / "model.safetensors")))
        return model
