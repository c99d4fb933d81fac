"""A one-time, resized copy of an ImageFolder (ImageNet's train/ and val/), which training decodes faster:

    python -m tasks.data.resized_copy SOURCE DEST [--short-side 256] [--quality 90] [--workers N]

Every image whose short side is longer than `short_side` is brought down to it (aspect kept, bicubic, the size
torchvision's Resize(short_side) gives) and written as an RGB JPEG; a smaller RGB JPEG is copied byte for byte, and
any other small file (gray, CMYK, PNG) re-encoded as one. 256 is the size DeiT's evaluation resizes to (224 / 0.875)
and the copy fast-loading pipelines (FFCV) keep: a 500 x 375 ImageNet JPEG becomes 341 x 256, half the pixels to
decode, and every 224 crop of the training recipe still comes from at least 224 source pixels where the crop spans
the short side. Decoding uses libjpeg-turbo's DCT-domain downscaling (simplejpeg's min_height / min_width: the
smallest scale M/8 whose short side stays >= short_side), so a large original costs a fraction of a full decode.

The copy keeps every file's relative path, so ImageFolder indexes the same images in the same order (item i of the
copy is item i of the original), and carries a manifest (MANIFEST) which `load_imagenet_data` reads: training
batches from such a copy take the uint8 path of tasks/data/imagenet_fast.py under DeiT's recipe too. Bad paths are
refused in one `error:` line before anything is written; the copy is built in a hidden sibling folder and renamed to
DEST only when complete, so DEST never holds half a copy (a failure removes the sibling)."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

MANIFEST = "growbench-resized.json"     # in DEST's top level: marks a finished copy, and says how it was made
FORMAT = "growbench resized ImageFolder v1"
SPLITS = ("train", "val")
MIN_SHORT_SIDE = 16


def read_manifest(root) -> dict | None:
    """The manifest of a copy this module wrote at `root`, or None for any other folder."""
    path = Path(root) / MANIFEST
    if not path.is_file():
        return None
    manifest = json.loads(path.read_text())
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{path}: not a manifest this version writes (format {manifest.get('format')!r}, "
                         f"expected {FORMAT!r}); convert the original folder again")
    return manifest


def check_paths(source, dest) -> tuple[Path, Path]:
    """SOURCE and DEST resolved, or ValueError (one line) when the copy cannot be made: SOURCE must be an ImageFolder
    root with train/ and val/, DEST a new (or empty) folder in an existing, writable folder, neither inside the
    other."""
    src, dst = Path(source).expanduser().resolve(), Path(dest).expanduser().resolve()
    if not src.is_dir():
        raise ValueError(f"source {src} is not a directory (an ImageFolder root holding train/ and val/)")
    missing = [s for s in SPLITS if not (src / s).is_dir()]
    if missing:
        raise ValueError(f"source {src} has no {' or '.join(s + '/' for s in missing)} (ImageFolder layout: "
                         "train/<class>/*.jpg and val/<class>/*.jpg)")
    if dst == src or src in dst.parents or dst in src.parents:
        raise ValueError(f"destination {dst} and source {src} must be apart (neither inside the other)")
    if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
        raise ValueError(f"destination {dst} exists and is not an empty directory; remove it or pick another")
    if not dst.parent.is_dir():
        raise ValueError(f"destination's folder {dst.parent} does not exist")
    if not os.access(dst.parent, os.W_OK | os.X_OK):
        raise ValueError(f"destination's folder {dst.parent} is not writable")
    return src, dst


def list_images(src: Path) -> dict[str, list[str]]:
    """split -> image paths relative to `src`, as ImageFolder finds them; ValueError when a split holds none or the
    splits' classes differ (what load_imagenet_data would refuse)."""
    from torchvision.datasets import ImageFolder
    found, classes = {}, {}
    for split in SPLITS:
        try:
            folder = ImageFolder(str(src / split))
        except (FileNotFoundError, RuntimeError) as e:        # no class folder, or a class without images
            raise ValueError(f"source {src / split}: {' '.join(str(e).split())}") from None
        found[split] = [os.path.relpath(path, src) for path, _ in folder.samples]
        classes[split] = folder.classes
    if classes["train"] != classes["val"]:
        raise ValueError(f"source {src}: train/ and val/ have different class folders")
    return found


def resized_size(height: int, width: int, short_side: int) -> tuple[int, int]:
    """(height, width) with the short side at `short_side`, the long one as torchvision's Resize(short_side) makes
    it."""
    if height <= width:
        return short_side, int(short_side * width / height)
    return int(short_side * height / width), short_side


