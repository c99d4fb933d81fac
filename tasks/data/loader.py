"""Training batches made off the training process: a `torch.utils.data.DataLoader` over the micro-batches a run
will ask for, which yields exactly the batches the trainer's inline `data.train_batch` calls give, in the same
order, from any step on.

Why a map-style dataset over a precomputed index list, and not a stream. Every batch is a pure function of
(seed, micro-batch index) (tasks/data/__init__.py): the data position of a run is its step counter, which is what
makes a resumed run see the batches it would have seen and W processes compute what one process computes. The
loader keeps that property by construction: item k of `MicroBatches` is `(i_k, data.train_batch(i_k, B, seed))`
where i_0, i_1, ... are the micro-batch indices the trainer asks for from `start_step` to `total_steps` (worked out
once, in the training process, by the `index_fn` passed in: under torchrun `runs.distributed.micro_index`, so each
rank keeps its own share). Workers only decide *where* an item is computed, never *what* it is: every batch seeds
its own randomness (MLM masks, crops and flips) from (seed, index) under a forked RNG, so the workers' global
generators (seeded by the DataLoader per worker) cannot change a value; tests/test_loader.py varies them to show it.
With `workers=0` (the CPU default) the DataLoader calls `train_batch` inline, in the same order, when the trainer
asks for the next item, so the CPU records stay bit-identical; the DataLoader is given its own generator so that
making its iterator does not draw from the process's global RNG (which the trainer uses at stage boundaries).

Text at paper scale. Issue 42 asks for "streamed datasets, tokenised in workers, packed to the sequence length".
A stream tokenised in workers would make batch i depend on how far a stream (and each worker's share of it) has
got: resuming at step s would mean replaying the stream up to s, and the per-epoch permutation of blocks that
decorrelates consecutive batches would be gone. growbench instead tokenises each corpus once, already packed:
`tasks/data/text.py:token_ids` writes the documents, separator-joined, as one memory-mapped .npy, and a training
item is a fixed block of it, so per batch only the slicing and the MLM masking remain, and those now run in the
workers. The one-time pass is measured by bench/perf/pipeline.py (documents/s and tokens/s); it calls the Rust
tokenizer's `encode_batch_fast` on chunks of 10,000 documents, which the `tokenizers` library spreads over all
cores itself (its own thread pool; TOKENIZERS_PARALLELISM=false turns that off), so it is already parallel.

Images: `ImageNetData.make_batch` decodes and augments its images; in the workers that work leaves the training
process. Workers are forked (where the platform can) so that the data objects, which hold memory maps, a
tokenizer and closures over an ImageFolder, are shared rather than pickled; they never touch CUDA.
"""
from __future__ import annotations

import multiprocessing
import os
from typing import Callable

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

MAX_DEFAULT_WORKERS = 16   # cores beyond this rarely help one GPU, and each worker holds its own copies of pages


def serial_index(step: int, micro: int, accum: int) -> int:
    """Index of micro-batch `micro` of optimizer step `step` in a one-process run (runs.distributed.micro_index
    with one rank)."""
    return step * accum + micro


def micro_indices(start_step: int, total_steps: int, grad_accum: int,
                  index_fn: Callable[[int, int, int], int] = serial_index) -> np.ndarray:
    """The micro-batch indices the trainer asks for, in its order: steps start_step .. total_steps - 1, each
    micro-batch 0 .. grad_accum - 1, mapped by `index_fn(step, micro, grad_accum)`."""
    return np.array([index_fn(step, micro, grad_accum) for step in range(start_step, total_steps)
                     for micro in range(grad_accum)], dtype=np.int64)


class MicroBatches(Dataset):
    """Item k: (indices[k], data.train_batch(indices[k], batch_size, seed))."""

    def __init__(self, data, batch_size: int, seed: int, indices: np.ndarray):
        self.data, self.batch_size, self.seed, self.indices = data, batch_size, seed, indices

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, k: int):
        index = int(self.indices[k])
        return index, self.data.train_batch(index, self.batch_size, self.seed)


