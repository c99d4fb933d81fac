"""SQuAD v1.1 (Rajpurkar et al. 2016) and v2.0 (Rajpurkar et al. 2018): paper Table 1; recipe of §4.1:
2 epochs, lr 5e-5, batch 12, three seeds, mean reported.

Data: the hub's "rajpurkar/squad" / "rajpurkar/squad_v2", or the official JSON files under --set
data_dir=DIR (train-v1.1.json, dev-v1.1.json, train-v2.0.json, dev-v2.0.json, in DIR or DIR/squad).
Features follow BERT's recipe: the question (at most 64 tokens) + context windows of 384 tokens with a
document stride of 128 (all capped by the model's positions); a training window that does not contain
the answer, and every unanswerable question, points at the first token ([CLS]). Post-processing takes
the n-best (20) start and end logits of every window, keeps valid spans of up to 30 tokens inside the
context, and maps the best back to the context's characters; for v2.0 the question is unanswerable when
the null score ([CLS] start + end, minimum over windows) beats the best span by more than a threshold
(--set null_threshold, default 0). Scores are the official scripts' EM and F1 (tasks/evals/metrics.py).
"""
from __future__ import annotations

import collections
import json
from pathlib import Path

import numpy as np
import torch

from tasks.evals.registry import register_suite
from tasks.evals.finetune import (TEXT_INPUTS, EvalOptions, FinetuneRecipe, finetune, load_text_model,
                                  mean_over_seeds, model_loss, pad_collate, predict, text_max_len, type_ids)
from tasks.evals.metrics import squad_v1_scores, squad_v2_scores

RECIPE = FinetuneRecipe(epochs=2, lr=5e-5, batch_size=12, seeds=(0, 1, 2))
MAX_LEN, DOC_STRIDE, MAX_QUERY, N_BEST, MAX_ANSWER = 384, 128, 64, 20, 30
VERSIONS = {"squad_v1": ("rajpurkar/squad", "train-v1.1.json", "dev-v1.1.json", False),
            "squad_v2": ("rajpurkar/squad_v2", "train-v2.0.json", "dev-v2.0.json", True)}
FORMAT = ('the official SQuAD JSON: {"version", "data": [{"title", "paragraphs": [{"context", "qas": '
          '[{"id", "question", "answers": [{"text", "answer_start"}], "is_impossible" (v2.0)}]}]}]}')


