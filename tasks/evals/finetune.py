"""The fine-tuning loop shared by every downstream suite (GLUE, SQuAD, image transfer, the mini suites).

Pretraining lives in runs/trainer.py (FLOPs ledger, checkpoints, growth hooks); fine-tuning needs none of
that: a seeded shuffle, AdamW or SGD, a transformers.get_scheduler schedule, gradient clipping, and
batched prediction. `FinetuneRecipe` holds one suite's recipe (paper §4.1: GLUE 3 epochs / lr 1e-4 /
batch 32, SQuAD 2 epochs / 5e-5 / 12, DeiT transfer 1000 epochs / 0.01 / 768), and `EvalOptions`
overrides any field of it from the command line.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# option -> (test, what it must be): a recipe and every --set of an evaluation are checked against these before
# anything trains (an `epochs=0` run would train a step and record epochs 0)
RULES = {
    "epochs": (lambda v: _finite(v) and v > 0, "a number > 0"),
    "lr": (lambda v: _finite(v) and v > 0, "a number > 0"),
    "batch_size": (lambda v: isinstance(v, int) and v >= 1, "an integer >= 1"),
    # distinct: seeds=0,0,0 ran seed 0 three times and reported it as the mean over three seeds
    "seeds": (lambda v: len(v) > 0 and all(isinstance(s, int) and s >= 0 for s in v) and len(set(v)) == len(v),
              "distinct integers >= 0"),
    "weight_decay": (lambda v: _finite(v) and v >= 0, "a number >= 0"),
    "warmup_ratio": (lambda v: _finite(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "grad_clip": (lambda v: _finite(v) and v >= 0, "a number >= 0 (0: no clipping)"),
    "max_steps": (lambda v: v is None or (isinstance(v, int) and v >= 1), "an integer >= 1"),
    "eval_batch_size": (lambda v: isinstance(v, int) and v >= 1, "an integer >= 1"),
    "max_train": (lambda v: isinstance(v, int) and v >= 1, "an integer >= 1"),
    "max_eval": (lambda v: isinstance(v, int) and v >= 1, "an integer >= 1"),
    "max_seq_len": (lambda v: isinstance(v, int) and v >= 4, "an integer >= 4"),
    "null_threshold": (_finite, "a finite number"),
    "workers": (lambda v: isinstance(v, int) and v >= 0, "an integer >= 0"),
}


def check_value(key: str, value) -> None:
    if key in RULES and value is not None and not RULES[key][0](value):
        raise ValueError(f"evaluation {key} must be {RULES[key][1]}, got {value!r}")


@dataclass(frozen=True)
class FinetuneRecipe:
    epochs: float
    lr: float
    batch_size: int
    seeds: tuple[int, ...] = (0, 1, 2)   # the paper runs three seeds and reports the mean
    weight_decay: float = 0.0
    warmup_ratio: float = 0.0
    schedule: str = "linear"             # any transformers.get_scheduler name
    optimizer: str = "adamw"             # adamw | sgd (momentum 0.9, as DeiT's transfer recipe)
    grad_clip: float = 1.0
    max_steps: int | None = None         # stop early (quick looks; None: the full epochs)
    eval_batch_size: int = 64

    def __post_init__(self):
        for f in dataclasses.fields(self):
            check_value(f.name, getattr(self, f.name))

    def with_(self, **changes) -> "FinetuneRecipe":
        return dataclasses.replace(self, **changes)


@dataclass
class EvalOptions:
    """What the CLI may set for an evaluation (`--set KEY=VALUE`); None keeps each suite's own default."""
    seeds: tuple[int, ...] | None = None
    epochs: float | None = None
    lr: float | None = None
    batch_size: int | None = None
    weight_decay: float | None = None
    warmup_ratio: float | None = None
    schedule: str | None = None
    optimizer: str | None = None
    max_steps: int | None = None
    max_train: int | None = None      # use only the first N training examples
    max_eval: int | None = None       # and the first N evaluation examples
    max_seq_len: int | None = None    # text: tokens per example (default min(suite's, model positions))
    data_dir: str | None = None       # local copies in the official formats instead of the hub
    null_threshold: float = 0.0       # SQuAD v2.0: predict "no answer" when null score - best span > this
    mixup: bool = True                # image transfer: DeiT's mixup/cutmix + label smoothing
    workers: int = 0                  # DataLoader workers for decoded image sets
    device: str = "cpu"

    RECIPE_KEYS = ("seeds", "epochs", "lr", "batch_size", "weight_decay", "warmup_ratio", "schedule",
                   "optimizer", "max_steps")

    def recipe(self, default: FinetuneRecipe) -> FinetuneRecipe:
        return default.with_(**{k: getattr(self, k) for k in self.RECIPE_KEYS if getattr(self, k) is not None})

    def to_dict(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @classmethod
    def parse(cls, settings: list[str], device: str = "cpu") -> "EvalOptions":
        """KEY=VALUE strings -> options; one-line errors naming the key (seeds take a comma list)."""
        from models.family import unknown
        kinds = {f.name: f.type for f in dataclasses.fields(cls) if f.name != "device"}  # --device sets it
        opts = cls(device=device)
        given = set()
        for item in settings:
            key, sep, raw = item.partition("=")
            if key in given:
                raise ValueError(f"--set eval.{key} given twice; give it once")
            given.add(key)
            if not sep or not key:
                raise ValueError(f"malformed --set '{item}'; expected key=value, e.g. --set eval.epochs=1")
            if key not in kinds:
                raise KeyError(unknown("evaluation option", key, kinds))
            kind = str(kinds[key])
            try:
                if key == "seeds":
                    value = tuple(int(s) for s in raw.split(",") if s.strip())
                    if not value:
                        raise ValueError
                elif "bool" in kind:
                    if raw.lower() not in ("true", "false"):
                        raise ValueError
                    value = raw.lower() == "true"
                elif "int" in kind:
                    value = int(raw)
                elif "float" in kind:
                    value = float(raw)
                else:
                    value = raw
            except ValueError:
                expected = "comma-separated integers, e.g. seeds=0,1,2" if key == "seeds" else kind.replace(" | None", "")
                raise ValueError(f"--set {key}={raw}: expected {expected}") from None
            check_value(key, value)
            if key == "optimizer" and value not in ("adamw", "sgd"):
                raise KeyError(unknown("optimizer", value, ("adamw", "sgd")))
            if key == "schedule":
                from transformers import SchedulerType
                known = [t.value for t in SchedulerType]
                if value not in known:
                    raise KeyError(unknown("schedule", value, known))
            if key == "data_dir" and not Path(value).is_dir():     # a typo would be ignored by suites with no local data
                raise ValueError(f"--set data_dir={raw}: no such directory")
            setattr(opts, key, value)
        return opts


def _optimizer(model: torch.nn.Module, recipe: FinetuneRecipe) -> torch.optim.Optimizer:
    # no weight decay on biases and norm weights (1-d tensors), the BERT/DeiT convention
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.ndim > 1], "weight_decay": recipe.weight_decay},
              {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0}]
    if recipe.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=recipe.lr, momentum=0.9)
    if recipe.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=recipe.lr, eps=1e-8)
    raise ValueError(f"unknown optimizer '{recipe.optimizer}'; known: adamw, sgd")


