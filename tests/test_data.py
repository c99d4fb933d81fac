"""Tests of tasks/data: tokenizers, deterministic batches, masking, held-out splits, local-file paths.

The PTB corpora are built once per session in a temporary cache (small vocabularies keep tokenizer
training to a second or two); everything else uses tiny fixtures written to tmp_path. No hub access.
"""
import gzip
import os
import struct

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import treebank  # noqa: E402

from helpers import write_image_folder  # noqa: E402
from tasks.data import PretrainData, batch_indices, load_pretrain_data  # noqa: E402
from tasks.data import text as text_mod  # noqa: E402
from tasks.data import imagenet as imagenet_mod  # noqa: E402
from tasks.data import vision as vision_mod  # noqa: E402

SEQ, VOCAB = 64, 1000


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("gbcache")


@pytest.fixture(scope="session")
def ptb_mlm(cache):
    return load_pretrain_data("ptb", "mlm", seq_len=SEQ, vocab_size=VOCAB, tokenizer="wordpiece", cache_dir=str(cache))


@pytest.fixture(scope="session")
def ptb_clm(cache):
    return load_pretrain_data("ptb", "clm", seq_len=SEQ, vocab_size=VOCAB, tokenizer="bytelevel_bpe", cache_dir=str(cache))


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ------------------------------------------------------------------------------------ tokenizers

def test_tokenizer_trained_cached_and_round_trips(ptb_mlm, cache, monkeypatch):
    file = cache / f"ptb-wordpiece-{VOCAB}" / "tokenizer.json"
    assert file.exists() and 0 < len(ptb_mlm.tokenizer) <= VOCAB and ptb_mlm.vocab_size == len(ptb_mlm.tokenizer)
    mtime = file.stat().st_mtime_ns

    def no_training(*args, **kwargs):
        raise AssertionError("tokenizer retrained although it is cached")
    monkeypatch.setattr(text_mod, "_train_tokenizer", no_training)
    again = load_pretrain_data("ptb", "mlm", seq_len=SEQ, vocab_size=VOCAB, tokenizer="wordpiece", cache_dir=str(cache))
    assert file.stat().st_mtime_ns == mtime and again.tokenizer.get_vocab() == ptb_mlm.tokenizer.get_vocab()
    tok = ptb_mlm.tokenizer
    sentence = "the company said it expects higher earnings this year"
    enc = tok(sentence)["input_ids"]
    assert enc[0] == tok.cls_token_id and enc[-1] == tok.sep_token_id  # BERT-style post-processing
    assert tok.decode(enc, skip_special_tokens=True) == sentence
    for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"):
        assert t in tok.all_special_tokens


def test_bytelevel_tokenizer_special_tokens_and_round_trip(ptb_clm):
    tok = ptb_clm.tokenizer
    assert len(tok) <= VOCAB and tok.eos_token == tok.pad_token == "<|endoftext|>"
    sentence = " the stock rose N % to $ N a share in heavy trading"
    assert tok.decode(tok(sentence)["input_ids"]) == sentence  # byte-level BPE is lossless
    assert tok(sentence)["input_ids"][-1] != tok.eos_token_id  # GPT-2 adds no special tokens


def test_tokenizer_trains_on_train_split_only(tmp_path, monkeypatch):
    seen = {}

    class Stop(Exception):
        pass

    def spy(kind, vocab_size, docs):
        seen["docs"] = list(docs)
        raise Stop
    monkeypatch.setattr(text_mod, "_train_tokenizer", spy)
    with pytest.raises(Stop):
        load_pretrain_data("ptb", "mlm", vocab_size=500, tokenizer="wordpiece", cache_dir=str(tmp_path))
    train = [line.strip() for line in treebank.penn["train"].split("\n") if line.strip()]
    assert seen["docs"] == train


@pytest.mark.parametrize("kind", ["wordpiece", "bytelevel_bpe"])
def test_tokenizer_training_is_reproducible(kind):
    # Two machines training the same tokenizer must agree on every id, or cached runs would not transfer.
    lines = [line.strip() for line in treebank.penn["train"].split("\n")[:3000] if line.strip()]
    first, second = (text_mod._train_tokenizer(kind, 300, iter(lines)) for _ in range(2))
    assert first.to_str() == second.to_str() and first.get_vocab_size() <= 300


