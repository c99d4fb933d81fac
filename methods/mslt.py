"""MSLT: multi-stage layerwise training (Yang et al. 2020, "Progressively Stacking 2.0: A Multi-stage Layerwise
Training Method for BERT Training Speedup"; a baseline of the LiGO paper, §4.1 and Table 1).

Training is split into stages. Each stacking stage puts copies of the current top `stack_layers` blocks on top
of the model and trains only those new blocks (and the output layer) while every block below is frozen: the
frozen blocks run forward only, and no backward runs below the lowest trainable block (methods/base.py Stage).
A final stage trains the whole model at its full depth. Here the first model is the pretrained small one
(width grown first by the configured operator, default Net2Net FPI, when the pair also grows in width — DESIGN
§3 "Composition"), so stacking starts from L1 layers and ends at L2.

Defaults, scaled to the run's budget: MSLT grows BERT-Base 3 encoder layers at a time; here a stage adds half
the small model's depth (3 for 6 -> 12 layers). The stacking stages share the budget equally and the final
whole-model phase takes `final_fraction` of it, 0.2 by default (assumed: MSLT retrains the whole model briefly
at the end; its exact step counts were not at hand). `stage_steps="a,b,...,f"` sets every stage's length
explicitly (stacking stages then the final one; they must add up to the run's steps).

The model changes depth between stages, so `grow` returns the first stage's model (not task.large's depth) and
`resume_model` rebuilds the depth of the stage a checkpoint was written in.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from methods.base import GrowthMethod, Stage
from methods.depth import CopyDepthConfig, check_width_operator, small_canonical, width_operator
from methods.registry import MAIN_COMPARISONS, register_method
from models import build_model, family_of, from_canonical, to_canonical
from models.canonical import copy_depth, grows_width
from tasks.rules import in_range, integer_at_least


@dataclass
class MSLTConfig(CopyDepthConfig):
    stack_layers: int = 0         # blocks added per stage; 0 = half the small model's depth (at least 1)
    final_fraction: float = 0.2   # share of the steps for the final whole-model phase
    stage_steps: str = ""         # explicit "a,b,...,f" steps per stage; overrides final_fraction
    RULES = {"stack_layers": integer_at_least(0, " (0: half the small model's depth)"),
             "final_fraction": in_range(0, 1, low_open=True, high_open=True)}


def stack_top(canon, depth: int):
    """Grow `canon` to `depth` blocks by copying its top blocks (the top k for k new blocks) onto the top."""
    L = canon.spec.layers
    new = depth - L
    return copy_depth(canon, list(range(L)) + [(L - new + j) % L for j in range(new)])


@register_method("mslt")
class MSLT(GrowthMethod):
    display_name = "MSLT"
    color = "tab:green"
    table_order = 3
    sweeps = MAIN_COMPARISONS

    Config = MSLTConfig
    preserves_function = False     # each stack adds a copied block's residual update again

    def depths(self, task) -> list[int]:
        """Model depth in each stacking stage (empty when the pair does not grow in depth)."""
        L1, L2 = task.small.layers, task.large.layers
        k = self.config.stack_layers or max(1, L1 // 2)
        return list(range(L1 + k, L2, k)) + [L2] if L2 > L1 else []

    def check_pair(self, task):
        check_width_operator(self.config.width, self.config.seed, task)

    def grow(self, small, task):
        canon = small_canonical(small, task)
        if grows_width(task.small, task.large):
            canon = width_operator(self.config.width, self.config.seed).grow_width(canon, task.large)
        depths = self.depths(task)
        return from_canonical(stack_top(canon, depths[0]) if depths else canon)

    def stages(self, task, total_steps):
        depths = self.depths(task)
        if not depths:
            return [Stage("train", total_steps)]
        lengths = self._lengths(len(depths), total_steps)
        # the optimizer is rebuilt at every stage (its parameter set changes), as MSLT does
        stages, below = [], task.small.layers
        for depth, steps in zip(depths, lengths):
            stages.append(Stage(f"stack{depth}", steps, frozenset(range(below, depth)), reset_optimizer=True))
            below = depth
        return stages + [Stage("full", lengths[-1], None, reset_optimizer=True)]

    def _lengths(self, n_stack: int, total: int) -> list[int]:
        if self.config.stage_steps:
            try:
                lengths = [int(x) for x in str(self.config.stage_steps).split(",")]
            except ValueError:
                raise ValueError(f"stage_steps '{self.config.stage_steps}': expected comma-separated step "
                                 "counts, e.g. 100,100,50") from None
            if len(lengths) != n_stack + 1 or sum(lengths) != total or min(lengths) < 1:
                raise ValueError(f"stage_steps '{self.config.stage_steps}': expected {n_stack + 1} positive step "
                                 f"counts ({n_stack} stacking stages, then the whole model) adding up to {total}")
            return lengths
        final = max(1, round(self.config.final_fraction * total))
        if total - final < n_stack:
            raise ValueError(f"mslt needs at least {n_stack + 1} steps for its {n_stack + 1} stages, got {total}")
        each, extra = divmod(total - final, n_stack)
        return [each + (1 if i < extra else 0) for i in range(n_stack)] + [final]

    def _depth_of(self, stage: Stage, task) -> int:
        return task.large.layers if stage.trainable_blocks is None else max(stage.trainable_blocks) + 1

    @torch.no_grad()
    def enter_stage(self, model, stage, task):
        # stack up to the stage's depth; a model already that deep (a resumed run) is left as it is
        depth = self._depth_of(stage, task)
        if family_of(model).spec_of(model).layers >= depth:
            return model
        return from_canonical(stack_top(to_canonical(model), depth)).train(model.training)

    def resume_model(self, small, task, stage):
        return build_model(task.large.with_(layers=self._depth_of(stage, task)))
