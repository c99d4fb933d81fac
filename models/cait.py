"""CaiT (Touvron et al. 2021, "Going deeper with image transformers", arXiv:2103.17239), through timm.

CaiT is a pre-LN ViT with three additions, all of which the canonical form carries:
- LayerScale: every residual branch is scaled per channel by a learned gamma (`gamma1`, `gamma2`);
- talking-heads attention in the main blocks: two [H, H] linears mix the heads of the attention scores,
  one before the softmax (`talk_l`) and one after (`talk_w`);
- class attention: the class token joins only after the patch blocks, in `class_layers` blocks where it
  alone queries (keys/values span the class token and all patches) and alone runs the MLP. These are the
  canonical `class_blocks`: grown in width, never in depth.
The position embedding covers the patches only (the class token is added after the patch blocks).
"""
from __future__ import annotations

import torch
from timm.models.cait import Cait
from torch import nn

from models.canonical import IN, OUT, Canonical
from models.family import register_family
from models.flops import BlockFlops, ForwardFlops, transformer_block
from models.spec import ModelSpec
from models.stochastic_depth import drop_path_args, drop_path_of, with_drop_path
from models.timm_image import TimmImageFamily, mlp_ratio

D_OUT, D_IN = ("D", OUT), ("D", IN)
# canonical key -> parameter name inside one block, shared by both block kinds (q/k/v handled apart:
# fused `attn.qkv` in the patch blocks, separate `attn.q/k/v` in the class-attention blocks)
COMMON = {"o": "attn.proj", "fc1": "mlp.fc1", "fc2": "mlp.fc2", "norm1": "norm1", "norm2": "norm2"}
TALKING = {"talk_l": "attn.proj_l", "talk_w": "attn.proj_w"}
GAMMAS = {"gamma1": "gamma_1", "gamma2": "gamma_2"}
HEAD = {"norm.weight": "norm.weight", "norm.bias": "norm.bias",
        "classifier.weight": "head.weight", "classifier.bias": "head.bias"}


def layer_scale_init(depth: int) -> float:
    """LayerScale's initial gamma, by the paper's rule (§2.2): 0.1 up to 18 layers, 1e-5 at 24, 1e-6 deeper.
    timm's registered cait_* models use exactly these values (XS24/S24: 1e-5; S36/M36/M48: 1e-6), except
    cait_xxs36 (1e-5); the bare `Cait` constructor's 1e-4 matches no published model."""
    return 0.1 if depth <= 18 else 1e-5 if depth <= 24 else 1e-6


