"""Helpers several test modules share (importable because tests/ is on sys.path under pytest's default
`prepend` import mode)."""
import torch

from models import ModelSpec, get_family


def fake_batch(spec: ModelSpec, batch: int = 2, seq: int = 16) -> dict:
    """A deterministic pretraining batch of the family's objective. For MLM a third of the positions is not
    scored and rows differ, so a loss that ignores `labels == -100` or averages per row would show."""
    g = torch.Generator().manual_seed(0)
    if get_family(spec.family).objective == "image":
        return {"pixel_values": torch.randn(batch, spec.in_chans, spec.image_size, spec.image_size, generator=g),
                "labels": torch.randint(0, spec.classes, (batch,), generator=g)}
    ids = torch.randint(4, spec.vocab, (batch, seq), generator=g)
    labels = ids.clone()
    if get_family(spec.family).objective == "mlm":
        labels[:, 1::3] = -100
        labels[0, 2] = -100
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
    return {"input_ids": ids, "labels": labels}
