"""BERT and RoBERTa (Devlin et al. 2019; Liu et al. 2019) as masked LMs, through HF transformers.

Canonical mapping: post-LN blocks (norm1 after attention, norm2 after the FFN), an embedding LayerNorm,
and the MLM head (transform dense + LayerNorm + decoder, decoder tied to the token embedding unless the
spec unties it, as the official LiGO configs do).

The pretraining loss runs the MLM head on the masked positions only, as efficient BERT pretraining does (the
head is a quarter of BERT-Base's forward at vocab 30522, more than half of a mini model's): a forward pre-hook
on the head, which every model this family builds or loads carries, gathers those positions while
`compute_loss` says so (a context variable), and the labels go in gathered to match. Any other forward (the
exported model, `logits`, fine-tuning) decodes every position. The FLOPs formula counts what runs
(`head_tokens`); the loss is the same mean over masked positions as the dense head's.
"""
from __future__ import annotations

import contextvars
from contextlib import contextmanager
from pathlib import Path

import torch
import transformers as hf
from torch import nn

from models.canonical import IN, OUT, Canonical
from models.family import Family, register_family
from models.flops import ForwardFlops, transformer_block
from models.spec import ModelSpec

D_OUT = ("D", OUT)
BLOCK_NAMES = {  # canonical block key -> parameter name inside encoder.layer.{l}
    "q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
    "o": "attention.output.dense", "norm1": "attention.output.LayerNorm",
    "fc1": "intermediate.dense", "fc2": "output.dense", "norm2": "output.LayerNorm",
}


# set by `scoring_only` around a loss forward: the boolean mask of positions the MLM head must decode
_SCORED: contextvars.ContextVar = contextvars.ContextVar("growbench_mlm_scored", default=None)


@contextmanager
def scoring_only(mask: torch.Tensor):
    token = _SCORED.set(mask)
    try:
        yield
    finally:
        _SCORED.reset(token)


def _gather_scored(module, args):
    """Forward pre-hook on the MLM head: inside `scoring_only`, hand it the scored positions' hidden states only."""
    mask = _SCORED.get()
    if mask is None:
        return None
    return (args[0][mask],) + tuple(args[1:])


