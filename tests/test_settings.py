"""--set routing (runs/settings.py) is one definition for run.py and bench/sweeps/cli.py: the same key sent through
either command line changes the same field to the same typed value, and a value of the wrong type is refused by
both before anything is written."""
from __future__ import annotations

import re

import pytest

from bench.sweeps.registry import Entry
from bench.sweeps.cli import build
from methods import METHODS
from runs.settings import coerce, route, split_item
from tasks import get_task

ITEMS = ["lr=5e-4", "small_recipe.warmup=3", "large.layers=5", "large.hidden=192", "fit_steps=7",
         "layer_drop=true", "adam_betas=0.9,0.95"]


def test_text_and_typed_values_route_to_the_same_fields():
    """What a sweep's table writes typed (fit_steps=7) and what a command line writes as text must build one
    task, one method configuration and one set of strategies."""
    task = get_task("bert_small_base", "tiny")
    from_text = route(task, METHODS["ligo"], [split_item(i) for i in ITEMS])
    typed = [("lr", 5e-4), ("small_recipe.warmup", 3), ("large.layers", 5), ("large.hidden", 192), ("fit_steps", 7),
             ("layer_drop", True), ("adam_betas", (0.9, 0.95))]
    assert route(task, METHODS["ligo"], typed) == from_text
    new, options, strategies = from_text
    assert new.recipe == task.recipe.with_(lr=5e-4, adam_betas=(0.9, 0.95))
    assert new.small_recipe == task.small_recipe.with_(warmup=3)
    assert new.large == task.large.with_(layers=5, hidden=192, ffn=768)     # ffn follows hidden (4x)
    assert new.small == task.small and options == {"fit_steps": 7} and strategies == {"layer_drop": True}


def test_a_sweep_builds_what_run_py_records_from_the_same_set(tmp_path):
    """bench.sweeps --set and run.py --set reach the same fields: the task, method and strategies the sweep builds
    are the ones a run.py run records. Before the shared routing the sweep refused the model-spec keys
    (large.layers) that run.py took."""
    import run
    from runs.preflight import jsonable
    from runs.record import load_run
    items = [*ITEMS, "large.heads=6", "steps=0"]       # head_dim kept (LiGO's Net2Net width); grow and evaluate only
    task, method, strategies = build(Entry("bert_small_base", "ligo"), "tiny", tuple(split_item(i) for i in items))
    assert run.main(["--method", "ligo", "--task", "bert_small_base", "--scale", "tiny", "--quiet",
                     "--out", str(tmp_path / "run"), *[a for i in items for a in ("--set", i)]]) == 0
    recorded = load_run(tmp_path / "run").config
    assert recorded["task"] == jsonable(task.to_dict()) and task.large.layers == 5
    # a run gives the method its seed (GrowthMethod.for_run): the sweep's method, as run 0 uses it
    assert recorded["method"] == jsonable(method.for_run(0).describe()) and method.config.fit_steps == 7
    assert recorded["strategies"] == strategies.record() and strategies.layer_drop == 0.1


@pytest.mark.parametrize("key, raw, current, needle", [
    ("steps", "abc", 10, "--set steps=abc: expected int"),
    ("steps", 1.5, 10, "--set steps=1.5: expected int"),          # a typed table value is checked too
    ("steps", True, 10, "--set steps=True: expected int"),
    ("lr", "fast", 1e-3, "--set lr=fast: expected float"),
])
def test_a_value_of_the_wrong_type_is_refused(key, raw, current, needle):
    with pytest.raises(ValueError, match=re.escape(needle)):
        coerce(key, raw, current)


def test_an_int_becomes_a_float_where_the_field_is_a_float():
    assert coerce("lr", "1", 1e-3) == 1.0 and isinstance(coerce("lr", 1, 1e-3), float)


def test_the_sweep_refuses_a_mistyped_common_setting_before_anything_is_written(tmp_path, capsys):
    """`--set lr=abc` used to reach every run as the string 'abc'; now it is refused in one line, exit 2."""
    from bench.sweeps.cli import main
    assert main(["bert", "--scale", "tiny", "--seeds", "0", "--out", str(tmp_path / "out"), "--set", "lr=abc"]) == 2
    assert capsys.readouterr().err.strip() == "error: --set lr=abc: expected float"
    assert not (tmp_path / "out").exists()


def test_an_unknown_key_names_the_close_match_and_a_strategy_needs_a_value():
    task = get_task("bert_small_base", "tiny")
    with pytest.raises(KeyError, match="did you mean 'large.layers'"):
        route(task, METHODS["scratch"], [("large.layer", "3")])
    with pytest.raises(KeyError, match="unknown key 'large.family'"):      # the family is the task's, not a field
        route(task, METHODS["scratch"], [("large.family", "gpt2")])
    with pytest.raises(ValueError, match="--set layer_drop= has no value"):
        route(task, METHODS["scratch"], [split_item("layer_drop=")])
    with pytest.raises(ValueError, match="malformed --set 'lr'"):
        split_item("lr")


def test_a_path_is_taken_verbatim_and_a_typed_none_keeps_the_tasks_default(tmp_path):
    """data_path and tokenizer are names, not numbers: text such as "1e-4" stays that path (parsing made it
    "0.0001"); a sweep table's None means the task's own data, not a path called "None"."""
    task = get_task("bert_small_base", "tiny")
    assert route(task, METHODS["scratch"], [split_item("data_path=runs/1e-4")])[0].data_path == "runs/1e-4"
    assert route(task, METHODS["scratch"], [split_item("data_path=1e-4")])[0].data_path == "1e-4"
    assert task.data_path is None and route(task, METHODS["scratch"], [("data_path", None)])[0].data_path is None
