"""Family: the adapter between one model family (HF transformers / timm) and the canonical form.

A family builds its model from a `ModelSpec`, converts it to and from `Canonical` exactly, computes its
pretraining loss, and owns its analytic FLOPs formula (torchtitan style). Families register by name.
"""
from __future__ import annotations

import difflib
from abc import ABC, abstractmethod
from pathlib import Path

import torch
from torch import nn

from models.canonical import Canonical
from models.flops import ForwardFlops
from models.spec import ModelSpec

FAMILIES: dict[str, "Family"] = {}


def register_family(cls):
    """Class decorator: instantiate and register under `cls.name`."""
    FAMILIES[cls.name] = cls()
    return cls


def unknown(kind: str, name: str, known) -> str:
    """The one-line error for an unknown registry name, with a close match when there is one."""
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean '{close[0]}'? known:" if close else "; known:"
    return f"unknown {kind} '{name}'{hint} {', '.join(known)}"


def get_family(name: str) -> "Family":
    if name not in FAMILIES:
        raise KeyError(unknown("family", name, FAMILIES))
    return FAMILIES[name]


def family_of(model: nn.Module) -> "Family":
    for fam in FAMILIES.values():
        if fam.owns(model):
            return fam
    raise TypeError(f"no registered family owns a {type(model).__name__}; known: {', '.join(sorted(FAMILIES))}")