def read_squad_json(path, v2: bool) -> list[dict]:
    """Flatten an official SQuAD file into {id, title, context, question, answers{text, answer_start}}."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"SQuAD file {path} not found; expected {FORMAT}")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e.msg}, line {e.lineno}); expected {FORMAT}") from None

    def need(obj, key, kind, where):
        if not isinstance(obj, dict) or not isinstance(obj.get(key), kind):
            kinds = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
            raise ValueError(f"{path}: {where} lacks {key!r} ({kinds}); expected {FORMAT}")
        return obj[key]

    out = []
    for i, article in enumerate(need(doc, "data", list, "the top level")):
        for j, para in enumerate(need(article, "paragraphs", list, f"data[{i}]")):
            where = f"data[{i}].paragraphs[{j}]"
            context = need(para, "context", str, where)
            for k, qa in enumerate(need(para, "qas", list, where)):
                at = f"{where}.qas[{k}]"
                answers = need(qa, "answers", list, at)
                texts = [need(a, "text", str, f"{at}.answers") for a in answers]
                starts = [need(a, "answer_start", int, f"{at}.answers") for a in answers]
                if not answers and not (v2 and qa.get("is_impossible")):
                    raise ValueError(f"{path}: {at} has no answers and is not marked is_impossible (v2.0 only)")
                out.append({"id": str(need(qa, "id", (str, int), at)), "title": article.get("title", ""),
                            "context": context, "question": need(qa, "question", str, at),
                            "answers": {"text": texts, "answer_start": starts}})
    if not out:
        raise ValueError(f"{path} holds no questions; expected {FORMAT}")
    return out


def load_squad(version: str, split: str, data_dir: str | None = None, limit: int | None = None) -> list[dict]:
    hub, train_file, dev_file, v2 = VERSIONS[version]
    if data_dir is not None:   # DIR/<file>, or DIR/squad/<file> beside GLUE's and the image sets' folders
        root, name = Path(data_dir).expanduser(), train_file if split == "train" else dev_file
        rows = read_squad_json(next((p for p in (root / name, root / "squad" / name) if p.is_file()), root / name), v2)
    else:
        from datasets import load_dataset
        ds = load_dataset(hub, split="train" if split == "train" else "validation")
        rows = [{**r, "answers": {"text": list(r["answers"]["text"]),
                                  "answer_start": list(r["answers"]["answer_start"])}} for r in ds]
    return rows[:limit] if limit else rows


def _short_question(tok, question: str, max_query: int) -> str:
    """The question cut (at a token boundary, in characters) to at most max_query tokens."""
    question = question.lstrip()   # some SQuAD questions start with spaces that only waste tokens
    offsets = tok(question, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    return question if len(offsets) <= max_query else question[:offsets[max_query - 1][1]]


def make_features(tok, family: str, examples: list[dict], max_len: int, train: bool) -> list[dict]:
    """Windows over each context; training windows carry start/end token positions, evaluation windows
    the example index and per-token character offsets (None outside the context)."""
    stride, max_query = min(DOC_STRIDE, max_len // 4), min(MAX_QUERY, max_len // 2)
    questions = [_short_question(tok, ex["question"], max_query) for ex in examples]
    enc = tok(questions, [ex["context"] for ex in examples], truncation="only_second", max_length=max_len,
              stride=stride, return_overflowing_tokens=True, return_offsets_mapping=True, **type_ids(family))
    keys = [k for k in TEXT_INPUTS[family] if k in enc]
    feats = []
    for i, offsets in enumerate(enc["offset_mapping"]):
        seq = enc.sequence_ids(i)
        ex_idx = enc["overflow_to_sample_mapping"][i]
        f = {k: enc[k][i] for k in keys}
        ctx = [t for t, s in enumerate(seq) if s == 1]
        if train:
            f["start_positions"], f["end_positions"] = _answer_span(examples[ex_idx]["answers"], offsets, ctx)
        else:
            f["example_idx"] = ex_idx
            f["offsets"] = [o if s == 1 else None for o, s in zip(offsets, seq)]
        feats.append(f)
    return feats


def _answer_span(answers: dict, offsets, ctx: list[int]) -> tuple[int, int]:
    """Token positions of the first gold answer in this window, or (0, 0) for "not here / no answer"."""
    if not answers["text"] or not ctx:
        return 0, 0
    start_char = answers["answer_start"][0]
    end_char = start_char + len(answers["text"][0])
    if offsets[ctx[0]][0] > start_char or offsets[ctx[-1]][1] < end_char:
        return 0, 0
    start = next(t for t in reversed(ctx) if offsets[t][0] <= start_char)
    end = next(t for t in ctx if offsets[t][1] >= end_char)
    return start, max(start, end)


def postprocess(examples: list[dict], features: list[dict], starts, ends, v2: bool,
                null_threshold: float = 0.0) -> tuple[dict, dict, dict]:
    """(predictions, best non-null spans, null-score differences), keyed by question id."""
    by_example = collections.defaultdict(list)
    for fi, f in enumerate(features):
        by_example[f["example_idx"]].append(fi)
    preds, spans, diffs = {}, {}, {}
    for ei, ex in enumerate(examples):
        best, best_text, null = -np.inf, "", np.inf
        for fi in by_example[ei]:
            offsets = features[fi]["offsets"]
            s, e = starts[fi][:len(offsets)], ends[fi][:len(offsets)]
            null = min(null, float(s[0] + e[0]))
            for a in np.argsort(s)[::-1][:N_BEST]:
                for b in np.argsort(e)[::-1][:N_BEST]:
                    if offsets[a] is None or offsets[b] is None or b < a or b - a + 1 > MAX_ANSWER:
                        continue
                    if s[a] + e[b] > best:
                        best = float(s[a] + e[b])
                        # byte-level BPE offsets keep the leading space (GPT-2 has no post-processor to trim it)
                        best_text = ex["context"][offsets[a][0]:offsets[b][1]].strip()
        spans[ex["id"]] = best_text
        diffs[ex["id"]] = null - best if np.isfinite(best) else float("inf")
        preds[ex["id"]] = "" if v2 and diffs[ex["id"]] > null_threshold else best_text
    return preds, spans, diffs


def score_spans(examples: list[dict], spans: dict, diffs: dict, v2: bool, null_threshold: float) -> dict:
    gold = {ex["id"]: ex["answers"]["text"] for ex in examples}
    if not v2:
        return squad_v1_scores(gold, spans)
    # spans (always answering) + null-score differences as the no-answer "probabilities": thresholding
    # them at null_threshold scores exactly the predictions, and the official sweep finds the best threshold
    return squad_v2_scores(gold, spans, na_probs=diffs, na_prob_thresh=null_threshold)


def run_version(pretrained, version: str, train: list[dict], dev: list[dict], recipe: FinetuneRecipe,
                options: EvalOptions, log=print) -> dict:
    tok, fam, v2 = pretrained.tokenizer, pretrained.family, VERSIONS[version][3]
    max_len = text_max_len(pretrained, MAX_LEN, options)
    train_feats = make_features(tok, fam, train, max_len, train=True)
    dev_feats = make_features(tok, fam, dev, max_len, train=False)
    log(f" {version}: {len(train)} questions -> {len(train_feats)} windows; dev {len(dev)} -> {len(dev_feats)}")
    collate, per_seed, fits, preds = pad_collate(tok.pad_token_id), [], [], {}
    for seed in recipe.seeds:
        torch.manual_seed(seed)
        model = load_text_model(pretrained, "qa")
        fits.append(finetune(model, train_feats, collate, model_loss, recipe, seed, options.device, log))
        out = predict(model, dev_feats, collate, _logits, recipe.eval_batch_size, options.device)
        starts = [row for s, _ in out for row in s]
        ends = [row for _, e in out for row in e]
        preds, spans, diffs = postprocess(dev, dev_feats, starts, ends, v2, options.null_threshold)
        metrics = score_spans(dev, spans, diffs, v2, options.null_threshold)
        metrics["score"] = (metrics["f1"] + metrics["exact_match" if not v2 else "exact"]) / 2
        per_seed.append(metrics)
        log(f"  seed {seed} {version}: EM {metrics.get('exact_match', metrics.get('exact')):.2f} F1 {metrics['f1']:.2f}")
    samples = [{"question": ex["question"], "prediction": preds[ex["id"]], "gold": ex["answers"]["text"]}
               for ex in dev[:3]]
    return {"metrics": mean_over_seeds(per_seed), "per_seed": per_seed, "seeds": list(recipe.seeds),
            "n_train": len(train), "n_eval": len(dev), "windows": len(train_feats), "max_seq_len": max_len,
            "steps": fits[0]["steps"], "finetune_wall": sum(f["wall"] for f in fits), "recipe": recipe.__dict__,
            "sample_predictions": samples}


def _logits(model, batch):
    out = model(**{k: v for k, v in batch.items() if torch.is_tensor(v)})
    return out.start_logits.float().cpu().numpy(), out.end_logits.float().cpu().numpy()


def load_squad_data(names: list[str], options: EvalOptions) -> None:
    for version in names:
        for split in ("train", "dev"):
            load_squad(version, split, options.data_dir, 1)


@register_suite("squad", {"text": tuple(VERSIONS)}, load_data=load_squad_data)
def run_squad(pretrained, names: list[str], options: EvalOptions, log=print) -> dict:
    """SQuAD v1.1 / v2.0 EM and F1 by span fine-tuning (paper Table 1)."""
    recipe = options.recipe(RECIPE)
    results = {}
    for version in names:
        train = load_squad(version, "train", options.data_dir, options.max_train)
        dev = load_squad(version, "dev", options.data_dir, options.max_eval)
        results[version] = run_version(pretrained, version, train, dev, recipe, options, log)
    return {"tasks": results}
