"""Text pretraining data: corpora, tokenizers, and MLM (BERT/RoBERTa) / CLM (GPT-2) batches.

Corpora (tasks/data/corpora.py): the embedded Penn Treebank for the mini/tiny scales; at paper scale
English Wikipedia (BERT, RoBERTa) and C4 (GPT-2) through `datasets`, or local text files given by `path`
(one document a line). Tokenizers are either trained here with `tokenizers`
("wordpiece" for BERT, "bytelevel_bpe" for RoBERTa/GPT-2) on the training split only and cached on
disk, or loaded with AutoTokenizer (hub name or saved directory). Each split is tokenized once into a
flat .npy of token ids (documents joined by a separator/eos) cached next to the tokenizer and
memory-mapped, then cut into fixed blocks: a training item is one block. MLM blocks are wrapped as
[CLS] ... [SEP] (so seq_len includes them) and masked by transformers' DataCollatorForLanguageModeling
with its own seeded generator; CLM blocks are used as they are (the HF model shifts labels itself).
"""
from __future__ import annotations

import hashlib
import itertools
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

from .base import PretrainData
from .corpora import check_local_text, corpus_key, iter_documents

TRAINED_TOKENIZERS = ("wordpiece", "bytelevel_bpe")
WORDPIECE_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
BYTELEVEL_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>", "<|endoftext|>"]
MLM_PROBABILITY = 0.15
DEFAULT_CACHE = "~/.cache/growbench"  # tokenizers go to <root>/tokenizers; $GROWBENCH_CACHE overrides the root
TOKENIZER_TRAIN_DOCS = 1_000_000  # tokenizers learn their vocabulary from a prefix of a hub corpus
ENCODE_CHUNK = 10_000  # documents per tokenizer call


# -------------------------------------------------------------------------------------- tokenizers

def _train_tokenizer(kind: str, vocab_size: int, docs):
    """Train a raw `tokenizers.Tokenizer` of family `kind` on an iterator of documents."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    if kind == "wordpiece":  # BERT-uncased pipeline
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=WORDPIECE_SPECIALS,
                                              show_progress=sys.stderr.isatty())
        tok.train_from_iterator(docs, trainer)
        # The trainer numbers tokens in hash-map order, so two trainings on the same text give different
        # ids. WordPiece tokenization never looks at ids: renumber canonically so every machine agrees.
        learned = sorted(set(tok.get_vocab()) - set(WORDPIECE_SPECIALS),
                         key=lambda t: (t.startswith("##"), len(t), t))
        tok.model = models.WordPiece({t: i for i, t in enumerate(WORDPIECE_SPECIALS + learned)},
                                     unk_token="[UNK]")
        cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
        return tok
    if kind == "bytelevel_bpe":  # GPT-2 / RoBERTa pipeline; the post-processor is set per family on load
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=BYTELEVEL_SPECIALS,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      show_progress=sys.stderr.isatty())
        tok.train_from_iterator(docs, trainer)
        return tok
    raise ValueError(f"unknown tokenizer kind {kind!r}; known: {', '.join(TRAINED_TOKENIZERS)}")


def _wrap(raw, kind: str, objective: str):
    """A transformers tokenizer with the special tokens the model family expects."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast
    if kind == "wordpiece":
        return PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]", pad_token="[PAD]",
                                       cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    if objective == "mlm":  # RoBERTa: <s> x </s>
        raw.post_processor = processors.RobertaProcessing(
            ("</s>", raw.token_to_id("</s>")), ("<s>", raw.token_to_id("<s>")), add_prefix_space=False)
        return PreTrainedTokenizerFast(tokenizer_object=raw, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                       pad_token="<pad>", cls_token="<s>", sep_token="</s>", mask_token="<mask>")
    # GPT-2: no added tokens; <|endoftext|> ends documents and doubles as padding.
    eot = "<|endoftext|>"
    return PreTrainedTokenizerFast(tokenizer_object=raw, bos_token=eot, eos_token=eot, pad_token=eot, unk_token="<unk>")


