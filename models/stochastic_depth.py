"""Stochastic depth (drop path) for the timm image families, as DeiT and CaiT train with it.

The rate is `ModelSpec.drop_path`, handed to timm's constructor as `drop_path_rate` (DeiT's main.py passes
`drop_path_rate=args.drop_path` to `create_model`). It adds no parameters, so every growth method, which builds the
large model from its spec and then copies weights into it, gets it too. timm spreads the rate over the blocks its own
way (ViT: linearly from 0 to the rate; CaiT: the rate in every patch block), so the rate cannot be read back exactly
from the blocks (a float32 linspace ends at 0.10000000149 for 0.1, and a one-block ViT has no drop path at all): the
model carries the spec's value as an attribute, which `spec_of` reads.
"""
from __future__ import annotations

from torch import nn

from models.spec import ModelSpec

ATTRIBUTE = "growbench_drop_path"


def drop_path_args(spec: ModelSpec) -> dict:
    """The constructor argument, only when on: a model without drop path is built (and exported) as before."""
    return {"drop_path_rate": spec.drop_path} if spec.drop_path else {}


def with_drop_path(model: nn.Module, spec: ModelSpec) -> nn.Module:
    setattr(model, ATTRIBUTE, spec.drop_path)
    return model


def drop_path_of(model: nn.Module) -> float:
    """The rate `model` was built with (0.0 for a model built elsewhere without it)."""
    return float(getattr(model, ATTRIBUTE, 0.0))
