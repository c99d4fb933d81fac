"""A method's options are checked when the method is made (methods/base.py: Config.RULES, check_config): a value that
cannot be right is refused in one line naming the method, the option and what is accepted, before a run writes
anything. Before these rules, `--set fit_lr=-1` wrote a config and a metrics file and then died inside torch, and a
NaN noise, temperature or SNR passed every `<` test and trained a NaN model."""
from __future__ import annotations

import dataclasses
import math

import pytest

import run
from methods import get_method
from methods.registry import METHODS
from tasks import get_task
from tasks.registry import PAIRS
from tasks.task import SCALES

FLOAT_OPTIONS = [(name, f.name) for name, cls in sorted(METHODS.items()) for f in dataclasses.fields(cls.Config)
                 if isinstance(f.default, float) or f.type in ("float", "float | None")]


def test_there_are_float_options_to_check():
    assert {("ligo", "fit_lr"), ("hypercloning", "snr_db"), ("ki", "temperature"), ("net2net", "noise")} \
        <= set(FLOAT_OPTIONS)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("name,option", FLOAT_OPTIONS)
def test_a_non_finite_float_option_is_refused_by_every_method(name, option, bad):
    with pytest.raises(ValueError) as info:
        get_method(name, **{option: bad})
    message = str(info.value)
    assert message.startswith(f"{name} {option} must be ") and message.endswith(f"got {bad!r}")
    assert "\n" not in message


@pytest.mark.parametrize("name,option,value,accepted", [
    ("ligo", "fit_lr", -1.0, "a finite number > 0"),
    ("ligo", "fit_lr", 0.0, "a finite number > 0"),
    ("ligo", "fit_steps", -3, "an integer >= 0"),
    ("ligo", "fit_steps", 2.5, "an integer >= 0"),
    ("ligo", "init_noise", -0.03, "a finite number >= 0"),
    ("ligo", "fit_noise", -1.0, "a finite number >= 0"),
    ("ligo", "fit_weight_decay", -0.1, "a finite number >= 0"),
    ("ligo", "fit_adam_eps", 0.0, "a finite number > 0"),
    ("ligo", "fit_adam_betas", (0.9, 1.0), "a pair b1,b2 with 0 <= b < 1"),
    ("ligo", "fit_max_grad_norm", -1.0, "a finite number >= 0 (0: no clipping)"),
    ("ligo", "fit_warmup_steps", -1, "an integer >= 0"),
    ("net2net", "noise", -0.1, "a finite number >= 0"),
    ("bert2bert", "noise", -0.1, "a finite number >= 0"),
    ("ki", "decay_fraction", 1.5, "in [0, 1]"),
    ("ki", "temperature", 0.0, "a finite number > 0"),
    ("lemon", "split_spread", 1.0, "in [0, 1) (shares stay positive)"),
    ("lemon", "depth_noise", -0.1, "a finite number >= 0"),
    ("g_stack", "growth_tokens", -1, "an integer >= 0"),
    ("g_stack", "growth_factor", -2, "an integer >= 0"),
    ("mslt", "final_fraction", 1.0, "in (0, 1)"),
    ("mslt", "stack_layers", -1, "an integer >= 0"),
    ("msg", "ramp_steps", 0, "an integer >= 1"),
])
def test_an_option_out_of_range_is_refused_saying_what_is_accepted(name, option, value, accepted):
    with pytest.raises(ValueError) as info:
        get_method(name, **{option: value})
    message = str(info.value)
    assert message.startswith(f"{name} {option} must be {accepted}") and message.endswith(f"got {value!r}")


@pytest.mark.parametrize("name,option,value", [
    ("ligo", "fit_max_grad_norm", 0.0), ("ligo", "fit_warmup_steps", 10000), ("ki", "decay_fraction", 0.0),
    ("lemon", "split_spread", 0.0), ("lemon", "depth_noise", 0.0), ("hypercloning", "snr_db", -5.0),
    ("hypercloning", "snr_db", None), ("mslt", "stack_layers", 0), ("g_stack", "growth_factor", 0),
])
def test_the_boundary_values_the_options_document_are_accepted(name, option, value):
    assert getattr(get_method(name, **{option: value}).config, option) == value


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_is_made_with_every_tasks_defaults(name, scale):
    """The scale's and family's method defaults (e.g. mini's fit_steps=20, ramp_steps=20; fit_noise 0.1 without
    dropout) pass the rules and reach the config, except the options a method keeps its own (ligo_official's
    fit_noise: the official init adds none)."""
    fields = {f.name for f in dataclasses.fields(METHODS[name].Config)}
    for task in (get_task(t, scale) for t in PAIRS):
        method = get_method(name, task=task)
        for key, value in task.method_defaults:
            if key in fields and key not in method.keeps_own:
                assert getattr(method.config, key) == value, (task.name, key)
            elif key in method.keeps_own:
                assert getattr(method.config, key) == getattr(method.Config(), key), (task.name, key)


def test_the_no_dropout_families_are_those_whose_models_have_no_dropout():
    """tasks/registry.py NO_DROPOUT decides where LiGO's copy start breaks its copies' symmetry by default: it must name exactly
    the families whose models train without dropout (else the twins it is for part anyway, or never)."""
    import torch

    from tasks.registry import NO_DROPOUT
    for name in PAIRS:
        task = get_task(name, "tiny")
        active = any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in task.build_large().modules())
        assert active == (task.family not in NO_DROPOUT), (name, task.family)
        noise = dict(task.method_defaults).get("fit_noise", 0.0)
        assert get_method("ligo_copy", task=task).config.fit_noise == noise == (0.1 if task.family in NO_DROPOUT else 0.0)
        assert get_method("ligo", task=task).config.fit_noise == 0.0          # random rows: no copies to part


def test_cli_refuses_a_bad_option_in_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "never"
    code = run.main(["--method", "ligo", "--task", "bert_small_base", "--scale", "tiny", "--out", str(out),
                     "--set", "fit_lr=-1"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == "error: ligo fit_lr must be a finite number > 0, got -1.0"
    assert not out.exists()
