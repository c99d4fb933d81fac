"""bench/sweeps/relabel.py: a method renamed in committed records only where the new name computes what the record says,
names moving on in one step (ligo -> ligo_copy while ligo_official -> ligo), never silently, nothing moved on a
refusal."""
import dataclasses
import json

import pytest
from records import SCRATCH, write_run

from bench.sweeps.relabel import main, renamed_dir
from methods import get_method
from tasks import get_task

RENAMES = ["--rename", "ligo=ligo_copy", "ligo_official=ligo", "--why", "the default is the authors' start"]


def described(name: str, **options) -> dict:
    method = get_method(name, task=get_task("bert_small_base", "mini"), **options).for_run(0)
    d = method.describe()
    return {**d, "config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in d["config"].items()}}


def write(root, label, name, description):
    d = write_run(root, name, SCRATCH, label=label, method_config=description["config"])
    config = json.loads((d / "config.json").read_text())
    config["method"] = {**description, "name": name}
    (d / "config.json").write_text(json.dumps(config))
    return d


def test_labels_follow_their_method_and_small_models_follow_their_variant():
    renames = {"ligo": "ligo_copy", "ligo_official": "ligo"}
    assert renamed_dir("ligo_official-pinv-s1", renames) == "ligo-pinv-s1"
    assert renamed_dir("ligo-s0", renames) == "ligo_copy-s0"
    assert renamed_dir("ligo+layer_drop0.1-s0", renames) == "ligo_copy+layer_drop0.1-s0"
    assert renamed_dir("small-ligo-smallshort-s0", renames) == "small-ligo_copy-smallshort-s0"
    assert renamed_dir("small-s0", renames) == "small-s0" and renamed_dir("ligo_copy-s0", renames) == "ligo_copy-s0"


def test_names_move_on_in_one_step_with_their_provenance(tmp_path, capsys):
    copy_start, authors = described("ligo_copy"), described("ligo")
    write(tmp_path, "ligo", "ligo", copy_start)              # the copy start, recorded under its old name
    # as ligo_official showed itself: the new name's display replaces it
    write(tmp_path, "ligo_official", "ligo_official", {**authors, "display": {"name": "LiGO (official)", "color": None,
                                                                             "order": None}})
    twin = write(tmp_path, "ligo-noise0.1", "ligo", copy_start)
    config = json.loads((twin / "config.json").read_text())
    (twin / "config.json").write_text(json.dumps({**config, "same_computation_as": "ligo-s0"}))
    assert main([str(tmp_path), *RENAMES]) == 0
    pair = tmp_path / "bert_small_base-mini"
    assert sorted(p.name for p in pair.iterdir()) == ["ligo-s0", "ligo_copy-noise0.1-s0", "ligo_copy-s0"]
    new = json.loads((pair / "ligo-s0" / "config.json").read_text())
    assert new["method"]["name"] == "ligo" and new["method"]["config"] == authors["config"]
    assert new["method"]["display"] == {"name": "LiGO", "color": "tab:red", "order": 7}
    assert new["relabelled"] == [{"from": "ligo_official-s0", "to": "ligo-s0", "why": "the default is the authors' start"}]
    assert json.loads((pair / "ligo_copy-noise0.1-s0" / "config.json").read_text())["same_computation_as"] == "ligo_copy-s0"
    assert (pair / "ligo_copy-s0" / "metrics.jsonl").exists()


def test_a_record_the_new_name_would_not_compute_is_refused_and_nothing_moves(tmp_path, capsys):
    # the old `ligo` with an option the new name does not have: not the same computation under any settings
    copy_start = described("ligo_copy")
    odd = {**copy_start, "config": {**copy_start["config"], "retired_option": 1}}
    write(tmp_path, "ligo", "ligo", odd)
    before = sorted(p.name for p in (tmp_path / "bert_small_base-mini").iterdir())
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path), *RENAMES])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "retired_option" in err
    assert sorted(p.name for p in (tmp_path / "bert_small_base-mini").iterdir()) == before
    assert "relabelled" not in json.loads((tmp_path / "bert_small_base-mini" / "ligo-s0" / "config.json").read_text())


def test_every_option_of_a_ligo_start_survives_the_round_trip_through_a_record():
    """A record's options rebuild the method they came from (the relabel's check relies on it)."""
    from bench.sweeps.relabel import check_same_computation
    for name in ("ligo", "ligo_copy"):
        d = described(name)
        check_same_computation({"method": d}, name, "record")
        options = dataclasses.fields(get_method(name).Config)
        assert {f.name for f in options} == set(d["config"])