@register_family
class CaitFamily(TimmImageFamily):
    name = "cait"
    blocks_attr = "blocks"
    class_attention = True

    # -- building ------------------------------------------------------------------------------------------
    timm_architecture = "cait_xxs24_224"

    def timm_args(self, spec: ModelSpec) -> dict:
        ratio = mlp_ratio(spec.hidden, spec.ffn)
        # the class blocks get the same FFN width as the patch blocks: one canonical spec.ffn for both
        return dict(img_size=spec.image_size, patch_size=spec.patch_size, in_chans=spec.in_chans,
                    num_classes=spec.classes, embed_dim=spec.hidden, depth=spec.layers, num_heads=spec.heads,
                    mlp_ratio=ratio, mlp_ratio_token_only=ratio, depth_token_only=spec.class_layers,
                    init_values=layer_scale_init(spec.layers), **drop_path_args(spec))

    def build(self, spec: ModelSpec) -> nn.Module:
        # timm's Cait gives every patch block the same drop-path rate (CaiT's rule; the class blocks get none)
        return with_drop_path(Cait(**self.timm_args(spec)), spec)

    def owns(self, model) -> bool:
        return type(model) is Cait

    def spec_of(self, model) -> ModelSpec:
        pe, first = model.patch_embed, model.blocks[0]
        ffn = first.mlp.fc1.out_features
        if any(b.mlp.fc1.out_features != ffn for b in model.blocks_token_only):
            raise ValueError("class-attention blocks have another FFN width than the patch blocks; "
                             "the canonical form has one ffn")
        return ModelSpec(self.name, len(model.blocks), model.embed_dim, first.attn.num_heads, ffn=ffn,
                         image_size=pe.img_size[0], patch_size=pe.patch_size[0], in_chans=model.in_chans,
                         classes=model.num_classes, class_layers=len(model.blocks_token_only),
                         drop_path=drop_path_of(model))

    # -- canonical -------------------------------------------------------------------------------------------
    @staticmethod
    def _block_names(prefix: str, talking: bool) -> dict[str, str]:
        """canonical key -> parameter name for one block, q/k/v excluded."""
        names = {f"{k}.{kind}": f"{prefix}.{n}.{kind}" for k, n in {**COMMON, **(TALKING if talking else {})}.items()
                 for kind in ("weight", "bias")}
        names.update({k: f"{prefix}.{n}" for k, n in GAMMAS.items()})
        return names

    def to_canonical(self, model) -> Canonical:
        spec = self.spec_of(model)
        p = {k: v.detach().clone() for k, v in model.named_parameters()}
        embed = {"patch.weight": p["patch_embed.proj.weight"].reshape(spec.hidden, -1),   # conv as a linear map
                 "patch.bias": p["patch_embed.proj.bias"],
                 "cls": p["cls_token"].reshape(1, spec.hidden),
                 "position": p["pos_embed"].reshape(-1, spec.hidden)}
        blocks = []
        for l in range(spec.layers):
            pre = f"blocks.{l}"
            b = {key: p[name] for key, name in self._block_names(pre, talking=True).items()}
            # timm's fused qkv stacks rows as [3, heads, head_dim]: the thirds are q, k, v
            for kind in ("weight", "bias"):
                b["q." + kind], b["k." + kind], b["v." + kind] = p[f"{pre}.attn.qkv.{kind}"].chunk(3, dim=0)
            blocks.append(b)
        class_blocks = []
        for l in range(spec.class_layers):
            pre = f"blocks_token_only.{l}"
            b = {key: p[name] for key, name in self._block_names(pre, talking=False).items()}
            b.update({f"{x}.{kind}": p[f"{pre}.attn.{x}.{kind}"] for x in "qkv" for kind in ("weight", "bias")})
            class_blocks.append(b)
        head = {key: p[name] for key, name in HEAD.items()}
        return Canonical(spec, embed, blocks, head,
                         embed_axes={"patch.weight": (D_OUT, None), "patch.bias": (D_OUT,),
                                     "cls": (None, D_OUT), "position": (None, D_OUT)},
                         head_axes={"norm.weight": (D_OUT,), "norm.bias": (D_OUT,),
                                    "classifier.weight": (None, D_IN), "classifier.bias": (None,)},
                         class_blocks=class_blocks, tied_head_norm=None)

    def state_from_canonical(self, canon: Canonical) -> dict[str, torch.Tensor]:
        s, e, d = canon.spec, canon.embed, canon.spec.hidden
        state = {"patch_embed.proj.weight": e["patch.weight"].reshape(d, s.in_chans, s.patch_size, s.patch_size),
                 "patch_embed.proj.bias": e["patch.bias"],
                 "cls_token": e["cls"].reshape(1, 1, d),
                 "pos_embed": e["position"].reshape(1, -1, d)}
        for l, b in enumerate(canon.blocks):
            pre = f"blocks.{l}"
            state.update({name: b[key] for key, name in self._block_names(pre, talking=True).items()})
            for kind in ("weight", "bias"):
                state[f"{pre}.attn.qkv.{kind}"] = torch.cat([b["q." + kind], b["k." + kind], b["v." + kind]])
        for l, b in enumerate(canon.class_blocks):
            pre = f"blocks_token_only.{l}"
            state.update({name: b[key] for key, name in self._block_names(pre, talking=False).items()})
            state.update({f"{pre}.attn.{x}.{kind}": b[f"{x}.{kind}"] for x in "qkv" for kind in ("weight", "bias")})
        state.update({name: canon.head[key] for key, name in HEAD.items()})
        return state

    # -- training ----------------------------------------------------------------------------------------------
    def forward_flops(self, spec: ModelSpec, batch: int, seq: int = 0, head_tokens: int | None = None) -> ForwardFlops:
        n = (spec.image_size // spec.patch_size) ** 2      # patch tokens; `seq` is ignored for images
        # spec.drop_path changes nothing: timm's DropPath computes each branch in full and masks it (see models/vit.py)
        d, h = spec.hidden, spec.heads
        embed = 2 * batch * n * d * spec.in_chans * spec.patch_size ** 2
        block = transformer_block(batch, n, d, spec.ffn)
        # talking heads: proj_l and proj_w are [H, H] linears over the [B, N, N, H] score tensor
        talking = 2 * 2 * batch * n * n * h * h
        block = BlockFlops(block.linear + talking, block.attention)
        # class attention: the class token alone queries, projects and runs the MLP; k and v span all N + 1
        cls_block = transformer_block(batch, n + 1, d, spec.ffn, queries=1)
        head = 2 * batch * d * spec.classes                 # classifier on the class token only
        return ForwardFlops(float(embed), [block] * spec.layers, float(head), [cls_block] * spec.class_layers)

