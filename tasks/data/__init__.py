"""Pretraining data for growbench: one entry point, `load_pretrain_data`, and the `PretrainData` contract.

Every method is compared on the same stream of batches, and a crashed run must resume onto exactly
the batches it would have seen, so a batch is a pure function of (seed, step, batch_size): the
training split is walked in a per-epoch permutation seeded by (seed, epoch), and any randomness
inside a batch (MLM masking, image augmentation) is seeded from (seed, step). Nothing here touches
the global RNG. Text lives in `text.py` (PTB / Wikipedia / C4, locally trained or hub tokenizers,
MLM and CLM batches), images in `vision.py` (digits / Fashion-MNIST / ImageNet).
"""
from __future__ import annotations

# the package's face: the contract and the sampling, in a module of their own below the loaders (tasks/data/base.py)
from tasks.data.base import PretrainData, batch_indices, derive_seed, to_device  # noqa: F401

TEXT_SOURCES = ("ptb", "wikipedia", "c4")
IMAGE_SOURCES = ("digits", "fashion_mnist", "imagenet")
OBJECTIVES = {"mlm": TEXT_SOURCES, "clm": TEXT_SOURCES, "image": IMAGE_SOURCES}


def check_data_path(source: str, objective: str, path: str | None) -> None:
    """One-line refusal of a local data path that cannot make a run, before anything is trained or written. With
    no path, a source read from a fixed local place (Fashion-MNIST's Debian package) is looked for there: a
    sweep checks its plan with this, and a missing package must stop it once, not fail each of its runs."""
    if path is not None and not str(path).strip():
        raise ValueError("data_path is empty; give a path (or leave it out for the task's default data)")
    if objective == "image":
        from .vision import check_image_path
        check_image_path(source, path)
    elif path is not None:
        from .corpora import check_local_text
        check_local_text(path)


def data_key(source: str, objective: str, path: str | None) -> str:
    """What identifies the data a model was trained on: the source's name, or for a local copy a hash of its
    files' names, sizes and mtimes (text: the corpus cache key; images: the directory's top level, which
    holds the idx files, or ImageNet's train/ and val/)."""
    if path is None:
        return source
    if objective != "image":
        from .corpora import corpus_key
        return corpus_key(source, path)
    import hashlib
    import os
    root = os.path.abspath(os.path.expanduser(path))
    entries = sorted(os.scandir(root), key=lambda e: e.name) if os.path.isdir(root) else []
    sig = "|".join([root] + [f"{e.name}:{e.stat().st_size}:{e.stat().st_mtime}" for e in entries])
    return f"{source}-local-{hashlib.sha1(sig.encode()).hexdigest()[:8]}"


def load_pretrain_data(source: str, objective: str, *, seq_len: int = 128, vocab_size: int | None = None,
                       tokenizer: str | None = None, image_size: int | None = None, path: str | None = None,
                       cache_dir: str | None = None) -> PretrainData:
    """Build the pretraining data for `source` under `objective` (see the module docstring).

    Text sources take seq_len / vocab_size / tokenizer ("wordpiece", "bytelevel_bpe", a hub name or a
    saved tokenizer directory); image sources take image_size. `path` points at a local copy of the
    data; `cache_dir` holds trained tokenizers and token-id caches (default ~/.cache/growbench/tokenizers).
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; known: {', '.join(OBJECTIVES)}")
    if source not in TEXT_SOURCES + IMAGE_SOURCES:
        raise ValueError(f"unknown data source {source!r}; known: {', '.join(TEXT_SOURCES + IMAGE_SOURCES)}")
    if source not in OBJECTIVES[objective]:
        raise ValueError(f"source {source!r} does not fit objective {objective!r} (it takes {', '.join(OBJECTIVES[objective])})")
    if objective == "image":
        from .vision import load_image_data
        return load_image_data(source, image_size=image_size, path=path)
    from .text import load_text_data
    return load_text_data(source, objective, seq_len=seq_len, vocab_size=vocab_size, tokenizer=tokenizer,
                          path=path, cache_dir=cache_dir)


__all__ = ["PretrainData", "check_data_path", "data_key", "load_pretrain_data", "batch_indices",
           "derive_seed"]