def load_tokenizer(tokenizer: str, objective: str, source: str, path: str | None, vocab_size: int | None,
                   cache_root: Path):
    """(transformers tokenizer, directory for this corpus+tokenizer's token-id caches).

    A trained kind is cached as <cache_root>/<corpus>-<kind>-<vocab>/tokenizer.json and trained (on
    the training split only) only when that file is missing; anything else goes to AutoTokenizer."""
    key = corpus_key(source, path)
    if tokenizer in TRAINED_TOKENIZERS:
        from tokenizers import Tokenizer
        vocab_size = vocab_size or (8192 if source == "ptb" else 30522 if tokenizer == "wordpiece" else 50265)
        tdir = cache_root / f"{key}-{tokenizer}-{vocab_size}"
        file = tdir / "tokenizer.json"
        if not file.exists():
            limit = None if key == "ptb" or path is not None else TOKENIZER_TRAIN_DOCS
            raw = _train_tokenizer(tokenizer, vocab_size, iter_documents(source, "train", path, limit, cache_root))
            if raw.get_vocab_size() > vocab_size:   # the corpus's alphabet and the specials alone exceed it: refuse
                # before anything is cached (the run would be refused later anyway, by runs.preflight.check_vocab)
                raise ValueError(f"vocab {vocab_size} is smaller than the {raw.get_vocab_size()} tokens a {tokenizer} "
                                 f"tokenizer of this corpus needs (its alphabet and special tokens); give small.vocab "
                                 f"and large.vocab >= {raw.get_vocab_size()}")
            tdir.mkdir(parents=True, exist_ok=True)
            tmp = Path(f"{file}.{os.getpid()}.tmp")
            try:
                try:
                    raw.save(str(tmp))
                except Exception as e:  # the Rust library's error is a bare Exception ("File too large (os error
                    # 27)", a full disk) that names no file: name it
                    code = re.search(r"os error (\d+)", str(e))      # keep the errno: a full disk exits 1
                    raise OSError(int(code.group(1)) if code else 0, f"cannot write the tokenizer cache file: {e}",
                                  str(file)) from None
                os.replace(tmp, file)  # atomic: concurrent runs never read half a file
            finally:
                tmp.unlink(missing_ok=True)
        return _wrap(Tokenizer.from_file(str(file)), tokenizer, objective), tdir
    from transformers import AutoTokenizer
    try:
        tok = AutoTokenizer.from_pretrained(tokenizer)
    except (OSError, ValueError):     # the hub's own message is many lines (and names no fix)
        offline = " (the hub is offline here)" if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true") else ""
        raise ValueError(f"tokenizer '{tokenizer}' cannot be loaded: it is not {' or '.join(TRAINED_TOKENIZERS)} "
                         f"(trained here), a saved tokenizer directory, or a hub tokenizer we can reach"
                         f"{offline}") from None
    if objective == "clm" and tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token  # GPT-2 ships without a pad token
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", tokenizer.strip("/"))[-60:]
    return tok, cache_root / f"{key}-{name}"


# ------------------------------------------------------------------------------------- token ids

def _separator(tok, objective: str) -> int:
    """Token placed after every document: eos for causal LMs, [SEP] / </s> for masked LMs."""
    sep = tok.eos_token_id if objective == "clm" and tok.eos_token_id is not None else tok.sep_token_id
    if sep is None:
        sep = tok.eos_token_id
    if sep is None:
        raise ValueError(f"tokenizer {tok.name_or_path!r} has neither an eos nor a sep token to separate documents")
    return sep


