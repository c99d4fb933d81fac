"""One core's cost of an image, stage by stage, for bench/perf/pipeline.py: what an item costs as the data makes it
and as a GPU run's loader sends it, the JPEG decode (PIL, torchvision, simplejpeg), the augmentation on PIL images
against on uint8 tensors, and a resized copy's path against the original's. CPU time of this one-thread process, so
that a neighbour's load is mostly left out; two paths compared in alternated rounds, as one pass each beside a
neighbour's load is noise."""
from __future__ import annotations

import copy
import time
from pathlib import Path

import numpy as np

STAGE_SEED = 0       # each stage draws the same augmentations whenever it runs


def image_stage_costs(data, folder: Path, n: int, sent) -> dict:
    """Milliseconds per image of one core's work, by stage: what an item costs as the data makes it (decode +
    training transform + stacking), the JPEG decode alone (PIL, as ImageFolder's loader does it; torchvision's
    libjpeg-turbo decode_jpeg), and the augmentation done instead on the decoded uint8 tensor by torchvision's v2
    transforms, normalisation left to the GPU, against the same crop and flip on the PIL image: what a faster image
    path could save, measured, not assumed. `item_pil_path`: the item as the data made it before it decoded image
    files with torchvision (the PIL decode, crop, flip and ToTensor), beside the item as it makes it now; and, in
    alternated rounds (host_against_sent), the batch as the host makes it against as a GPU run's loader makes it
    (`sent`, data.for_transfer(): uint8 pixels, the float work left to the device)."""
    import torchvision.transforms.v2 as V
    from PIL import Image
    from torchvision.io import decode_jpeg, read_file
    paths = sorted((folder / "train").rglob("*.jpg"))[:n]
    tensors = [decode_jpeg(read_file(str(p))) for p in paths]
    bicubic = V.InterpolationMode.BICUBIC
    crop = [V.RandomResizedCrop(data.image_size, interpolation=bicubic, antialias=True), V.RandomHorizontalFlip()]
    pil, v2 = V.Compose(crop), V.Compose(crop)       # v2 transforms take PIL images and tensors alike
    images = [Image.open(p).convert("RGB") for p in paths]
    pil_path = copy.copy(data)
    pil_path.files = None            # ImageNetData without its files: PIL decode and transform, the first path
    stages = {
        # pairs of images, timed per image (Mixup/CutMix, in DeiT's recipe, mixes a batch: it takes even sizes)
        "item_as_the_data_makes_it": lambda i: data.make_batch("train", np.array([i, (i + 1) % len(paths)]), i),
        "item_pil_path": lambda i: pil_path.make_batch("train", np.array([i, (i + 1) % len(paths)]), i),
        "decode_pil": lambda i: Image.open(paths[i]).convert("RGB"),
        "decode_torchvision": lambda i: decode_jpeg(read_file(str(paths[i]))),
        "augment_pil_crop_flip_only": lambda i: pil(images[i]),
        "augment_uint8_tensor_v2_no_normalise": lambda i: v2(tensors[i]),
    }
    out = {}
    for name, fn in stages.items():      # CPU time of this one-thread process: neighbours' load mostly left out
        fn(0)
        t0 = time.process_time()
        for i in range(len(paths)):
            fn(i)
        out[name] = (time.process_time() - t0) / len(paths) * 1e3 / (2 if name.startswith("item") else 1)
    out["transform_pil_path"] = out["item_pil_path"] - out["decode_pil"]
    out["images_per_s_per_core_from_item_cost"] = 1e3 / out["item_as_the_data_makes_it"]
    out["host_against_sent"] = host_against_sent(data, sent, len(paths))
    shown = ("it", "pil", "vision", "normalise", "only", "path")
    print("  images, CPU ms per image: " + ", ".join(f"{k} {v:.2f}" for k, v in out.items() if k.endswith(shown))
          + f" (one core: {out['images_per_s_per_core_from_item_cost']:.0f} images/s)", flush=True)
    return out


SENT_ROUNDS, SENT_BATCH = 8, 16     # alternated rounds of batches (even: Mixup/CutMix mixes pairs)


def alternated_rounds(first, second, n: int) -> dict:
    """CPU ms an image of training batches made by `first` against by `second`, in SENT_ROUNDS alternated rounds
    (which goes first alternates too) of SENT_BATCH images (items round-robin over the first `n`): medians, and the
    paired ratios (first / second), median and range. One pass of each beside a neighbour's load is noise: a
    20-image pass saw none of a 1.4x difference."""
    times = ([], [])
    for r in range(SENT_ROUNDS):
        idx = np.arange(r * SENT_BATCH, (r + 1) * SENT_BATCH) % n
        pair = [(times[0], first), (times[1], second)]
        for spent, d in pair if r % 2 == 0 else pair[::-1]:
            t0 = time.process_time()
            d.make_batch("train", idx, r)
            spent.append((time.process_time() - t0) / SENT_BATCH * 1e3)
    ratios = np.array(times[0]) / np.array(times[1])
    return {"rounds": SENT_ROUNDS, "batch": SENT_BATCH, "first_ms": float(np.median(times[0])),
            "second_ms": float(np.median(times[1])), "ratio_median": float(np.median(ratios)),
            "ratio_min": float(ratios.min()), "ratio_max": float(ratios.max())}


