"""Experiment trackers beside metrics.jsonl (`run.py --report-to tensorboard`), as HF's Trainer `report_to` does.

metrics.jsonl stays the record (the analysis reads nothing else); a tracker is a live view of the same rows. The
RunWriter hands every logged row to each tracker (runs/record.py), so the trainer needs nothing of its own: each row's
numbers go out with its step as the x-axis (train loss, lr, tokens or images seen, eval loss and accuracy, FLOPs by
phase, twin fractions), and the run's config once as text and as hyperparameters.

A resumed run continues its tracker where the checkpoint left it: TensorBoard is opened with `purge_step`, so the
events logged after the checkpoint by the interrupted process are dropped when read, and no step appears twice.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
from pathlib import Path

# name -> the module it needs (each is imported only by a run that reports to it)
TRACKERS = {"tensorboard": "tensorboard", "wandb": "wandb"}
TENSORBOARD_DIR = "tensorboard"          # inside the run directory: `tensorboard --logdir runs/out` shows every run


def parse_report_to(value) -> tuple[str, ...]:
    """`--report-to` as HF reads it: a comma-separated list of trackers, "none" (or nothing) for none, "all" for every
    installed one. A tracker that is unknown or not installed is refused in one line, before anything is written."""
    from models.family import unknown
    names = value.split(",") if isinstance(value, str) else list(value or ())
    names = [n.strip() for n in names if n.strip() and n.strip() != "none"]
    if names == ["all"]:
        return tuple(n for n, module in TRACKERS.items() if importlib.util.find_spec(module) is not None)
    for name in names:
        if name not in TRACKERS:
            raise ValueError(unknown("--report-to tracker", name, (*TRACKERS, "all", "none")))
        if importlib.util.find_spec(TRACKERS[name]) is None:
            raise ValueError(f"--report-to {name}: the {TRACKERS[name]} package is not installed (pip install "
                             f"{TRACKERS[name]}), or drop --report-to {name}")
    return tuple(dict.fromkeys(names))


def unit_name(config: dict) -> str:
    """What a row's `units` count: images for an image family, tokens for a text one."""
    from models import get_family
    return "images" if get_family(config["task"]["large"]["family"]).objective == "image" else "tokens"


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _tag(key: str, unit: str) -> str:
    named = {"lr": "train/lr", "units": f"train/{unit}", "wall": "train/wall_seconds", "flops": "flops/total"}
    if key in named:
        return named[key]
    for prefix in ("train_", "eval_", "flops_"):
        if key.startswith(prefix):
            return f"{prefix[:-1]}/{key[len(prefix):]}"
    return key


def scalars(row: dict, unit: str) -> dict[str, float]:
    """A metrics row's numbers under tracker tags (train/loss, train/lr, eval/loss, flops/fit, twins/F, ...); its
    step is the x-axis, and what is not a number (stage, computation, full_model) is left to metrics.jsonl."""
    out = {}
    for key, value in row.items():
        if key == "step":
            continue
        if isinstance(value, dict):          # twins, twin_gap: one curve per space
            out.update({f"{key}/{sub}": float(v) for sub, v in value.items() if _is_number(v)})
        elif _is_number(value):
            out[_tag(key, unit)] = float(value)
    return out


def flat_config(config: dict, prefix: str = "") -> dict:
    """config.json as flat hyperparameters (task.recipe.lr: 0.001); values TensorBoard cannot take as they are
    (lists, None) as their text."""
    flat = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(flat_config(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value if isinstance(value, (int, float, str, bool)) else json.dumps(value)
    return flat


class TensorBoardTracker:
    def __init__(self, out: Path, config: dict, after_step: int | None):
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams
        log_dir = Path(out) / TENSORBOARD_DIR
        if after_step is None:              # a new record (or one started over): no event of an older one stays
            shutil.rmtree(log_dir, ignore_errors=True)
        # resuming after step N: events of steps > N written before the interruption are purged when read
        self.writer = SummaryWriter(log_dir=str(log_dir),
                                    purge_step=None if after_step is None else after_step + 1)
        self.unit = unit_name(config)
        if after_step is None:              # written once, with the run's first events
            self.writer.add_text("config", "    " + json.dumps(config, indent=2, default=str).replace("\n", "\n    "))
            # hyperparameters in this run's own event file (add_hparams would open a sub-run of its own)
            for summary in hparams(flat_config(config), {}):
                self.writer.file_writer.add_summary(summary)

    def log(self, row: dict) -> None:
        for tag, value in scalars(row, self.unit).items():
            self.writer.add_scalar(tag, value, global_step=row["step"])
        self.writer.flush()                 # a live view: every row is on disk when logged, as metrics.jsonl is

    def close(self) -> None:
        self.writer.close()


class WandbTracker:
    def __init__(self, out: Path, config: dict, after_step: int | None):
        import wandb
        # one W&B run per record: the id hashes the directory and the record's creation time, so a resumed run
        # continues it and an --overwrite starts another
        run_id = hashlib.sha1(f"{Path(out).resolve()}|{config.get('created')}".encode()).hexdigest()[:16]
        self.unit = unit_name(config)
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "growbench"), dir=str(out), id=run_id,
                              name=f"{Path(out).parent.name}/{Path(out).name}", config=config, resume="allow")

    def log(self, row: dict) -> None:
        self.run.log(scalars(row, self.unit), step=row["step"])

    def close(self) -> None:
        self.run.finish()


def open_trackers(names: tuple[str, ...], out: Path, config: dict, after_step: int | None) -> list:
    """The trackers `names` for the run in `out`; `after_step`: the last step its record keeps when resuming
    (None for a new run)."""
    kinds = {"tensorboard": TensorBoardTracker, "wandb": WandbTracker}
    return [kinds[name](out, config, after_step) for name in names]
