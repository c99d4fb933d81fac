"""LiGO's default fit costs at most 2% of the large model's training at mini scale, on every pair, checked from the
tasks' own numbers before any run (the analysis checks the same rule on the records after: analysis/regime.py).
The paper calls its 100-step fit negligible (0.03% of 400K steps); a mini run is 1,600 steps, so the fit's share is
a budget a pair can overrun (the CaiT pair did at 20 steps: its materialisation outweighs a batch of small images)."""
import pytest
import torch

import methods  # noqa: F401  (registers every method)
from methods.ligo import FitSession
from methods.registry import get_method
from models import get_family
from models.flops import backward_flops
from tasks.registry import PAIRS, get_task


def pretraining_batch(task) -> dict:
    """A batch of the recipe's shape; a masked LM scores every 7th position (~15%, as its data collator does),
    since its head decodes only the scored positions."""
    spec, recipe = task.large, task.recipe
    family = get_family(spec.family)
    if family.objective == "image":
        return {"pixel_values": torch.zeros(recipe.batch_size, spec.in_chans, spec.image_size, spec.image_size),
                "labels": torch.zeros(recipe.batch_size, dtype=torch.long)}
    ids = torch.full((recipe.batch_size, recipe.seq_len), 5)
    labels = ids.clone()
    if family.objective == "mlm":
        labels[:, torch.arange(recipe.seq_len) % 7 != 0] = -100
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_the_default_fit_costs_at_most_2_percent_of_training(name):
    task = get_task(name, "mini")
    method = get_method("ligo", task=task)
    family = get_family(task.family)
    batch = pretraining_batch(task)
    forward = family.batch_flops(task.large, batch)
    train_step = forward.total + backward_flops(forward)
    with torch.device("meta"):          # shapes only: FlopCounterMode counts without memory or compute
        small = family.build(task.small)
    fit_step = FitSession(method, small, task).step_flops(batch)     # what a run's ledger charges for a fit step
    share = method.config.fit_steps * fit_step / (task.recipe.steps * train_step)
    assert 0 < share <= 0.02, f"{name}: LiGO's {method.config.fit_steps}-step fit is {share:.2%} of training"
