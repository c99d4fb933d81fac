"""Image transfer for DeiT/CaiT: paper Table 2 (CIFAR-10, CIFAR-100, Flowers102, Stanford Cars,
ChestX-ray8; top-1 accuracy). The paper fine-tunes 1000 epochs at batch 768 with lr 0.01 and ImageNet's
augmentation; DeiT's authors give the rest of that recipe (facebookresearch/deit issue 45): SGD, weight decay
1e-4, no random erasing, no stochastic depth, everything else as on ImageNet — RandAugment
rand-m9-mstd0.5-inc1, mixup 0.8 / cutmix 1.0, label smoothing 0.1, cosine schedule with 5 warmup epochs.
(RandAugment's magnitude is clipped at 9.99 rather than timm's 10: see RAND_AUGMENT_MAX_MAGNITUDE.)

Data: by hub name through `datasets` (the image and label columns are found from the features), or an
ImageFolder under --set data_dir=DIR: DIR/<set>/train/<class>/* and DIR/<set>/{val,test}/<class>/*.
ChestX-ray8 is multi-label; as a top-1 number it is scored on the images with a single finding label
("No Finding" being one of the classes), which is what a top-1 accuracy on it can mean.
Images are resized to the model's input size and converted to its channels (gray for 1-channel models).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from models import get_family
from tasks.evals.registry import register_suite
from tasks.evals.finetune import EvalOptions, FinetuneRecipe, finetune, mean_over_seeds, predict
from tasks.evals.metrics import top1

RECIPE = FinetuneRecipe(epochs=1000, lr=0.01, batch_size=768, seeds=(0,), optimizer="sgd", weight_decay=1e-4,
                        schedule="cosine", warmup_ratio=5 / 1000, grad_clip=0.0, eval_batch_size=256)
RAND_AUGMENT = "rand-m9-mstd0.5-inc1"
# The largest magnitude a RandAugment op draws. timm clips at 10, where PosterizeIncreasing keeps 0 bits: Pillow 13
# refuses that (ValueError; older Pillow made the image black), and with magnitude noise 0.5 around 9 about 2% of
# draws reach it, so a fine-tune crashed within its first epochs. Just below 10 the op keeps 1 bit (as destructive);
# every other op moves by at most 0.1% of its range, on those draws only.
RAND_AUGMENT_MAX_MAGNITUDE = 9.99
EVAL_CROP = 0.875


@dataclass(frozen=True)
class ImageSet:
    hub: str
    eval_split: str = "test"
    single_label: bool = False   # multi-label source: keep the single-label images (ChestX-ray8)


SETS = {
    "cifar10": ImageSet("uoft-cs/cifar10"),
    "cifar100": ImageSet("uoft-cs/cifar100"),
    "flowers102": ImageSet("nelorth/oxford-flowers"),
    "stanford_cars": ImageSet("tanganke/stanford_cars"),
    "chestxray8": ImageSet("timm/nih-chest-xray-14", single_label=True),
}


class Items(torch.utils.data.Dataset):
    """(PIL image, label) pairs from a getter, passed through `transform`."""

    def __init__(self, get, labels: list[int], classes: list[str], transform=None):
        self.get, self.labels, self.classes, self.transform = get, labels, classes, transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        image = self.get(i)
        return (self.transform(image) if self.transform else image), self.labels[i]

    def with_transform(self, transform) -> "Items":
        return Items(self.get, self.labels, self.classes, transform)


def load_image_folder(root, split: str) -> Items:
    """An ImageFolder split: root/train or root/val (else root/test), one sub-directory per class."""
    from torchvision.datasets import ImageFolder
    root = Path(root).expanduser()
    names = ["train"] if split == "train" else ["val", "test"]
    found = next((root / n for n in names if (root / n).is_dir()), None)
    if found is None:
        raise FileNotFoundError(f"image folder {root / names[0]} not found; expected the ImageFolder layout "
                                f"{root}/train/<class>/*.png and {root}/val/<class>/*.png (or test/)")
    try:
        folder = ImageFolder(str(found))
    except (FileNotFoundError, RuntimeError) as e:
        raise ValueError(f"{found}: not an ImageFolder ({e}); expected one sub-directory of images per class") from None
    return Items(lambda i: folder.loader(folder.samples[i][0]), [s[1] for s in folder.samples], folder.classes)


def _hub_items(ds, single_label: bool) -> Items:
    from datasets import ClassLabel, Image
    feats = ds.features
    image_col = next((k for k, v in feats.items() if isinstance(v, Image)), None)
    label_col = next((k for k, v in feats.items() if isinstance(v, ClassLabel)), None)
    multi_col = next((k for k, v in feats.items() if isinstance(getattr(v, "feature", None), ClassLabel)), None)
    if image_col is None or (label_col or multi_col) is None:
        raise ValueError(f"hub dataset has no image and class-label columns (features: {list(feats)})")
    if label_col is not None and not single_label:
        labels, classes = list(ds[label_col]), feats[label_col].names
        rows = list(range(len(ds)))
    else:   # multi-label: keep the images with exactly one label
        col = multi_col or label_col
        all_labels = ds[col]
        rows = [i for i, ls in enumerate(all_labels) if not isinstance(ls, list) or len(ls) == 1]
        labels = [all_labels[i][0] if isinstance(all_labels[i], list) else all_labels[i] for i in rows]
        classes = feats[col].feature.names if multi_col else feats[col].names
    return Items(lambda i: ds[rows[i]][image_col], labels, classes)


def load_image_set(name: str, split: str, data_dir: str | None = None, limit: int | None = None) -> Items:
    spec = SETS[name]
    if data_dir is not None:
        items = load_image_folder(Path(data_dir) / name, split)
    else:
        from datasets import load_dataset
        items = _hub_items(load_dataset(spec.hub, split="train" if split == "train" else spec.eval_split),
                           spec.single_label)
    if limit:
        items = Items(items.get, items.labels[:limit], items.classes)
    return items


def transforms(spec, train: bool):
    """DeiT's ImageNet transforms at the model's size (RandAugment for RGB; crop+flip for gray models)."""
    import torchvision.transforms as T
    size = spec.image_size
    bicubic = T.InterpolationMode.BICUBIC
    if spec.in_chans == 3 and train:
        return rand_augment_pipeline(size)
    mode, mean, std = ("RGB", (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)) if spec.in_chans == 3 else ("L", (0.5,), (0.5,))
    head = [T.RandomResizedCrop(size, interpolation=bicubic), T.RandomHorizontalFlip()] if train else \
        [T.Resize(int(math.ceil(size / EVAL_CROP)), interpolation=bicubic), T.CenterCrop(size)]
    return T.Compose([T.Lambda(lambda im: im.convert(mode)), *head, T.ToTensor(), T.Normalize(mean, std)])


def rand_augment_pipeline(size: int):
    """timm's ImageNet training transforms with DeiT's RandAugment, as `create_transform(auto_augment=RAND_AUGMENT)`
    builds them (its crop, flip, RandAugment hparams, no colour jitter, normalisation), the magnitude clipped at
    RAND_AUGMENT_MAX_MAGNITUDE."""
    import torchvision.transforms as T
    from PIL import Image
    from timm.data import IMAGENET_DEFAULT_MEAN, create_transform
    from timm.data.auto_augment import rand_augment_transform
    primary, _, final = create_transform(size, is_training=True, color_jitter=None, re_prob=0.0,
                                         interpolation="bicubic", separate=True)
    hparams = {"translate_const": int(size * 0.45), "img_mean": tuple(round(255 * m) for m in IMAGENET_DEFAULT_MEAN),
               "interpolation": Image.BICUBIC, "magnitude_max": RAND_AUGMENT_MAX_MAGNITUDE}
    return T.Compose([*primary.transforms, rand_augment_transform(RAND_AUGMENT, hparams), *final.transforms])


def load_vision_model(pretrained, num_classes: int):
    """The pretrained DeiT/CaiT with a fresh classifier (timm reset_classifier; seed before calling)."""
    model = get_family(pretrained.family).load(pretrained.model_dir)
    model.reset_classifier(num_classes)
    return model


def image_collate(items):
    return {"pixel_values": torch.stack([x for x, _ in items]), "labels": torch.tensor([y for _, y in items])}


def image_loss(mixup=None):
    """Cross-entropy; with a timm Mixup, mixup/cutmix with label smoothing and a soft-target loss
    (an odd-sized last batch, which mixup refuses, falls back to smoothed cross-entropy)."""
    def loss(model, batch):
        x, y = batch["pixel_values"], batch["labels"]
        if mixup is not None and len(y) % 2 == 0:
            x, soft = mixup(x, y)
            return torch.sum(-soft * F.log_softmax(model(x), dim=-1), dim=-1).mean()
        return F.cross_entropy(model(x), y, label_smoothing=mixup.label_smoothing if mixup else 0.0)
    return loss


def classify_images(pretrained, train, evals: dict, num_classes: int, recipe: FinetuneRecipe, options: EvalOptions,
                    mixup_args: dict | None = None, log=print) -> dict:
    """Fine-tune once per seed, score top-1 on each eval set; per-eval {metrics, per_seed, seeds, ...}."""
    per_seed, fits = {k: [] for k in evals}, []
    for seed in recipe.seeds:
        torch.manual_seed(seed)
        random.seed(seed)          # timm's RandAugment draws from `random`, its Mixup from numpy's global RNG
        np.random.seed(seed)
        model = load_vision_model(pretrained, num_classes)
        mixup = None
        if mixup_args:
            from timm.data import Mixup
            mixup = Mixup(num_classes=num_classes, **mixup_args)
        fits.append(finetune(model, train, image_collate, image_loss(mixup), recipe, seed, options.device, log,
                             options.workers))
        for name, data in evals.items():
            logits = np.concatenate(predict(model, data, image_collate, lambda m, b: m(b["pixel_values"]).float().cpu().numpy(),
                                            recipe.eval_batch_size, options.device, options.workers))
            acc = top1(logits, data.labels)
            per_seed[name].append({"top1": acc, "score": acc})
            log(f"  seed {seed} {name}: top1 {acc:.2f}")
    return {name: {"metrics": mean_over_seeds(rows), "per_seed": rows, "seeds": list(recipe.seeds),
                   "n_train": len(train), "n_eval": len(evals[name]), "steps": fits[0]["steps"],
                   "finetune_wall": sum(f["wall"] for f in fits), "recipe": recipe.__dict__}
            for name, rows in per_seed.items()}


def load_transfer_data(names: list[str], options: EvalOptions) -> None:
    for name in names:
        for split in ("train", "eval"):
            load_image_set(name, split, options.data_dir, 1)


@register_suite("transfer", {"image": tuple(SETS)}, load_data=load_transfer_data)
def run_transfer(pretrained, names: list[str], options: EvalOptions, log=print) -> dict:
    """Top-1 transfer accuracy on five image sets (paper Table 2)."""
    recipe, results, spec = options.recipe(RECIPE), {}, pretrained.spec
    mixup = dict(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1) if options.mixup else None
    for name in names:
        train = load_image_set(name, "train", options.data_dir, options.max_train)
        test = load_image_set(name, "eval", options.data_dir, options.max_eval)
        if len(train.classes) != len(test.classes):
            raise ValueError(f"{name}: train has {len(train.classes)} classes, the eval split {len(test.classes)}")
        log(f" {name}: {len(train)} train, {len(test)} eval, {len(train.classes)} classes")
        results.update(classify_images(pretrained, train.with_transform(transforms(spec, True)),
                                       {name: test.with_transform(transforms(spec, False))}, len(train.classes),
                                       recipe, options, mixup, log))
    return {"tasks": results}