def default_workers(device) -> int:
    """Worker processes for the trainer's loader on `device`: 0 on the CPU (the batch is made inline, where the
    training step would compete with workers for the same cores anyway); on a GPU, the cores this process may run
    on, shared among the node's ranks (torchrun's LOCAL_WORLD_SIZE), less one for the training process, capped at
    MAX_DEFAULT_WORKERS; at least one, since the training process mostly waits on the device."""
    if torch.device(device).type != "cuda":
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    per_rank = cores // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    return max(1, min(per_rank - 1, MAX_DEFAULT_WORKERS))


def check_loader_args(workers: int | None, prefetch_factor: int | None, persistent_workers: bool) -> None:
    """One-line refusal of loader settings that cannot work (before a run starts): what was wrong, what is taken."""
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 0):
        raise ValueError(f"workers must be an integer >= 0 (0: batches made in the training process), got {workers!r}")
    if prefetch_factor is not None:
        if isinstance(prefetch_factor, bool) or not isinstance(prefetch_factor, int) or prefetch_factor < 1:
            raise ValueError(f"prefetch_factor must be an integer >= 1 (batches each worker keeps ready), "
                             f"got {prefetch_factor!r}")
        if not workers:
            raise ValueError("prefetch_factor needs workers >= 1 (with 0 workers nothing is made ahead); "
                             "leave it out or give workers")
    if persistent_workers and not workers:
        raise ValueError("persistent_workers needs workers >= 1; leave it out or give workers")


def _one_thread(worker_id: int) -> None:
    """Each worker computes one batch at a time on one core: intra-op threads would only fight the other workers
    (torch's worker loop sets this too; said here so it does not depend on that)."""
    torch.set_num_threads(1)


def _identity(item):
    return item      # batch_size=None: the item already is the batch; no conversion (default_convert) wanted


def train_loader(data, batch_size: int, seed: int, *, start_step: int, total_steps: int, grad_accum: int = 1,
                 index_fn: Callable[[int, int, int], int] = serial_index, device="cpu", workers: int | None = None,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 worker_seed: int = 0) -> DataLoader:
    """A DataLoader yielding (micro-batch index, CPU batch) for steps start_step .. total_steps - 1 of a run, in the
    trainer's order (module docstring). `workers` None: `default_workers(device)`; memory is pinned when `device`
    is a GPU, and the batches are then `data.for_transfer()`'s, which the caller completes with `data.on_device`
    after the copy. `prefetch_factor`: batches each worker keeps ready (torch's default 2). `worker_seed` seeds the
    workers' global RNGs (torch, random, numpy); batches do not depend on it."""
    check_loader_args(workers, prefetch_factor, persistent_workers)
    if not 0 <= start_step <= total_steps:
        raise ValueError(f"start_step must be within 0 .. total_steps ({total_steps}), got {start_step}")
    if grad_accum < 1 or batch_size < 1:
        raise ValueError(f"batch_size and grad_accum must be >= 1, got {batch_size} and {grad_accum}")
    workers = default_workers(device) if workers is None else workers
    if torch.device(device).type == "cuda":
        data = data.for_transfer()      # completed on the device by data.on_device (uint8 images: a quarter the bytes)
    extra = {}
    if workers:
        extra = {"worker_init_fn": _one_thread, "prefetch_factor": prefetch_factor,
                 "persistent_workers": persistent_workers}
        if "fork" in multiprocessing.get_all_start_methods():   # share the data objects, do not pickle them
            extra["multiprocessing_context"] = "fork"
    dataset = MicroBatches(data, batch_size, seed, micro_indices(start_step, total_steps, grad_accum, index_fn))
    return DataLoader(dataset, batch_size=None, shuffle=False, num_workers=workers, collate_fn=_identity,
                      pin_memory=torch.device(device).type == "cuda", generator=torch.Generator().manual_seed(worker_seed),
                      **extra)


__all__ = ["MicroBatches", "check_loader_args", "default_workers", "micro_indices", "serial_index", "train_loader"]