def token_ids(tok, docs, sep: int, file: Path) -> np.ndarray:
    """All documents tokenized, each followed by `sep`, as a memory-mapped 1-D .npy at `file`
    (computed once). Chunks stream to a raw file first so paper-scale corpora never sit in RAM;
    the .npy header is written once the length is known."""
    if not file.exists():
        dtype = np.dtype(np.uint16 if len(tok) <= np.iinfo(np.uint16).max else np.int32)
        file.parent.mkdir(parents=True, exist_ok=True)
        # Per-process temporary names: concurrent runs filling the same cache must not share a half-written file.
        raw, tmp = file.with_suffix(f".bin.{os.getpid()}.tmp"), file.with_suffix(f".npy.{os.getpid()}.tmp")
        n, chunk = 0, []
        backend = getattr(tok, "backend_tokenizer", None)
        if backend is not None:
            # A private copy of the Rust tokenizer with truncation/padding off: a hub tokenizer.json may carry
            # max_length=512, which would silently cut every document.
            from tokenizers import Tokenizer
            backend = Tokenizer.from_str(backend.to_str())
            backend.no_truncation()
            backend.no_padding()

        def flush(out):
            nonlocal n
            if backend is not None:  # the Rust tokenizer directly: no offsets, no per-encoding Python objects
                ids = [e.ids + [sep] for e in backend.encode_batch_fast(chunk, add_special_tokens=False)]
            else:
                ids = [d + [sep] for d in tok(chunk, add_special_tokens=False)["input_ids"]]
            total = sum(map(len, ids))
            out.write(np.fromiter(itertools.chain.from_iterable(ids), dtype=dtype, count=total).tobytes())
            n += total
            chunk.clear()

        try:
            with open(raw, "wb") as out:
                for doc in docs:
                    chunk.append(doc)
                    if len(chunk) == ENCODE_CHUNK:
                        flush(out)
                if chunk:
                    flush(out)
            with open(tmp, "wb") as out, open(raw, "rb") as src:
                np.lib.format.write_array_header_1_0(
                    out, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (n,)})
                shutil.copyfileobj(src, out, 1 << 24)
            os.replace(tmp, file)
        except OSError as e:  # a full disk: name the cache file (the write error itself names none)
            raise OSError(e.errno, e.strerror, str(file)) from None
        finally:              # failed or interrupted: no half-written file stays in the cache
            raw.unlink(missing_ok=True)
            tmp.unlink(missing_ok=True)
    return np.load(file, mmap_mode="r")


# -------------------------------------------------------------------------------------- the data

