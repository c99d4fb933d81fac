"""bench/experiments/regime_probe.py: the committed probe table recomputes from the committed probe records (a probe folder holds
its small model's record, its control and scratch), and bad input is refused in one line before anything runs."""
import json
import os
from pathlib import Path

import pytest

from bench.experiments.regime_probe import main, probe_rows, table
from runs.record import read_metrics

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "bench" / "results" / "regime_probe.json"


@pytest.mark.skipif(not RESULT.exists(), reason="no committed probe table")
def test_the_committed_probe_table_recomputes_from_its_records():
    committed = json.loads(RESULT.read_text())["rows"]
    again = [r for folder in sorted((ROOT / "records" / "probes").iterdir()) for r in probe_rows(folder)]
    assert again == committed
    for row in again:       # the regime verdict is every check, the control's included
        checks = [v for k, v in row.items() if k.startswith("check_")]
        assert row["passes"] == all(v is True for v in checks)
        short = (row["control_best"] < row["scratch_final"] if row["metric"] == "acc"     # images: accuracy
                 else row["control_best"] > row["scratch_final"])                       # text: loss
        assert row["check_control"] == short
    assert {row["metric"] for row in again} == {"acc", "loss"}      # both kinds of probe are committed
    for row, line in zip(again, table(again).splitlines()[2:]):     # a row names its units: images or tokens
        assert (" images |" in line) == (row["metric"] == "acc") and (" tokens |" in line) == (row["metric"] == "loss")


def test_a_committed_probe_tabulates_without_the_cache_it_was_trained_from(tmp_path):
    """A probe folder reads its own copy of the small model's record: on a fresh clone the cache entry its control
    names (an absolute path of the machine that trained it) does not exist."""
    import shutil
    committed = ROOT / "records" / "probes" / "deit-32-64-4x"
    probe = tmp_path / committed.name
    shutil.copytree(committed, probe)
    for config_file in probe.glob("controls/*/direct_copy-s*/config.json"):
        config = json.loads(config_file.read_text())
        config["small"]["path"] = str(tmp_path / "gone" / "cache" / Path(config["small"]["path"]).name)
        config_file.write_text(json.dumps(config))
    rows = probe_rows(probe)
    assert [r["seed"] for r in rows] == [0, 1]
    assert rows == [r for r in json.loads(RESULT.read_text())["rows"] if r["probe"] == committed.name]


@pytest.mark.parametrize("argv, said", [([], "give a task and --out"),
                                        (["--table", "records"], "not a probe folder"),
                                        (["bert_small_base", "--out", "{tmp}/p", "--set", "fit_steps=3"],
                                         "the control takes recipe fields")])
