"""Run records: atomic JSON, whole metric lines, truncated-line recovery, the reader."""
import json

import pytest

from runs.ledger import FlopsLedger
from runs.record import RunExistsError, RunWriter, load_run, read_metrics, write_json_atomic


def test_writer_and_reader_round_trip(tmp_path):
    w = RunWriter(tmp_path / "r", {"task": {"name": "t"}, "method": {"name": "m"}})
    w.log({"step": 1, "flops": 10.0})
    w.log({"step": 2, "flops": 20.0})
    assert not load_run(tmp_path / "r").complete
    w.finish({"flops": 20.0})
    run = load_run(tmp_path / "r")
    assert run.complete and run.method == "m" and run.task == "t"
    assert [r["step"] for r in run.metrics] == [1, 2]
    assert list(run.frame()["flops"]) == [10.0, 20.0]


def test_truncated_last_line_is_dropped_with_warning(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 1}) + "\n" + '{"step": 2, "flo')
    with pytest.warns(UserWarning, match="truncated last line"):
        rows = read_metrics(path)
    assert rows == [{"step": 1}]


def test_corrupt_middle_line_is_an_error(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{oops\n{"step": 3}\n')
    with pytest.raises(ValueError, match="line 2"):
        read_metrics(path)


def test_existing_run_needs_resume_or_overwrite(tmp_path):
    RunWriter(tmp_path, {"a": 1}).close()
    with pytest.raises(RunExistsError, match="--resume"):
        RunWriter(tmp_path, {"a": 2})
    assert json.loads((tmp_path / "config.json").read_text()) == {"a": 1}


def test_atomic_json_leaves_no_temporary(tmp_path):
    write_json_atomic(tmp_path / "x.json", {"k": [1, 2]})
    assert json.loads((tmp_path / "x.json").read_text()) == {"k": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_ledger_rejects_unknown_phase_and_negative_flops():
    ledger = FlopsLedger()
    ledger.add("forward", 3)
    ledger.add("fit", 2)
    assert ledger.total == 5 and ledger.as_dict()["fit"] == 2
    with pytest.raises(KeyError, match="known: fit"):
        ledger.add("eval", 1)
    with pytest.raises(ValueError):
        ledger.add("forward", -1)