class TextData(PretrainData):
    """Token blocks of a tokenized corpus; item i of a split is block i of its flat id array."""

    kind = "text"

    def __init__(self, objective: str, tokenizer, train_ids: np.ndarray, valid_ids: np.ndarray, seq_len: int):
        self.objective, self.tokenizer, self.seq_len = objective, tokenizer, seq_len
        self.vocab_size = len(tokenizer)
        self.ids = {"train": train_ids, "valid": valid_ids}
        if objective == "mlm":
            missing = [t for t in ("cls_token", "sep_token", "mask_token") if getattr(tokenizer, t) is None]
            if missing:
                raise ValueError(f"tokenizer {tokenizer.name_or_path!r} lacks {missing} needed for MLM")
            if seq_len < 3:
                raise ValueError("MLM needs seq_len >= 3 ([CLS] x [SEP])")
        self.block = seq_len - 2 if objective == "mlm" else seq_len  # content tokens per item
        self.n_train, self.n_valid = len(train_ids) // self.block, len(valid_ids) // self.block
        for split, n in (("train", self.n_train), ("valid", self.n_valid)):
            if n == 0:
                raise ValueError(f"{split} split has {len(self.ids[split])} tokens: shorter than one block of {self.block}")

    def blocks(self, split: str, indices: np.ndarray) -> torch.Tensor:
        """Unmasked input ids [B, seq_len] of items `indices` (MLM: wrapped in [CLS] ... [SEP])."""
        ids, L = self.ids[split], self.block
        rows = torch.from_numpy(np.stack([np.asarray(ids[i * L:(i + 1) * L], dtype=np.int64) for i in indices]))
        if self.objective == "mlm":
            col = lambda t: torch.full((len(indices), 1), t, dtype=torch.long)  # noqa: E731
            rows = torch.cat([col(self.tokenizer.cls_token_id), rows, col(self.tokenizer.sep_token_id)], dim=1)
        return rows

    def unigram_cross_entropy(self, batches: list[dict[str, torch.Tensor]]) -> float:
        """Cross-entropy (nats) of the tokens `batches` score under the training split's unigram distribution
        (add-one smoothed): what a model that learned word frequencies and nothing else scores. MLM scores the
        masked positions, which are never special tokens, so specials get no unigram mass; CLM scores every
        next token, separators included. The reference line a model that learns must fall well below."""
        logp = self.unigram_log_probs()
        targets = []
        for batch in batches:
            labels = batch["labels"]
            targets.append(labels[labels != -100] if self.objective == "mlm" else labels[:, 1:].reshape(-1))
        return float(-logp[torch.cat(targets).long()].mean())

    def unigram_log_probs(self) -> torch.Tensor:
        """log p(token) [vocab] under the training split's add-one smoothed unigram distribution (MLM: specials,
        which are never masked, get no mass)."""
        counts = np.bincount(np.asarray(self.ids["train"]), minlength=self.vocab_size).astype(np.float64)[:self.vocab_size]
        if self.objective == "mlm":
            counts[self.tokenizer.all_special_ids] = 0.0
        return torch.from_numpy(np.log((counts + 1.0) / (counts + 1.0).sum()))

    def make_batch(self, split: str, indices: np.ndarray, rng_seed: int) -> dict[str, torch.Tensor]:
        ids = self.blocks(split, indices)
        if self.objective == "clm":
            return {"input_ids": ids, "labels": ids.clone()}
        from transformers import DataCollatorForLanguageModeling
        # The mask must depend only on (seed, step), and on nobody's global RNG. Not through the collator's
        # own `seed`: in a subprocess it adds the DataLoader worker id to it, or refuses to run (and which
        # generator it keeps is private state that has changed between transformers releases). Instead the
        # collator draws from the CPU default generator, seeded here inside fork_rng, which restores the
        # caller's CPU RNG state afterwards (devices=[]: no CUDA state is touched); the draws are those of a
        # torch.Generator seeded alike, so the masks are the ones earlier records were trained on.
        collator = DataCollatorForLanguageModeling(self.tokenizer, mlm=True, mlm_probability=MLM_PROBABILITY,
                                                   return_tensors="pt")
        with torch.random.fork_rng(devices=[]):
            torch.random.default_generator.manual_seed(rng_seed)
            out = collator(list(ids))
        # No attention mask: blocks are packed, never padded. An all-ones mask changes no number (checked on the CPU,
        # dropout on), but on a GPU it costs transformers a check of its values (a host sync) every forward, and
        # keeps SDPA from its flash kernel
        return {"input_ids": out["input_ids"], "labels": out["labels"]}


def load_text_data(source: str, objective: str, *, seq_len: int = 128, vocab_size: int | None = None,
                   tokenizer: str | None = None, path: str | None = None, cache_dir: str | None = None) -> TextData:
    """Text data for `objective` ("mlm"/"clm"). `tokenizer` defaults to wordpiece for MLM and byte-level
    BPE for CLM; `vocab_size` sizes a trained tokenizer (default 8192 on PTB, 30522/50265 at paper scale)
    and is ignored for hub/saved tokenizers, whose vocabulary is what it is (`.vocab_size` reports it)."""
    tokenizer = tokenizer or ("wordpiece" if objective == "mlm" else "bytelevel_bpe")
    if path is not None:
        check_local_text(path)
    root = Path(os.environ.get("GROWBENCH_CACHE") or DEFAULT_CACHE) / "tokenizers"
    cache_root = Path(cache_dir or root).expanduser()
    tok, ids_dir = load_tokenizer(tokenizer, objective, source, path, vocab_size, cache_root)
    sep = _separator(tok, objective)
    # Keyed by the tokenizer's full serialisation: a retrained or edited tokenizer never reuses stale ids.
    backend = getattr(tok, "backend_tokenizer", None)
    tok_hash = hashlib.sha1((backend.to_str() if backend else repr(tok)).encode()).hexdigest()[:10]
    ids = {split: token_ids(tok, iter_documents(source, split, path, cache_root=cache_root), sep,
                            ids_dir / f"ids-{split}-{tok_hash}-{sep}.npy")
           for split in ("train", "valid")}
    return TextData(objective, tok, ids["train"], ids["valid"], seq_len)