def test_bad_input_is_one_line_and_trains_nothing(argv, said, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1
    assert not (tmp_path / "p").exists()


def own_regime_pairs() -> list[str]:
    """The pairs whose regime the registry sets apart from mini's pair at the common budget (PAIRS' "regime" sizes,
    PAIR_REGIME_STEPS): each is a choice made from a probe, so a probe must back it."""
    from tasks import PAIRS
    from tasks.registry import PAIR_REGIME_STEPS
    return sorted({name for name, (_, sizes, _) in PAIRS.items() if "regime" in sizes} | set(PAIR_REGIME_STEPS))


@pytest.mark.parametrize("name", own_regime_pairs())
def test_a_pairs_own_regime_is_one_a_committed_probe_passes_at_seeds_0_and_1(name):
    """`get_task(name, "regime")` trains exactly what a committed probe trained (the task record as runs are compared:
    runs/record.py compared_task), and that probe passes every regime check, the control's included, at
    seeds 0 and 1: a registry edit that moves the regime off its evidence fails here."""
    from runs.atomic import read_json
    from runs.record import compared_task, jsonable
    from tasks import get_task
    same = lambda record: jsonable(compared_task(record))       # noqa: E731  (tuples as lists, as config.json has them)
    want = same(get_task(name, "regime").to_dict())
    backing = {folder for folder in (ROOT / "records" / "probes").iterdir()
               if any(same(read_json(c)["task"]) == want for c in folder.glob("runs/*/scratch-s*/config.json"))}
    assert backing, f"no committed probe trained {name}'s regime task"
    rows = [r for folder in sorted(backing) for r in probe_rows(folder)]
    assert {r["seed"] for r in rows} >= {0, 1}
    assert all(r["passes"] for r in rows), [(r["probe"], r["seed"]) for r in rows if not r["passes"]]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc (Linux)")
def test_a_probe_stopped_by_sigterm_stops_the_tool_it_runs(tmp_path):
    """SIGTERM to the probe alone (`kill`, a scheduler) must stop the training tool it started: a killed CaiT probe's
    control once trained on to its end, orphaned."""
    import signal
    import subprocess
    import sys
    import time

    from bench.sweeps.launch import children
    log = tmp_path / "stderr"          # a file, not a pipe: an orphaned tool would hold a pipe open
    with log.open("w") as stderr:
        probe = subprocess.Popen(
            [sys.executable, "-m", "bench.experiments.regime_probe", "deit_s_b", "--scale", "tiny", "--seeds", "0",
             "--set", "steps=100000", "--set", "small_recipe.steps=100000", "--out", str(tmp_path / "p")],
            cwd=ROOT, stderr=stderr)
    tools = []
    try:
        deadline = time.monotonic() + 120
        while not (tools := children(probe.pid)) and probe.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert tools, "the probe started no tool"
        time.sleep(3)                                  # the tool past its imports, training
        probe.send_signal(signal.SIGTERM)
        probe.wait(timeout=120)
        alive = [pid for pid in tools if _alive(pid)]
        assert not alive, f"the probe's tool trains on after the probe stopped (pids {alive})"
    finally:
        for pid in [probe.pid] + tools:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    err = log.read_text()
    assert probe.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "stopped by SIGTERM" in err


def eval_losses(metrics: Path) -> list[float]:
    return [m["eval_loss"] for m in read_metrics(metrics) if "eval_loss" in m]


def test_a_probe_of_the_regime_scales_task_is_adopted_as_the_comparisons_runs(tmp_path, capsys, monkeypatch):
    """BERT's 3x probe trained exactly the regime scale's pair: adopted, its scratch runs and controls are the records
    records/regime holds (copied by hand before the tool), and the sweep takes them as complete; adopted again,
    nothing moves. A probe of another budget, or with no seed complete at the regime scale, is refused in one line,
    nothing written."""
    from bench.sweeps.cli import main as sweep
    committed = ROOT / "records" / "probes" / "bert-96-144-3x"
    runs, controls = tmp_path / "regime", tmp_path / "regime-control"
    monkeypatch.chdir(ROOT)          # copied_from names the probe as given: relative to the checkout, as committed
    probe = committed.relative_to(ROOT)
    assert main(["--adopt", str(probe), "--runs", str(runs), "--controls", str(controls)]) == 0
    for seed in (0, 1):
        for root, committed_root, run in ((runs, "regime", f"bert_small_base-regime/scratch-s{seed}"),
                                          (controls, "regime-control",
                                           f"bert_small_base_smallcont-regime/direct_copy-s{seed}")):
            assert (root / run / "metrics.jsonl").read_bytes() == \
                (ROOT / "records" / committed_root / run / "metrics.jsonl").read_bytes()
            config = json.loads((root / run / "config.json").read_text())
            assert config["copied_from"] == json.loads(
                (ROOT / "records" / committed_root / run / "config.json").read_text())["copied_from"]
        # the small model's record: the control's own pretraining, the very computation the sweep made for its runs
        adopted, swept = (root / "bert_small_base-regime" / f"small-s{seed}" / "metrics.jsonl"
                          for root in (runs, ROOT / "records" / "regime"))
        assert eval_losses(adopted) == eval_losses(swept) and len(eval_losses(adopted)) == 25
    capsys.readouterr()
    assert sweep(["bert", "--methods", "scratch", "--seeds", "0", "1", "--out", str(runs), "--dry-run"]) == 0
    said = capsys.readouterr()
    assert (said.out + said.err).count("complete, skipped") == 2
    assert main(["--adopt", str(probe), "--runs", str(runs), "--controls", str(controls)]) == 0
    assert "adopted 0 record(s)" in capsys.readouterr().out

    other = tmp_path / "other"
    for name, said in (("bert-96-144-2x", "differs in: recipe.steps, small_recipe.steps"),     # the pair at 2x
                       ("bert-2x", "no seed with its control and scratch complete at the regime scale")):
        with pytest.raises(SystemExit) as exit_:
            main(["--adopt", str(ROOT / "records" / "probes" / name), "--runs", str(other / "r"),
                  "--controls", str(other / "c")])
        assert exit_.value.code == 2
        err = capsys.readouterr().err.strip()
        assert said in err and len(err.splitlines()) == 1
        assert not other.exists()


def test_a_probe_at_another_budget_is_adopted_with_the_settings_its_comparison_runs(tmp_path, capsys, monkeypatch):
    """A budget point of the regime's pair (the budget study): the 2x probe is the regime scale's task with
    `--set steps=3200 --set small_recipe.steps=3200`, so with those settings it is adopted, and the sweep given the
    same settings takes its scratch runs as complete; a setting the probe did not train, or one no control takes,
    is refused in one line, nothing written."""
    from bench.sweeps.cli import main as sweep
    monkeypatch.chdir(ROOT)
    probe = str(Path("records") / "probes" / "bert-96-144-2x")
    runs, controls = tmp_path / "r", tmp_path / "c"
    budget = ["--set", "steps=3200", "--set", "small_recipe.steps=3200"]
    assert main(["--adopt", probe, "--runs", str(runs), "--controls", str(controls), *budget]) == 0
    assert "adopted 6 record(s)" in capsys.readouterr().out        # scratch, control and small model at two seeds
    assert json.loads((runs / "bert_small_base-regime" / "scratch-s1" / "config.json").read_text())[
        "copied_from"] == str(Path(probe) / "runs" / "bert_small_base-regime" / "scratch-s1")
    assert sweep(["bert", "--methods", "scratch", "--seeds", "0", "1", "--out", str(runs), "--dry-run", *budget]) == 0
    said = capsys.readouterr()
    assert (said.out + said.err).count("complete, skipped") == 2
    other = tmp_path / "other"
    for sets, said in ((["--set", "steps=3200"], "differs in: small_recipe.steps"),
                       ([*budget, "--set", "fit_steps=0"], "--set fit_steps: the control takes recipe fields")):
        with pytest.raises(SystemExit) as exit_:
            main(["--adopt", probe, "--runs", str(other / "r"), "--controls", str(other / "c"), *sets])
        assert exit_.value.code == 2
        err = capsys.readouterr().err.strip()
        assert said in err and len(err.splitlines()) == 1
        assert not other.exists()
