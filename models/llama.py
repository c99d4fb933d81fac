"""Llama (Touvron et al. 2023, "LLaMA: Open and Efficient Foundation Language Models"; Llama 2's grouped-query
attention, Ainslie et al. 2023) as a causal LM, through HF transformers' LlamaForCausalLM.

Canonical mapping: pre-norm blocks with RMSNorm (weight only, no bias: norm1 = input_layernorm before attention,
norm2 = post_attention_layernorm before the MLP), rotary position embeddings (no position tensor at all: the
rotation is a fixed function of the position, so nothing about positions is grown), bias-free q/k/v/o, a SwiGLU
FFN down(silu(gate x) * up x) as canonical gate / fc1 (up) / fc2 (down), grouped-query attention with `kv_heads`
key/value heads (K and V spaces smaller than Q, and o consuming Q: models/canonical.py), and a head of the final
RMSNorm plus an LM head, untied by default (Llama's choice) and tied where the spec says so (the tied norm is then
tagged IN, as GPT-2's ln_f). Linear weights are stored W[out, in] already: no transposes.

Growth-relevant facts: RMSNorm, like LayerNorm, keeps its statistic (the mean square) when every residual unit is
copied equally often, so Net2Net-style copies with integer ratios preserve the function; rotary embeddings act
within each head, so whole-head copies with head_dim fixed are rotated exactly as their sources.
"""
from __future__ import annotations

from pathlib import Path

import transformers as hf
from torch import nn

from models.canonical import GQA_BLOCK_AXES, IN, OUT, Canonical
from models.family import CausalLM, register_family
from models.flops import ForwardFlops, transformer_block
from models.spec import ModelSpec

D_OUT = ("D", OUT)
# canonical block key -> parameter name inside model.layers.{l}
BLOCK_NAMES = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
               "gate": "mlp.gate_proj", "fc1": "mlp.up_proj", "fc2": "mlp.down_proj",
               "norm1": "input_layernorm", "norm2": "post_attention_layernorm"}
EMBED_AXES = {"token": (None, D_OUT)}
HEAD_AXES = {"norm.weight": (D_OUT,), "decoder.weight": (None, ("D", IN))}
RMS_EPS = 1e-5          # Llama 2's rms_norm_eps
ROPE_THETA = 10_000.0   # Llama 1/2's rotary base


def swiglu_ffn(hidden: int, multiple_of: int = 256) -> int:
    """Llama's FFN width: 2/3 of 4 x hidden (SwiGLU has three matrices), rounded up to `multiple_of`."""
    return -(-int(8 * hidden / 3) // multiple_of) * multiple_of


@register_family
class Llama(CausalLM):
    name = "llama"
    blocks_attr = "model.layers"
    grouped_query = True
    norm_kind = "rmsnorm"

    def config(self, spec: ModelSpec) -> hf.LlamaConfig:
        return hf.LlamaConfig(
            vocab_size=spec.vocab, hidden_size=spec.hidden, intermediate_size=spec.ffn,
            num_hidden_layers=spec.layers, num_attention_heads=spec.heads, num_key_value_heads=spec.kv,
            max_position_embeddings=spec.positions, tie_word_embeddings=spec.tie_embeddings,
            rms_norm_eps=RMS_EPS, rope_theta=ROPE_THETA, attention_bias=False, mlp_bias=False,
            hidden_act="silu", bos_token_id=spec.vocab - 1, eos_token_id=spec.vocab - 1, pad_token_id=None,
            attn_implementation="sdpa")

    def build(self, spec: ModelSpec) -> nn.Module:
        return hf.LlamaForCausalLM(self.config(spec))

    def owns(self, model) -> bool:
        return type(model) is hf.LlamaForCausalLM

    def spec_of(self, model) -> ModelSpec:
        c = model.config
        return ModelSpec(self.name, c.num_hidden_layers, c.hidden_size, c.num_attention_heads,
                         ffn=c.intermediate_size, vocab=c.vocab_size, positions=c.max_position_embeddings,
                         tie_embeddings=bool(c.tie_word_embeddings), kv_heads=c.num_key_value_heads)

    # -- canonical ---------------------------------------------------------------------------------------
    def to_canonical(self, model) -> Canonical:
        spec = self.spec_of(model)
        if model.config.head_dim != spec.head_dim:
            raise ValueError(f"llama with head_dim {model.config.head_dim} != hidden/heads ({spec.head_dim}) has no "
                             "canonical form here")
        canon = Canonical(spec, {}, [], {}, embed_axes=dict(EMBED_AXES), head_axes=dict(HEAD_AXES),
                          tied_head_norm="norm" if spec.tie_embeddings else None, block_axes=GQA_BLOCK_AXES)
        # state_from_canonical: the default, by parameter_names (no ops: LiGO differentiates through it)
        return self.fill_canonical(canon, model)

    def parameter_names(self, spec: ModelSpec) -> dict[tuple, str]:
        names = {("embed", None, "token"): "model.embed_tokens.weight",
                 ("head", None, "norm.weight"): "model.norm.weight"}
        if not spec.tie_embeddings:
            names["head", None, "decoder.weight"] = "lm_head.weight"
        for layer in range(spec.layers):
            names.update({("blocks", layer, f"{key}.weight"): f"model.layers.{layer}.{name}.weight"
                          for key, name in BLOCK_NAMES.items()})
        return names

    # -- FLOPs (loss, logits and export: CausalLM) ---------------------------------------------------
    def forward_flops(self, spec: ModelSpec, batch: int, seq: int, head_tokens: int | None = None) -> ForwardFlops:
        # k and v project onto kv_heads x head_dim only; the gated FFN has three matrices; scores and values
        # cover every query head (a key/value head serves its whole group); the causal mask saves no matmul work;
        # RMSNorm, SiLU and the rotary table and rotation are elementwise (no matmul FLOPs)
        block = transformer_block(batch, seq, spec.hidden, spec.ffn, kv_hidden=spec.kv * spec.head_dim,
                                  ffn_matrices=3)
        head = 2 * batch * seq * spec.hidden * spec.vocab
        return ForwardFlops(0.0, [block] * spec.layers, float(head))

    # -- export ------------------------------------------------------------------------------------------
    def load(self, directory: Path):
        return hf.LlamaForCausalLM.from_pretrained(directory, attn_implementation="sdpa")
