"""bench/perf/budgets.py: the README command it times is README's own, each measurement starts cold (its own small model
pretrained inside its folder), and a failed command or bad input gives an error and writes no result."""
import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import bench.perf.budgets as budgets  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_the_timed_readme_command_is_the_one_readme_gives():
    """At README's defaults the measured command is, word for word, the main command README.md shows."""
    args = budgets.command("readme", "regime", 0, "auto", Path("unused"))
    assert args == budgets.README_COMMAND
    assert "python " + " ".join(args) in (ROOT / "README.md").read_text()
    # another scale, seed or device is said on the command line, so the record says what was timed
    assert budgets.command("readme", "tiny", 1, "cpu", Path("w"))[-6:] == ["--scale", "tiny", "--seed", "1",
                                                                           "--device", "cpu"]


def test_targets_apply_at_the_default_scale_only_and_say_when_missed():
    assert budgets.row("readme", ["run.py"], 1799.0, "cpu", "regime")["within"] is True
    assert budgets.row("readme", ["run.py"], 121.0, "cuda", "regime")["within"] is False
    assert budgets.row("comparison", ["x"], 599.0, "cuda", "regime")["within"] is True
    assert budgets.row("comparison", ["x"], 10.0, "cpu", "regime")["target_s"] is None     # no CPU target set
    assert budgets.row("readme", ["run.py"], 10.0, "cpu", "mini")["target_s"] is None


def test_readme_measurement_starts_cold_and_writes_its_time(tmp_path):
    work, out = tmp_path / "work", tmp_path / "budgets.json"
    assert budgets.main(["--only", "readme", "--scale", "tiny", "--device", "cpu", "--work", str(work),
                         "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    (r,) = result["rows"]
    assert r["measure"] == "readme" and r["seconds"] > 0 and r["target_s"] is None
    assert 50 < r["peak_rss_mb"] < 24_000           # the command's own peak: a python with torch loaded, in MB
    assert result["device"] == "cpu"
    # the table names the CPU's model where Linux reports one, as the run's record does, not only its architecture
    from runs.hardware import cpu_model
    assert result["device_name"] == (cpu_model() or result["environment"]["machine"])
    assert result["table"].startswith(f"budgets on {result['device_name']}\n")
    # the run and the small model it pretrained are inside the measurement's own folder: nothing was cached
    assert (work / "readme" / "bert_small_base-tiny" / "ligo-s0" / "summary.json").exists()
    assert list((work / "readme" / "cache" / "small").glob("bert_small_base-tiny-s0-*/summary.json"))
    # where the time went, from those two records: the small model's pretraining and the LiGO run
    runs = {run["run"].split("/")[-1].split("-s0")[0]: run for run in r["runs"]}
    assert set(runs) == {"bert_small_base-tiny", "ligo"}, runs
    for run in runs.values():
        # a tiny run's training can take under 10 ms on an idle machine: its wall may round to 0.00
        assert 0 <= run["wall_s"] < r["seconds"] and run["steps"] > 0 and run["eval_loss"] > 0
        assert run["s_per_step"] == pytest.approx(run["wall_s"] / run["steps"], abs=0.005 / run["steps"] + 1e-4)
    assert "| readme | bert_small_base-tiny/ligo-s0 |" in result["table"]
    assert not any(run["shipped"] for run in runs.values())      # the repository ships no tiny small model


def test_a_shipped_small_model_is_not_timed_as_trained_here(tmp_path):
    """The README job's small model comes shipped (pretrained/): its copied record holds the wall time of a
    pretraining made elsewhere, which must not read as part of this measurement."""
    for name, config in (("cache/small/t-regime-s0-0123456789", {"shipped_as": "records/r/t-regime/small-s0"}),
                         ("t-regime/ligo-s0", {})):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "config.json").write_text(json.dumps(config))
        (tmp_path / name / "summary.json").write_text(json.dumps({"wall": 500.0, "step": 100, "eval_loss": 4.0}))
    small, large = budgets.runs_in(tmp_path)
    assert (small["shipped"], small["wall_s"], small["s_per_step"]) == (True, None, None)
    assert (large["shipped"], large["wall_s"], large["s_per_step"]) == (False, 500.0, 5.0)
    table = budgets.table([{**budgets.row("readme", ["run.py"], 600.0, "cpu", "regime"),
                            "runs": [small, large]}], "x86_64")
    assert "| readme | cache/small/t-regime-s0-0123456789 | shipped | 100 |" in table


def test_a_failing_command_is_an_error_not_a_time(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(budgets, "README_COMMAND", ["-c", "print('boom'); raise SystemExit(3)"])
    out = tmp_path / "budgets.json"
    assert budgets.main(["--only", "readme", "--scale", "tiny", "--device", "cpu", "--work", str(tmp_path / "w"),
                         "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "exited 3" in err and "boom" in err
    assert not out.exists()


def test_a_measurement_made_survives_a_later_failing_one(tmp_path, monkeypatch, capsys):
    """The file is written after each measurement (a lent GPU's time can run out mid-comparison): the README row
    is kept, the comparison is listed as pending, and no time is written for the command that failed."""
    fake = {"readme": ["-c", "pass"], "comparison": ["-c", "print('boom'); raise SystemExit(3)"]}
    monkeypatch.setattr(budgets, "command", lambda name, *rest: fake[name])
    out = tmp_path / "budgets.json"
    assert budgets.main(["--scale", "tiny", "--device", "cpu", "--work", str(tmp_path / "w"),
                         "--out", str(out)]) == 1
    assert "exited 3" in capsys.readouterr().err
    result = json.loads(out.read_text())
    assert [r["measure"] for r in result["rows"]] == ["readme"] and result["pending"] == ["comparison"]
    assert result["rows"][0]["seconds"] >= 0


@pytest.mark.parametrize("args,needle", [(["--scale", "huge"], "huge"), (["--device", "tpu"], "unknown device 'tpu'")])
def test_bad_input_is_one_line_and_writes_nothing(args, needle, tmp_path, capsys):
    out = tmp_path / "budgets.json"
    with pytest.raises(SystemExit) as e:
        budgets.main([*args, "--work", str(tmp_path / "w"), "--out", str(out)])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1
    assert not out.exists() and not (tmp_path / "w").exists()


def test_an_existing_work_folder_is_refused(tmp_path, capsys):
    work = tmp_path / "w"
    work.mkdir()
    (work / "keep.txt").write_text("mine")
    with pytest.raises(SystemExit) as e:
        budgets.main(["--scale", "tiny", "--device", "cpu", "--work", str(work), "--out", str(tmp_path / "b.json")])
    assert e.value.code == 2 and "exists" in capsys.readouterr().err
    assert (work / "keep.txt").read_text() == "mine" and not (tmp_path / "b.json").exists()
