"""Downstream metrics exactly as the benchmarks define them.

GLUE (Wang et al. 2019, "GLUE: A Multi-Task Benchmark and Analysis Platform"): accuracy for SST-2, MNLI,
QNLI, RTE, WNLI; F1 (of the positive class 1) and accuracy for MRPC and QQP; Matthews correlation for CoLA;
Pearson and Spearman correlation for STS-B. A task with two metrics scores their unweighted mean, and the
GLUE score is the unweighted mean over tasks. Built on scikit-learn / scipy.

SQuAD: EM and F1 as the official evaluation scripts compute them — v1.1 (Rajpurkar et al. 2016) and v2.0
(Rajpurkar et al. 2018). Both normalise answers the same way (lower case, drop punctuation, drop the
articles a/an/the, collapse whitespace), take the maximum over the gold answers, and report percentages.
They differ on empty strings: v1.1's F1 of an empty prediction is 0 even against an empty gold, while
v2.0 scores two empty token lists as a match (that is how an unanswerable question is scored), counts a
question as answerable iff its gold answer list is non-empty (even if the answers normalise to ""), and
reports HasAns/NoAns breakdowns and the best no-answer threshold. Every score here is a percentage (0-100), as in the paper's tables.
"""
from __future__ import annotations

import collections
import re
import string

import numpy as np

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


# ------------------------------------------------------------------------------------------------ GLUE

def accuracy(preds, labels) -> float:
    from sklearn.metrics import accuracy_score
    return 100.0 * float(accuracy_score(labels, preds))


def f1_binary(preds, labels) -> float:
    """F1 of class 1 ("equivalent" in MRPC, "duplicate" in QQP), as GLUE scores it."""
    from sklearn.metrics import f1_score
    return 100.0 * float(f1_score(labels, preds, pos_label=1, average="binary", zero_division=0))


def matthews(preds, labels) -> float:
    from sklearn.metrics import matthews_corrcoef
    return 100.0 * float(matthews_corrcoef(labels, preds))


def pearson(preds, labels) -> float:
    from scipy.stats import pearsonr
    return _correlation(pearsonr, preds, labels)


def spearman(preds, labels) -> float:
    from scipy.stats import spearmanr
    return _correlation(spearmanr, preds, labels)


def _correlation(fn, preds, labels) -> float:
    # a constant prediction (an untrained regressor) has no correlation: scipy would give nan with a
    # warning; it carries no signal, so it scores 0
    p, y = np.asarray(preds, float), np.asarray(labels, float)
    if len(p) < 2 or np.ptp(p) == 0 or np.ptp(y) == 0:
        return 0.0
    return 100.0 * float(fn(p, y)[0])


GLUE_METRICS = {  # task -> the metrics GLUE reports for it
    "cola": ("mcc",), "sst2": ("accuracy",), "mrpc": ("f1", "accuracy"), "qqp": ("f1", "accuracy"),
    "stsb": ("pearson", "spearman"), "mnli": ("accuracy",), "qnli": ("accuracy",), "rte": ("accuracy",),
    "wnli": ("accuracy",),
}
_FUNCS = {"accuracy": accuracy, "f1": f1_binary, "mcc": matthews, "pearson": pearson, "spearman": spearman}


def glue_metrics(task: str, preds, labels) -> dict[str, float]:
    """The GLUE metrics of `task` ("mnli", "mnli_mm" and "mnli_m" all score accuracy); `preds` are class
    ids, or floats for STS-B. Adds "score", the unweighted mean of the task's metrics."""
    names = GLUE_METRICS[task.split("_")[0]]
    out = {name: _FUNCS[name](preds, labels) for name in names}
    out["score"] = float(np.mean([out[n] for n in names]))
    return out


def top1(logits_or_preds, labels) -> float:
    """Top-1 accuracy (percent) from [N, C] logits or [N] predicted classes."""
    p = np.asarray(logits_or_preds)
    return accuracy(p.argmax(-1) if p.ndim == 2 else p, np.asarray(labels))


# ----------------------------------------------------------------------------------------------- SQuAD

def normalize_answer(s: str) -> str:
    """Lower case, remove punctuation, remove articles, collapse whitespace (both official scripts)."""
    s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def _tokens(s: str) -> list[str]:
    return normalize_answer(s).split() if s else []


