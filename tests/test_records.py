"""Run records: atomic JSON, whole metric lines, truncated-line recovery, the reader, each start of a resumed run."""
import io
import json

import pytest
import torch

from runs.ledger import FlopsLedger
import pandas as pd

from analysis.frames import one_machine
from runs.atomic import atomic_path, write_json_atomic
from runs.record import RunExistsError, RunWriter, load_run, read_metrics, run_machine


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


def start_config(threads: int, argv: list[str]) -> dict:
    return {"task": {"name": "t"}, "method": {"name": "m"}, "argv": argv, "created": f"start {threads}",
            "environment": {"device": "cpu", "device_name": "x86_64", "threads": threads}}


def test_a_cpu_runs_machine_is_its_cpu_model_where_recorded():
    # two CPUs of one architecture ("x86_64") run at another pace: their wall times are two machines'
    epyc = {"device": "cpu", "device_name": "x86_64", "cpu": "AMD EPYC", "threads": 2}
    xeon = {**epyc, "cpu": "Intel(R) Xeon(R) Platinum"}
    assert run_machine({"environment": epyc}) == "AMD EPYC, 2 thr."
    assert run_machine({"environment": epyc, "resumed": [{"step": 9, "environment": xeon}]}) == \
        "AMD EPYC, 2 thr. then Intel(R) Xeon(R) Platinum, 2 thr."
    # a record made before CPU models were recorded is not taken for the EPYC's; a GPU run is its GPU's
    assert run_machine(start_config(2, [])) != run_machine({"environment": epyc})
    gpu = {"device": "cuda", "device_name": "NVIDIA H200", "cpu": "AMD EPYC", "threads": 16}
    assert run_machine({"environment": gpu}) == "NVIDIA H200, 16 thr."


def test_a_resume_elsewhere_is_recorded_and_its_wall_time_is_no_single_machines(tmp_path):
    # a sweep stopped at step 200 on 2 threads and resumed by a launcher that gives each run 1 thread: the record
    # must not say "2 threads" of a wall time mostly made on one, nor put it beside scratch's 2-thread runs
    w = RunWriter(tmp_path / "r", start_config(2, ["run.py"]))
    for step in (0, 100, 200):
        w.log({"step": step, "flops": float(step)})
    w.close()
    w = RunWriter(tmp_path / "r", start_config(1, ["run.py", "--resume"]), resume=True)
    w.log({"step": 300, "flops": 300.0})
    w.finish({"flops": 300.0})
    config = load_run(tmp_path / "r").config
    assert config["environment"]["threads"] == 2 and config["created"] == "start 2"     # the first start kept
    assert config["resumed"] == [{"step": 200, "created": "start 1", "argv": ["run.py", "--resume"],
                                  "environment": {"device": "cpu", "device_name": "x86_64", "threads": 1}}]
    assert run_machine(config) == "x86_64, 2 thr. then x86_64, 1 thr."
    assert run_machine(start_config(2, [])) == "x86_64, 2 thr."
    # resumed on the same machine, it is that machine's
    w = RunWriter(tmp_path / "same", start_config(2, ["run.py"]))
    w.log({"step": 0, "flops": 0.0})
    w.close()
    RunWriter(tmp_path / "same", start_config(2, ["run.py", "--resume"]), resume=True).close()
    same = load_run(tmp_path / "same").config
    assert len(same["resumed"]) == 1 and run_machine(same) == "x86_64, 2 thr."
    # the wall-time panels keep scratch's machine only
    curves = pd.DataFrame([{"role": "large", "label": "scratch", "seed": 0, "machine": run_machine(same)},
                           {"role": "large", "label": "stackbert", "seed": 0, "machine": run_machine(config)},
                           {"role": "large", "label": "ligo", "seed": 0, "machine": run_machine(same)}])
    kept, left_out = one_machine(curves)
    assert list(kept["label"]) == ["scratch", "ligo"] and left_out == [("stackbert", 0)]


def test_atomic_json_leaves_no_temporary(tmp_path):
    write_json_atomic(tmp_path / "x.json", {"k": [1, 2]})
    assert json.loads((tmp_path / "x.json").read_text()) == {"k": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


class InterruptedMidWrite(io.RawIOBase):
    """A file that takes Ctrl-C part-way through its `after`-th write, as a checkpoint being written does."""
    def __init__(self, f, after: int):
        self.f, self.writes, self.after = f, 0, after

    def writable(self):
        return True

    def write(self, b):
        self.writes += 1
        if self.writes == self.after:
            self.f.write(bytes(b)[:len(b) // 2])
            raise KeyboardInterrupt
        return self.f.write(b)

    def tell(self):
        return self.f.tell()


@pytest.mark.parametrize("after", [1, 2, 3, 5, 8])
def test_ctrl_c_inside_torch_save_stays_an_interrupt_and_keeps_the_old_file(tmp_path, after):
    """Interrupted inside a record, torch's zip writer fails its clean-up ("unexpected pos"); the caller still
    sees the KeyboardInterrupt (run.py's exit 130 and one line), the temporary is gone, the old file intact."""
    path = tmp_path / "checkpoint.pt"
    torch.save({"step": 1}, path)
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            torch.save({"w": torch.randn(1000), "v": torch.randn(3000)}, InterruptedMidWrite(f, after))
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]
    assert torch.load(path) == {"step": 1}


def test_ledger_rejects_unknown_phase_and_negative_flops():
    ledger = FlopsLedger()
    ledger.add("forward", 3)
    ledger.add("fit", 2)
    assert ledger.total == 5 and ledger.as_dict()["fit"] == 2
    with pytest.raises(KeyError, match="known: fit"):
        ledger.add("eval", 1)
    with pytest.raises(ValueError):
        ledger.add("forward", -1)


def test_how_a_run_came_by_its_small_model_is_provenance_not_its_identity():
    """A checkpoint names its run by run_identity: a run that pretrained its small model, one that found it cached and
    one recorded before `obtained` existed are the same computation; another small model is not."""
    from runs.record import run_identity
    small = {"path": "cache/small/x", "source": "cache", "pretrain_flops": 1e12, "pretrain_wall": 60.0}
    config = {"task": {"name": "t"}, "method": {"name": "ligo"}, "seed": 0}
    ids = [run_identity({**config, "small": {**small, **extra}})
           for extra in ({"obtained": "pretrained by this run"}, {"obtained": "found in the cache"}, {})]
    assert len(set(ids)) == 1
    assert run_identity({**config, "small": {**small, "path": "cache/small/y"}}) != ids[0]
