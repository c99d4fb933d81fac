"""MSG (Yao et al., ICLR 2024, "Masked Structural Growth for 2x Faster Language Model Pre-training"): the large model
starts as the small one with every new unit multiplied by a mask that ramps from 0 to 1 during training, so the
function is the small model's exactly whatever the new weights are, and the new structure phases in.

Growth. The large model is growbench's direct copy (methods/direct_copy.py): the family's own random initialisation
with the small model's weights written into the leading slice of every tensor (old units first in every space;
attention by whole heads, head_dim and the key/value group size kept, so a small head keeps its key/value head), and
new layers (l >= L1, on top) copies of layer l - L1 (the official BERT code's default, `copy`).

Masks: one value m = min(1, t / ramp_steps) for all new structure, t the optimizer steps done.
- FFN units and heads: the input of their consumer is masked (fc2's on the FFN space, o's on the space it reads: V,
  or Q under grouped-query attention), so a new unit contributes m times its output. The official code masks the
  FFN before its activation and q/k/v; any placement that zeroes a new unit's contribution is exact at 0.
- The residual stream (hidden size): every writer (embeddings, o, fc2, BERT's head transform) has its new units'
  output multiplied by m, and every norm takes its statistic with the new units weighted by m and multiplies its
  output on them by m (the official masked LayerNorm: mean = sum(w x) / sum(w), variance likewise; under RMSNorm the
  weighted mean square). At m = 0 every norm computes the small model's and no consumer reads a new unit.
- New layers: the layer's output is interpolated, m layer(x) + (1 - m) x, as both official codes do; at 0 the layer
  is skipped, pre- and post-norm alike.
So at m = 0 the logits are the small model's (`preserves_function`); at m = 1 every mask is the identity and the
hooks are removed: from step `ramp_steps` on the model trained, evaluated and exported is the plain large model.

Schedule. The masks are a function of the step alone (`set_step`), so resuming mid-ramp is exact. The official codes
ramp over 5,000 steps (tongxuluo/prts: FFN and depth, then hidden size, then heads, 5,000 steps each; cofe-ai/MSG
grows each dimension at its own step during the small model's training). growbench pretrains the small model
separately, as for every method, and ramps everything at once from the grown model's step 0 over `ramp_steps`:
5,000 at paper scale (1.25% of 400K steps) and the same share at mini (20 of 1,600; tasks/registry.py). Evaluations
during the ramp do not count as the large model reaching a target (`computes_large`). The masks cost elementwise
work only; every step is charged the large model's FLOPs, which it computes in full.

Implementation: PyTorch forward hooks on the family's modules (`Family.canonical_modules`), placed by the canonical
axes of each module's weight, so no family is named here. Refused (`check_pair`): families without that map (ViT,
CaiT: the class token and position embeddings are parameters added inside the forward, not module outputs), head_dim
or group size changing, a ramp longer than the run. Not implemented: the official code's transfer of optimizer state
and learning-rate rewind at a growth during training (growth happens before training here: there is no state).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from methods.base import Config, GrowthMethod
from methods.direct_copy import DirectCopy
from methods.net2net import function_deviation
from methods.registry import register_method
from methods.width import check_whole_heads
from models import get_family, to_canonical
from models.canonical import IN, OUT, RESIDUAL, space_size
from models.spec import ModelSpec
from tasks.rules import integer_at_least

ATTRIBUTE = "_growbench_msg"      # the Masks of a model, on the model itself (resume builds a fresh one)


@dataclass
class MSGConfig(Config):
    ramp_steps: int = 5000    # steps over which the masks go from 0 to 1 (both official codes' default)
    RULES = {"ramp_steps": integer_at_least(1, " (and at most the run's steps)")}


def norm_statistic(module: nn.Module) -> tuple[str, float]:
    """(statistic, epsilon) of a norm module: LayerNorm's mean and variance, or RMSNorm's mean square."""
    if isinstance(module, nn.LayerNorm):
        return "layernorm", module.eps
    if hasattr(module, "variance_epsilon"):           # transformers' RMSNorm (Llama)
        return "rmsnorm", module.variance_epsilon
    raise ValueError(f"msg cannot mask a {type(module).__name__} as a norm (LayerNorm and RMSNorm only)")


class Masks:
    """The mask value of one model and the hooks that apply it (module docstring)."""

    def __init__(self, model: nn.Module, small: ModelSpec, large: ModelSpec):
        family = get_family(large.family)
        canon = to_canonical(model)
        self.m, self.handles, self._vectors = 0.0, [], {}
        self.hidden = small.hidden      # the residual stream's old units
        for (section, layer, group), module in family.canonical_modules(model).items():
            tensors = canon.blocks[layer] if section == "blocks" else getattr(canon, section)
            key = next((k for k in (group, f"{group}.weight", f"{group}.bias") if k in tensors), None)
            if key is None:
                continue
            axes = canon.axes(section, key)
            if len(axes) == 1 and axes[0] is not None and axes[0][0] == RESIDUAL:
                self._hook(module.register_forward_hook(self._norm_hook(module)))
                continue
            if any(tag == (RESIDUAL, OUT) for tag in axes):
                self._hook(module.register_forward_hook(self._writer_hook))
            consumed = [tag[0] for tag in axes if tag is not None and tag[1] == IN and tag[0] != RESIDUAL]
            if consumed:
                self._hook(module.register_forward_pre_hook(self._consumer_hook(space_size(small, consumed[0]))))
        for layer in range(small.layers, large.layers):
            self._hook(family.blocks(model)[layer].register_forward_hook(self._layer_hook, with_kwargs=True))

    def _hook(self, handle):
        self.handles.append(handle)

    def set(self, m: float) -> None:
        if m != self.m:
            self.m, self._vectors = m, {}

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []

    def vector(self, n_old: int, x: torch.Tensor) -> torch.Tensor:
        """[1] * n_old + [m] * (new units), on x's last axis, device and dtype."""
        key = (n_old, x.shape[-1], x.device, x.dtype)
        if key not in self._vectors:
            v = torch.full((x.shape[-1],), self.m, device=x.device, dtype=x.dtype)
            v[:n_old] = 1
            self._vectors[key] = v
        return self._vectors[key]

    # -- the hooks ---------------------------------------------------------------------------------------------
    def _writer_hook(self, module, args, out):
        return out * self.vector(self.hidden, out)

    def _consumer_hook(self, n_old: int):
        def hook(module, args):
            return (args[0] * self.vector(n_old, args[0]), *args[1:])
        return hook

    def _norm_hook(self, module: nn.Module):
        statistic, eps = norm_statistic(module)

        def hook(module, args, out):
            x = args[0].float()
            w = self.vector(self.hidden, x)
            total = w.sum()
            if statistic == "layernorm":
                mean = (x * w).sum(-1, keepdim=True) / total
                x = x - mean
            y = x * torch.rsqrt((x * x * w).sum(-1, keepdim=True) / total + eps)
            if statistic == "rmsnorm":             # as transformers' RMSNorm: scaled in the input's dtype
                y = module.weight * y.to(args[0].dtype)
            else:
                y = y * module.weight + (module.bias if module.bias is not None else 0)
            return (y * self.vector(self.hidden, y)).to(out.dtype)
        return hook

    def _layer_hook(self, module, args, kwargs, out):
        x = args[0] if args else kwargs["hidden_states"]
        h = out[0] if isinstance(out, tuple) else out
        mixed = self.m * h + (1 - self.m) * x
        return (mixed, *out[1:]) if isinstance(out, tuple) else mixed


