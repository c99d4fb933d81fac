"""Data-parallel training on PyTorch's own engine: `torchrun --nproc_per_node N run.py ...`.

torchrun sets RANK, WORLD_SIZE and LOCAL_RANK; `setup` reads them and opens a process group (NCCL on CUDA, gloo
on CPU, so that a 2-process run is testable on a laptop). Without WORLD_SIZE, or with WORLD_SIZE=1, nothing is
opened and every helper below returns at once: the single-process path pays nothing.

Sharding, and why W processes compute what one process computes. The unit of data is the micro-batch, and
micro-batch i is a pure function of (seed, i) (tasks.data.PretrainData.train_batch). Optimizer step s consumes
micro-batches [s*A*W, (s+1)*A*W), A = recipe.grad_accum; rank r takes the contiguous block (s*W + r)*A + m,
m < A (`micro_index`). Each rank scales its loss by 1/A and DDP averages gradients over the W ranks, so the
update is the mean over A*W micro-batches: exactly what one process with accumulation A*W computes, on the very
same micro-batches (same rows, same MLM masks, same dropped layers, and same dropout, which the trainer seeds per
micro-batch). Global batch = batch_size x grad_accum x world size. Splitting each micro-batch's rows across
ranks instead would not be equivalent: the MLM loss averages over the masked tokens, whose count differs from
shard to shard, so the mean of shard means is not the batch mean.

FLOPs. Each rank charges its own micro-batches analytically to its ledger; after every step (and after an
operator fit) the ledger's increase is summed over the ranks (`sum_over_ranks`), so every rank's ledger, and
the record rank 0 writes, holds the global count: the FLOPs of all A*W micro-batches, as in one process.

Evaluation is sharded by batch (rank r scores batches r, r+W, ...) and gathered exactly: each per-batch loss is
filled in by one rank and summed with zeros elsewhere, so the mean is bit-identical to a single-process mean.

Only rank 0 writes (record, checkpoints, exports, artifacts): other ranks get a `SilentWriter`.
"""
from __future__ import annotations

import os
import warnings
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch
import torch.distributed as dist

MODES = ("ddp", "fsdp")


# -- the process group ---------------------------------------------------------------------------------------------
def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def is_main() -> bool:
    return rank() == 0