# -------------------------------------------------------------------------------- text batches

def test_train_batch_is_a_pure_function_of_seed_and_step(ptb_mlm, cache):
    rng_state = torch.get_rng_state()
    b = ptb_mlm.train_batch(3, 8, seed=0)
    ptb_mlm.train_batch(4, 8, seed=0), ptb_mlm.train_batch(0, 16, seed=7)  # call history must not matter
    assert _same(b, ptb_mlm.train_batch(3, 8, seed=0))
    assert torch.equal(rng_state, torch.get_rng_state())  # the global RNG is untouched
    assert not torch.equal(b["input_ids"], ptb_mlm.train_batch(4, 8, seed=0)["input_ids"])
    assert not torch.equal(b["input_ids"], ptb_mlm.train_batch(3, 8, seed=1)["input_ids"])
    # A freshly loaded object (what a resumed run builds) gives the very same batch.
    fresh = load_pretrain_data("ptb", "mlm", seq_len=SEQ, vocab_size=VOCAB, tokenizer="wordpiece", cache_dir=str(cache))
    assert _same(b, fresh.train_batch(3, 8, seed=0))


def test_mlm_batch_is_the_same_in_a_worker_process(ptb_mlm, monkeypatch):
    # The HF collator seeds by worker id (or refuses) outside the main process; ours must not care.
    import transformers.data.data_collator as dc
    expected = ptb_mlm.train_batch(2, 4, seed=0)

    class Worker:
        name = "SpawnPoolWorker-1"
    monkeypatch.setattr(dc.mp, "current_process", lambda: Worker())
    assert _same(expected, ptb_mlm.train_batch(2, 4, seed=0))


def test_mlm_batch_masking(ptb_mlm):
    B, step, seed = 32, 5, 3
    batch = ptb_mlm.train_batch(step, B, seed)
    original = ptb_mlm.blocks("train", batch_indices(ptb_mlm.n_train, step, B, seed))
    ids, labels = batch["input_ids"], batch["labels"]
    for t in (ids, labels):
        assert t.shape == (B, SEQ) and t.dtype == torch.long
    # packed blocks, never padded: no attention mask (SDPA's flash kernel, no per-forward mask check on a GPU)
    assert "attention_mask" not in batch and ptb_mlm.units(batch) == B * SEQ == ptb_mlm.units_per_batch(B)
    tok = ptb_mlm.tokenizer
    assert bool((original[:, 0] == tok.cls_token_id).all()) and bool((original[:, -1] == tok.sep_token_id).all())
    selected = labels != -100
    assert torch.equal(labels[selected], original[selected])  # labels are the original tokens...
    assert torch.equal(ids[~selected], original[~selected])  # ...and unselected inputs are unchanged
    special = torch.isin(original, torch.tensor(tok.all_special_ids))
    assert not bool((selected & special).any())
    rate = selected.sum().item() / (~special).sum().item()
    assert 0.10 < rate < 0.20, rate
    to_mask = (ids[selected] == tok.mask_token_id).float().mean().item()
    assert 0.6 < to_mask < 0.95, to_mask  # 80% of selected become [MASK]


def test_clm_batch(ptb_clm):
    batch = ptb_clm.train_batch(2, 4, seed=0)
    assert set(batch) == {"input_ids", "labels"}
    assert batch["input_ids"].shape == (4, SEQ) and batch["input_ids"].dtype == torch.long
    assert torch.equal(batch["input_ids"], batch["labels"])
    assert batch["labels"].data_ptr() != batch["input_ids"].data_ptr()  # a clone, safe to modify
    assert int(batch["input_ids"].max()) < ptb_clm.vocab_size
    assert ptb_clm.kind == "text" and ptb_clm.objective == "clm" and isinstance(ptb_clm, PretrainData)


