"""Analytic FLOPs of what actually ran (DESIGN.md §6): 2 FLOPs per multiply-add, attention included.

Each family describes one forward pass as `ForwardFlops`; the training-step rule is shared:
- a trainable layer's backward costs 2x its forward (gradient w.r.t. inputs and w.r.t. weights);
- a frozen layer that sits above a trainable one still passes gradients down: 1x for its weight matmuls
  (input gradient only) and 2x for attention's score/value matmuls (both operands carry gradient);
- nothing below the lowest trainable layer runs backward at all;
- the input projection (ViT patch conv) has no input gradient: 1x when trainable.
Counts cover matmuls only, as `torch.utils.flop_counter.FlopCounterMode` does (norms, softmax, GELU are
a few per cent of a transformer and not matmul FLOPs).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BlockFlops:
    linear: float      # matmuls with weights (q, k, v, o, fc1, fc2, talking heads)
    attention: float   # score and value matmuls (no weights)

    @property
    def total(self) -> float:
        return self.linear + self.attention


@dataclass
class ForwardFlops:
    embed: float                       # input projection (ViT/CaiT patch conv); 0 for token lookups
    blocks: list[BlockFlops]
    head: float                        # everything after the blocks (MLM transform, decoder, classifier)
    class_blocks: list[BlockFlops] = field(default_factory=list)   # CaiT class attention, after blocks

    @property
    def total(self) -> float:
        return self.embed + self.head + sum(b.total for b in self.blocks + self.class_blocks)

    def scaled(self, factor: float) -> "ForwardFlops":
        s = lambda b: BlockFlops(b.linear * factor, b.attention * factor)
        return ForwardFlops(self.embed * factor, [s(b) for b in self.blocks], self.head * factor,
                            [s(b) for b in self.class_blocks])


def backward_flops(fwd: ForwardFlops, trainable_blocks: set[int] | None = None,
                   embed_trainable: bool = True) -> float:
    """Backward FLOPs given which (main) blocks train; None means everything trains.

    Head and class blocks are taken as trainable (no method here freezes them)."""
    n = len(fwd.blocks)
    trainable = set(range(n)) if trainable_blocks is None else set(trainable_blocks)
    lowest = min(trainable) if trainable else n
    total = 2 * fwd.head + sum(2 * b.total for b in fwd.class_blocks)
    for i, b in enumerate(fwd.blocks):
        if i in trainable:
            total += 2 * b.total
        elif i > lowest:
            total += b.linear + 2 * b.attention
    if embed_trainable and trainable_blocks is None:
        total += fwd.embed
    return total


def transformer_block(batch: int, seq: int, hidden: int, ffn: int, queries: int | None = None,
                      kv_hidden: int | None = None, ffn_matrices: int = 2) -> BlockFlops:
    """One block over `batch` sequences of `seq` tokens. `queries` (per sequence) is for CaiT's class
    attention, where only the class token queries and runs the MLP while keys/values cover all tokens.
    `kv_hidden`: width of k and v under grouped-query attention (default `hidden`); `ffn_matrices`: 3 for a
    gated FFN (SwiGLU: gate, up, down)."""
    q = seq if queries is None else queries
    kv = hidden if kv_hidden is None else kv_hidden
    linear = 2 * batch * hidden * (2 * q * hidden + 2 * seq * kv) + ffn_matrices * 2 * batch * q * hidden * ffn
    attention = 2 * 2 * batch * q * seq * hidden      # scores q.k^T and probs @ v
    return BlockFlops(float(linear), float(attention))


def ran_forward(fwd: ForwardFlops, tokens: dict[int, float],
                trainable_blocks: set[int] | frozenset[int] | None) -> tuple[ForwardFlops, set[int] | None]:
    """The forward that actually ran, for training strategies that skip blocks or tokens: only the main blocks
    in `tokens` (block index -> share of the full token count it processed), in order, and the trainable set
    renumbered to match, ready for `backward_flops`.

    A block on a share r of the tokens costs r x its weight matmuls and r^2 x its score/value matmuls.
    (CaiT's talking-heads mixing is booked under `linear` but grows with r^2; it is about 1% of a block.)"""
    kept = sorted(tokens)
    blocks = [BlockFlops(fwd.blocks[i].linear * tokens[i], fwd.blocks[i].attention * tokens[i] ** 2) for i in kept]
    trainable = None if trainable_blocks is None else {pos for pos, i in enumerate(kept) if i in trainable_blocks}
    return ForwardFlops(fwd.embed, blocks, fwd.head, list(fwd.class_blocks)), trainable
