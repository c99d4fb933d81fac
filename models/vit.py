"""ViT / DeiT (Dosovitskiy et al. 2021; Touvron et al. 2021, "Training data-efficient image transformers &
distillation through attention") as an image classifier, through timm's `VisionTransformer`.

DeiT is architecturally a ViT (the distillation token is not used here: KI distils in the loss), so one
family covers DeiT-S/B. Canonical mapping: pre-LN blocks (norm1 before attention, norm2 before the MLP),
an embedding section of the patch projection (conv flattened to a linear map [D, C*p*p]), the class
token and the position table (N patches + 1 class token), and a head of the final norm and the classifier
on the class token. timm's fused `qkv` Linear is already W[out, in]: it is only split into q/k/v.
"""
from __future__ import annotations


import torch
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from models.canonical import IN, OUT, Canonical
from models.family import register_family
from models.flops import ForwardFlops, transformer_block
from models.spec import ModelSpec
from models.stochastic_depth import drop_path_args, drop_path_of, with_drop_path
from models.timm_image import TimmImageFamily, mlp_ratio

D_OUT = ("D", OUT)
# canonical block key -> parameter name inside blocks.{l}; q/k/v live fused in attn.qkv
BLOCK_NAMES = {"o": "attn.proj", "fc1": "mlp.fc1", "fc2": "mlp.fc2", "norm1": "norm1", "norm2": "norm2"}
QKV = ("q", "k", "v")
EMBED_AXES = {"patch.weight": (D_OUT, None), "patch.bias": (D_OUT,), "cls": (None, D_OUT), "position": (None, D_OUT)}
HEAD_AXES = {"norm.weight": (D_OUT,), "norm.bias": (D_OUT,), "classifier.weight": (None, ("D", IN)),
             "classifier.bias": (None,)}


@register_family
class ViT(TimmImageFamily):
    name = "vit"
    blocks_attr = "blocks"

    timm_architecture = "vit_base_patch16_224"

    def timm_args(self, spec: ModelSpec) -> dict:
        ratio = mlp_ratio(spec.hidden, spec.ffn)
        return dict(img_size=spec.image_size, patch_size=spec.patch_size, in_chans=spec.in_chans,
                    num_classes=spec.classes, embed_dim=spec.hidden, depth=spec.layers, num_heads=spec.heads,
                    mlp_ratio=ratio, qkv_bias=True, class_token=True, global_pool="token", **drop_path_args(spec))

    def build(self, spec: ModelSpec) -> nn.Module:
        return with_drop_path(VisionTransformer(**self.timm_args(spec)), spec)

    def owns(self, model) -> bool:
        return type(model) is VisionTransformer

    def spec_of(self, model) -> ModelSpec:
        proj = model.patch_embed.proj
        return ModelSpec(self.name, len(model.blocks), model.embed_dim, model.blocks[0].attn.num_heads,
                         ffn=model.blocks[0].mlp.fc1.out_features, image_size=model.patch_embed.img_size[0],
                         patch_size=model.patch_embed.patch_size[0], in_chans=proj.in_channels,
                         classes=model.num_classes, drop_path=drop_path_of(model))

    # -- canonical ---------------------------------------------------------------------------------------
    def to_canonical(self, model) -> Canonical:
        spec = self.spec_of(model)
        p = {n: t.detach() for n, t in model.named_parameters()}
        embed = {"patch.weight": p["patch_embed.proj.weight"].reshape(spec.hidden, -1).clone(),  # [D, C*p*p]
                 "patch.bias": p["patch_embed.proj.bias"].clone(),
                 "cls": p["cls_token"].reshape(1, spec.hidden).clone(),                           # [1, D]
                 "position": p["pos_embed"].reshape(-1, spec.hidden).clone()}                     # [N+1, D]
        head = {"norm.weight": p["norm.weight"].clone(), "norm.bias": p["norm.bias"].clone(),
                "classifier.weight": p["head.weight"].clone(), "classifier.bias": p["head.bias"].clone()}
        canon = Canonical(spec, embed, [], head, embed_axes=dict(EMBED_AXES), head_axes=dict(HEAD_AXES),
                          tied_head_norm=None)
        for layer in range(spec.layers):
            pre, block = f"blocks.{layer}.", {}
            qkv_w = p[pre + "attn.qkv.weight"].split(spec.hidden, dim=0)   # rows: q, k, v outputs
            qkv_b = p[pre + "attn.qkv.bias"].split(spec.hidden, dim=0)
            for key, w, b in zip(QKV, qkv_w, qkv_b):
                block[f"{key}.weight"], block[f"{key}.bias"] = w.clone(), b.clone()
            for key, name in BLOCK_NAMES.items():
                for kind in ("weight", "bias"):
                    block[f"{key}.{kind}"] = p[f"{pre}{name}.{kind}"].clone()
            canon.blocks.append(block)
        return canon

    def state_from_canonical(self, canon: Canonical) -> dict[str, torch.Tensor]:
        # only reshape and cat: LiGO differentiates through this map (functional_call on the result)
        s, e = canon.spec, canon.embed
        state = {"patch_embed.proj.weight": e["patch.weight"].reshape(s.hidden, s.in_chans, s.patch_size, s.patch_size),
                 "patch_embed.proj.bias": e["patch.bias"],
                 "cls_token": e["cls"].reshape(1, 1, s.hidden),
                 "pos_embed": e["position"].reshape(1, -1, s.hidden),
                 "norm.weight": canon.head["norm.weight"], "norm.bias": canon.head["norm.bias"],
                 "head.weight": canon.head["classifier.weight"], "head.bias": canon.head["classifier.bias"]}
        for layer, block in enumerate(canon.blocks):
            pre = f"blocks.{layer}."
            for kind in ("weight", "bias"):
                state[f"{pre}attn.qkv.{kind}"] = torch.cat([block[f"{k}.{kind}"] for k in QKV], dim=0)
                for key, name in BLOCK_NAMES.items():
                    state[f"{pre}{name}.{kind}"] = block[f"{key}.{kind}"]
        return state

    # -- training ----------------------------------------------------------------------------------------
    def forward_flops(self, spec: ModelSpec, batch: int, seq: int = 0, head_tokens: int | None = None) -> ForwardFlops:
        # `seq` is ignored: the token count follows from the image (N patches + the class token). Stochastic depth
        # (spec.drop_path) changes nothing here: timm's DropPath runs the whole branch on every sample and multiplies
        # its output by a per-sample 0/(1/keep) mask (timm.layers.drop.drop_path: `x * random_tensor`), so a step
        # computes every block in full and is charged in full.
        patches = (spec.image_size // spec.patch_size) ** 2
        embed = 2 * batch * patches * spec.hidden * spec.in_chans * spec.patch_size ** 2
        blocks = [transformer_block(batch, patches + 1, spec.hidden, spec.ffn)] * spec.layers
        head = 2 * batch * spec.hidden * spec.classes      # global_pool="token": only the class token is classified
        return ForwardFlops(float(embed), blocks, float(head))