def test_epoch_walk_is_a_permutation():
    n, B = 10, 3
    idx = np.concatenate([batch_indices(n, s, B, seed=0) for s in range(4)])
    assert sorted(idx[:n]) == list(range(n))  # epoch 0 visits every item exactly once
    nxt = np.concatenate([batch_indices(n, s, 5, seed=0) for s in range(2, 4)])  # positions 10..19: epoch 1
    assert sorted(nxt) == list(range(n)) and not np.array_equal(nxt, idx[:n])  # reshuffled per epoch
    assert not np.array_equal(idx[:n], np.concatenate([batch_indices(n, s, 5, seed=1) for s in range(2)]))
    assert sorted(batch_indices(n, 0, 25, seed=0)[:20] % n) == sorted(list(range(n)) * 2)  # B > n spans epochs


def test_eval_batches_fixed_and_from_the_valid_split(ptb_mlm, ptb_clm):
    first, second = ptb_mlm.eval_batches(8, 3), ptb_mlm.eval_batches(8, 3)
    assert len(first) == 3 and all(_same(a, b) for a, b in zip(first, second))
    assert all((b["labels"] != -100).any() for b in first)
    # Whole sentences inside the eval blocks are validation sentences, not training ones.
    tok = ptb_clm.tokenizer
    valid = {line.strip() for line in treebank.penn["valid"].split("\n")}
    train = {line.strip() for line in treebank.penn["train"].split("\n")}
    sentences = []
    for batch in ptb_clm.eval_batches(8, 6):
        for row in batch["input_ids"]:
            parts = tok.decode(row).split(tok.eos_token)[1:-1]  # drop the partial first/last pieces
            sentences += [p.strip() for p in parts if len(p.split()) >= 8]
    assert len(sentences) >= 10
    assert all(s in valid for s in sentences) and not any(s in train for s in sentences)


# ------------------------------------------------------------------------------- local text files

def test_local_text_corpus_and_saved_tokenizer(ptb_mlm, tmp_path):
    lines = [line.strip() for line in treebank.penn["train"].split("\n")[:1500] if line.strip()]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "train.txt").write_text("\n".join(lines[:1300]) + "\n")
    (corpus / "valid.txt").write_text("\n".join(lines[1300:]) + "\n")
    (corpus / "wiki.test.tokens").write_text("xylophonequartet\n" * 50)  # a test split: never trained on
    wiki = load_pretrain_data("wikipedia", "mlm", seq_len=32, vocab_size=300, tokenizer="bytelevel_bpe",
                              path=str(corpus), cache_dir=str(tmp_path / "cache"))
    assert 0 < wiki.vocab_size <= 300 and wiki.tokenizer.mask_token == "<mask>"
    b = wiki.train_batch(0, 4, seed=0)
    assert b["input_ids"].shape == (4, 32) and bool((b["input_ids"][:, 0] == wiki.tokenizer.cls_token_id).all())
    assert wiki.n_valid > 0 and len(wiki.eval_batches(4, 1)) == 1
    train_text = wiki.tokenizer.decode(wiki.ids["train"].tolist())
    assert lines[5] in train_text and lines[1400] not in train_text and "xylophonequartet" not in train_text

    # A saved tokenizer directory goes through AutoTokenizer (the code path of hub names).
    saved = tmp_path / "saved-tokenizer"
    ptb_mlm.tokenizer.save_pretrained(saved)
    single = tmp_path / "c4.txt"
    single.write_text("\n".join(lines) + "\n")  # one file: the last 1% of lines is held out
    c4 = load_pretrain_data("c4", "clm", seq_len=32, tokenizer=str(saved), path=str(single),
                            cache_dir=str(tmp_path / "cache"))
    assert c4.vocab_size == len(ptb_mlm.tokenizer) and c4.tokenizer.get_vocab() == ptb_mlm.tokenizer.get_vocab()
    b = c4.train_batch(1, 4, seed=0)
    assert b["input_ids"].shape == (4, 32) and torch.equal(b["input_ids"], b["labels"])
    assert c4.n_valid >= 1 and c4.n_train > 10 * c4.n_valid


# ---------------------------------------------------------------------------------------- vision

