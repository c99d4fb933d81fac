"""GPT-2 (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners") as a causal LM,
through HF transformers.

Canonical mapping: pre-LN blocks (norm1 = ln_1 before attention, norm2 = ln_2 before the MLP), token and
position embeddings, and a head of the final LayerNorm (ln_f) plus the LM head, tied to the token
embedding unless the spec unties it. GPT-2 stores its linear maps as `Conv1D` with W[in, out]; the
canonical form is W[out, in], so every weight is transposed, and the fused `c_attn` is split into q/k/v.
"""
from __future__ import annotations

from pathlib import Path

import torch
import transformers as hf
from torch import nn

from models.canonical import IN, OUT, Canonical
from models.family import CausalLM, register_family
from models.flops import ForwardFlops, transformer_block
from models.spec import ModelSpec

D_OUT = ("D", OUT)
# canonical block key -> Conv1D / LayerNorm name inside transformer.h.{l}; q/k/v live fused in attn.c_attn
BLOCK_NAMES = {"o": "attn.c_proj", "fc1": "mlp.c_fc", "fc2": "mlp.c_proj", "norm1": "ln_1", "norm2": "ln_2"}
CONV1D = {"o", "fc1", "fc2"}   # stored [in, out]: transpose on the way in and out
QKV = ("q", "k", "v")
EMBED_AXES = {"token": (None, D_OUT), "position": (None, D_OUT)}
HEAD_AXES = {"norm.weight": (D_OUT,), "norm.bias": (D_OUT,), "decoder.weight": (None, ("D", IN))}


