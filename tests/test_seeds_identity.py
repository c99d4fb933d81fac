"""Seeds that seed and runs that carry their identity (issue 43): a run's --seed is its growth method's seed unless
one is set; a checkpoint names its run and its last logged step, and --resume refuses one of another run or a
record whose rows do not reach it; --out inside another run, absurd sizes, a config of the wrong types and a
non-UTF-8 --out are refused in one line before anything is written."""
import json

import pytest
import torch

import run
from methods import get_method
from runs.record import load_run
from tasks import make_task

TINY = ["--task", "bert_small_base", "--scale", "tiny", "--quiet"]
SMALL = dict(layers=2, hidden=64, heads=4)
# the methods with a seed, each on a pair where it draws (HyperCloning only with noise, on an integer ratio)
DRAWS = {"ligo": (dict(fit_steps=0), dict(layers=4, hidden=96, heads=6)),
         "lemon": ({}, dict(layers=4, hidden=96, heads=6)),
         "net2net": ({}, dict(layers=4, hidden=96, heads=6)),
         "stackbert": ({}, dict(layers=4, hidden=96, heads=6)),          # its width operator's draws
         "hypercloning": (dict(snr_db=20.0), dict(layers=2, hidden=128, heads=8))}


def grown(method, task, small):
    torch.manual_seed(0)           # as run_experiment does before grow: only the method's own seed differs
    return method.grow(small, task).state_dict()


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_the_run_seed_seeds_the_methods_draws_unless_set(name, trained):
    options, large = DRAWS[name]
    task = make_task("gpt2", small=SMALL, large=large, scale="tiny")
    method = get_method(name, task=task, **options)
    at = {seed: grown(method.for_run(seed), task, trained(task.small)) for seed in (0, 1)}
    default = grown(get_method(name, task=task, **options), task, trained(task.small))
    # seed 0 draws what every seed drew before (the committed seed-0 records stay this computation)
    assert all(torch.equal(at[0][k], default[k]) for k in default)
    assert any(not torch.equal(at[0][k], at[1][k]) for k in default), f"{name}: seed 1 drew what seed 0 drew"
    described = method.for_run(1).describe()
    assert described["config"]["seed"] == 1 and described["seed_source"] == "run"
    fixed = get_method(name, task=task, seed=5, **options)
    assert fixed.for_run(1).describe()["config"]["seed"] == 5 and fixed.for_run(1).describe()["seed_source"] == "set"


def test_methods_without_a_seed_are_unchanged_by_the_run_seed():
    method = get_method("scratch")
    assert method.for_run(3) is method and "seed_source" not in method.describe()


def test_the_record_says_the_methods_seed_and_where_it_came_from(tmp_path):
    args = ["--method", "net2net", *TINY, "--steps", "0", "--seed", "1"]
    assert run.main([*args, "--out", str(tmp_path / "run")]) == 0
    assert run.main([*args, "--set", "seed=5", "--out", str(tmp_path / "set")]) == 0
    derived, chosen = (load_run(tmp_path / d).config for d in ("run", "set"))
    assert derived["seed"] == chosen["seed"] == 1
    assert (derived["method"]["config"]["seed"], derived["method"]["seed_source"]) == (1, "run")
    assert (chosen["method"]["config"]["seed"], chosen["method"]["seed_source"]) == (5, "set")
