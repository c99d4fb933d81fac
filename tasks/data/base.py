"""The `PretrainData` contract and the sampling every corpus shares (tasks/data/__init__.py's module docstring
says why a batch is a pure function of (seed, step, batch_size)). A module of its own, below the loaders: text.py,
vision.py and the image recipe subclass PretrainData, and the package's entry points import those loaders, so the
contract cannot live in the package's __init__ without an import circle."""
from __future__ import annotations

import functools

import numpy as np
import torch

EVAL_SEED = 1234  # fixed masking/augmentation seed for held-out batches: every run scores the same batches


def derive_seed(*parts: int) -> int:
    """A well-mixed 32-bit seed from integer parts (seed, step, domain tag), so nearby (seed, step)
    pairs do not give correlated generators the way `seed * 1000 + step` would."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])


@functools.lru_cache(maxsize=4)
def epoch_permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    """Order of the n training items in `epoch`; cached because consecutive steps share an epoch
    (a pure function, so caching cannot break determinism)."""
    perm = np.random.default_rng([int(seed), int(epoch), 0]).permutation(n)
    perm.flags.writeable = False
    return perm


def batch_indices(n: int, step: int, batch_size: int, seed: int) -> np.ndarray:
    """Item indices of batch `step`: positions [step*B, (step+1)*B) of the endless stream made of
    one permutation per epoch. A batch may straddle an epoch boundary (or span several epochs
    when B > n), so each position looks up its own epoch's permutation."""
    if n <= 0:
        raise ValueError("training split is empty")
    pos = np.arange(step * batch_size, (step + 1) * batch_size, dtype=np.int64)
    epochs = pos // n
    out = np.empty(batch_size, dtype=np.int64)
    for e in np.unique(epochs):
        sel = epochs == e
        out[sel] = epoch_permutation(n, seed, int(e))[pos[sel] % n]
    return out


def to_device(batch: dict, device) -> dict:
    """A CPU batch onto `device`. To a GPU through pinned memory, so that the copy is asynchronous and the host
    does not wait for it (a pageable tensor's non_blocking copy is synchronous)."""
    device = torch.device(device)
    if device.type != "cuda":
        return {k: v.to(device) for k, v in batch.items()}
    return {k: v.pin_memory().to(device, non_blocking=True) for k, v in batch.items()}


class PretrainData:
    """What the trainer and the growth methods see of a pretraining corpus.

    Subclasses set the attributes below, `n_train` / `n_valid` (number of items: token blocks or
    images) and implement `make_batch(split, indices, rng_seed)`; sampling and accounting live here
    so text and images follow exactly the same determinism rules.
    """

    kind: str  # "text" or "image"
    objective: str  # "mlm", "clm" or "image"
    vocab_size: int | None = None
    num_classes: int | None = None
    image_size: int | None = None
    in_chans: int | None = None
    seq_len: int | None = None
    tokenizer = None
    n_train: int = 0
    n_valid: int = 0

    def make_batch(self, split: str, indices: np.ndarray, rng_seed: int) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def for_transfer(self) -> "PretrainData":
        """The data as a GPU run's loader makes its training batches, to be sent to the device and completed there
        by `on_device`: by default the batches themselves (tasks/data/imagenet.py ImageNetData sends uint8 pixels and
        leaves the float work of its recipe to the device)."""
        return self

    def on_device(self, batch: dict[str, torch.Tensor], device) -> dict[str, torch.Tensor]:
        """A CPU batch of `for_transfer`'s, sent to `device` and completed there: what `train_batch` gives (or, where
        the recipe draws random numbers on the device, a batch drawn from the same distribution; imagenet.py)."""
        return to_device(batch, device)

    def train_batch(self, step: int, batch_size: int, seed: int) -> dict[str, torch.Tensor]:
        """Batch `step` of the run seeded `seed`; identical for identical arguments, whatever was
        called before (what makes crash-resume exact)."""
        idx = batch_indices(self.n_train, step, batch_size, seed)
        return self.make_batch("train", idx, derive_seed(seed, step, 1))

    def eval_batches(self, batch_size: int, max_batches: int) -> list[dict[str, torch.Tensor]]:
        """The first `max_batches` batches of the held-out split in order (the last one may be
        short when the split runs out), with a fixed seed, so eval losses are comparable
        across runs and methods. Cached: paper-scale images are expensive to decode."""
        key = (batch_size, max_batches)
        cache = self.__dict__.setdefault("_eval_cache", {})
        if key not in cache:
            n = min(self.n_valid, batch_size * max_batches)
            cache[key] = [
                self.make_batch("valid", np.arange(i, min(i + batch_size, n)), derive_seed(EVAL_SEED, i // batch_size, 2))
                for i in range(0, n, batch_size)
            ]
        return list(cache[key])

    @property
    def unit(self) -> str:
        return "tokens" if self.kind == "text" else "images"

    def preprocessing(self) -> dict | None:
        """What this data does to a raw input before the model sees it, for the export to carry (an image set's
        normalisation, as timm's pretrained_cfg states it); None where an export needs none (text: the
        tokenizer is saved beside the model)."""
        return None

    def units(self, batch: dict[str, torch.Tensor]) -> int:
        """Tokens (input_ids.numel(), special tokens included) or images in a batch: the x-axis of
        every savings curve."""
        if self.kind == "text":
            return int(batch["input_ids"].numel())
        return int(batch["labels"].shape[0])

    def units_per_batch(self, batch_size: int) -> int:
        return batch_size * self.seq_len if self.kind == "text" else batch_size

    def __repr__(self) -> str:
        extra = f"vocab={self.vocab_size}, seq_len={self.seq_len}" if self.kind == "text" else (
            f"classes={self.num_classes}, size={self.image_size}, chans={self.in_chans}")
        return f"{type(self).__name__}({self.objective}, {extra}, train={self.n_train}, valid={self.n_valid})"