def finetune(model: torch.nn.Module, dataset, collate: Callable, loss_fn: Callable, recipe: FinetuneRecipe,
             seed: int, device: str = "cpu", log: Callable | None = None, workers: int = 0) -> dict:
    """Train `model` in place for recipe.epochs over `dataset` (anything indexable) in seeded random order;
    `loss_fn(model, batch)` returns the scalar loss. Returns steps, wall seconds and the last loss."""
    from transformers import get_scheduler
    if len(dataset) == 0:
        raise ValueError("the training set is empty")
    g = torch.Generator().manual_seed(seed)
    loader = torch.utils.data.DataLoader(dataset, batch_size=recipe.batch_size, shuffle=True, generator=g,
                                         collate_fn=collate, num_workers=workers)
    steps = max(1, math.ceil(recipe.epochs * len(loader)))
    if recipe.max_steps is not None:
        steps = min(steps, recipe.max_steps)
    model.to(device).train()
    opt = _optimizer(model, recipe)
    sched = get_scheduler(recipe.schedule, opt, num_warmup_steps=int(recipe.warmup_ratio * steps),
                          num_training_steps=steps)
    step, losses, start = 0, [], time.perf_counter()
    while step < steps:
        for batch in loader:
            batch = to_device(batch, device)
            loss = loss_fn(model, batch)
            loss.backward()
            if recipe.grad_clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            losses.append(float(loss.detach()))
            step += 1
            if log and (step % max(1, steps // 5) == 0 or step == steps):
                log(f"  step {step}/{steps} loss {np.mean(losses[-20:]):.4f}")
            if step >= steps:
                break
    return {"steps": step, "wall": time.perf_counter() - start, "train_loss": float(np.mean(losses[-20:]))}


@torch.no_grad()
def predict(model: torch.nn.Module, dataset, collate: Callable, forward: Callable, batch_size: int = 64,
            device: str = "cpu", workers: int = 0) -> list:
    """forward(model, batch) for every batch in order (eval mode); returns the list of outputs."""
    model.to(device).eval()
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=False, collate_fn=collate,
                                         num_workers=workers)
    return [forward(model, to_device(b, device)) for b in loader]


def to_device(batch, device):
    if isinstance(batch, dict):
        return {k: (v.to(device) if torch.is_tensor(v) else v) for k, v in batch.items()}
    return [v.to(device) if torch.is_tensor(v) else v for v in batch]


def mean_over_seeds(per_seed: list[dict[str, float]]) -> dict[str, float]:
    """Mean of every numeric metric over seeds (the paper reports the mean of three runs)."""
    keys = [k for k in per_seed[0] if isinstance(per_seed[0][k], (int, float))]
    return {k: float(np.mean([r[k] for r in per_seed])) for k in keys}


# ------------------------------------------------------------------------------ text models and batches
# Which tokenizer outputs each family's model takes: GPT-2 would add token_type_ids through its token
# embedding, and RoBERTa has a single token type, so only BERT gets them.
TEXT_INPUTS = {"bert": ("input_ids", "token_type_ids", "attention_mask"),
               "roberta": ("input_ids", "attention_mask"), "gpt2": ("input_ids", "attention_mask"),
               "llama": ("input_ids", "attention_mask")}


def type_ids(family: str) -> dict:
    """Ask for segment ids where the family takes them: a tokenizer reloaded from a run directory does not
    list them among its default outputs, and BERT needs segment B marked in sentence pairs."""
    return {"return_token_type_ids": True} if "token_type_ids" in TEXT_INPUTS[family] else {}


def text_max_len(pretrained, default: int, options: EvalOptions) -> int:
    """Tokens per example: the suite's (or --set max_seq_len), never beyond the model's positions."""
    return min(options.max_seq_len or default, pretrained.spec.positions)


def load_text_model(pretrained, head: str, num_labels: int = 2, regression: bool = False):
    """A task model built from the pretrained MLM/LM weights by transformers' Auto classes: the encoder is
    loaded, the head ("classification" or "qa") is freshly initialised from the global RNG (seed first)."""
    from transformers import AutoModelForQuestionAnswering, AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging
    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()   # "some weights newly initialized" is the point here, not news
    hf_logging.disable_progress_bar()
    try:
        if head == "qa":
            model = AutoModelForQuestionAnswering.from_pretrained(str(pretrained.model_dir))
        else:
            model = AutoModelForSequenceClassification.from_pretrained(
                str(pretrained.model_dir), num_labels=num_labels,
                problem_type="regression" if regression else "single_label_classification")
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()
    if model.config.pad_token_id is None:  # GPT-2 finds each sequence's last token through the pad id
        model.config.pad_token_id = pretrained.tokenizer.pad_token_id
    return model


def encode_pairs(tokenizer, family: str, a: list[str], b: list[str] | None, max_len: int) -> list[dict]:
    """Tokenize single sentences or pairs (truncating the longer side first), keeping the family's inputs."""
    enc = tokenizer(a, b, truncation=True, max_length=max_len, **type_ids(family)) if b is not None else \
        tokenizer(a, truncation=True, max_length=max_len, **type_ids(family))
    keys = [k for k in TEXT_INPUTS[family] if k in enc]
    return [{k: enc[k][i] for k in keys} for i in range(len(a))]


def pad_collate(pad_id: int):
    """Right-pad token lists to the batch's longest; labels become a long (class) or float (regression)
    tensor; other keys pass through as lists."""
    def collate(items: list[dict]) -> dict:
        longest = max(len(it["input_ids"]) for it in items)
        out = {}
        for key in items[0]:
            vals = [it[key] for it in items]
            if key in ("input_ids", "token_type_ids", "attention_mask"):
                fill = pad_id if key == "input_ids" else 0
                out[key] = torch.tensor([v + [fill] * (longest - len(v)) for v in vals], dtype=torch.long)
            elif key in ("labels", "start_positions", "end_positions"):
                out[key] = torch.tensor(vals, dtype=torch.float if isinstance(vals[0], float) else torch.long)
            else:
                out[key] = vals
        return out
    return collate


def model_loss(model, batch) -> torch.Tensor:
    """The HF task model's own loss (cross-entropy, MSE for regression, span loss for QA)."""
    return model(**{k: v for k, v in batch.items() if torch.is_tensor(v)}).loss
