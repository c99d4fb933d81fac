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

from helpers import same_batch as _same, write_image_folder  # noqa: E402
from tasks.data import PretrainData, batch_indices, load_pretrain_data  # noqa: E402
from tasks.data import text as text_mod  # noqa: E402
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
    from bench.sweeps.cli import main as sweep
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
