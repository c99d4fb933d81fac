"""Shared test setup: never reach the Hugging Face hub, keep run outputs and caches in a temp area."""
import os
import tempfile
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# one cache for the whole session: tokenizers trained once, small models pretrained once
_ROOT = Path(os.environ.setdefault("GROWBENCH_TEST_ROOT", tempfile.mkdtemp(prefix="growbench-tests-")))
os.environ.setdefault("GROWBENCH_OUT", str(_ROOT / "runs"))
# trained tokenizers and token-id caches too (default ~/.cache/growbench): shared with every other growbench process on
# the machine, a tokenizer retrained there between a test's one-process run and its torchrun children would make
# the two read other ids
os.environ.setdefault("GROWBENCH_CACHE", str(_ROOT / "cache"))


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """The in-process tests train tiny models: on a shared 2-core machine a second OpenMP thread mostly
    spin-waits on the first (steps 5-10x slower and erratic, measured); one thread is faster and steady. The other
    cores go to other pytest-xdist workers (pyproject.toml addopts). Subprocess tests (run.py, torchrun) set their
    own threads."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def trained():
    """`trained(spec)`: a small model of `spec` that has learned (tests/helpers.train_small), trained once per spec
    and session and handed out as a fresh copy. Claims such as "function preserving" or "is Net2Net at fit 0"
    are tested on these: on random init they cannot fail."""
    import copy

    from helpers import train_small
    cache = {}

    def get(spec):
        if spec not in cache:
            cache[spec] = train_small(spec)
        return copy.deepcopy(cache[spec])
    return get
