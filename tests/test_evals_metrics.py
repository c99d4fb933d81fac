"""Downstream metrics against their definitions: SQuAD EM/F1 as the official v1.1 and v2.0 scripts score
them (hand-checked cases), GLUE metrics against scikit-learn / scipy and hand-computed values."""
import math

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from tasks.evals.metrics import (exact_v1, exact_v2, f1_v1, f1_v2, glue_metrics, normalize_answer,
                                 squad_v1_scores, squad_v2_scores, top1)


@pytest.mark.parametrize("text,expected", [
    ("The Denver Broncos", "denver broncos"),          # articles go, case folds
    ("a an the", ""),                                   # only articles: nothing left
    ("Anthem theater", "anthem theater"),               # articles only as whole words
    ("U.S.A.", "usa"),                                  # punctuation is deleted, not spaced
    ("well-known, isn't it?", "wellknown isnt it"),
    ("  lots \t of\n  space ", "lots of space"),        # whitespace collapses
    ("the.the", "thethe"),                              # punctuation removed before articles
    ("", ""),
])
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_exact_and_f1_token_overlap():
    assert exact_v1("the Denver Broncos", "Denver Broncos!") == 1.0
    assert f1_v1("Denver Broncos team", "Denver Broncos") == pytest.approx(0.8)   # p 2/3, r 1
    assert f1_v1("x y y", "y y z") == pytest.approx(2 / 3)                        # counts repeated tokens
    assert f1_v1("Paris", "London") == 0.0


def test_empty_strings_differ_between_v1_and_v2():
    assert exact_v1("", "") == 1.0 and f1_v1("", "") == 0.0     # v1.1: no common token, F1 0
    assert exact_v2("", "") == 1.0 and f1_v2("", "") == 1.0     # v2.0: both empty is a match
    assert f1_v2("the", "") == 1.0                              # "the" normalises to nothing
    assert f1_v2("Paris", "") == 0.0 and f1_v2("", "Paris") == 0.0


def test_v1_max_over_gold_answers_and_missing_predictions():
    gold = {"q1": ["Broncos", "Denver Broncos"], "q2": ["1998"], "q3": ["x"]}
    preds = {"q1": "Denver", "q2": "in 1998"}        # q3 has no prediction: counted, scores 0
    s = squad_v1_scores(gold, preds)
    assert s["exact_match"] == 0.0
    f1_q1 = max(0.0, 2 * (1 * 0.5) / 1.5)             # vs "Denver Broncos": p 1, r 1/2
    assert s["f1"] == pytest.approx(100 * (f1_q1 + 2 / 3) / 3)


def test_v2_unanswerable_questions_and_breakdowns():
    # q2 has no gold answer: unanswerable. q3's answers all normalise to "", but its answer list is not empty:
    # the official script counts it answerable (HasAns) and scores it against [""]
    gold = {"q1": ["Paris", "the city of Paris"], "q2": [], "q3": ["the", "."], "q4": ["1998"]}
    preds = {"q1": "Paris", "q2": "", "q3": "London", "q4": ""}
    s = squad_v2_scores(gold, preds)
    assert s["total"] == 4
    assert s["exact"] == pytest.approx(50.0) and s["f1"] == pytest.approx(50.0)
    assert s["HasAns_total"] == 3 and s["HasAns_exact"] == pytest.approx(100 / 3)
    assert s["NoAns_total"] == 1 and s["NoAns_exact"] == 100.0


def test_v2_answerable_means_a_non_empty_answer_list_as_the_official_script():
    # a question whose only gold answer is "The", predicted unanswerable (no-answer probability above the
    # threshold), is wrong: the official script gives EM 66.67 here, not 100
    gold = {"a": ["Paris"], "b": [], "c": ["The"]}
    preds = {"a": "Paris", "b": "x", "c": "y"}
    s = squad_v2_scores(gold, preds, na_probs={"a": 0.0, "b": 1.0, "c": 1.0}, na_prob_thresh=0.5)
    assert s["exact"] == pytest.approx(200 / 3) and s["HasAns_total"] == 2 and s["NoAns_total"] == 1


def test_v2_no_answer_threshold_and_best_threshold_sweep():
    gold = {"q1": ["Paris"], "q2": []}
    preds = {"q1": "Paris", "q2": "London"}
    na = {"q1": 0.2, "q2": 0.8}
    # above the threshold a question is predicted unanswerable: q2 then scores 1
    assert squad_v2_scores(gold, preds, na, na_prob_thresh=0.5)["exact"] == 100.0
    s = squad_v2_scores(gold, preds, na, na_prob_thresh=1.0)
    assert s["exact"] == 50.0
    # hand sweep: abstain everywhere = 1/2; answer q1 (na 0.2) = 2/2; also answer q2 = 1/2
    assert s["best_exact"] == 100.0 and s["best_exact_thresh"] == 0.2
    assert s["best_f1"] == 100.0


def test_v2_missing_prediction_is_left_out_as_the_script_does():
    s = squad_v2_scores({"q1": ["a b"], "q2": ["c"]}, {"q1": "a b"})
    assert s["total"] == 1 and s["exact"] == 100.0


def test_glue_metrics_match_sklearn_and_scipy():
    rng = np.random.default_rng(0)
    y, p = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    assert glue_metrics("sst2", p, y)["accuracy"] == pytest.approx(100 * accuracy_score(y, p))
    mrpc = glue_metrics("mrpc", p, y)
    assert mrpc["f1"] == pytest.approx(100 * f1_score(y, p)) and mrpc["accuracy"] == pytest.approx(100 * accuracy_score(y, p))
    assert mrpc["score"] == pytest.approx((mrpc["f1"] + mrpc["accuracy"]) / 2)
    assert glue_metrics("cola", p, y)["mcc"] == pytest.approx(100 * matthews_corrcoef(y, p))
    a, b = rng.normal(size=50), rng.normal(size=50)
    st = glue_metrics("stsb", a, b)
    assert st["pearson"] == pytest.approx(100 * pearsonr(a, b)[0]) and st["spearman"] == pytest.approx(100 * spearmanr(a, b)[0])
    y3, p3 = rng.integers(0, 3, 100), rng.integers(0, 3, 100)
    assert glue_metrics("mnli_mm", p3, y3) == glue_metrics("mnli", p3, y3)


def test_glue_metrics_hand_checked():
    # preds 1 1 0 0 1 / labels 1 0 0 0 1: TP 2, TN 2, FP 1, FN 0 -> MCC 4 / sqrt(3*2*3*2) = 2/3
    assert glue_metrics("cola", [1, 1, 0, 0, 1], [1, 0, 0, 0, 1])["mcc"] == pytest.approx(100 * 2 / 3)
    m = glue_metrics("qqp", [1, 0, 1, 1], [1, 0, 0, 1])      # TP 2, FP 1, FN 0: F1 0.8, accuracy 0.75
    assert m == pytest.approx({"f1": 80.0, "accuracy": 75.0, "score": 77.5})
    s = glue_metrics("stsb", [1, 2, 3, 4], [2, 4, 6, 9])      # monotone: Spearman exactly 1
    assert s["spearman"] == pytest.approx(100.0) and 99 < s["pearson"] < 100
    assert glue_metrics("stsb", [3, 3, 3], [1, 2, 3])["pearson"] == 0.0   # constant prediction: no nan


def test_top1_from_logits_or_classes():
    logits = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    assert top1(logits, [1, 0, 0]) == pytest.approx(200 / 3)
    assert top1([1, 0, 0], [1, 0, 0]) == 100.0
    assert not math.isnan(top1(logits, [1, 1, 1]))
