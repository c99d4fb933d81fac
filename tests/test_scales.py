"""The regime scale (the default): mini's pairs and data trained longer, vision on every test image, so that a saving
can measure growth (tasks/registry.py regime_of); run.py and the sweeps run it when no --scale is given."""
import pytest

from tasks import PAIRS, get_task, make_task
from tasks.registry import PAIR_REGIME_STEPS, REGIME_EVAL_IMAGES, REGIME_STEPS, _pair_task


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_the_regime_pair_is_minis_pair_trained_longer(name):
    """Mini's recipe trained longer (the kind's factor, or the pair's own: PAIR_REGIME_STEPS), on mini's pair or, where
    the registry gives one, the pair's own regime sizes."""
    sizes = PAIRS[name][1]
    mini = get_task(name, "mini") if "regime" not in sizes else _pair_task(name, "mini", sizes["regime"])
    regime = get_task(name, "regime")
    kind = "image" if mini.family in ("vit", "cait") else "text"
    factor = PAIR_REGIME_STEPS.get(name, REGIME_STEPS[kind])
    assert (regime.small, regime.large, regime.data, regime.scale) == (mini.small, mini.large, mini.data, "regime")
    assert regime.recipe.steps == factor * mini.recipe.steps
    assert regime.small_recipe.steps == factor * mini.small_recipe.steps      # the small model pretrained as long
    assert regime.recipe.with_(steps=mini.recipe.steps, eval_batches=mini.recipe.eval_batches) == mini.recipe
    if kind == "image":           # every test image: one evaluation's sampling error below the differences ranked
        assert regime.recipe.eval_batches * regime.recipe.batch_size >= REGIME_EVAL_IMAGES
        assert (regime.recipe.eval_batches - 1) * regime.recipe.batch_size < REGIME_EVAL_IMAGES
    defaults, mini_defaults = dict(regime.method_defaults), dict(mini.method_defaults)
    assert defaults["fit_steps"] == mini_defaults["fit_steps"]           # LiGO's fit: a smaller share of a longer run
    assert defaults["ramp_steps"] == factor * mini_defaults["ramp_steps"]  # MSG's ramp keeps its share


def test_a_pairs_own_regime_sizes_keep_its_shape_ratios():
    """A pair's own regime sizes are mini's pair scaled, not reshaped: the depth and width ratios between its two models
    and their shared head_dim stay mini's (themselves the paper's shape), at the recipe's lr; every other pair trains
    mini's models."""
    own = {name for name, (_, sizes, _) in PAIRS.items() if "regime" in sizes}
    assert own == {"deit_s_b", "bert_small_base"}
    for name in own:
        regime, mini = get_task(name, "regime"), get_task(name, "mini")
        for a, b in ((regime.small, regime.large), (mini.small, mini.large)):
            assert b.head_dim == a.head_dim
        assert regime.large.hidden * mini.small.hidden == mini.large.hidden * regime.small.hidden
        assert (regime.small.layers, regime.large.layers) == (mini.small.layers, mini.large.layers)
        assert regime.large.hidden < mini.large.hidden and regime.recipe.lr == mini.recipe.lr


def test_a_custom_pair_at_the_regime_scale_is_its_mini_pair_trained_longer():
    small, large = dict(layers=2, hidden=64, heads=2), dict(layers=4, hidden=96, heads=3)
    mini, regime = make_task("bert", small, large, "mini"), make_task("bert", small, large, "regime")
    assert regime.large == mini.large and regime.recipe.steps == REGIME_STEPS["text"] * mini.recipe.steps


def test_run_and_the_sweeps_default_to_the_regime_scale_and_import_no_torch_to_say_so():
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    light = subprocess.run([sys.executable, "-c", "import sys, run, bench.sweeps; print('torch' in sys.modules)"],
                           capture_output=True, text=True, cwd=root)
    assert light.stdout.strip() == "False", light.stderr          # --help and a refusal stay instant
    for cmd in (["run.py", "--help"], ["-m", "bench.sweeps", "--help"]):
        out = subprocess.run([sys.executable, *cmd], capture_output=True, text=True, cwd=root).stdout
        assert "paper | regime | mini | tiny (default: regime)" in " ".join(out.split()), cmd
