"""ModelSpec: the sizes that define one transformer of any family (DESIGN.md §2 `dims`).

One dataclass for all five families keeps tasks and growth methods family-agnostic; fields a family does
not use keep their defaults (a text model has no patch size, a ViT no vocabulary).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class ModelSpec:
    family: str                 # registered family name: bert, roberta, gpt2, vit, cait
    layers: int
    hidden: int
    heads: int
    ffn: int = 0                # 0 means 4 * hidden, the convention of every paper model
    vocab: int = 0              # text families
    positions: int = 0          # maximum sequence length (text)
    image_size: int = 0         # vision families
    patch_size: int = 0
    in_chans: int = 3
    classes: int = 0
    class_layers: int = 0       # CaiT class-attention blocks (never grown in depth)
    tie_embeddings: bool = True  # output layer shares the token embedding (paper §3.3)

    def __post_init__(self):
        if self.ffn == 0:
            object.__setattr__(self, "ffn", 4 * self.hidden)
        for name in ("layers", "hidden", "heads"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.hidden % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide hidden ({self.hidden})")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def short(self) -> str:
        """A one-line description for messages: 'bert 6L/512H/8 heads, ffn 2048'."""
        size = f"{self.family} {self.layers}L/{self.hidden}H/{self.heads} heads, ffn {self.ffn}"
        extra = (f", vocab {self.vocab}" if self.vocab else "") + (f", image {self.image_size}" if self.image_size else "")
        return size + extra + (f", {self.class_layers} class layers" if self.class_layers else "")

    def with_(self, **changes) -> "ModelSpec":
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return asdict(self)


def check_growable(small: ModelSpec, large: ModelSpec) -> None:
    """Raise ValueError naming the problem if `large` cannot be grown from `small`."""
    if small.family != large.family:
        raise ValueError(f"mismatched families: cannot grow {small.family} into {large.family}")
    for name in ("layers", "hidden", "heads", "ffn", "class_layers"):
        if getattr(large, name) < getattr(small, name):
            raise ValueError(f"the large model shrinks in {name} ({getattr(small, name)} -> {getattr(large, name)}); "
                             "growth needs large >= small in every dimension")
    for name in ("vocab", "positions", "image_size", "patch_size", "in_chans", "classes"):
        if getattr(large, name) != getattr(small, name):
            raise ValueError(f"{name} differs between small ({getattr(small, name)}) and large ({getattr(large, name)}); "
                             "it must be equal for growth")
