"""--report-to (runs/tracking.py): a run's TensorBoard event file holds what metrics.jsonl holds (train loss, lr, eval
loss, ... at the same steps, read back with TensorBoard's own EventAccumulator) and the config as text and
hyperparameters; a resumed run continues it without a step twice; an unknown or uninstalled tracker is refused in
one line before anything is written."""
import importlib.util
import json

import pytest

from methods import get_method
from runs.record import RunWriter
from runs.tracking import TENSORBOARD_DIR, parse_report_to, scalars
from tasks import get_task


def tiny_task(steps=4):
    task = get_task("deit_s_b", "tiny")
    return task.with_(recipe=task.recipe.with_(steps=steps, eval_every=2, log_every=1))


def rows(out):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def events(out):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    accumulator = EventAccumulator(str(out / TENSORBOARD_DIR))
    accumulator.Reload()
    return accumulator


def curve(accumulator, tag):
    return [(e.step, e.value) for e in accumulator.Scalars(tag)]


def test_tensorboard_holds_every_row_and_the_config(tmp_path):
    from runs.experiment import run_experiment
    task = tiny_task()
    out = run_experiment(task, get_method("scratch", task=task), out=tmp_path / "run", progress=False,
                         log=lambda m: None, report_to="tensorboard")
    record, tb = rows(out), events(out)
    for key, tag in (("train_loss", "train/loss"), ("lr", "train/lr"), ("eval_loss", "eval/loss"),
                     ("eval_acc", "eval/acc"), ("units", "train/images"), ("flops", "flops/total")):
        want = [(r["step"], r[key]) for r in record if key in r]
        assert [s for s, _ in curve(tb, tag)] == [s for s, _ in want], tag
        assert [v for _, v in curve(tb, tag)] == pytest.approx([v for _, v in want], rel=1e-6), tag
    assert [s for s, _ in curve(tb, "eval/loss")] == [0, 2, 4]
    text = tb.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert json.loads(text) == json.loads((out / "config.json").read_text())
    assert "_hparams_/session_start_info" in tb.PluginTagToContent("hparams")


def test_a_resumed_run_continues_its_event_file_without_a_step_twice(tmp_path, monkeypatch):
    from runs.experiment import run_experiment
    task = tiny_task()
    out = tmp_path / "run"
    log = RunWriter.log

    def interrupt_after_step_3(self, row):     # the checkpoint is at step 2: step 3 is logged, then lost
        log(self, row)
        if row["step"] == 3:
            raise KeyboardInterrupt
    monkeypatch.setattr(RunWriter, "log", interrupt_after_step_3)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(task, get_method("scratch", task=task), out=out, progress=False, log=lambda m: None,
                       report_to="tensorboard")
    monkeypatch.setattr(RunWriter, "log", log)
    run_experiment(task, get_method("scratch", task=task), out=out, resume=True, progress=False, log=lambda m: None,
                   report_to="tensorboard")
    assert len(list((out / TENSORBOARD_DIR).iterdir())) == 2          # the resumed process wrote its own file
    loss = curve(events(out), "train/loss")
    assert [s for s, _ in loss] == [1, 2, 3, 4]                       # step 3 once: the interrupted one purged
    assert [v for _, v in loss] == pytest.approx([r["train_loss"] for r in rows(out) if "train_loss" in r], rel=1e-6)


def test_rows_become_tagged_numbers():
    row = {"step": 4, "train_loss": 1.5, "lr": 1e-3, "units": 64, "eval_loss": 2.0, "stage": "full",
           "full_model": True, "computation": "abc", "flops_fit": 3.0, "twins": {"F": 0.5}}
    assert scalars(row, "tokens") == {"train/loss": 1.5, "train/lr": 1e-3, "train/tokens": 64.0, "eval/loss": 2.0,
                                      "flops/fit": 3.0, "twins/F": 0.5}


def test_trackers_are_checked_before_anything_is_written(tmp_path):
    assert parse_report_to("none") == () and parse_report_to(None) == ()
    assert parse_report_to("tensorboard,tensorboard") == ("tensorboard",)
    with pytest.raises(ValueError, match="did you mean 'tensorboard'"):
        parse_report_to("tensorbord")
    if importlib.util.find_spec("wandb") is None:
        with pytest.raises(ValueError, match="wandb package is not installed"):
            parse_report_to("wandb")
        assert parse_report_to("all") == ("tensorboard",)


def test_cli_refuses_an_unknown_tracker_in_one_line(tmp_path, capsys):
    from run import main
    out = tmp_path / "run"
    code = main(["--method", "scratch", "--task", "deit_s_b", "--scale", "tiny", "--out", str(out),
                 "--report-to", "tensorbord", "--quiet", "--device", "cpu"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "unknown --report-to tracker 'tensorbord'" in err[0]
    assert not out.exists()