def convert_file(source: str, dest: str, short_side: int, quality: int) -> str:
    """One image into the copy; returns what was done: "resized", "re-encoded" (small, but not an RGB JPEG) or
    "copied"."""
    import numpy as np
    import simplejpeg
    from PIL import Image
    data = Path(source).read_bytes()
    try:
        height, width, colour, _ = simplejpeg.decode_jpeg_header(data)
    except ValueError:                      # not a JPEG (a PNG, even one named .jpg): PIL reads it
        colour = None
    if colour == "YCbCr" and min(height, width) <= short_side:
        shutil.copyfile(source, dest)       # already what the copy holds: no generation lost
        return "copied"
    box = None
    try:
        if colour in ("YCbCr", "Gray"):     # libjpeg-turbo converts these to RGB itself, downscaling in the DCT
            # by the smallest M/8 whose decoded short side exceeds short_side: libjpeg rounds the decoded size up
            # (ceil(side x M/8)), so the last row or column is partly padding and the content spans side x M/8
            at_least = {"min_height" if height <= width else "min_width": short_side + 1}
            pixels = simplejpeg.decode_jpeg(data, colorspace="RGB", **at_least)
            eighths = round(8 * max(pixels.shape[:2]) / max(height, width))
            box = (0, 0, width * eighths / 8, height * eighths / 8) if eighths != 8 else None
        else:                               # CMYK / YCCK JPEGs and other formats: as ImageFolder's loader reads them
            with Image.open(source) as image:
                (width, height), pixels = image.size, np.asarray(image.convert("RGB"))
    except (ValueError, OSError) as e:
        raise ValueError(f"{source}: cannot decode ({' '.join(str(e).split())})") from None
    resized = min(height, width) > short_side
    # the size Resize(short_side) gives the original, from the decoded content's exact extent
    want = resized_size(height, width, short_side) if resized else (height, width)
    if pixels.shape[:2] != want or box is not None:
        pixels = np.asarray(Image.fromarray(pixels).resize(want[::-1], Image.BICUBIC, box=box))
    Path(dest).write_bytes(simplejpeg.encode_jpeg(np.ascontiguousarray(pixels), quality=quality, colorspace="RGB",
                                                  colorsubsampling="420"))
    return "resized" if resized else "re-encoded"


def _convert(job):
    return convert_file(*job)


def write_resized_copy(source, dest, short_side: int = 256, quality: int = 90, workers: int = 1) -> dict:
    """The copy (module docstring) of ImageFolder root `source` at `dest`; returns its manifest."""
    if isinstance(short_side, bool) or not isinstance(short_side, int) or short_side < MIN_SHORT_SIDE:
        raise ValueError(f"short side must be an integer >= {MIN_SHORT_SIDE} pixels, got {short_side!r}")
    if isinstance(quality, bool) or not isinstance(quality, int) or not 1 <= quality <= 100:
        raise ValueError(f"JPEG quality must be an integer in 1 .. 100, got {quality!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    src, dst = check_paths(source, dest)
    images = list_images(src)
    partial = dst.parent / f".{dst.name}.partial-{os.getpid()}"
    t0 = time.perf_counter()
    try:
        jobs = [(str(src / rel), str(partial / rel), short_side, quality) for paths in images.values() for rel in paths]
        for folder in sorted({os.path.dirname(job[1]) for job in jobs}):
            os.makedirs(folder, exist_ok=True)
        if workers == 1:
            done = [_convert(job) for job in jobs]
        else:
            from concurrent.futures import ProcessPoolExecutor
            with ProcessPoolExecutor(workers) as pool:
                done = list(pool.map(_convert, jobs, chunksize=64))
        manifest = {"format": FORMAT, "source": str(src), "short_side": short_side, "quality": quality,
                    "images": {split: len(paths) for split, paths in images.items()},
                    **{kind: done.count(kind) for kind in ("resized", "re-encoded", "copied")},
                    "seconds": round(time.perf_counter() - t0, 1)}
        (partial / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        os.replace(partial, dst)            # an empty DEST is replaced; DEST appears complete or not at all
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return manifest


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse refusing in one `error: ...` line and exit 2, as runs/cli.py's parser of the same name does (tasks/
    may not import runs/: DESIGN.md §1)."""

    def error(self, message):
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def main(argv=None) -> int:
    ap = OneLineArgumentParser(prog="python -m tasks.data.resized_copy", description=__doc__.splitlines()[0])
    ap.add_argument("source", help="ImageFolder root holding train/ and val/ (e.g. ImageNet)")
    ap.add_argument("dest", help="new folder for the copy (must not exist, or be empty)")
    ap.add_argument("--short-side", type=int, default=256, help="short side of the copy's images (default 256)")
    ap.add_argument("--quality", type=int, default=90, help="JPEG quality of the images written (default 90)")
    ap.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                    else (os.cpu_count() or 1), help="processes converting images (default: the cores here)")
    args = ap.parse_args(argv)
    try:
        manifest = write_resized_copy(args.source, args.dest, args.short_side, args.quality, args.workers)
    except (ValueError, OSError) as e:
        text = f"{e.filename}: {e.strerror}" if isinstance(e, OSError) and e.strerror else str(e)
        print("error: " + " ".join(text.split()), file=sys.stderr)
        return 1
    print(f"wrote {args.dest}: {manifest['images']['train']:,} training and {manifest['images']['val']:,} held-out "
          f"images ({manifest['resized']:,} resized, {manifest['re-encoded']:,} re-encoded, {manifest['copied']:,} "
          f"copied) in {manifest['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
