"""A run's checkpoint: what a killed run needs to continue with exactly the numbers it would have produced (model,
optimizer, scheduler, the step counter that is also the data position, the FLOPs ledger, the stage, every RNG
stream), and the identity of the run it belongs to, which --resume checks (runs/preflight.py check_checkpoint)."""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from runs import distributed
from runs.ledger import FlopsLedger
from runs.atomic import read_json, save_atomic
from runs.record import CHECKPOINT_FILE, CONFIG, run_identity

CHECKPOINT = CHECKPOINT_FILE      # the file's name, one definition (runs/record.py: torch-free readers need it)


@dataclass
class TrainState:
    step: int = 0
    wall: float = 0.0          # seconds spent training (evaluation excluded), carried across resumes
    units: int = 0             # tokens (text) or images seen


def rng_state() -> dict:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def save_checkpoint(path, model, optimizer, scheduler, state: TrainState, ledger: FlopsLedger, stage_index: int):
    """Written right after the row of `state.step` is logged. It carries the identity of its run (`run`: the digest
    of the config.json beside it, runs.record.run_identity) and that row's step (`logged_step`), which --resume
    checks against the record (runs/preflight.py check_checkpoint)."""
    # every rank calls this (under FSDP gathering the full state is a collective); only rank 0 writes
    model_state, optimizer_state = distributed.full_state(model, optimizer)
    if not distributed.is_main():
        return
    config = Path(path).parent / CONFIG
    identity = run_identity(read_json(config)) if config.exists() else None
    save_atomic({"model": model_state, "optimizer": optimizer_state,     # per-process temporary, fsync, rename
                 "scheduler": scheduler.state_dict(), "state": vars(state), "ledger": ledger.as_dict(),
                 "stage": stage_index, "rng": rng_state(), "run": identity, "logged_step": state.step}, path)


def load_checkpoint(path):
    """A checkpoint as save_checkpoint wrote it; one without `run` and `logged_step` was written before checkpoints
    carried them. A file that is not a checkpoint (torn, foreign, of the wrong shape) is a one-line ValueError."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # a torn or foreign file: say which, do not guess
        raise ValueError(f"corrupt checkpoint {path}: {type(e).__name__}") from None
    missing = [k for k in ("model", "optimizer", "scheduler", "state", "ledger", "stage", "rng")
               if not isinstance(checkpoint, dict) or k not in checkpoint]
    if missing or not isinstance(checkpoint["state"], dict) or not isinstance(checkpoint["state"].get("step"), int):
        raise ValueError(f"corrupt checkpoint {path}: not a growbench checkpoint (no {', '.join(missing) or 'step'})")
    return checkpoint
