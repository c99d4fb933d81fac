"""Contract tests parametrised over the method registry x every family: a new method is covered for free.

For each method: the model it hands to training, taken through all of its stages, has exactly
`task.build_large()`'s parameter names and shapes; where it claims function preservation, outputs match
the small model on a width-only integer-ratio pair; and `run.py` runs it end to end at tiny scale. A pair the method
refuses in `check_pair` (one line naming it) is checked for that refusal instead.
"""
import pytest
import torch

import run
from helpers import learnable_batches, relative_logit_gap
from methods import METHODS, get_method
from models import get_family
from runs.record import load_run
from tasks import get_task, make_task

TASKS = {"bert": "bert_small_base", "roberta": "roberta_small_base", "gpt2": "gpt2_base_medium",
         "llama": "llama_small_base", "vit": "deit_s_b", "cait": "cait_xs_s"}
REAL_METHODS = sorted(m for m in METHODS if not m.startswith("nan_"))   # skip test-only registrations


def small_model(task, seed=0):
    torch.manual_seed(seed)
    model = task.build_small()
    with torch.no_grad():   # move norms/biases off their init so a copying mistake cannot hide
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    return model.eval()


def refuses(method, task) -> bool:
    """A method may refuse a pair it cannot grow (a family feature it needs): `check_pair` raises one line naming it,
    and `grow` refuses the same way. The contract then checks the refusal instead of the growth."""
    try:
        method.check_pair(task)
    except ValueError as e:
        assert method.name in str(e) and "\n" not in str(e)
        with pytest.raises(ValueError, match=method.name):
            method.grow(small_model(task), task)
        return True
    return False


def trained_model(method, small, task):
    """What the trainer ends with, minus the optimisation: grow, then enter every stage in order."""
    model = method.grow(small if method.needs_small else None, task)
    for stage in method.stages(task, task.recipe.steps):
        model = method.enter_stage(model, stage, task)
    return model


@pytest.mark.parametrize("family", sorted(TASKS))
@pytest.mark.parametrize("name", REAL_METHODS)
def test_grown_model_has_the_large_layout(name, family):
    task = get_task(TASKS[family], "tiny")
    if refuses(get_method(name, task=task), task):
        return
    model = trained_model(get_method(name, task=task), small_model(task), task)
    want = {k: v.shape for k, v in task.build_large().state_dict().items()}
    got = {k: v.shape for k, v in model.state_dict().items()}
    assert got == want
    assert get_family(family).spec_of(model) == task.large


@pytest.mark.parametrize("family", sorted(TASKS))
@pytest.mark.parametrize("name", [m for m in REAL_METHODS if METHODS[m].preserves_function])
def test_function_preserving_methods_preserve_function(name, family, trained):
    """On a small model that has learned (random init keeps logits near zero and hides scaling errors), tied output
    layers included: logits within 1e-4 of their scale. Llama with grouped-query attention (2 query heads per
    key/value head) and its own untied head."""
    extra = dict(class_layers=1) if family == "cait" else {}
    kv = (dict(kv_heads=1), dict(kv_heads=2)) if family == "llama" else ({}, {})
    task = make_task(family, small=dict(layers=2, hidden=64, heads=2, **extra, **kv[0]),
                     large=dict(layers=2, hidden=128, heads=4, **extra, **kv[1]), scale="tiny")
    if refuses(get_method(name, task=task), task):
        return
    small = trained(task.small)
    large = get_method(name, task=task).grow(small, task)
    assert relative_logit_gap(small, large, next(learnable_batches(task.small, batch=4, seed=5))) <= 1e-4


@pytest.mark.parametrize("name", REAL_METHODS)
def test_every_method_runs_from_the_cli(name, tmp_path):
    out = tmp_path / name
    # bert_small_base, or the first task the method does not refuse (LEMON refuses post-LN depth growth)
    task = next(t for t in ("bert_small_base", "gpt2_base_medium", "llama_small_base")
                if not refuses(get_method(name, task=get_task(t, "tiny")), get_task(t, "tiny")))
    args = ["--method", name, "--task", task, "--scale", "tiny", "--quiet", "--out", str(out),
            "--steps", "4"]
    if "fit_steps" in {f for f in METHODS[name].Config.__dataclass_fields__}:
        args += ["--set", "fit_steps=3"]
    assert run.main(args) == 0
    record = load_run(out)
    assert record.complete and record.method == name
    flops = [r["flops"] for r in record.metrics]
    assert all(b > a for a, b in zip(flops[1:], flops[2:]))


def readme_method(name: str):
    """Register README's "Add a growth method" snippet, as written but under `name` (so that a reader who added
    methods/repeat_top.py keeps theirs); returns the name."""
    import re
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    code = re.search(r"# methods/repeat_top.py\n(.*?)```", readme, re.S).group(1)
    assert '@register_method("repeat_top")' in code
    exec(compile(code.replace('"repeat_top"', f'"{name}"'), "README:repeat_top", "exec"), {})
    return name


def test_readme_example_method_passes_the_contract(tmp_path):
    """The 'Add a growth method' example in README.md, as written: the large layout on every family, and a run from
    the CLI on the pair README names (which grows width too)."""
    name = readme_method("nan_readme_repeat_top")
    try:
        for family in sorted(TASKS):
            task = get_task(TASKS[family], "tiny")
            model = trained_model(get_method(name, task=task), small_model(task), task)
            assert get_family(family).spec_of(model) == task.large, family
            assert {k: v.shape for k, v in model.state_dict().items()} == \
                   {k: v.shape for k, v in task.build_large().state_dict().items()}
        assert run.main(["--method", name, "--task", "bert_small_base", "--scale", "tiny", "--quiet",
                         "--out", str(tmp_path / "run"), "--steps", "2"]) == 0
    finally:
        METHODS.pop(name, None)


def test_a_method_that_grows_the_wrong_width_is_refused_before_step_0(tmp_path, capsys):
    """README's first example copied the small model's width into a pair that grows width: it trained a 64-wide
    model as the 96-wide one and every row said full_model. Refused now in one line, nothing written."""
    from methods.base import GrowthMethod
    from methods.registry import register_method
    from models import from_canonical, to_canonical
    from models.canonical import copy_depth
    from runs.trainer import full_model

    @register_method("nan_narrow_copy")
    class NarrowCopy(GrowthMethod):
        def grow(self, small, task):
            return from_canonical(copy_depth(to_canonical(small), [min(l, task.small.layers - 1)
                                                                   for l in range(task.large.layers)]))
    try:
        task = get_task("bert_small_base", "tiny")
        narrow = NarrowCopy().grow(small_model(task), task)
        assert not full_model(narrow, get_family("bert"), task)       # the layer count alone said True
        out = tmp_path / "run"
        assert run.main(["--method", "nan_narrow_copy", "--task", "bert_small_base", "--scale", "tiny", "--quiet",
                         "--out", str(out)]) == 2
        # before it, only the run's progress lines (the small model pretrained, which one it grew from)
        err = capsys.readouterr().err.strip().splitlines()
        assert [line for line in err if line.startswith("error")] == err[-1:]
        assert err[-1].startswith("error: method 'nan_narrow_copy' grew bert 2L/64H") and "hidden 64 vs 96" in err[-1]
        assert not out.exists()
    finally:
        METHODS.pop("nan_narrow_copy", None)
