"""Model and batch sizes against this machine's memory: a size that cannot fit is refused in one line before a run
writes anything (runs/preflight.check_inputs), instead of aborting in the tokenizer's Rust code or running out of
memory after the record was written."""
from __future__ import annotations

import os


def least_parameters(spec) -> int:
    """A lower bound on a model's parameter count, from its sizes alone (no module is built): the token, position
    (or patch-grid) and class embeddings, and per block two hidden x hidden attention projections (query, output)
    and two hidden x ffn FFN matrices; every family has at least these."""
    grid = (spec.image_size // spec.patch_size) ** 2 if spec.patch_size else 0
    embeddings = spec.hidden * (spec.vocab + spec.positions + grid + spec.classes)
    return embeddings + (spec.layers + spec.class_layers) * 2 * spec.hidden * (spec.hidden + spec.ffn)


def host_memory() -> int:
    """This machine's physical memory in bytes (every model is built on the host first, in float32); 1 TiB where the
    system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2 ** 40


def check_sizes(task) -> None:
    """Refuse, in one line and before anything is written, a model whose float32 weights alone cannot fit in this
    machine's memory (a vocabulary of 1e12 aborted inside the tokenizer's Rust code; 1e8 layers ran out of memory
    after the record was written). A lower bound (least_parameters): a model it lets through may still not fit."""
    memory = host_memory()
    for which in ("small", "large"):
        spec = getattr(task, which)
        need = 4 * least_parameters(spec)
        if need > memory:
            raise ValueError(f"the {which} model ({spec.short()}) needs at least {need:.3g} bytes for its float32 "
                             f"weights alone, more than this machine's {memory / 2 ** 30:.0f} GiB of memory; give "
                             f"smaller {which}.* sizes")
    # a micro-batch's float32 input to the first block alone (tokens x hidden, or the image's pixels), made on the host
    # (a batch_size of 1e9 failed in numpy after the record was written)
    for key, recipe, spec in (("small_recipe.", task.small_recipe, task.small), ("", task.recipe, task.large)):
        per_item = spec.in_chans * spec.image_size ** 2 if spec.image_size else recipe.seq_len * spec.hidden
        need = 4 * recipe.batch_size * per_item
        if need > memory:
            raise ValueError(f"a micro-batch of {key}batch_size {recipe.batch_size} needs at least {need:.3g} bytes for "
                             f"its input alone, more than this machine's {memory / 2 ** 30:.0f} GiB of memory; lower "
                             f"{key}batch_size (grad_accum raises the batch without memory)")
