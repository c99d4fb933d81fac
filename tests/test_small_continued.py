"""bench/experiments/small_continued.py: the no-growth control (the pair's small model trained on under the large recipe).
Its committed result recomputes from the committed records, and its task grows nothing."""
import json
from pathlib import Path

import pytest

from bench.experiments.small_continued import compare, continued_task, run_dir
from tasks import get_task

ROOT = Path(__file__).resolve().parents[1]
RESULTS = sorted((ROOT / "bench" / "results").glob("small_continued*.json"))


def test_the_continued_task_trains_the_small_model_under_the_large_recipe():
    task = get_task("deit_s_b", "mini")
    cont = continued_task(task)
    assert cont.large == cont.small == task.small and cont.recipe == task.recipe
    assert cont.small_recipe == task.small_recipe          # the same cached small model as the growth runs
    assert run_dir(Path("r"), task, 1) == Path("r/deit_s_b_smallcont-mini/direct_copy-s1")


@pytest.mark.parametrize("result", RESULTS, ids=[r.stem for r in RESULTS])
def test_the_committed_result_recomputes_from_the_records(result):
    committed = json.loads(result.read_text())
    assert committed["rows"]
    for row in committed["rows"]:
        task = get_task(row["task"], committed["scale"])
        again = compare(task, row["seed"], ROOT / row["record"], ROOT / committed["records"])
        assert again == row
        assert again["reached"] == (again["saving_flops"] is not None)


def test_settings_reach_the_control_as_a_sweeps_set_reaches_its_runs():
    task = get_task("bert_small_base", "mini")
    cont = continued_task(task, (("steps", "6400"), ("small_recipe.steps", "3200")))
    assert cont.recipe == task.recipe.with_(steps=6400)
    assert cont.small_recipe == task.small_recipe.with_(steps=3200)     # the small model of those runs, pretrained as long
    assert cont.large == cont.small == task.small
    probed = continued_task(task, (("small.hidden", "64"), ("small.heads", "2"), ("large.hidden", "96")))
    assert probed.large == probed.small and (probed.small.hidden, probed.small.heads) == (64, 2)   # the probed small model


@pytest.mark.parametrize("argv, said", [
    (["--set", "large.width=8"], "not a model-spec field"),
    (["--set", "fit_steps=5"], "the control takes recipe fields"),
    (["--set", "steps=abc"], "steps=abc"),
    (["--steps", "5", "--set", "steps=6"], "given twice"),
    (["--set", "small_recipe.steps=0", "--train-only"], "small_recipe.steps=0"),
])
def test_bad_settings_are_refused_in_one_line_before_anything_is_written(tmp_path, capsys, monkeypatch, argv, said):
    """On a machine without Debian's Fashion-MNIST too: the settings are checked before the data (a new machine got
    the missing package's FileNotFoundError for `small_recipe.steps=0`)."""
    from bench.experiments.small_continued import main
    from tasks.data import vision
    monkeypatch.setattr(vision, "FASHION_MNIST_DIR", str(tmp_path / "no-fashion-mnist"))
    runs, out = tmp_path / "runs", tmp_path / "result.json"
    with pytest.raises(SystemExit) as exit_:
        main(["--tasks", "deit_s_b:0", "--runs", str(runs), "--out", str(out), *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1
    assert not runs.exists() and not out.exists()