def _overlap_f1(pred: list[str], gold: list[str]) -> float:
    same = sum((collections.Counter(pred) & collections.Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def exact_v1(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_v1(prediction: str, gold: str) -> float:
    """v1.1: no common token (which includes both being empty) scores 0."""
    return _overlap_f1(normalize_answer(prediction).split(), normalize_answer(gold).split())


def exact_v2(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_v2(prediction: str, gold: str) -> float:
    """v2.0: if either side has no tokens, F1 is 1 when both have none, else 0."""
    pred, ref = _tokens(prediction), _tokens(gold)
    if not pred or not ref:
        return float(pred == ref)
    return _overlap_f1(pred, ref)


def squad_v1_scores(gold: dict[str, list[str]], predictions: dict[str, str]) -> dict[str, float]:
    """Official v1.1 evaluation: qid -> gold answer texts, qid -> predicted text. A question without a
    prediction scores 0 (the script prints a warning and counts it)."""
    em = f1 = 0.0
    for qid, answers in gold.items():
        if qid not in predictions:
            continue
        pred = predictions[qid]
        em += max(exact_v1(pred, a) for a in answers)
        f1 += max(f1_v1(pred, a) for a in answers)
    n = max(len(gold), 1)
    return {"exact_match": 100.0 * em / n, "f1": 100.0 * f1 / n}


def squad_v2_raw(gold: dict[str, list[str]], predictions: dict[str, str]) -> tuple[dict, dict, dict]:
    """Per-question (exact, f1, has_answer) as the v2.0 script computes them: a question is answerable iff its
    gold answer list is non-empty (make_qid_to_has_ans), even when every answer normalises to "" (say "The");
    for scoring, gold answers that normalise to "" are dropped and a question left with none is scored
    against [""] (get_raw_scores)."""
    exact, f1, has = {}, {}, {}
    for qid, answers in gold.items():
        has[qid] = bool(answers)
        refs = [a for a in answers if normalize_answer(a)] or [""]
        if qid not in predictions:
            continue
        pred = predictions[qid]
        exact[qid] = max(exact_v2(pred, a) for a in refs)
        f1[qid] = max(f1_v2(pred, a) for a in refs)
    return exact, f1, has


def _apply_threshold(scores: dict, na_probs: dict, has: dict, thresh: float) -> dict:
    # the script's rule: a question whose no-answer probability exceeds the threshold is predicted
    # unanswerable, which scores 1 exactly when it is
    return {q: (float(not has[q]) if na_probs.get(q, 0.0) > thresh else s) for q, s in scores.items()}


def _best_threshold(scores: dict, predictions: dict, na_probs: dict, has: dict) -> tuple[float, float]:
    """Sweep the no-answer threshold over the sorted no-answer probabilities (the script's find_best_thresh):
    start from abstaining everywhere, then answer questions in order of confidence; answering an
    unanswerable question costs 1 only when the prediction is non-empty."""
    cur = best = float(sum(not has[q] for q in scores))
    best_t = 0.0
    for q in sorted(na_probs, key=lambda k: na_probs[k]):
        if q not in scores:
            continue
        cur += scores[q] if has[q] else (-1.0 if predictions[q] else 0.0)
        if cur > best:
            best, best_t = cur, na_probs[q]
    return 100.0 * best / max(len(scores), 1), best_t


def squad_v2_scores(gold: dict[str, list[str]], predictions: dict[str, str], na_probs: dict | None = None,
                    na_prob_thresh: float = 1.0) -> dict[str, float]:
    """Official v2.0 evaluation: exact, f1 (percent), HasAns_/NoAns_ breakdowns, and with `na_probs` (qid ->
    no-answer probability or score) best_exact/best_f1 and their thresholds. As in the script, a question
    without a prediction is left out (v2.0 prints "Missing prediction" and does not count it)."""
    exact, f1, has = squad_v2_raw(gold, predictions)
    probs = na_probs or {q: 0.0 for q in predictions}
    exact_t = _apply_threshold(exact, probs, has, na_prob_thresh)
    f1_t = _apply_threshold(f1, probs, has, na_prob_thresh)
    n = max(len(exact_t), 1)
    out = {"exact": 100.0 * sum(exact_t.values()) / n, "f1": 100.0 * sum(f1_t.values()) / n, "total": len(exact_t)}
    for name, keep in (("HasAns", True), ("NoAns", False)):
        qids = [q for q in exact_t if has[q] == keep]
        if qids:
            out[f"{name}_exact"] = 100.0 * sum(exact_t[q] for q in qids) / len(qids)
            out[f"{name}_f1"] = 100.0 * sum(f1_t[q] for q in qids) / len(qids)
            out[f"{name}_total"] = len(qids)
    if na_probs is not None:
        out["best_exact"], out["best_exact_thresh"] = _best_threshold(exact, predictions, probs, has)
        out["best_f1"], out["best_f1_thresh"] = _best_threshold(f1, predictions, probs, has)
    return out
