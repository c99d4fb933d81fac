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


def learnable_batches(spec: ModelSpec, batch: int = 16, seq: int = 16, seed: int = 0):
    """An endless stream of pretraining batches a tiny model learns in a few hundred steps, so that tests run on
    weights that have *learned* (confident logits), not on random init, where logits sit near zero and a
    model k times too confident looks right: one fixed sentence with 20% of its tokens masked (MLM), counting
    sequences (CLM: next = current + 1), or per-class templates plus noise (images)."""
    g = torch.Generator().manual_seed(seed)
    objective = get_family(spec.family).objective
    if objective == "image":
        shape = (spec.in_chans, spec.image_size, spec.image_size)
        templates = torch.randn(spec.classes, *shape, generator=torch.Generator().manual_seed(123))
        while True:
            y = torch.randint(0, spec.classes, (batch,), generator=g)
            yield {"pixel_values": templates[y] + 0.5 * torch.randn(batch, *shape, generator=g), "labels": y}
    seq = min(seq, spec.positions)
    if objective == "clm":
        while True:
            ids = (torch.randint(1, spec.vocab, (batch, 1), generator=g) + torch.arange(seq)) % (spec.vocab - 1) + 1
            yield {"input_ids": ids, "labels": ids.clone()}
    sentence = torch.randperm(spec.vocab - 1, generator=torch.Generator().manual_seed(7))[:seq] + 1
    while True:
        ids = sentence.expand(batch, seq)
        masked = torch.rand(batch, seq, generator=g) < 0.2
        yield {"input_ids": ids.masked_fill(masked, 0), "attention_mask": torch.ones_like(ids),
               "labels": ids.masked_fill(~masked, -100)}


def train_small(spec: ModelSpec, steps: int = 150, seed: int = 0):
    """A model of `spec` trained on `learnable_batches` (Adam, lr 3e-3), in eval mode; the caller's global RNG is
    left as it was. Refuses to return a model that did not learn."""
    family = get_family(spec.family)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = family.build(spec)
        data = learnable_batches(spec, seed=seed + 1)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        losses = []
        for _ in range(steps):
            loss = family.loss(model, next(data))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0], f"{spec.short()} did not learn: loss {losses[0]:.3f} -> {losses[-1]:.3f}"
    return model.eval()


def logits_of(model, batch: dict) -> torch.Tensor:
    with torch.no_grad():
        return get_family(get_family_name(model)).logits(model.eval(), batch).float()


def get_family_name(model) -> str:
    from models import family_of
    return family_of(model).name


def relative_logit_gap(a, b, batch: dict) -> float:
    """max |logits(a) - logits(b)| / max |logits(a)|: the issue's 'relative to the logits' scale'."""
    la, lb = logits_of(a, batch), logits_of(b, batch)
    return float((la - lb).abs().max() / la.abs().max())


def write_image_folder(root, classes, per_split: dict, size: tuple[int, int], suffix: str = ".png"):
    """An ImageFolder of random RGB images (as ImageNet is read: root/train/<class>/, root/val/<class>/):
    `per_split` images per class and split, `size` (height, width), saved with `suffix` (.png or .jpg). Returns root."""
    from pathlib import Path

    import numpy as np
    from PIL import Image
    root, rng = Path(root), np.random.default_rng(0)
    for split, n in per_split.items():
        for cls in classes:
            (root / split / cls).mkdir(parents=True)
            for i in range(n):
                Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8)).save(root / split / cls / f"{i}{suffix}")
    return root


def same_batch(a: dict, b: dict) -> bool:
    """Two batches hold the same keys and equal tensors."""
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
