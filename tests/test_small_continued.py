"""bench/small_continued.py: the no-growth control (the pair's small model trained on under the large recipe).
Its committed result recomputes from the committed records, and its task grows nothing."""
import json
from pathlib import Path

import pytest

from bench.small_continued import compare, continued_task, run_dir
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
    from bench.small_continued import main
    from tasks.data import vision
    monkeypatch.setattr(vision, "FASHION_MNIST_DIR", str(tmp_path / "no-fashion-mnist"))
    runs, out = tmp_path / "runs", tmp_path / "result.json"
    with pytest.raises(SystemExit) as exit_:
        main(["--tasks", "deit_s_b:0", "--runs", str(runs), "--out", str(out), *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1
    assert not runs.exists() and not out.exists()


def test_merge_runs_copies_complete_runs_whole_and_never_an_incomplete_one(tmp_path):
    import subprocess

    def run(root, label, complete, text):
        d = root / "t-mini" / label
        d.mkdir(parents=True)
        (d / "metrics.jsonl").write_text(text)
        if complete:
            (d / "summary.json").write_text("{}")
    a, b, dest = tmp_path / "a", tmp_path / "b", tmp_path / "dest"
    run(a, "ligo-s0", False, "a's incomplete")      # an incomplete run in one part ...
    run(b, "ligo-s0", True, "b's complete")          # ... complete in the other
    run(a, "small-s0", True, "a's small")
    run(b, "small-s0", True, "b's small")
    run(a, "net2net-s0", False, "only incomplete")
    run(dest, "scratch-s0", False, "dest's incomplete")
    run(b, "scratch-s0", True, "b's scratch")
    script = ROOT / "bench" / "merge_runs.sh"
    subprocess.run(["bash", "-c", f'. "{script}" && merge_runs "{dest}" "{a}" "{b}"'], check=True)
    got = {d.name: (d / "metrics.jsonl").read_text() for d in (dest / "t-mini").iterdir()}
    assert got == {"ligo-s0": "b's complete", "small-s0": "a's small", "scratch-s0": "b's scratch"}
    assert all((dest / "t-mini" / label / "summary.json").exists() for label in got)


@pytest.mark.parametrize("job", ["bert-6400:bert:bert_small_base::0",            # no runs
                                 "bert-6400:bert:bert_small_base:ligo:zero",     # seeds not numbers
                                 "bert 6400:bert:bert_small_base:ligo:0",        # a name that is not a folder name
                                 "bert-6400:bert:bert_small_base:ligo:0:steps"])  # a setting without a value
def test_the_regime_script_refuses_a_malformed_job_before_it_installs_or_writes(tmp_path, job):
    """bench/issue41_regime.sh runs on a lent GPU whose minutes are few: a malformed job is refused in one line, with
    the form it takes, before pip or any folder (its WORK root, $OUT) is touched."""
    import subprocess
    work, out = tmp_path / "work", tmp_path / "out"
    done = subprocess.run(["bash", str(ROOT / "bench" / "issue41_regime.sh"), "60", "ok:bert:t:scratch:0", job],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "OUT": str(out),
                                                               "WORK": str(work), "DEVICE": "cpu"}, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "NAME:SWEEP:TASK:RUNS:SEEDS" in done.stderr and job in done.stderr
    assert not work.exists() and not out.exists()
