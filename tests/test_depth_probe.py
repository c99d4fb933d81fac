"""bench/experiments/depth_probe.py: each depth is the pair's large model with only its depth changed, trained from scratch as
an ordinary run, and a complete run is reused rather than trained again."""
import json
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.experiments.depth_probe import WIDTH_FIELDS, default_out, depth_task, main  # noqa: E402
from tasks import get_task  # noqa: E402


def test_depth_task_changes_only_the_depth():
    task = get_task("bert_depth_only", "tiny")
    probe = depth_task(task, 3)
    assert probe.large == probe.small and probe.large.layers == 3
    assert {k: v for k, v in vars(probe.large).items() if k != "layers"} == \
           {k: v for k, v in vars(task.large).items() if k != "layers"}
    assert probe.recipe == probe.small_recipe == task.recipe and probe.data == task.data


def test_small_width_takes_every_width_field_of_the_small_model_and_keeps_the_depth_asked():
    task = get_task("llama_small_base", "mini")      # grows width x1.33 with key/value groups, and depth x2
    probe = depth_task(task, task.large.layers, "small")
    assert probe.large == probe.small and probe.large.layers == task.large.layers
    assert {f: getattr(probe.large, f) for f in WIDTH_FIELDS} == {f: getattr(task.small, f) for f in WIDTH_FIELDS}
    assert probe.large.hidden < task.large.hidden and probe.large.kv_heads < task.large.kv_heads
    rest = lambda spec: {k: v for k, v in vars(spec).items() if k not in WIDTH_FIELDS + ("layers",)}  # noqa: E731
    assert rest(probe.large) == rest(task.large)
    assert probe.name != depth_task(task, task.large.layers).name     # its own record directory


def test_result_files_of_other_tasks_widths_and_seeds_do_not_overwrite_the_committed_one():
    names = {default_out(t, w, s) for t in ("bert_depth_only", "llama_small_base") for w in ("large", "small")
             for s in (0, 1)}
    assert len(names) == 8
    assert default_out("bert_depth_only", "large", 0).endswith("/depth_probe.json")
    assert default_out("bert_depth_only", "large", 1).endswith("/depth_probe-s1.json")
    assert default_out("llama_small_base", "small", 1).endswith("/depth_probe-llama_small_base-small_width-s1.json")


def test_probe_records_each_depth_and_reuses_complete_runs(tmp_path, capsys):
    runs, out = tmp_path / "runs", tmp_path / "probe.json"
    args = ["--scale", "tiny", "--layers", "2", "1", "--runs", str(runs), "--out", str(out)]
    assert main(args) == 0
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert [r["layers"] for r in rows] == [1, 2]
    assert rows[0]["final_eval_loss"] != rows[1]["final_eval_loss"]
    assert rows[0]["unigram_ce"] == rows[1]["unigram_ce"] > 0
    assert all(r["curve"][-1][1] == r["final_eval_loss"] and r["curve"][0][0] == 0 for r in rows)
    from runs.record import load_run
    for r in rows:        # the record's own last evaluation interval, shown in the table beside the eval loss
        assert r["closing_train_loss"] == load_run(r["record"]).closing_training_loss()[0] > 0
        assert f"{r['closing_train_loss']:.3f} |" in result["table"]
    recipe = get_task("bert_depth_only", "tiny").recipe
    assert result["recipe"]["warmup"] == recipe.warmup and result["recipe"]["lr"] == recipe.lr
    assert f"{recipe.warmup} warm-up steps" in result["table"]
    metrics = sorted(runs.rglob("metrics.jsonl"))
    assert len(metrics) == 2
    stamps = [m.stat().st_mtime_ns for m in metrics]
    assert main(args) == 0                        # the second call trains nothing
    assert [m.stat().st_mtime_ns for m in metrics] == stamps
    assert json.loads(out.read_text())["rows"] == rows


def test_a_record_made_under_another_recipe_is_refused_not_reused(tmp_path, capsys):
    runs, out = tmp_path / "runs", tmp_path / "probe.json"
    args = ["--scale", "tiny", "--layers", "1", "--runs", str(runs), "--out", str(out)]
    assert main(args) == 0
    config = next(runs.rglob("config.json"))
    recorded = json.loads(config.read_text())
    recorded["task"]["recipe"]["lr"] *= 2          # as if the registry's recipe had changed since
    config.write_text(json.dumps(recorded))
    out.unlink()
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: ") and "another configuration" in err and "recipe" in err, err
    assert not out.exists()
