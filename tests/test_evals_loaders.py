"""Loaders of the downstream suites on tiny fixtures in the official formats (tests/fixtures): GLUE TSVs,
SQuAD v1.1/v2.0 JSON, ImageFolder, the embedded BBC News and digits sets; missing or malformed files give
errors that name the file and the format expected."""
import json
from pathlib import Path

import pytest

from tasks.evals.glue import TASKS, load_glue, read_glue_tsv
from tasks.evals.mini import load_bbc_news, load_digits_items
from tasks.evals.squad import load_squad, read_squad_json
from tasks.evals.transfer import load_image_folder

FIXTURES = Path(__file__).parent / "fixtures"
GLUE = str(FIXTURES / "glue")


@pytest.mark.parametrize("task,n_train,labels,pair", [
    ("cola", 3, [1, 0, 1], False),            # no header row
    ("sst2", 3, [0, 0, 1], False),
    ("mrpc", 2, [1, 0], True),
    ("qqp", 2, [0, 1], True),                 # the truncated third row is skipped, as GLUE's processor does
    ("stsb", 2, [5.0, 3.8], True),            # regression targets
    ("mnli", 4, [1, 0, 0, 2], True),          # neutral 1, entailment 0, contradiction 2 (the hub's ids)
    ("qnli", 2, [1, 0], True),
    ("rte", 2, [1, 0], True),
    ("wnli", 2, [1, 1], True),
])
def test_glue_tsv_training_files(task, n_train, labels, pair, recwarn):
    rows = load_glue(task, "train", GLUE)
    assert [str(w.message).split(": ")[-1] for w in recwarn] == (["skipped 1 truncated QQP rows"] if task == "qqp" else [])
    assert len(rows) == n_train and [r["label"] for r in rows] == labels
    assert all(isinstance(r["text_a"], str) and r["text_a"] for r in rows)
    assert all((r["text_b"] is not None) == pair for r in rows)


def test_glue_dev_files_and_mnli_halves():
    assert [r["label"] for r in load_glue("mnli", "mnli_m", GLUE)] == [1, 2]
    mm = load_glue("mnli", "mnli_mm", GLUE)
    assert len(mm) == 1 and mm[0]["label"] == 2 and mm[0]["text_b"].startswith("Your contributions")
    assert load_glue("mrpc", "mrpc", GLUE)[0]["text_a"].startswith("He said the foodservice")
    assert load_glue("cola", "cola", GLUE)[1] == {"text_a": "The more you eat, the more you want the fatter.",
                                                   "text_b": None, "label": 0}
    assert load_glue("sst2", "train", GLUE, limit=2) == load_glue("sst2", "train", GLUE)[:2]


