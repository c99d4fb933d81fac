"""FlopsLedger: cumulative FLOPs by phase — what actually ran, never what a formula hoped (DESIGN.md §6)."""
from __future__ import annotations

PHASES = ("fit", "forward", "backward", "teacher")


class FlopsLedger:
    """Phases: `fit` (a growth operator's own training, e.g. LiGO's 100 steps), `forward` and `backward`
    (training the model), `teacher` (distillation forwards, KI). Evaluation is not training compute and is
    not charged, as in the paper."""

    def __init__(self, counts: dict[str, float] | None = None):
        self.counts = {p: 0.0 for p in PHASES}
        for phase, value in (counts or {}).items():
            self.add(phase, value)

    def add(self, phase: str, flops: float) -> None:
        if phase not in self.counts:
            raise KeyError(f"unknown FLOPs phase '{phase}'; known: {', '.join(PHASES)}")
        if flops < 0:
            raise ValueError(f"negative FLOPs ({flops}) charged to {phase}")
        self.counts[phase] += float(flops)

    @property
    def total(self) -> float:
        return sum(self.counts.values())

    def as_dict(self) -> dict[str, float]:
        return dict(self.counts)