@register_family
class GPT2(CausalLM):
    name = "gpt2"
    blocks_attr = "transformer.h"

    def config(self, spec: ModelSpec) -> hf.GPT2Config:
        return hf.GPT2Config(
            n_layer=spec.layers, n_embd=spec.hidden, n_head=spec.heads, n_inner=spec.ffn,
            vocab_size=spec.vocab, n_positions=spec.positions, tie_word_embeddings=spec.tie_embeddings,
            # GPT-2's <|endoftext|> is the last id (50256 of 50257); keep that convention at every vocab size
            # rather than the default 50256, which transformers 5 flags as outside a small vocabulary
            bos_token_id=spec.vocab - 1, eos_token_id=spec.vocab - 1,
            attn_implementation="sdpa")

    def build(self, spec: ModelSpec) -> nn.Module:
        return with_causal_lm_loss(hf.GPT2LMHeadModel(self.config(spec)))

    def owns(self, model) -> bool:
        return type(model) is hf.GPT2LMHeadModel

    def spec_of(self, model) -> ModelSpec:
        c = model.config
        return ModelSpec(self.name, c.n_layer, c.n_embd, c.n_head, ffn=c.n_inner or 4 * c.n_embd,
                         vocab=c.vocab_size, positions=c.n_positions,
                         tie_embeddings=bool(c.tie_word_embeddings))

    # -- canonical ---------------------------------------------------------------------------------------
    def to_canonical(self, model) -> Canonical:
        spec = self.spec_of(model)
        p = {n: t.detach() for n, t in model.named_parameters()}
        canon = Canonical(spec, {"token": p["transformer.wte.weight"].clone(),
                                 "position": p["transformer.wpe.weight"].clone()},
                          [], {"norm.weight": p["transformer.ln_f.weight"].clone(),
                               "norm.bias": p["transformer.ln_f.bias"].clone()},
                          embed_axes=dict(EMBED_AXES), head_axes=dict(HEAD_AXES),
                          tied_head_norm="norm" if spec.tie_embeddings else None)
        if not spec.tie_embeddings:
            canon.head["decoder.weight"] = p["lm_head.weight"].clone()
        for layer in range(spec.layers):
            pre, block = f"transformer.h.{layer}.", {}
            # c_attn: x @ W + b with W [D, 3D]; the rows of W^T are q, k, v outputs in that order
            qkv_w = p[pre + "attn.c_attn.weight"].t().split(spec.hidden, dim=0)
            qkv_b = p[pre + "attn.c_attn.bias"].split(spec.hidden, dim=0)
            for key, w, b in zip(QKV, qkv_w, qkv_b):
                block[f"{key}.weight"], block[f"{key}.bias"] = w.contiguous(), b.clone()
            for key, name in BLOCK_NAMES.items():
                w = p[f"{pre}{name}.weight"]
                block[f"{key}.weight"] = w.t().contiguous() if key in CONV1D else w.clone()
                block[f"{key}.bias"] = p[f"{pre}{name}.bias"].clone()
            canon.blocks.append(block)
        return canon

    def state_from_canonical(self, canon: Canonical) -> dict[str, torch.Tensor]:
        # only cat and t(): LiGO differentiates through this map (functional_call on the result)
        state = {"transformer.wte.weight": canon.embed["token"], "transformer.wpe.weight": canon.embed["position"],
                 "transformer.ln_f.weight": canon.head["norm.weight"], "transformer.ln_f.bias": canon.head["norm.bias"]}
        if not canon.spec.tie_embeddings:
            state["lm_head.weight"] = canon.head["decoder.weight"]
        for layer, block in enumerate(canon.blocks):
            pre = f"transformer.h.{layer}."
            state[pre + "attn.c_attn.weight"] = torch.cat([block[f"{k}.weight"] for k in QKV], dim=0).t()
            state[pre + "attn.c_attn.bias"] = torch.cat([block[f"{k}.bias"] for k in QKV], dim=0)
            for key, name in BLOCK_NAMES.items():
                w = block[f"{key}.weight"]
                state[f"{pre}{name}.weight"] = w.t() if key in CONV1D else w
                state[f"{pre}{name}.bias"] = block[f"{key}.bias"]
        return state

    def parameter_names(self, spec: ModelSpec) -> dict[tuple, str]:
        names = {("embed", None, "token"): "transformer.wte.weight",
                 ("embed", None, "position"): "transformer.wpe.weight",
                 ("head", None, "norm.weight"): "transformer.ln_f.weight",
                 ("head", None, "norm.bias"): "transformer.ln_f.bias"}
        if not spec.tie_embeddings:
            names["head", None, "decoder.weight"] = "lm_head.weight"
        for layer in range(spec.layers):
            pre = f"transformer.h.{layer}."
            for kind in ("weight", "bias"):
                names.update({("blocks", layer, f"{key}.{kind}"): f"{pre}attn.c_attn.{kind}" for key in QKV})
                names.update({("blocks", layer, f"{key}.{kind}"): f"{pre}{name}.{kind}"
                              for key, name in BLOCK_NAMES.items()})
        return names

    # -- FLOPs (loss, logits and export: CausalLM) ---------------------------------------------------
    def forward_flops(self, spec: ModelSpec, batch: int, seq: int, head_tokens: int | None = None) -> ForwardFlops:
        # the causal mask does not save matmul work (scores are computed in full, then masked), and the
        # LM head projects every position onto the vocabulary
        head = 2 * batch * seq * spec.hidden * spec.vocab
        return ForwardFlops(0.0, [transformer_block(batch, seq, spec.hidden, spec.ffn)] * spec.layers, float(head))

    # -- export ------------------------------------------------------------------------------------------
    def load(self, directory: Path):
        return with_causal_lm_loss(hf.GPT2LMHeadModel.from_pretrained(directory, attn_implementation="sdpa"))


def with_causal_lm_loss(model):
    """Name the loss GPT2LMHeadModel computes. transformers picks a model's loss by matching its class name against
    its loss table; "GPT2LMHeadModel" matches none, so every run warned "`loss_type=None` ... unrecognized" and then
    used the causal-LM loss anyway. Naming it keeps the same loss and drops the warning."""
    model.loss_type = "ForCausalLM"
    return model
