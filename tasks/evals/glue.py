"""GLUE (Wang et al. 2019) by full fine-tuning: paper Table 1 (and Table 5's rows); recipe of paper §4.1
after Tan & Bansal 2020: 3 epochs, lr 1e-4, batch 32, three seeds, mean reported.

Data: the hub's "nyu-mll/glue" configs, or the TSVs of the GLUE distribution under --set data_dir=DIR
(DIR/SST-2/train.tsv, DIR/MNLI/dev_matched.tsv, ...), read as GLUE's own processors read them: tab
separated, no quoting, the task's columns by position, CoLA without a header row. Local labels are mapped
to the hub's ids (MNLI: entailment 0, neutral 1, contradiction 2; QNLI/RTE: entailment 0) so that the two
sources agree. Scores are on the dev sets (the test labels are not public), with GLUE's metrics.
"""
from __future__ import annotations

import csv
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from tasks.evals.registry import register_suite
from tasks.evals.finetune import (EvalOptions, FinetuneRecipe, encode_pairs, finetune, load_text_model,
                                  mean_over_seeds, model_loss, pad_collate, predict, text_max_len)
from tasks.evals.metrics import glue_metrics

RECIPE = FinetuneRecipe(epochs=3, lr=1e-4, batch_size=32, seeds=(0, 1, 2))
MAX_LEN = 128        # tokens per example, as in BERT's GLUE fine-tuning
HUB = "nyu-mll/glue"
NLI3 = {"entailment": 0, "neutral": 1, "contradiction": 2}
NLI2 = {"entailment": 0, "not_entailment": 1}


@dataclass(frozen=True)
class GlueTask:
    folder: str                       # directory name in the GLUE distribution
    hub_fields: tuple                 # text columns in the hub dataset (1 or 2)
    columns: tuple                    # TSV column positions: text a, text b (or None), label
    min_columns: int                  # a row with fewer columns is malformed
    num_labels: int                   # 1: regression (STS-B)
    evals: dict                       # result name -> (hub split, local file)
    header: bool = True
    labels: dict | None = None        # TSV label string -> hub id (None: the integer in the file)


TASKS = {
    "cola": GlueTask("CoLA", ("sentence",), (3, None, 1), 4, 2, {"cola": ("validation", "dev.tsv")}, header=False),
    "sst2": GlueTask("SST-2", ("sentence",), (0, None, 1), 2, 2, {"sst2": ("validation", "dev.tsv")}),
    "mrpc": GlueTask("MRPC", ("sentence1", "sentence2"), (3, 4, 0), 5, 2, {"mrpc": ("validation", "dev.tsv")}),
    "qqp": GlueTask("QQP", ("question1", "question2"), (3, 4, 5), 6, 2, {"qqp": ("validation", "dev.tsv")}),
    "stsb": GlueTask("STS-B", ("sentence1", "sentence2"), (7, 8, -1), 10, 1, {"stsb": ("validation", "dev.tsv")}),
    "mnli": GlueTask("MNLI", ("premise", "hypothesis"), (8, 9, -1), 12, 3,
                     {"mnli_m": ("validation_matched", "dev_matched.tsv"),
                      "mnli_mm": ("validation_mismatched", "dev_mismatched.tsv")}, labels=NLI3),
    "qnli": GlueTask("QNLI", ("question", "sentence"), (1, 2, 3), 4, 2, {"qnli": ("validation", "dev.tsv")}, labels=NLI2),
    "rte": GlueTask("RTE", ("sentence1", "sentence2"), (1, 2, 3), 4, 2, {"rte": ("validation", "dev.tsv")}, labels=NLI2),
    "wnli": GlueTask("WNLI", ("sentence1", "sentence2"), (1, 2, 3), 4, 2, {"wnli": ("validation", "dev.tsv")}),
}
PAPER_TASKS = ("sst2", "mnli", "mrpc", "cola", "qnli", "qqp", "stsb")   # Table 1's columns


def read_glue_tsv(task: str, path) -> list[dict]:
    """Examples {text_a, text_b, label} of one GLUE TSV file; a missing or malformed file is an error
    naming the file, the line and the format expected."""
    spec, path = TASKS[task], Path(path)
    a, b, lab = spec.columns
    what = (f"the GLUE {spec.folder} TSV format: tab-separated, {'a header row, ' if spec.header else 'no header, '}"
            f"text in column {a}{f' and {b}' if b is not None else ''}, label in column {lab} (0-based)")
    if not path.is_file():
        raise FileNotFoundError(f"GLUE file {path} not found; expected {what}")
    out = []
    csv.field_size_limit(sys.maxsize)   # a few GLUE sentences exceed csv's default field limit
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    skipped = 0
    for lineno, row in enumerate(rows, start=1):
        if spec.header and lineno == 1 or not row:
            continue
        if len(row) < spec.min_columns:
            if task == "qqp":  # GLUE's QQP has a few truncated rows; its own processor skips them too
                skipped += 1
                continue
            raise ValueError(f"{path}:{lineno}: {len(row)} columns, expected at least {spec.min_columns} ({what})")
        out.append({"text_a": row[a], "text_b": row[b] if b is not None else None,
                    "label": _label(task, row[lab], path, lineno)})
    if skipped:
        warnings.warn(f"{path}: skipped {skipped} truncated QQP rows")
    if not out:
        raise ValueError(f"{path} holds no examples; expected {what}")
    return out