def setup(device: str = "cpu") -> str:
    """Open the process group torchrun asked for (no-op without WORLD_SIZE > 1); returns the device this rank
    uses: `cuda` becomes cuda:LOCAL_RANK, one GPU per process."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or dist.is_initialized():
        return device
    cuda = device.startswith("cuda")
    if cuda:
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")
    return device


def teardown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def barrier() -> None:
    if world_size() > 1:
        dist.barrier()


@contextmanager
def main_first():
    """Rank 0 runs the block first (e.g. trains and caches a tokenizer), the others after it, reading its cache."""
    if not is_main():
        barrier()
    try:
        yield
    finally:
        if is_main():
            barrier()


def describe(mode: str, recipe) -> dict:
    """What goes into the run record: how many processes, how they shard, the global batch."""
    w = world_size()
    return {"world_size": w, "mode": mode if w > 1 else None,
            "backend": dist.get_backend() if w > 1 else None,
            "global_batch": recipe.batch_size * recipe.grad_accum * w}


# -- data sharding -------------------------------------------------------------------------------------------------
def micro_index(step: int, micro: int, accum: int) -> int:
    """Global index of this rank's micro-batch `micro` (< accum) in optimizer step `step` (module docstring);
    with one process, step * accum + micro."""
    return (step * world_size() + rank()) * accum + micro


def rank_stream(make_batch, accum: int):
    """This rank's share of the endless micro-batch stream i -> make_batch(i), A micro-batches per step."""
    k = 0
    while True:
        yield make_batch(micro_index(k // accum, k % accum, accum))
        k += 1


# -- reductions ----------------------------------------------------------------------------------------------------
def sum_floats(*values: float) -> list[float]:
    if world_size() == 1:
        return [float(v) for v in values]
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t)
    return t.tolist()


def sum_over_ranks(ledger, before: dict, *values: float) -> list[float]:
    """Sum `values` and the ledger's increase since `before` (its `as_dict()` then) over the ranks, in one
    collective; afterwards every rank's ledger holds the global count. Returns the summed values."""
    if world_size() == 1:
        return list(values)
    phases = list(before)
    summed = sum_floats(*values, *(ledger.counts[p] - before[p] for p in phases))
    for p, increase in zip(phases, summed[len(values):]):
        ledger.counts[p] = before[p] + increase
    return summed[:len(values)]


def _independent(model) -> bool:
    """Can this rank run forwards of `model` on its own? Not under FSDP: every forward gathers parameters, a
    collective all ranks must join."""
    from torch.distributed.fsdp import FSDPModule
    return not isinstance(model, FSDPModule)


def shard(n: int, model) -> range:
    """Indices of the n evaluation batches this rank scores (all of them where it cannot score alone)."""
    if world_size() == 1 or not _independent(model):
        return range(n)
    return range(rank(), n, world_size())


def collect(model, *tensors: torch.Tensor) -> list[torch.Tensor]:
    """Sum per-rank partial results (zeros where another rank scored) over the ranks; exact, since every entry is
    one rank's number plus zeros. Identity where each rank scored everything (`shard`)."""
    if world_size() == 1 or not _independent(model):
        return list(tensors)
    out = []
    for t in tensors:
        t = t.clone()
        dist.all_reduce(t)
        out.append(t)
    return out


# -- wrapping a model for training ---------------------------------------------------------------------------------
def wrap(model, device, *, mode: str = "ddp", blocks=None, find_unused: bool = False, compile: bool = False):
    """The callable a training forward goes through: `model` itself with one process; DistributedDataParallel
    (replicated weights, gradients all-reduced in buckets during backward); or FSDP2 `fully_shard` per main
    block and at the root (weights, gradients and optimizer state sharded; the model is changed in place).
    `find_unused`: some trainable parameters may get no gradient in a step (dropped or frozen-below blocks).
    `compile`: torch.compile on top (after DDP, so DDP's optimizer splits graphs at bucket boundaries)."""
    if mode not in MODES:
        raise ValueError(f"unknown distributed mode '{mode}'; known: {', '.join(MODES)}")
    call = model
    if world_size() > 1 and mode == "fsdp":
        from torch.distributed.fsdp import FSDPModule, fully_shard
        # HF models return outputs that are views; FSDP2 warns in case someone modifies them in place (the
        # trainer never does: it only divides the loss out of place)
        warnings.filterwarnings("ignore", message=r"FSDP2-wrapped module .* returned a view tensor")
        if not isinstance(model, FSDPModule):
            for block in blocks or ():
                fully_shard(block)
            fully_shard(model)
    elif world_size() > 1:
        from torch.nn.parallel import DistributedDataParallel
        device = torch.device(device)
        call = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                       find_unused_parameters=find_unused)
    return torch.compile(call) if compile else call


def accumulating(call, last: bool):
    """Context for one micro-batch's forward and backward: gradients are synchronised only on the last one."""
    inner = getattr(call, "_orig_mod", call)           # under torch.compile
    if last or world_size() == 1:
        if hasattr(inner, "set_requires_gradient_sync"):
            inner.set_requires_gradient_sync(True)
        return nullcontext()
    if hasattr(inner, "no_sync"):                      # DDP
        return inner.no_sync()
    if hasattr(inner, "set_requires_gradient_sync"):   # FSDP2
        inner.set_requires_gradient_sync(False)
    return nullcontext()


def full_state(model, optimizer) -> tuple[dict, dict]:
    """(model, optimizer) state dicts as a single process has them. Under FSDP a collective that every rank must
    call (rank 0 receives the full tensors on CPU, the others empty dicts)."""
    if _independent(model):
        return model.state_dict(), optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                         get_optimizer_state_dict)
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=options), get_optimizer_state_dict(model, optimizer, options=options)


def load_optimizer_state(model, optimizer, optimizer_state: dict) -> None:
    """Inverse of `full_state` for the optimizer (every rank read the full checkpoint; under FSDP each keeps its
    shard). The model's weights are loaded before wrapping, into the plain module."""
    if _independent(model):
        optimizer.load_state_dict(optimizer_state)
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict
    set_optimizer_state_dict(model, optimizer, optimizer_state, options=StateDictOptions(full_state_dict=True))


def plain_model(model, family):
    """The model as one ordinary module (for export): itself, or under FSDP a fresh copy loaded with the gathered
    weights (a collective; on ranks other than 0 the copy is not loaded and must not be used)."""
    if _independent(model):
        return model
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    plain = family.build(family.spec_of(model))
    if is_main():
        plain.load_state_dict(state)
    return plain


class SilentWriter:
    """What ranks other than 0 write: nothing (they run the same code; rank 0 keeps the record)."""

    def __init__(self, directory: Path):
        self.dir = Path(directory)

    def log(self, row: dict) -> None:
        pass

    def finish(self, summary: dict) -> None:
        pass

    def close(self) -> None:
        pass
