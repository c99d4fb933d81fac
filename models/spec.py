"""ModelSpec: the sizes that define one transformer of any family (DESIGN.md §2 `spec`).

One dataclass for all five families keeps tasks and growth methods family-agnostic; fields a family does
not use keep their defaults (a text model has no patch size, a ViT no vocabulary).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class ModelSpec:
    family: str                 # registered family name: bert, roberta, gpt2, llama, vit, cait
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
    # key/value heads of grouped-query attention (Llama); 0 means one per query head (every other family). Kept at
    # 0 then, and left out of `to_dict`, so that records, cache keys and fingerprints of the other families stay
    # what they were before the field existed.
    kv_heads: int = 0
    # stochastic depth (vision families): timm's drop_path_rate, a constructor argument without parameters. One rate
    # per pair (check_growable): a method that grows depth alone builds the large model from the small one's spec.
    # 0 is no drop path, left out of `to_dict` as kv_heads is.
    drop_path: float = 0.0

    def __post_init__(self):
        if self.ffn == 0:
            object.__setattr__(self, "ffn", 4 * self.hidden)
        for name in ("layers", "hidden", "heads", "ffn"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("vocab", "positions", "image_size", "patch_size", "in_chans", "classes", "class_layers"):
            if getattr(self, name) < 0:      # 0: a field the family does not use
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.hidden % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide hidden ({self.hidden})")
        if self.kv_heads == self.heads:
            object.__setattr__(self, "kv_heads", 0)
        if self.kv_heads < 0 or (self.kv_heads and self.heads % self.kv_heads):
            raise ValueError(f"kv_heads ({self.kv_heads}) must divide heads ({self.heads})")
        if not 0 <= self.drop_path < 1:
            raise ValueError(f"drop_path must be in [0, 1), got {self.drop_path}")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv(self) -> int:
        """Key/value heads: `kv_heads` under grouped-query attention, else one per query head."""
        return self.kv_heads or self.heads

    @property
    def group(self) -> int:
        """Query heads per key/value head (1 without grouped-query attention)."""
        return self.heads // self.kv

    def short(self) -> str:
        """A one-line description for messages: 'bert 6L/512H/8 heads, ffn 2048'."""
        size = f"{self.family} {self.layers}L/{self.hidden}H/{self.heads} heads, ffn {self.ffn}"
        size += f" ({self.kv_heads} kv heads)" if self.kv_heads else ""
        extra = (f", vocab {self.vocab}" if self.vocab else "") + (f", image {self.image_size}" if self.image_size else "")
        return size + extra + (f", {self.class_layers} class layers" if self.class_layers else "")

    def with_(self, **changes) -> "ModelSpec":
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return drop_defaults(asdict(self))


def drop_defaults(spec: dict) -> dict:
    """A spec's dict without the fields added after records existed, where they hold their neutral value."""
    return {k: v for k, v in spec.items() if not (k in ("kv_heads", "drop_path") and not v)}


def check_growable(small: ModelSpec, large: ModelSpec) -> None:
    """Raise ValueError naming the problem if `large` cannot be grown from `small`."""
    if small.family != large.family:
        raise ValueError(f"mismatched families: cannot grow {small.family} into {large.family}")
    for name in ("layers", "hidden", "heads", "kv", "ffn", "class_layers"):
        if getattr(large, name) < getattr(small, name):
            label = "key/value heads" if name == "kv" else name
            raise ValueError(f"the large model shrinks in {label} ({getattr(small, name)} -> {getattr(large, name)}); "
                             "growth needs large >= small in every dimension")
    for name in ("vocab", "positions", "image_size", "patch_size", "in_chans", "classes", "drop_path"):
        if getattr(large, name) != getattr(small, name):
            raise ValueError(f"{name} differs between small ({getattr(small, name)}) and large ({getattr(large, name)}); "
                             "it must be equal for growth")
