"""A run's closing lines against the committed records (analysis/reference.py): the saving the analysis computes for
the same record, a line that follows a changed record, nothing where the reference is another computation, and
run.py printing them after a run."""
import json
import shutil
from pathlib import Path

import pytest

import run
from analysis import reference
from analysis.frames import curves_frame, runs_frame
from analysis.load import load_runs
from analysis.reference import reference_lines
from analysis.savings import seed_savings

ROOT = Path(__file__).resolve().parents[1]
BERT = ROOT / "records/mini/bert_small_base-mini"
KEPT = ("scratch-s0", "scratch-s1", "small-s0", "small-s1", "ligo-s0", "ligo-s1", "net2net-s0", "net2net-s1")


@pytest.fixture
def repo(tmp_path):
    """A copy of part of the committed mini root and its BERT controls, laid out as in the repository."""
    if not BERT.is_dir():
        pytest.skip("records/mini is not in this checkout")
    for name in KEPT:
        shutil.copytree(BERT / name, tmp_path / "records/mini/bert_small_base-mini" / name)
    shutil.copytree(ROOT / "records/small-continued/bert_small_base_smallcont-mini",
                    tmp_path / "records/small-continued/bert_small_base_smallcont-mini")
    return tmp_path


def analysis_saving(folder: Path, label: str, seed: int) -> float:
    runs, _ = load_runs(folder)
    rows = seed_savings(curves_frame(runs), runs_frame(runs), "bert_small_base", "mini")
    return float(rows[(rows["label"] == label) & (rows["seed"] == seed)]["saving_flops"].iloc[0])


def test_the_saving_is_the_analysis_own_and_the_regime_is_the_root_s(repo):
    folder = repo / "records/mini/bert_small_base-mini"
    saving, regime = reference_lines(folder / "ligo-s0", repo=repo)
    assert f"with {100 * analysis_saving(folder, 'ligo', 0):.1f}% fewer FLOPs" in saving
    assert "scratch: records/mini/bert_small_base-mini/scratch-s0" in saving and "LiGO reached" in saving
    # at mini the small model trained on reaches scratch: the control check fails, and the line says so
    assert regime.startswith("regime: FAIL, not met: the small model trained on")


def test_a_changed_record_changes_the_line(repo):
    folder = repo / "records/mini/bert_small_base-mini"
    before = reference_lines(folder / "ligo-s0", repo=repo)[0]
    metrics = folder / "scratch-s0/metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    last = max(i for i, r in enumerate(rows) if r.get("eval_loss") is not None)
    rows[last]["eval_loss"] += 0.05           # scratch ends worse: LiGO reaches it sooner
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = json.loads((folder / "scratch-s0/summary.json").read_text())
    (folder / "scratch-s0/summary.json").write_text(json.dumps({**summary, "eval_loss": rows[last]["eval_loss"]}))
    after = reference_lines(folder / "ligo-s0", repo=repo)[0]
    assert after != before and f"{100 * analysis_saving(folder, 'ligo', 0):.1f}% fewer" in after


def test_no_scratch_of_the_seed_means_no_number(repo):
    folder = repo / "records/mini/bert_small_base-mini"
    shutil.rmtree(folder / "scratch-s1")
    lines = reference_lines(folder / "ligo-s1", repo=repo)
    assert lines == [lines[0]] and lines[0].startswith("saving: none measured: no committed scratch run")
    assert "seed 1" in lines[0] and "%" not in lines[0]


def test_another_computation_gives_no_number_and_names_what_differs(repo, tmp_path):
    """records/bert-6400 is the same pair at 4x the steps (scale mini): not the mini root's scratch computation."""
    longer = ROOT / "records/bert-6400/bert_small_base-mini/ligo-s0"
    if not longer.is_dir():
        pytest.skip("records/bert-6400 is not in this checkout")
    shutil.copytree(longer, tmp_path / "elsewhere/ligo-s0")
    [line] = reference_lines(tmp_path / "elsewhere/ligo-s0", repo=repo)
    assert "trained another task" in line and "recipe.steps" in line and "%" not in line


def test_method_defaults_are_not_the_computation(repo):
    """A committed scratch run whose task record differs from the run's only in the per-scale method defaults (a
    step-count default stretched with another budget) is the same computation: the line gives the number."""
    folder = repo / "records/mini/bert_small_base-mini"
    config = json.loads((folder / "scratch-s0/config.json").read_text())
    config["task"]["method_defaults"] = [["fit_steps", 20], ["ramp_steps", 80]]
    (folder / "scratch-s0/config.json").write_text(json.dumps(config))
    assert f"with {100 * analysis_saving(folder, 'ligo', 0):.1f}% fewer FLOPs" in reference_lines(folder / "ligo-s0",
                                                                                                    repo=repo)[0]


def test_another_device_is_said(repo):
    folder = repo / "records/mini/bert_small_base-mini"
    config = json.loads((folder / "ligo-s0/config.json").read_text())
    config["environment"]["device"] = "cuda"
    (folder / "ligo-s0/config.json").write_text(json.dumps(config))
    assert "trained on cpu, this run on cuda" in reference_lines(folder / "ligo-s0", repo=repo)[0]


def test_a_regime_that_passes_says_so(repo):
    """The control stays short of scratch (its best evaluation above scratch's final): every check passes."""
    control = repo / "records/small-continued/bert_small_base_smallcont-mini"
    for seed in (0, 1):
        metrics = control / f"direct_copy-s{seed}/metrics.jsonl"
        rows = [json.loads(line) for line in metrics.read_text().splitlines()]
        rows = [{**r, "eval_loss": r["eval_loss"] + 1.0} if r.get("eval_loss") is not None else r for r in rows]
        metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
        summary = json.loads((metrics.parent / "summary.json").read_text())
        (metrics.parent / "summary.json").write_text(json.dumps({**summary, "eval_loss": summary["eval_loss"] + 1.0}))
    regime = reference_lines(repo / "records/mini/bert_small_base-mini/ligo-s0", repo=repo)[1]
    assert regime.startswith("regime: PASS, all 5 checks")


def test_run_py_prints_the_lines_after_a_run(tmp_path, capsys, monkeypatch):
    """End to end at tiny: a committed scratch run of the task and seed, then `run.py --method ligo` prints its
    saving against it; without a root for the scale it prints none."""
    root = tmp_path / "records/tiny"
    args = ("--task", "bert_small_base", "--scale", "tiny", "--quiet")
    assert run.main(["--method", "scratch", *args, "--out", str(root / "bert_small_base-tiny/scratch-s0")]) == 0
    assert run.main(["--method", "ligo", *args, "--out", str(tmp_path / "a/ligo-s0")]) == 0
    assert "saving:" not in capsys.readouterr().out        # tiny has no canonical root
    monkeypatch.setattr(reference, "REPO", tmp_path)
    monkeypatch.setitem(reference.CANONICAL, "tiny", ("records/tiny", "records/tiny-control"))
    assert run.main(["--method", "ligo", *args, "--out", str(tmp_path / "b/ligo-s0")]) == 0
    out = capsys.readouterr().out
    assert "scratch: records/tiny/bert_small_base-tiny/scratch-s0" in out
    # tiny fails the checks it can take (its LiGO fit is no 2% of scratch) and names the ones without a record
    assert "regime: FAIL, not met: LiGO fit FLOPs" in out and "(no record for: small final <= unigram" in out