def test_glue_missing_file_names_file_and_format(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        load_glue("sst2", "train", str(tmp_path))
    assert str(tmp_path / "SST-2" / "train.tsv") in str(e.value) and "GLUE SST-2 TSV format" in str(e.value)


def test_glue_malformed_rows_and_labels(tmp_path):
    bad = tmp_path / "train.tsv"
    bad.write_text("sentence\tlabel\nonly one column here\n")
    with pytest.raises(ValueError, match=r"train.tsv:2: 1 columns, expected at least 2"):
        read_glue_tsv("sst2", bad)
    bad.write_text("index\tquestion\tsentence\tlabel\n0\tq?\ts.\tmaybe\n")
    with pytest.raises(ValueError, match=r"train.tsv:2: label 'maybe' is not one of \['entailment', 'not_entailment'\]"):
        read_glue_tsv("qnli", bad)
    bad.write_text("sentence\tlabel\n")
    with pytest.raises(ValueError, match="holds no examples"):
        read_glue_tsv("sst2", bad)


def test_glue_registry_covers_the_paper_tasks():
    assert {"sst2", "mnli", "mrpc", "cola", "qnli", "qqp", "stsb", "rte", "wnli"} <= set(TASKS)
    assert TASKS["stsb"].num_labels == 1 and TASKS["mnli"].num_labels == 3


def test_squad_v1_json():
    train = load_squad("squad_v1", "train", str(FIXTURES / "squad"))
    assert len(train) == 4 and {"id", "title", "context", "question", "answers"} <= set(train[0])
    for ex in train:   # every answer sits where answer_start says
        for text, start in zip(ex["answers"]["text"], ex["answers"]["answer_start"]):
            assert ex["context"][start:start + len(text)] == text
    dev = load_squad("squad_v1", "dev", str(FIXTURES / "squad"))
    assert [len(ex["answers"]["text"]) for ex in dev] == [3, 1, 2]


def test_squad_v2_json_has_unanswerable_questions():
    train = load_squad("squad_v2", "train", str(FIXTURES / "squad"))
    assert len(train) == 4 and sum(not ex["answers"]["text"] for ex in train) == 2
    dev = load_squad("squad_v2", "dev", str(FIXTURES / "squad"))
    assert [ex["id"] for ex in dev] == ["a1", "a3"] and dev[1]["answers"] == {"text": [], "answer_start": []}


def test_squad_errors_name_file_and_format(tmp_path):
    with pytest.raises(FileNotFoundError, match="dev-v1.1.json not found; expected the official SQuAD JSON"):
        load_squad("squad_v1", "dev", str(tmp_path))
    f = tmp_path / "x.json"
    f.write_text("{not json")
    with pytest.raises(ValueError, match="x.json: not valid JSON"):
        read_squad_json(f, v2=False)
    f.write_text(json.dumps({"version": "1.1", "articles": []}))
    with pytest.raises(ValueError, match="x.json: the top level lacks 'data'"):
        read_squad_json(f, v2=False)
    qa = {"id": "q", "question": "?", "answers": []}
    f.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": "c", "qas": [qa]}]}]}))
    with pytest.raises(ValueError, match=r"data\[0\].paragraphs\[0\].qas\[0\] has no answers"):
        read_squad_json(f, v2=False)
    qa["answers"] = [{"text": "c"}]
    f.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": "c", "qas": [qa]}]}]}))
    with pytest.raises(ValueError, match="answers lacks 'answer_start'"):
        read_squad_json(f, v2=False)
    qa = {"question": "?", "answers": [{"text": "c", "answer_start": 0}]}     # no "id": one line, str or int
    f.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": "c", "qas": [qa]}]}]}))
    with pytest.raises(ValueError, match=r"qas\[0\] lacks 'id' \(str or int\)"):
        read_squad_json(f, v2=False)


def test_image_folder(tmp_path):
    from PIL import Image
    for split in ("train", "val"):
        for cls, color in (("cat", 0), ("dog", 255)):
            (tmp_path / split / cls).mkdir(parents=True)
            for i in range(2 if split == "train" else 1):
                Image.new("RGB", (6, 5), (color, 0, 0)).save(tmp_path / split / cls / f"{i}.png")
    train, val = load_image_folder(tmp_path, "train"), load_image_folder(tmp_path, "eval")
    assert len(train) == 4 and train.classes == ["cat", "dog"] and train.labels == [0, 0, 1, 1]
    assert len(val) == 2 and val[1][0].size == (6, 5) and val[1][1] == 1
    with pytest.raises(FileNotFoundError, match="expected the ImageFolder layout"):
        load_image_folder(tmp_path / "nothing", "train")


def test_bbc_news_from_the_wheel():
    train, test, topics = load_bbc_news()
    assert topics == ["business", "entertainment", "politics", "sports", "tech"]
    assert (len(train), len(test)) == (1781, 444)
    assert sorted({r["label"] for r in test}) == [0, 1, 2, 3, 4] and all(r["text_b"] is None for r in train)
    assert "Time Warner" in train[0]["text_a"]


def test_bbc_news_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="expected .*<topic>/\\*.txt"):
        load_bbc_news(tmp_path / "none")


def test_digits_items_at_the_model_size():
    from models import ModelSpec
    spec = ModelSpec("vit", 1, 32, 1, image_size=12, patch_size=4, in_chans=3, classes=10)
    train, test = load_digits_items(spec)
    assert (len(train), len(test)) == (1438, 359)
    x, y = test[0]
    assert tuple(x.shape) == (3, 12, 12) and 0 <= y < 10