def host_against_sent(data, sent, n: int) -> dict:
    """The batch as the data makes it on the host against as a GPU run's loader sends it (`sent`: uint8 after the
    per-image draws, the float work left to the device), in alternated rounds."""
    rounds = alternated_rounds(data, sent, n)
    out = {"rounds": rounds["rounds"], "batch": rounds["batch"], "host_ms": rounds["first_ms"],
           "sent_ms": rounds["second_ms"], **{k: v for k, v in rounds.items() if k.startswith("ratio")}}
    print(f"  images, CPU ms per image in {SENT_ROUNDS} alternated rounds of {SENT_BATCH}: on the host "
          f"{out['host_ms']:.2f}, as a GPU loader sends it {out['sent_ms']:.2f} ({out['ratio_median']:.2f}x less; "
          f"paired {out['ratio_min']:.2f}-{out['ratio_max']:.2f})", flush=True)
    return out


def resized_copy_costs(current, copy_data, n: int) -> dict:
    """CPU ms per image of one core, the resized copy's uint8 path (`copy_data`, tasks/data/resized_copy.py and
    imagenet_fast.py) beside the current path on the original images (`current`), both as a GPU run's loader sends
    them: the whole item (pairs of images, as in image_stage_costs), and by stage: the copy's decode (simplejpeg,
    torchvision, PIL), the uint8 transform on the decoded tensor, and under DeiT's recipe its parts (timm's crop and
    flip on the tensor, RandAugment on the 224 crop with the round trip through PIL) against timm's crop and flip on
    the original PIL image (the current path's); then the two items in alternated rounds."""
    import torchvision.transforms.v2.functional as VF
    from PIL import Image
    from tasks.data.imagenet import decode_rgb
    from tasks.data.imagenet_fast import TimmCropOnTensor, decode_jpeg_rgb
    originals = [current.files["train"](i)[0] for i in range(n)]
    copies = [copy_data.files["train"](i)[0] for i in range(n)]
    tensors = [decode_jpeg_rgb(p) for p in copies]
    transform = copy_data.file_transform
    pairs = lambda i: np.array([i, (i + 1) % n])       # noqa: E731
    stages = {
        "item_current_path": lambda i: current.make_batch("train", pairs(i), i),
        "item_resized_copy_path": lambda i: copy_data.make_batch("train", pairs(i), i),
        "decode_simplejpeg_copy": lambda i: decode_jpeg_rgb(copies[i]),
        "decode_torchvision_copy": lambda i: decode_rgb(copies[i]),
        "decode_pil_copy": lambda i: Image.open(copies[i]).convert("RGB"),
        "uint8_transform_copy": lambda i: transform(tensors[i]),
    }
    secondary = getattr(transform, "secondary", None)
    if secondary is not None:                   # DeiT's recipe: the uint8 transform's parts, and the PIL crop's
        primary = transform.primary
        pil_primary = [t.crop if isinstance(t, TimmCropOnTensor) else t for t in primary]
        images = [Image.open(p).convert("RGB") for p in originals]
        crops = [VF.to_pil_image(apply(primary, t)) for t in tensors]
        stages.update({
            "crop_flip_tensor_copy": lambda i: apply(primary, tensors[i]),
            "randaugment_224_with_pil_round_trip": lambda i: VF.pil_to_tensor(secondary(crops[i])),
            "crop_flip_pil_original": lambda i: apply(pil_primary, images[i]),
        })
    out = time_stages(stages, n)
    out["images_per_s_per_core_current"] = 1e3 / out["item_current_path"]
    out["images_per_s_per_core_resized_copy"] = 1e3 / out["item_resized_copy_path"]
    out["current_against_copy"] = alternated_rounds(current, copy_data, n)
    r = out["current_against_copy"]
    print("  resized copy, CPU ms per image: " + ", ".join(f"{k} {v:.2f}" for k, v in out.items()
                                                           if isinstance(v, float) and not k.startswith("images"))
          + f"; in {SENT_ROUNDS} alternated rounds of {SENT_BATCH}: current {r['first_ms']:.2f}, resized copy "
          f"{r['second_ms']:.2f} ({r['ratio_median']:.2f}x less; paired {r['ratio_min']:.2f}-{r['ratio_max']:.2f})",
          flush=True)
    return out


def apply(transforms, image):
    for t in transforms:
        image = t(image)
    return image


def time_stages(stages: dict, n: int) -> dict:
    """CPU ms per image of each stage over images 0 .. n-1 (items make pairs: per image), after one warm-up call;
    CPU time of this one-thread process, so neighbours' load is mostly left out. Seeded, so each stage draws the
    same augmentations whenever it runs."""
    from tasks.data.image_recipe import seeded_global_rngs
    out = {}
    with seeded_global_rngs() as seed:
        for name, fn in stages.items():
            seed(STAGE_SEED)
            fn(0)
            t0 = time.process_time()
            for i in range(n):
                fn(i)
            out[name] = (time.process_time() - t0) / n * 1e3 / (2 if name.startswith("item") else 1)
    return out