def _label(task: str, raw: str, path, lineno: int):
    spec = TASKS[task]
    try:
        if spec.num_labels == 1:
            return float(raw)
        value = spec.labels[raw] if spec.labels else int(raw)
        if not 0 <= value < spec.num_labels:
            raise ValueError
        return value
    except (KeyError, ValueError):
        known = sorted(spec.labels) if spec.labels else list(range(spec.num_labels))
        raise ValueError(f"{path}:{lineno}: label {raw!r} is not one of {known} (GLUE {spec.folder})") from None


def load_glue(task: str, split: str, data_dir: str | None = None, limit: int | None = None) -> list[dict]:
    """`split` is "train" or a result name of the task (e.g. "mnli_mm"); local TSVs when data_dir is given."""
    spec = TASKS[task]
    hub_split, local = ("train", "train.tsv") if split == "train" else spec.evals[split]
    if data_dir is not None:
        rows = read_glue_tsv(task, Path(data_dir).expanduser() / spec.folder / local)
    else:
        from datasets import load_dataset
        ds = load_dataset(HUB, task, split=hub_split)
        f = spec.hub_fields
        rows = [{"text_a": r[f[0]], "text_b": r[f[1]] if len(f) > 1 else None,
                 "label": float(r["label"]) if spec.num_labels == 1 else int(r["label"])} for r in ds]
    return rows[:limit] if limit else rows


def classify(pretrained, train: list[dict], evals: dict[str, list[dict]], num_labels: int, recipe: FinetuneRecipe,
             options: EvalOptions, score, max_len: int, log=print) -> dict:
    """Fine-tune a sequence classifier once per seed on `train` and score each eval set with
    `score(preds, labels)`; returns per-eval {metrics (mean over seeds), per_seed, seeds, ...}."""
    tok, fam = pretrained.tokenizer, pretrained.family
    pairs = train[0]["text_b"] is not None

    def encode(rows):
        feats = encode_pairs(tok, fam, [r["text_a"] for r in rows], [r["text_b"] for r in rows] if pairs else None, max_len)
        return [{**f, "labels": r["label"]} for f, r in zip(feats, rows)]

    train_feats, eval_feats = encode(train), {k: encode(v) for k, v in evals.items()}
    collate, per_seed, fits = pad_collate(tok.pad_token_id), {k: [] for k in evals}, []
    regression = num_labels == 1
    for seed in recipe.seeds:
        torch.manual_seed(seed)
        model = load_text_model(pretrained, "classification", num_labels, regression)
        fits.append(finetune(model, train_feats, collate, model_loss, recipe, seed, options.device, log))
        for name, feats in eval_feats.items():
            logits = np.concatenate(predict(model, feats, collate, lambda m, b: m(
                **{k: v for k, v in b.items() if k != "labels"}).logits.float().cpu().numpy(),
                recipe.eval_batch_size, options.device))
            preds = logits[:, 0] if regression else logits.argmax(-1)
            per_seed[name].append(score(preds, np.array([r["label"] for r in evals[name]])))
            log(f"  seed {seed} {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in per_seed[name][-1].items()))
    return {name: {"metrics": mean_over_seeds(rows), "per_seed": rows, "seeds": list(recipe.seeds),
                   "n_train": len(train), "n_eval": len(evals[name]), "max_seq_len": max_len,
                   "steps": fits[0]["steps"], "finetune_wall": sum(f["wall"] for f in fits),
                   "recipe": recipe.__dict__}
            for name, rows in per_seed.items()}


def load_glue_data(names: list[str], options: EvalOptions) -> None:
    for task in names:
        for split in ("train", *TASKS[task].evals):
            load_glue(task, split, options.data_dir, 1)


@register_suite("glue", {"text": tuple(TASKS)}, {"text": PAPER_TASKS}, load_data=load_glue_data)
def run_glue(pretrained, names: list[str], options: EvalOptions, log=print) -> dict:
    """GLUE dev-set scores by full fine-tuning (paper Table 1)."""
    recipe, results = options.recipe(RECIPE), {}
    for task in names:
        spec = TASKS[task]
        train = load_glue(task, "train", options.data_dir, options.max_train)
        evals = {name: load_glue(task, name, options.data_dir, options.max_eval) for name in spec.evals}
        log(f" {task}: {len(train)} train, " + ", ".join(f"{k} {len(v)}" for k, v in evals.items()))
        results.update(classify(pretrained, train, evals, spec.num_labels, recipe, options,
                                lambda p, y, t=task: glue_metrics(t, p, y), text_max_len(pretrained, MAX_LEN, options), log))
    return {"tasks": results}