class Family(ABC):
    name: str
    objective: str          # "mlm", "clm" or "image": which batches the pretraining data must yield
    # The block container, as an attribute path on the model: used to freeze or drop layers by index.
    blocks_attr: str
    grouped_query: bool = False   # the family has grouped-query attention (ModelSpec.kv_heads); else kv_heads is 0
    class_attention: bool = False  # the family has class-attention blocks (ModelSpec.class_layers); else 0
    # The norms, for growth methods whose exactness depends on them (LEMON): the statistic they take ("layernorm":
    # mean and variance; "rmsnorm": mean square) and where they sit ("pre": at the start of each residual branch, the
    # stream itself never normalised; "post": after each residual sum, BERT's layout, so the stream is a norm's output).
    norm_kind: str = "layernorm"
    norm_position: str = "pre"

    # -- building and identification -------------------------------------------------------------
    @abstractmethod
    def build(self, spec: ModelSpec) -> nn.Module:
        """A freshly initialised model of this spec (uses the global torch RNG: seed before calling)."""

    @abstractmethod
    def spec_of(self, model: nn.Module) -> ModelSpec: ...

    @abstractmethod
    def owns(self, model: nn.Module) -> bool: ...

    # -- canonical conversion ----------------------------------------------------------------------
    @abstractmethod
    def to_canonical(self, model: nn.Module) -> Canonical: ...

    def state_from_canonical(self, canon: Canonical) -> dict[str, torch.Tensor]:
        """Parameter name -> tensor for a model of canon.spec, by plain (differentiable) tensor ops, so
        that LiGO can run the large model with `torch.func.functional_call` on materialised weights. Default: no
        ops at all, one parameter per canonical key by `parameter_names` (a family that fuses or transposes
        overrides it)."""
        return {name: canon.tensor(section, layer, key)
                for (section, layer, key), name in self.parameter_names(canon.spec).items()}

    def fill_canonical(self, canon: Canonical, model: nn.Module) -> Canonical:
        """`canon` (spec and axes set, no tensors yet) filled with clones of `model`'s parameters, by
        `parameter_names`: the inverse of the default `state_from_canonical`."""
        params = dict(model.named_parameters())
        canon.blocks = [{} for _ in range(canon.spec.layers)]
        for (section, layer, key), name in self.parameter_names(canon.spec).items():
            tensors = canon.blocks[layer] if section == "blocks" else getattr(canon, section)
            tensors[key] = params[name].detach().clone()
        return canon

    def parameter_names(self, spec: ModelSpec) -> dict[tuple[str, int | None, str], str]:
        """(section, layer, canonical key) -> the name of the parameter holding it in a model of `spec` (a fused
        parameter, GPT-2's c_attn, is named by each key it holds). Methods that act on activations rather than on
        weights (MSG's masks) find their modules through it; a family that does not give it cannot be grown by them."""
        raise NotImplementedError(f"the {self.name} family does not map canonical keys to its parameters")

    def canonical_modules(self, model: nn.Module) -> dict[tuple[str, int | None, str], nn.Module]:
        """(section, layer, canonical group) -> the module computing it, a group being a key without its
        `.weight` / `.bias` ("o", "fc2", "norm1", "token"): the module whose output is that group's output."""
        modules = {}
        # a bias may sit on another module than its weight (BERT's tied decoder bias is the prediction head's):
        # the weight's module is the group's, so weights are read last
        names = sorted(self.parameter_names(self.spec_of(model)).items(), key=lambda kv: not kv[0][2].endswith(".bias"))
        for (section, layer, key), name in names:
            group = key.removesuffix(".weight").removesuffix(".bias")
            modules[section, layer, group] = model.get_submodule(name.rpartition(".")[0])
        return modules

    def from_canonical(self, canon: Canonical, like: nn.Module | None = None) -> nn.Module:
        model = self.build(canon.spec) if like is None or self.spec_of(like) != canon.spec else _clone(like)
        state = self.state_from_canonical(canon)
        params = dict(model.named_parameters())
        missing = set(params) - set(state)
        if missing:
            raise KeyError(f"canonical form lacks parameters {sorted(missing)[:3]} for {self.name}")
        with torch.no_grad():
            for name, value in state.items():
                params[name].copy_(value)
        return model

    # -- training --------------------------------------------------------------------------------------
    @abstractmethod
    def logits(self, model: nn.Module, batch: dict) -> torch.Tensor: ...

    def loss(self, model: nn.Module, batch: dict, params: dict | None = None) -> torch.Tensor:
        """The pretraining objective on one batch (mean over scored positions). With `params`, the model
        runs on those tensors instead of its own (torch.func.functional_call): LiGO differentiates the
        loss through the weights it materialises."""
        if params is None:
            return self.compute_loss(model, batch)
        return self.compute_loss(lambda *a, **k: torch.func.functional_call(model, params, a, k), batch)

    @abstractmethod
    def compute_loss(self, call, batch: dict) -> torch.Tensor:
        """The objective given `call`, the model's forward (the module itself or a functional stand-in)."""

    def scored(self, batch: dict) -> torch.Tensor | None:
        """Boolean mask of the positions the objective scores (None: all); token dropping never sets them aside."""
        return None

    def head_tokens(self, batch: dict) -> int | None:
        """How many positions the output head runs on in `compute_loss` (None: every position, as the family's
        FLOPs formula assumes). A masked LM scores, and so decodes, only its masked positions."""
        return None

    def head_logits(self, model: nn.Module, batch: dict) -> torch.Tensor:
        """The logits `compute_loss` scores, computed the way it computes them (a masked LM: [masked positions,
        vocab]); distillation compares a teacher's with the student's on exactly these."""
        return self.logits(model, batch)

    def batch_flops(self, spec: ModelSpec, batch: dict) -> ForwardFlops:
        """Forward FLOPs of the training loss on `batch`: its shape, and the positions the head runs on. Give a
        batch on the CPU where one is at hand: counting a masked LM's positions on a GPU costs a host sync."""
        if "input_ids" in batch:
            b, t = batch["input_ids"].shape[:2]
        else:
            b, t = batch["labels"].shape[0], 0
        return self.forward_flops(spec, int(b), int(t), head_tokens=self.head_tokens(batch))

    def blocks(self, model: nn.Module) -> nn.ModuleList:
        obj = model
        for part in self.blocks_attr.split("."):
            obj = getattr(obj, part)
        return obj

    @abstractmethod
    def forward_flops(self, spec: ModelSpec, batch: int, seq: int, head_tokens: int | None = None) -> ForwardFlops:
        """Analytic matmul FLOPs of one forward pass over `batch` inputs of `seq` tokens (text) or of the
        image size of the spec (vision; `seq` ignored). `head_tokens`: positions the output head runs on, where
        the family's loss decodes only some (`head_tokens(batch)`); None: the family's default."""

    # -- export ----------------------------------------------------------------------------------------
    @abstractmethod
    def export(self, model: nn.Module, directory: Path, preprocessing: dict | None = None) -> None:
        """Write the model in its ecosystem's own format (HF save_pretrained / timm safetensors+config).
        `preprocessing`: what the training data did to a raw input before the model saw it (an image family's
        normalisation, for timm's pretrained_cfg); the text families take none (their tokenizer is saved beside
        the model, runs/experiment.save_tokenizer)."""

    @abstractmethod
    def load(self, directory: Path) -> nn.Module: ...


class CausalLM(Family):
    """What every HF causal LM family shares (GPT-2, Llama): next-token loss computed by transformers itself, logits
    from input_ids, export by save_pretrained."""
    objective = "clm"

    def logits(self, model, batch):
        return model(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask")).logits

    def compute_loss(self, call, batch):
        # transformers shifts the labels itself: position t predicts token t+1
        return call(**batch).loss

    def export(self, model, directory: Path, preprocessing: dict | None = None) -> None:
        model.save_pretrained(directory)


def _clone(model: nn.Module) -> nn.Module:
    import copy
    return copy.deepcopy(model)


def exported_family(directory: Path) -> str | None:
    """The family an exported model directory holds: HF configs name it `model_type`, growbench's timm
    exports `family`. None when there is no readable config."""
    import json
    try:
        config = json.loads((Path(directory) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return config.get("family") or config.get("model_type")


def to_canonical(model: nn.Module) -> Canonical:
    return family_of(model).to_canonical(model)


def from_canonical(canon: Canonical, like: nn.Module | None = None) -> nn.Module:
    return get_family(canon.spec.family).from_canonical(canon, like=like)


def build_model(spec: ModelSpec) -> nn.Module:
    return get_family(spec.family).build(spec)