def test_digits_batches_and_held_out_split():
    data = load_pretrain_data("digits", "image")
    assert (data.kind, data.num_classes, data.image_size, data.in_chans) == ("image", 10, 8, 1)
    b = data.train_batch(0, 16, seed=0)
    assert b["pixel_values"].shape == (16, 1, 8, 8) and b["pixel_values"].dtype == torch.float32
    assert b["labels"].dtype == torch.long and 0 <= int(b["labels"].min()) and int(b["labels"].max()) <= 9
    assert data.units(b) == 16 and _same(b, data.train_batch(0, 16, seed=0))
    epoch = data.train_batch(0, data.n_train, seed=0)["pixel_values"]  # step 0 at B = n_train: one full epoch
    train = {x.numpy().tobytes() for x in epoch}
    held_out = [x.numpy().tobytes() for b in data.eval_batches(100, 10) for x in b["pixel_values"]]
    assert len(train) == data.n_train and len(held_out) == data.n_valid == 1797 // 5
    assert train.isdisjoint(held_out)
    resized = load_pretrain_data("digits", "image", image_size=16).train_batch(0, 2, seed=0)
    assert resized["pixel_values"].shape == (2, 1, 16, 16)


def test_fashion_mnist_missing_path_says_where_and_how(tmp_path):
    missing = tmp_path / "no-such-dir"
    with pytest.raises(FileNotFoundError) as err:
        load_pretrain_data("fashion_mnist", "image", path=str(missing))
    msg = str(err.value)
    assert str(missing) in msg and "dataset-fashion-mnist" in msg and "\n" not in msg


