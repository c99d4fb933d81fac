"""G_stack (Du et al., NeurIPS 2024, "Stacking Your Transformers: A Closer Look at Model Growth for Efficient LLM
Pre-Training"): depthwise stacking of the whole small model by a growth factor g.

The small model (L1 blocks) is stacked g times: large block l copies small block l mod L1 (the official config's
"stacking_list" [0..L1-1] * g); embeddings, final norm and output layer are the small model's. The paper's two
hyperparameters:
- growth factor g = L2 / L1: the paper fixes g = 4 as best; growbench's tasks double depth, so g = 2 on them.
  `growth_factor` 0 (default) takes the task's ratio; a nonzero value must equal it, and L2 must be a multiple of
  L1 (G_stack stacks whole models only: 3 -> 5 layers is refused rather than truncated).
- growth timing d, the tokens the small model is trained on before it is stacked: that is the small model's
  training budget, so it is the task's small recipe (tokens = steps x batch x seq), or `growth_tokens` when set
  (the small model is then pretrained for that many tokens, rounded up to whole steps: `small_recipe`). The paper's
  guideline log10(d) = 0.88 log10(N) + 163.27 / log10(C) - 5.74 (N the large model's parameters, C its training
  FLOPs) is computed and recorded beside the timing actually used (`growth.json`); it was fitted for LLMs of
  410M-7B parameters and is not meaningful at mini or tiny scale.
On a pair that also grows in width, width is grown first by the configured operator (default Net2Net FPI), as the
other depth methods do, and recorded. On a depth-only pair whose depth doubles G_stack's initialisation is
StackBERT's (the same rule, l mod L1): a table merges the two when they are the same computation.
Not function-preserving (every copy adds its residual update again).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from methods.depth import CopyDepthConfig, CopyDepthMethod, stack_sources
from methods.registry import register_method
from models import get_family
from tasks.rules import integer_at_least


@dataclass
class GStackConfig(CopyDepthConfig):
    growth_factor: int = 0        # g; 0: the task's L2 / L1 (the paper's best is 4)
    growth_tokens: int = 0        # growth timing d in tokens (images for vision); 0: the task's small recipe
    RULES = {"growth_factor": integer_at_least(0, " (0: the task's L2 / L1)"),
             "growth_tokens": integer_at_least(0, " (0: the task's small recipe)")}


def guideline_tokens(params: float, flops: float) -> float:
    """The paper's growth timing d (tokens) for a target of `params` parameters trained with `flops` FLOPs."""
    return 10 ** (0.88 * math.log10(params) + 163.27 / math.log10(flops) - 5.74)


@register_method("g_stack")
class GStack(CopyDepthMethod):
    """G_stack: the whole small model stacked g times in depth (large block l copies small block l mod L1), grown at
    the small model's training budget (growth timing)."""
    display_name = "G_stack"
    color = "goldenrod"
    table_order = 11
    sweeps = ("llama",)

    Config = GStackConfig
    depth_rule = "g_stack: l mod L1, whole model stacked g = L2 / L1 times"

    def growth_factor(self, L1: int, L2: int) -> int:
        if L2 % L1:
            raise ValueError(f"g_stack stacks the whole small model and needs the large depth to be a multiple of the "
                             f"small one ({L1} -> {L2} layers)")
        g = L2 // L1
        if self.config.growth_factor not in (0, g):
            raise ValueError(f"g_stack growth_factor={self.config.growth_factor}, but this pair grows depth "
                             f"{L1} -> {L2} (g = {g}); leave growth_factor at 0 or pick a pair with L2 = g x L1")
        return g

    def check_pair(self, task):
        super().check_pair(task)                # the width operator's, where the pair grows width too
        self.growth_factor(task.small.layers, task.large.layers)
        self.small_recipe(task)

    def sources(self, L1, L2):
        self.growth_factor(L1, L2)
        return stack_sources(L1, L2)

    def small_recipe(self, task):
        """Growth timing: with `growth_tokens` the small model trains for that many tokens (images), rounded up."""
        r = task.small_recipe
        if not self.config.growth_tokens:
            return r
        steps = math.ceil(self.config.growth_tokens / tokens_per_step(task, r))
        return r.with_(steps=steps, warmup=min(r.warmup, steps))       # a short budget keeps a valid warmup

    def grow(self, small, task):
        self.growth_factor(task.small.layers, task.large.layers)
        large = super().grow(small, task)
        recipe = self.small_recipe(task)
        params = sum(p.numel() for p in large.parameters())
        flops = task.train_flops() * task.recipe.steps
        self.report.update(growth_factor=task.large.layers // task.small.layers,
                           growth_tokens=recipe.steps * tokens_per_step(task, recipe),
                           guideline_tokens=guideline_tokens(params, flops) if flops > 1 else None,
                           large_params=params, large_train_flops=flops)
        return large


def tokens_per_step(task, recipe) -> int:
    per_example = recipe.seq_len if get_family(task.family).objective != "image" else 1
    return recipe.batch_size * recipe.grad_accum * per_example