@register_method("msg")
class MSG(GrowthMethod):
    """MSG: the small model in the leading slices of a randomly initialised large one, every new unit and layer
    masked by m ramping from 0 to 1 over `ramp_steps` (function preserving at 0; plain large model from then on)."""
    display_name = "MSG"
    color = "tab:cyan"
    table_order = 13
    sweeps = ("llama",)

    Config = MSGConfig
    preserves_function = True       # at mask 0, for any width and depth growth of the families it supports

    def __init__(self, config=None, **overrides):
        super().__init__(config, **overrides)
        self.report: dict = {}
        self._pair: tuple[ModelSpec, ModelSpec] | None = None

    def check_pair(self, task):
        s, l = task.small, task.large
        try:
            get_family(l.family).parameter_names(l)
        except NotImplementedError:
            raise ValueError(f"msg masks module outputs, and the {l.family} family maps no canonical key to a module "
                             "(ViT and CaiT add the class token and position embeddings as parameters)") from None
        check_whole_heads(s, l, "msg keeps a small head's units and grows whole heads",
                          "msg grows grouped-query attention by whole key/value groups")

    def mask(self, step: int) -> float:
        return min(1.0, step / self.config.ramp_steps)

    def grow(self, small, task):
        self.check_pair(task)
        large = DirectCopy().grow(small, task)        # the masks, not the weights, keep the function
        self._attach(large, task, 0)
        self.report = {"function_deviation": function_deviation(small, large), "ramp_steps": self.config.ramp_steps}
        return large

    def _attach(self, model, task, step: int) -> None:
        self._pair = (task.small, task.large)
        self.set_step(model, step, task.recipe.steps)

    # -- training ----------------------------------------------------------------------------------------------
    def stages(self, task, total_steps):
        if total_steps < 1:
            raise ValueError("msg trains its masks from 0 to 1 over ramp_steps: it needs at least 1 step (--steps 0 "
                             "would evaluate a model whose new units are still masked, not the large one)")
        if not 1 <= self.config.ramp_steps <= total_steps:
            raise ValueError(f"msg: ramp_steps must be between 1 and the run's {total_steps} steps (the masks must "
                             f"reach 1, so that the model trained is the large one), got {self.config.ramp_steps}")
        return super().stages(task, total_steps)

    def enter_stage(self, model, stage, task):
        self._attach(model, task, 0)      # a resumed run's model is fresh: masked again, set_step then says how much
        return model

    def set_step(self, model, step, total_steps):
        m = self.mask(step)
        masks = model.__dict__.get(ATTRIBUTE)
        if masks is None and m < 1 and self._pair is not None:    # a model the trainer swapped in mid-ramp
            masks = model.__dict__[ATTRIBUTE] = Masks(model, *self._pair)
        if masks is None:
            return
        masks.set(m)
        if m >= 1:                       # every mask is the identity: the plain large model from here on
            masks.remove()
            del model.__dict__[ATTRIBUTE]

    def computes_large(self, step, total_steps):
        return self.mask(step) >= 1

    def training_signature(self):
        # not plain training of the model it grew: the masks shape the first `ramp_steps` steps
        return {"method": self.name, "config": {"ramp_steps": self.config.ramp_steps}}

    def describe(self):
        return {**super().describe(),
                "composition": {"depth": "stack: l mod L1 (new layers on top), masked",
                                "width": "direct_copy (new units random), masked"}}

    def artifacts(self):
        return {"growth.json": self.report} if self.report else {}