def test_missing_fashion_mnist_package_is_refused_before_a_run_or_a_sweep_starts(tmp_path, monkeypatch, capsys):
    """Without the Debian package a DeiT sweep started every run and failed each with a traceback (8 of them for
    CaiT); the task's data check now looks where the package puts the files, so the sweep stops once, in one
    line, and writes nothing."""
    from bench.sweeps import main as sweep
    from tasks import get_task
    monkeypatch.setattr(vision_mod, "FASHION_MNIST_DIR", str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist"):
        get_task("deit_s_b", "mini").check_data()
    get_task("deit_s_b", "tiny").check_data()          # the embedded digits need no package
    out = tmp_path / "runs"
    assert sweep(["deit", "--seeds", "0", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "dataset-fashion-mnist" in err[0], err
    assert not out.exists()


def _write_idx(path, array):
    with gzip.open(path, "wb") as f:
        f.write(b"\x00\x00\x08" + bytes([array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape))
        f.write(array.astype(np.uint8).tobytes())


def test_fashion_mnist_reads_idx_files(tmp_path):
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 30), ("t10k", 10)):
        _write_idx(tmp_path / f"{prefix}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28)))
        _write_idx(tmp_path / f"{prefix}-labels-idx1-ubyte.gz", np.arange(n) % 10)
    data = load_pretrain_data("fashion_mnist", "image", path=str(tmp_path))
    assert (data.n_train, data.n_valid, data.image_size, data.num_classes) == (30, 10, 28, 10)
    b = data.train_batch(0, 8, seed=0)
    assert b["pixel_values"].shape == (8, 1, 28, 28)
    assert data.eval_batches(10, 1)[0]["labels"].tolist() == list(range(10))  # t10k files are the held-out split


@pytest.mark.skipif(not os.path.isdir(vision_mod.FASHION_MNIST_DIR), reason="dataset-fashion-mnist not installed")
def test_fashion_mnist_debian_package():
    data = load_pretrain_data("fashion_mnist", "image", image_size=32)
    assert (data.n_train, data.n_valid, data.num_classes, data.image_size) == (60_000, 10_000, 10, 32)
    b = data.train_batch(0, 8, seed=0)
    assert b["pixel_values"].shape == (8, 1, 32, 32) and abs(float(b["pixel_values"].mean())) < 1.0


def test_imagenet_folder_batches_are_deterministic(tmp_path):
    write_image_folder(tmp_path, ("cat", "dog"), {"train": 3, "val": 3}, (40, 48))
    data = load_pretrain_data("imagenet", "image", path=str(tmp_path), image_size=32)
    assert (data.num_classes, data.in_chans, data.n_train, data.n_valid) == (2, 3, 6, 6)
    state = torch.get_rng_state()
    b = data.train_batch(1, 4, seed=0)
    assert b["pixel_values"].shape == (4, 3, 32, 32) and set(b["labels"].tolist()) <= {0, 1}
    assert _same(b, data.train_batch(1, 4, seed=0)) and torch.equal(state, torch.get_rng_state())
    assert not torch.equal(b["pixel_values"], data.train_batch(1, 4, seed=5)["pixel_values"])
    assert _same(data.eval_batches(4, 2)[1], data.eval_batches(4, 2)[1])


def test_bad_source_or_objective():
    with pytest.raises(ValueError, match="unknown data source"):
        load_pretrain_data("ptbb", "mlm")
    with pytest.raises(ValueError, match="does not fit"):
        load_pretrain_data("digits", "mlm")


def test_a_vocabulary_below_the_alphabet_is_refused_before_the_tokenizer_is_cached(tmp_path):
    """A trained tokenizer cannot be smaller than its corpus's alphabet plus the special tokens: the request is
    refused in one line naming the size it needs, and no tokenizer file is cached (it was, before the run's refusal)."""
    from tasks.data import load_pretrain_data
    with pytest.raises(ValueError, match=r"vocab 20 is smaller than the \d+ tokens a wordpiece tokenizer"):
        load_pretrain_data("ptb", "mlm", seq_len=16, vocab_size=20, tokenizer="wordpiece", cache_dir=str(tmp_path))
    assert not any(tmp_path.rglob("tokenizer.json"))


def _smooth_image_folder(root, size=(60, 80)):
    """Smooth colour fields (where resampling methods agree to within a few levels, unlike noise) as RGB, gray and
    CMYK JPEGs and a PNG named .jpg: the kinds ImageNet's train set holds."""
    from PIL import Image
    y, x = np.mgrid[0:size[0], 0:size[1]]
    for split in ("train", "val"):
        for c, cls in enumerate(("cat", "dog")):
            (root / split / cls).mkdir(parents=True)
            for k, mode in enumerate(("RGB", "L", "CMYK", "PNG")):
                rgb = np.stack([128 + 100 * np.sin(x / (7.0 + k + c)), 128 + 100 * np.cos(y / (5.0 + k)),
                                (x + y) * (1.5 + c) % 256], -1).astype(np.uint8)
                image, path = Image.fromarray(rgb), root / split / cls / f"{k}.jpg"
                if mode == "PNG":
                    image.save(path, format="PNG")
                else:
                    image.convert(mode).save(path, quality=95)
    return root


def test_imagenet_training_batches_from_files_match_the_pil_path(tmp_path, monkeypatch):
    """Training batches of an ImageFolder decode with torchvision and crop/flip the uint8 tensor (issue 42: 2.2x
    cheaper a image than PIL + ToTensor): the same crops and flips as the PIL path, pixels within resampling error,
    every kind of file decoded as PIL decodes it; DeiT's per-image recipe (timm, PIL only) keeps the PIL path."""
    import copy

    from torchvision.transforms.v2.functional import pil_to_tensor
    from PIL import Image
    root = _smooth_image_folder(tmp_path)
    for path in sorted((root / "train").rglob("*.jpg")):
        assert torch.equal(imagenet_mod.decode_rgb(str(path)), pil_to_tensor(Image.open(path).convert("RGB")))
    data = load_pretrain_data("imagenet", "image", path=str(root), image_size=32)
    pil = copy.copy(data)
    pil.files = None
    calls = []
    real = imagenet_mod.decode_rgb
    monkeypatch.setattr(imagenet_mod, "decode_rgb", lambda p: calls.append(p) or real(p))
    for step in range(3):
        fast, slow = data.train_batch(step, 8, seed=0), pil.train_batch(step, 8, seed=0)
        assert torch.equal(fast["labels"], slow["labels"]) and fast["pixel_values"].dtype == torch.float32
        gap = (fast["pixel_values"] - slow["pixel_values"]).abs()
        other = (fast["pixel_values"] - pil.train_batch(step, 8, seed=1)["pixel_values"]).abs()
        # normalised units: one level of 255 is 0.017; the same crops, resampled by PIL or by torch
        assert float(gap.max()) < 0.05 and float(gap.mean()) < 0.005 and float(other.mean()) > 0.5
    assert len(calls) == 3 * 8
    calls.clear()
    assert _same(data.eval_batches(4, 1)[0], pil.eval_batches(4, 1)[0]) and not calls   # held out: PIL path
    deit = data.with_augmentation(DEIT_PER_IMAGE)
    deit.train_batch(0, 8, seed=0)
    assert not calls
    # the float conversion and normalisation of the stacked uint8 crops give the floats converting each crop gives,
    # and those ToTensor + Normalize give the crop as a PIL image (what the PIL path, and timm's transform, do)
    import torchvision.transforms as T
    crops = torch.stack([data.tensor_crop(real(str(p))) for p in sorted((root / "train").rglob("*.jpg"))])
    assert crops.dtype == torch.uint8
    assert torch.equal(data.to_float(crops), torch.stack([data.to_float(c) for c in crops]))
    pil_float = T.Compose([T.ToTensor(), T.Normalize(data.mean, data.std)])
    assert torch.equal(data.to_float(crops), torch.stack([pil_float(Image.fromarray(c.permute(1, 2, 0).numpy()))
                                                          for c in crops]))


def test_a_gpu_loader_sends_uint8_images_and_the_device_makes_the_same_floats(tmp_path):
    """Training batches as a GPU run's loader makes them (`for_transfer`): uint8 pixels, a quarter of the bytes, and
    the batch's seed; `on_device` turns them into train_batch's batch bit for bit (here the device is the CPU; on a
    GPU the same elementwise ops), from files and from decoded images, plain or under DeiT's recipe without random
    erasing: RandAugment in the workers, Mixup/CutMix and label smoothing after the copy. Held-out batches and the
    data the trainer holds are unchanged."""
    import copy
    root = _smooth_image_folder(tmp_path)
    data = load_pretrain_data("imagenet", "image", path=str(root), image_size=32)
    decoded = copy.copy(data)
    decoded.files = None                 # the hub's already-decoded images: the PIL path
    mixing = {**DEIT_PER_IMAGE, "re_prob": 0.0, "mixup": 0.8, "cutmix": 1.0, "smoothing": 0.1}
    for held in (data, decoded, data.with_augmentation(mixing), decoded.with_augmentation(mixing),
                 data.with_augmentation({**mixing, "auto_augment": "", "color_jitter": 0.0})):
        sent = held.for_transfer()
        assert sent is not held and not held.sends_uint8
        for step in range(2):
            raw, want = sent.train_batch(step, 8, seed=0), held.train_batch(step, 8, seed=0)
            assert raw["pixel_values"].dtype == torch.uint8 and raw["pixel_values"].shape == want["pixel_values"].shape
            assert raw["labels"].shape == (8,)                      # hard labels: mixed after the copy
            done = held.on_device(raw, "cpu")
            assert set(done) == set(want) and all(torch.equal(done[k], want[k]) for k in want)
        assert held.on_device(want, "cpu")["pixel_values"] is want["pixel_values"]      # floats pass through
        assert _same(sent.eval_batches(4, 1)[0], held.eval_batches(4, 1)[0])
        assert sent.eval_batches(4, 1)[0]["pixel_values"].dtype == torch.float32
    assert want["labels"].shape == (8, 2) and not torch.equal(want["labels"], want["labels"].round())   # soft: mixed
    digits = load_pretrain_data("digits", "image")
    assert digits.for_transfer() is digits
    assert _same(digits.on_device(b := digits.train_batch(0, 4, 0), "cpu"), b)


def test_random_erasing_moves_to_the_device_with_its_draws_seeded_by_the_batch(tmp_path):
    """Under DeiT's recipe with random erasing, a GPU run's workers stop after RandAugment (timm's prefetcher
    transform) and `on_device` erases, as timm's PrefetchLoader does: every image of a batch erased at probability 1,
    each in one rectangle and nowhere else, the same for the same (seed, step), the caller's random streams left as
    they were; what came before the erasing is the batch without it, bit for bit."""
    root = _smooth_image_folder(tmp_path)
    data = load_pretrain_data("imagenet", "image", path=str(root), image_size=32)
    erasing = data.with_augmentation({**DEIT_PER_IMAGE, "re_prob": 1.0}).for_transfer()
    plain = data.with_augmentation({**DEIT_PER_IMAGE, "re_prob": 0.0}).for_transfer()
    for step in range(2):
        raw, raw_plain = erasing.train_batch(step, 8, seed=0), plain.train_batch(step, 8, seed=0)
        assert _same(raw, raw_plain)             # the workers' part does not depend on the erasing
        done, again = erasing.on_device(raw, "cpu"), erasing.on_device(erasing.train_batch(step, 8, seed=0), "cpu")
        assert torch.equal(done["pixel_values"], again["pixel_values"])
        changed = (done["pixel_values"] != plain.on_device(raw_plain, "cpu")["pixel_values"]).any(1)   # [B, H, W]
        for image in changed:
            rows, cols = image.any(1).nonzero().flatten(), image.any(0).nonzero().flatten()
            assert len(rows) and len(cols)
            box = image[rows.min():rows.max() + 1, cols.min():cols.max() + 1]
            assert box.float().mean() > 0.99 and int(image.sum()) == int(box.sum())    # a rectangle of noise
    import random
    state = random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state()
    erasing.on_device(raw, "cpu")
    assert random.getstate() == state[0] and np.array_equal(np.random.get_state()[1], state[1])
    assert torch.equal(torch.get_rng_state(), state[2])         # the caller's streams untouched


# the recipe fields tasks.task.Recipe.augmentation hands a data set: DeiT's per-image transform on, mixing off
DEIT_PER_IMAGE = {"auto_augment": "rand-m9-mstd0.5-inc1", "color_jitter": 0.3, "train_interpolation": "bicubic",
                  "re_prob": 0.25, "re_mode": "pixel", "re_count": 1, "mixup": 0.0, "cutmix": 0.0, "mixup_prob": 1.0,
                  "mixup_switch_prob": 0.5, "mixup_mode": "batch", "smoothing": 0.0, "repeated_aug": 1}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (bench/issue42_device.sh runs it: cuda-tests)")
def test_on_a_gpu_the_device_part_of_deits_recipe_is_seeded_and_leaves_the_callers_streams(tmp_path):
    """On a GPU: without random erasing, the completed batch is the host's floats and soft labels bit for bit (the
    same elementwise ops); with it, the same batch twice for the same (seed, step), and the GPU's generator, which the
    erasing's noise draws from, restored after."""
    root = _smooth_image_folder(tmp_path)
    data = load_pretrain_data("imagenet", "image", path=str(root), image_size=32)
    mixing = data.with_augmentation({**DEIT_PER_IMAGE, "re_prob": 0.0, "mixup": 0.8, "cutmix": 1.0, "smoothing": 0.1})
    raw, want = mixing.for_transfer().train_batch(0, 8, seed=0), mixing.train_batch(0, 8, seed=0)
    done = mixing.on_device(raw, "cuda")
    assert all(done[k].is_cuda and torch.equal(done[k].cpu(), want[k]) for k in want)
    erasing = data.with_augmentation({**DEIT_PER_IMAGE, "re_prob": 1.0}).for_transfer()
    raw = erasing.train_batch(0, 8, seed=0)
    before = torch.cuda.get_rng_state()
    first = erasing.on_device(raw, "cuda")["pixel_values"]
    assert torch.equal(torch.cuda.get_rng_state(), before)
    assert torch.equal(first, erasing.on_device(raw, "cuda")["pixel_values"])
    assert not torch.equal(first.cpu(), erasing.on_device(raw, "cpu")["pixel_values"])    # the GPU's own noise
