"""tasks/data/resized_copy.py: the one-time resized copy of an ImageFolder (shapes, kinds of file, the same items in
the same order, what load_imagenet_data makes of it) and its refusals (one `error:` line, nothing written)."""
import json
import os

import numpy as np
import pytest
import torch

from tasks.data import load_pretrain_data
from tasks.data.resized_copy import MANIFEST, main, read_manifest, resized_size, write_resized_copy

SHORT = 32


def _smooth(height, width, shift=0):
    y, x = np.mgrid[0:height, 0:width]
    return np.stack([128 + 100 * np.sin(x / (9.0 + shift)), 128 + 100 * np.cos(y / 7.0),
                     128 + 100 * np.sin((x + y) / 11.0)], -1).astype(np.uint8)


# name -> (height, width, how it is saved): larger than SHORT (resized) and not (copied or re-encoded), the kinds of
# file ImageNet's train set holds (RGB, gray and CMYK JPEGs, a PNG named .jpg)
KINDS = {"wide.jpg": (60, 80, "RGB"), "tall.JPEG": (90, 50, "RGB"), "gray.jpg": (64, 48, "L"),
         "cmyk.jpg": (48, 64, "CMYK"), "png.jpg": (40, 40, "PNG"), "small.jpg": (24, 30, "RGB"),
         "small_gray.jpg": (20, 28, "L")}
DONE = {"wide.jpg": "resized", "tall.JPEG": "resized", "gray.jpg": "resized", "cmyk.jpg": "resized",
        "png.jpg": "resized", "small.jpg": "copied", "small_gray.jpg": "re-encoded"}


@pytest.fixture
def folder(tmp_path):
    from PIL import Image
    root = tmp_path / "original"
    for split in ("train", "val"):
        for c, cls in enumerate(("cat", "dog")):
            (root / split / cls).mkdir(parents=True)
            for k, (name, (h, w, mode)) in enumerate(KINDS.items()):
                image = Image.fromarray(_smooth(h, w, shift=k + c))
                if mode == "PNG":
                    image.save(root / split / cls / name, format="PNG")
                else:
                    image.convert(mode).save(root / split / cls / name, quality=95)
    return root


def test_the_copy_keeps_every_item_in_order_with_its_short_side_brought_down(folder, tmp_path):
    """Every file at its relative path, an RGB JPEG of the size torchvision's Resize(SHORT) gives (none enlarged),
    pixels within a few levels of PIL's bicubic resize of the original (the DCT-domain downscale at decode comes
    first); a small RGB JPEG byte for byte; the manifest; and the copy read as ImageNet: the same items and labels
    in the same order, training batches through the resized copy's path."""
    import simplejpeg
    from PIL import Image
    dest = tmp_path / "copy"
    manifest = write_resized_copy(folder, dest, short_side=SHORT, quality=95)
    assert read_manifest(dest) == manifest and read_manifest(folder) is None
    assert manifest["images"] == {"train": 2 * len(KINDS), "val": 2 * len(KINDS)}
    assert {k: manifest[k] for k in ("resized", "re-encoded", "copied")} == {
        kind: 4 * list(DONE.values()).count(kind) for kind in ("resized", "re-encoded", "copied")}
    originals = sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file())
    assert sorted(p.relative_to(dest) for p in dest.rglob("*") if p.is_file() and p.name != MANIFEST) == originals
    for rel in originals:
        (h, w, _), data = KINDS[rel.name], (dest / rel).read_bytes()
        pixels = simplejpeg.decode_jpeg(data, colorspace="RGB")
        assert simplejpeg.decode_jpeg_header(data)[2] == "YCbCr"
        want = resized_size(h, w, SHORT) if min(h, w) > SHORT else (h, w)
        assert pixels.shape == (*want, 3), rel
        if DONE[rel.name] == "copied":
            assert data == (folder / rel).read_bytes()
        with Image.open(folder / rel) as original:
            reference = np.asarray(original.convert("RGB").resize(want[::-1], Image.BICUBIC), dtype=np.float64)
        assert np.abs(pixels - reference).mean() < 4, rel        # levels of 255: JPEG at 95 and the DCT downscale
    original, copy = (load_pretrain_data("imagenet", "image", path=str(p), image_size=16) for p in (folder, dest))
    assert copy.resized_copy == manifest and original.resized_copy is None
    assert [os.path.relpath(copy.files["train"](i)[0], dest) for i in range(copy.n_train)] == \
        [os.path.relpath(original.files["train"](i)[0], folder) for i in range(original.n_train)]
    assert torch.equal(copy.train_batch(0, 4, 0)["labels"], original.train_batch(0, 4, 0)["labels"])
    assert copy.train_batch(0, 4, 0)["pixel_values"].shape == (4, 3, 16, 16)


def _nothing_written(tmp_path, before):
    return sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("case", ["no source", "source is a file", "no val", "no class folders", "dest not empty",
                                  "dest inside source", "source inside dest", "dest's folder missing",
                                  "quality 0", "short side 8"])
def test_bad_paths_and_options_are_refused_in_one_line_before_anything_is_written(folder, tmp_path, capsys, case):
    source, dest, options = folder, tmp_path / "copy", []
    if case == "no source":
        source = tmp_path / "nowhere"
    elif case == "source is a file":
        source = folder / "train" / "cat" / "wide.jpg"
    elif case == "no val":
        os.rename(folder / "val", tmp_path / "elsewhere")
    elif case == "no class folders":
        for cls in ("cat", "dog"):
            for f in (folder / "val" / cls).iterdir():
                f.unlink()
            (folder / "val" / cls).rmdir()
    elif case == "dest not empty":
        dest.mkdir()
        (dest / "keep.txt").write_text("mine")
    elif case == "dest inside source":
        dest = folder / "copy"
    elif case == "source inside dest":
        dest = tmp_path
    elif case == "dest's folder missing":
        dest = tmp_path / "missing" / "copy"
    elif case == "quality 0":
        options = ["--quality", "0"]
    elif case == "short side 8":
        options = ["--short-side", "8"]
    before = sorted(tmp_path.rglob("*"))
    code = main([str(source), str(dest), "--workers", "1", *options])
    err = capsys.readouterr().err
    assert code != 0 and err.startswith("error: ") and err.count("\n") == 1, err
    assert _nothing_written(tmp_path, before)


def test_an_image_that_cannot_be_decoded_stops_the_copy_and_leaves_nothing(folder, tmp_path, capsys):
    """A broken file found half-way: one `error:` line naming it, no DEST, no hidden partial folder left."""
    (folder / "train" / "dog" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a JPEG")
    before = sorted(tmp_path.rglob("*"))
    assert main([str(folder), str(tmp_path / "copy"), "--workers", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "broken.jpg" in err and err.count("\n") == 1
    assert _nothing_written(tmp_path, before)


def test_an_empty_destination_folder_is_filled_and_the_command_says_what_it_did(folder, tmp_path, capsys):
    dest = tmp_path / "copy"
    dest.mkdir()
    assert main([str(folder), str(dest), "--short-side", str(SHORT), "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"wrote {dest}: 14 training and 14 held-out images") and out.count("\n") == 1
    assert json.loads((dest / MANIFEST).read_text())["short_side"] == SHORT
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
