"""Text corpora as documents: the embedded Penn Treebank (`treebank.penn`, one sentence a line) for the mini and tiny
scales; at paper scale English Wikipedia (BERT, RoBERTa) and C4 (GPT-2) streamed through `datasets`, or local text
files given by `path` (one document a line), checked before anything is trained or cached. A corpus's cache key
(`corpus_key`) names the tokenizer and token-id caches built from it (tasks/data/text.py).
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

# Paper-scale knobs. Wikipedia has no validation split: hold out its first articles. C4's train split
# (~365M documents) is far beyond what the paper's GPT-2 runs consume, so only a prefix is tokenized.
WIKIPEDIA_VALID_DOCS = 10_000
C4_TRAIN_DOCS = 40_000_000
LOCAL_VALID_FRACTION = 0.01  # held out from local files that come without a validation file


def _local_files(path: str) -> tuple[list[str], list[str]]:
    """(train files, validation files) under a local text path: a file, or a directory in which
    files with a name part valid/validation/val/dev (valid.txt, wiki.valid.tokens) are the validation
    split, files with a part "test" are left alone, and all others are training text."""
    p = Path(path).expanduser()
    if p.is_file():
        return [str(p)], []
    if not p.is_dir():
        raise FileNotFoundError(f"text corpus path {p} does not exist")
    train, valid = [], []
    for f in sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith(".")):
        parts = set(re.split(r"[._-]", f.name.lower()))
        if "test" not in parts:
            (valid if parts & {"valid", "validation", "val", "dev"} else train).append(str(f))
    if not train:
        raise FileNotFoundError(f"no training text files under {p}")
    return train, valid


TEXT_SNIFF = 1 << 16  # bytes of each file looked at to tell text from binary


def check_local_text(path: str) -> None:
    """Refuse, in one line and before any tokenizer is trained or cache written, a local corpus that cannot
    make a run: missing, binary, empty, or (one file, no validation file) too short to hold out a line. Reads
    only the head of each file, so a paper-scale corpus costs nothing."""
    train, valid = _local_files(path)
    for f in train + valid:
        with open(f, "rb") as fh:
            head = fh.read(TEXT_SNIFF)
        binary = b"\0" in head
        if not binary:
            try:
                head.decode("utf-8")
            except UnicodeDecodeError as e:     # but a multi-byte character cut by the sniff is text
                binary = e.reason != "unexpected end of data"
        if binary:
            raise ValueError(f"data_path {f} is not a UTF-8 text file (binary content); give text files, "
                             "one document a line")
    lines = 0
    for f in train:
        with open(f, encoding="utf-8", errors="replace") as fh:
            lines += sum(1 for _, line in zip(range(2), (ln for ln in fh if ln.strip())))
        if lines >= 2:
            break
    if lines == 0:
        raise ValueError(f"data_path {path} holds no text (the training files are empty)")
    if lines < 2 and not valid:
        raise ValueError(f"data_path {path} holds one line of text: too little to train on and hold out a "
                         "validation line; give a larger corpus (one document a line)")


def corpus_key(source: str, path: str | None) -> str:
    """Cache key of a corpus: its name, or for local files a hash of their names, sizes and mtimes
    (editing the files then invalidates the caches)."""
    if path is None:
        return source
    train, valid = _local_files(path)
    sig = "|".join(f"{f}:{os.path.getsize(f)}:{os.path.getmtime(f)}" for f in train + valid)
    return f"{source}-local-{hashlib.sha1(sig.encode()).hexdigest()[:8]}"


def iter_documents(source: str, split: str, path: str | None = None, limit: int | None = None,
                   cache_root: Path | None = None):
    """Non-empty documents of `split` ("train" or "valid"), as strings, in corpus order."""
    if source == "ptb" and path is None:
        import treebank
        docs = (line.strip() for line in treebank.penn["train" if split == "train" else "valid"].split("\n"))
    else:
        docs = (ex["text"] for ex in _hf_split(source, split, path, cache_root))
    count = 0
    for doc in docs:
        if doc.strip():
            yield doc
            count += 1
            if limit is not None and count >= limit:
                return


def _hf_split(source: str, split: str, path: str | None, cache_root: Path | None = None):
    """A `datasets` iterable for a paper-scale corpus (streamed from the hub) or local text files."""
    from datasets import load_dataset
    if path is not None:
        train, valid = _local_files(path)
        files = {"train": train, **({"validation": valid} if valid else {})}
        # The arrow copy of local files lives with our other caches, not in the global HF cache.
        cache = str(cache_root / "datasets") if cache_root else None
        ds = load_dataset("text", data_files=files, cache_dir=cache)
        if valid:
            return ds["train" if split == "train" else "validation"]
        # No validation file: the last LOCAL_VALID_FRACTION of lines is held out (deterministic).
        n = len(ds["train"])
        k = max(1, int(n * LOCAL_VALID_FRACTION)) if n > 1 else 0
        return ds["train"].select(range(n - k) if split == "train" else range(n - k, n))
    if source == "wikipedia":
        ds = load_dataset("wikimedia/wikipedia", "20231101.en", split="train", streaming=True)
        return ds.skip(WIKIPEDIA_VALID_DOCS) if split == "train" else ds.take(WIKIPEDIA_VALID_DOCS)
    if source == "c4":
        if split == "train":
            return load_dataset("allenai/c4", "en", split="train", streaming=True).take(C4_TRAIN_DOCS)
        return load_dataset("allenai/c4", "en", split="validation", streaming=True)
    raise ValueError(f"no hub corpus for {source!r}")
