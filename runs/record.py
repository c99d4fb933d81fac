"""The run record (DESIGN.md §6): one directory per run, written so that a crash never corrupts it.

    config.json     fully resolved config + environment (written once, atomically)
    metrics.jsonl   append-only, one JSON line per logged step, flushed whole
    summary.json    only on clean completion (its absence marks an incomplete run)
    checkpoint.pt   latest training state;  model/  the final model in its ecosystem's format

The reader is the only thing `analysis/` needs from here; it drops a truncated last line (power cut) with a
warning instead of failing or, worse, reading half a number.
"""
from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

CONFIG, METRICS, SUMMARY = "config.json", "metrics.jsonl", "summary.json"


def write_json_atomic(path: Path, obj) -> None:
    """Write to a temporary name, fsync, rename: readers see the old file or the new one, never half."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class RunExistsError(FileExistsError):
    pass


class RunWriter:
    def __init__(self, directory: Path, config: dict, resume: bool = False, overwrite: bool = False):
        self.dir = Path(directory)
        if (self.dir / CONFIG).exists() and not (resume or overwrite):
            raise RunExistsError(f"run directory {self.dir} already holds a run; pass --resume to continue it "
                                 "or --overwrite to replace it")
        self.dir.mkdir(parents=True, exist_ok=True)
        if overwrite:
            for name in (METRICS, SUMMARY, "checkpoint.pt"):
                (self.dir / name).unlink(missing_ok=True)
        if not resume or not (self.dir / CONFIG).exists():
            write_json_atomic(self.dir / CONFIG, config)
        self._metrics = open(self.dir / METRICS, "a")

    def log(self, row: dict) -> None:
        # one write call per line, then flush + fsync: a crash leaves at most one truncated last line
        self._metrics.write(json.dumps(row, sort_keys=True) + "\n")
        self._metrics.flush()
        os.fsync(self._metrics.fileno())

    def finish(self, summary: dict) -> None:
        self._metrics.close()
        write_json_atomic(self.dir / SUMMARY, summary)

    def close(self) -> None:
        if not self._metrics.closed:
            self._metrics.close()


def read_metrics(path: Path) -> list[dict]:
    """Metric rows; a truncated or corrupt *last* line is dropped with a warning; a corrupt line elsewhere
    is an error (that is not a crash artefact but a damaged file)."""
    rows, lines = [], Path(path).read_text().splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                warnings.warn(f"{path}: dropped a truncated last line ({len(line)} characters)")
            else:
                raise ValueError(f"{path}: line {i + 1} is not valid JSON; the record is damaged")
    return rows


@dataclass
class Run:
    dir: Path
    config: dict
    metrics: list[dict]
    summary: dict | None

    @property
    def complete(self) -> bool:
        return self.summary is not None

    @property
    def method(self) -> str:
        return self.config["method"]["name"]

    @property
    def task(self) -> str:
        return self.config["task"]["name"]

    def frame(self):
        import pandas as pd
        return pd.DataFrame(self.metrics)


def load_run(directory: Path) -> Run:
    d = Path(directory)
    if not (d / CONFIG).exists():
        raise FileNotFoundError(f"{d} is not a run directory (no {CONFIG})")
    config = json.loads((d / CONFIG).read_text())
    metrics = read_metrics(d / METRICS) if (d / METRICS).exists() else []
    summary = json.loads((d / SUMMARY).read_text()) if (d / SUMMARY).exists() else None
    return Run(d, config, metrics, summary)