class _MaskedLM(Family):
    objective = "mlm"
    norm_position = "post"   # LayerNorm after each residual sum (and on the embeddings)
    head_attr: str       # the MLM head module: "cls" / "lm_head"
    prefix: str          # "bert" / "roberta"
    head_names: dict     # canonical head key -> parameter name
    config_cls: type
    model_cls: type
    position_offset = 0  # RoBERTa reserves padding_idx + 1 position rows
    layer_norm_eps = 1e-12

    @property
    def blocks_attr(self):
        return f"{self.prefix}.encoder.layer"

    def config(self, spec: ModelSpec):
        return self.config_cls(
            vocab_size=spec.vocab, hidden_size=spec.hidden, num_hidden_layers=spec.layers,
            num_attention_heads=spec.heads, intermediate_size=spec.ffn,
            max_position_embeddings=spec.positions + self.position_offset,
            tie_word_embeddings=spec.tie_embeddings, layer_norm_eps=self.layer_norm_eps,
            **self.extra_config())

    def extra_config(self) -> dict:
        return {}

    def build(self, spec: ModelSpec) -> nn.Module:
        return self._with_sparse_head(self.model_cls(self.config(spec)))

    def _with_sparse_head(self, model):
        getattr(model, self.head_attr).register_forward_pre_hook(_gather_scored)
        return model

    def owns(self, model) -> bool:
        return type(model) is self.model_cls

    def spec_of(self, model) -> ModelSpec:
        c = model.config
        return ModelSpec(self.name, c.num_hidden_layers, c.hidden_size, c.num_attention_heads,
                         ffn=c.intermediate_size, vocab=c.vocab_size,
                         positions=c.max_position_embeddings - self.position_offset,
                         tie_embeddings=bool(c.tie_word_embeddings))

    # -- canonical ---------------------------------------------------------------------------------------
    def parameter_names(self, spec: ModelSpec) -> dict[tuple, str]:
        """(section, layer, canonical key) -> parameter name, for every parameter of the model."""
        p, names = self.prefix, {}
        emb = {"token": "word_embeddings.weight", "position": "position_embeddings.weight",
               "token_type": "token_type_embeddings.weight", "norm.weight": "LayerNorm.weight",
               "norm.bias": "LayerNorm.bias"}
        for key, name in emb.items():
            names["embed", None, key] = f"{p}.embeddings.{name}"
        for layer in range(spec.layers):
            for key, name in BLOCK_NAMES.items():
                for kind in ("weight", "bias"):
                    names["blocks", layer, f"{key}.{kind}"] = f"{p}.encoder.layer.{layer}.{name}.{kind}"
        for key, name in self.head_names.items():
            if key == "decoder.weight" and spec.tie_embeddings:
                continue
            if key == "decoder.bias" and not spec.tie_embeddings:
                # untied, transformers 5 gives the decoder its own bias and leaves the head's shared bias
                # unused; keep that one too (fixed axis) so the round trip stays exact
                names["head", None, "unused.bias"] = name
                name = self.head_names["decoder.weight"].replace("weight", "bias")
            names["head", None, key] = name
        return names

    def to_canonical(self, model) -> Canonical:
        spec = self.spec_of(model)
        canon = Canonical(spec, {}, [], {},
                          embed_axes={k: (None, D_OUT) if k in ("token", "position", "token_type") else (D_OUT,)
                                      for k in ("token", "position", "token_type", "norm.weight", "norm.bias")},
                          head_axes={"transform.weight": (D_OUT, ("D", IN)), "transform.bias": (D_OUT,),
                                     "transform_norm.weight": (D_OUT,), "transform_norm.bias": (D_OUT,),
                                     "decoder.weight": (None, ("D", IN)), "decoder.bias": (None,),
                                     "unused.bias": (None,)},
                          tied_head_norm="transform_norm" if spec.tie_embeddings else None)
        return self.fill_canonical(canon, model)      # state_from_canonical: the default, by parameter_names

    # -- training ----------------------------------------------------------------------------------------
    def logits(self, model, batch):
        return model(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask")).logits

    def compute_loss(self, call, batch):
        scored = batch["labels"] != -100
        with scoring_only(scored):     # the head decodes the masked positions; the labels come gathered to match
            return call(**{**batch, "labels": batch["labels"][scored]}).loss

    def scored(self, batch):
        return batch["labels"] != -100

    def head_tokens(self, batch):
        return int((batch["labels"] != -100).sum())

    def head_logits(self, model, batch):
        with scoring_only(self.scored(batch)):
            return self.logits(model, batch)

    def forward_flops(self, spec: ModelSpec, batch: int, seq: int, head_tokens: int | None = None) -> ForwardFlops:
        tokens = batch * seq
        # the MLM head transforms and decodes the positions the loss scores (every one unless told)
        head_rows = tokens if head_tokens is None else head_tokens
        head = 2 * head_rows * spec.hidden * spec.hidden + 2 * head_rows * spec.hidden * spec.vocab
        return ForwardFlops(0.0, [transformer_block(batch, seq, spec.hidden, spec.ffn)] * spec.layers, float(head))

    def export(self, model, directory: Path, preprocessing: dict | None = None) -> None:
        model.save_pretrained(directory)

    def load(self, directory: Path):
        return self._with_sparse_head(self.model_cls.from_pretrained(directory))


@register_family
class Bert(_MaskedLM):
    name, prefix, head_attr = "bert", "bert", "cls"
    config_cls, model_cls = hf.BertConfig, hf.BertForMaskedLM
    head_names = {"transform.weight": "cls.predictions.transform.dense.weight",
                  "transform.bias": "cls.predictions.transform.dense.bias",
                  "transform_norm.weight": "cls.predictions.transform.LayerNorm.weight",
                  "transform_norm.bias": "cls.predictions.transform.LayerNorm.bias",
                  "decoder.weight": "cls.predictions.decoder.weight", "decoder.bias": "cls.predictions.bias"}


@register_family
class Roberta(_MaskedLM):
    name, prefix, head_attr = "roberta", "roberta", "lm_head"
    config_cls, model_cls = hf.RobertaConfig, hf.RobertaForMaskedLM
    position_offset = 2       # positions start after padding_idx (= 1)
    layer_norm_eps = 1e-5
    head_names = {"transform.weight": "lm_head.dense.weight", "transform.bias": "lm_head.dense.bias",
                  "transform_norm.weight": "lm_head.layer_norm.weight",
                  "transform_norm.bias": "lm_head.layer_norm.bias",
                  "decoder.weight": "lm_head.decoder.weight", "decoder.bias": "lm_head.bias"}

    def extra_config(self) -> dict:
        return {"pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2, "type_vocab_size": 1}
