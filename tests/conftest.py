"""Shared test setup: never reach the Hugging Face hub, keep run outputs and caches in a temp area."""
import os
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# one cache for the whole session: tokenizers trained once, small models pretrained once
_ROOT = Path(os.environ.setdefault("GROWBENCH_TEST_ROOT", tempfile.mkdtemp(prefix="growbench-tests-")))
os.environ.setdefault("GROWBENCH_OUT", str(_ROOT / "runs"))
