"""Small models the repository ships (pretrained/small/<cache entry name>/), so that a fresh clone grows from a
pretrained small model as the paper's runs do (they start from released checkpoints) instead of pretraining it
first: the README job's small model is one (pretrained/README.md says which and why).

An entry is a copy of a small-model cache entry (runs.small_model.small_cache_dir) without its checkpoint: the
exported model, config.json, metrics.jsonl and summary.json of the pretraining run. Its name is the cache entry's,
so it is found only by a task whose small model, recipe, data, tokenizer and seed hash to the same key; a run
copies it into its cache (runs.small_model: SHIPPED_ROOT, shipped_entry, resolve_small) where the cache lacks the
entry and the vocabulary this machine's tokenizer builds is the one it was trained with, and pretrains the small
model otherwise.

    python -m runs.shipped bert_small_base --seed 0 --records records/regime

ships the cache entry of the task's small model (the regime scale's by default), after checking that its pretraining
is the committed record's computation (records/<root>/<task>-<scale>/small-s<seed>: the same steps, FLOPs and final
eval loss to every digit); nothing is written where a check fails.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from runs import small_model
from runs.atomic import read_json
from runs.record import CONFIG, EVAL_FILE, SUMMARY, copy_record, result_differences


def ship(cache: Path, record: Path, root: Path | None = None) -> Path:
    """Copy the complete cache entry `cache` into the shipped models (weights, record; no checkpoint), after
    checking it is the computation of the committed record `record`. Refuses, writing nothing, otherwise."""
    cache, record, root = Path(cache), Path(record), root or small_model.SHIPPED_ROOT
    if not (cache / SUMMARY).is_file() or not (cache / "model").is_dir():
        raise ValueError(f"{cache}: no complete small-model cache entry there (pretrain it first: a run of the task "
                         "pretrains it when its cache lacks it)")
    if not (record / SUMMARY).is_file():
        raise ValueError(f"{record}: no committed record of the small model's pretraining there (give --records "
                         "the root that holds <task>-<scale>/small-s<seed>)")
    if diff := result_differences(cache, record):
        raise ValueError(f"{cache} is not the computation of {record}: {'; '.join(diff)}")
    target = root / cache.name
    if target.exists():
        raise ValueError(f"{target} exists already (remove it to ship this entry again)")
    repo = small_model.SHIPPED_ROOT.parent.parent     # named from the repository's root, as documents name records
    where = record.resolve().relative_to(repo) if record.resolve().is_relative_to(repo) else record.resolve()
    config = {**read_json(cache / CONFIG), "shipped_as": where.as_posix()}
    copy_record(cache, target, config, dirs=("model",), skip=(EVAL_FILE,))   # .json/.jsonl only: no checkpoint
    return target


def main(argv: list[str] | None = None) -> int:
    from tasks import get_task
    p = argparse.ArgumentParser(description="Ship the cache entry of a task's small model with the repository.")
    p.add_argument("task")
    p.add_argument("--scale", default="regime")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--records", required=True, help="the committed root holding <task>-<scale>/small-s<seed>")
    args = p.parse_args(argv)
    task = get_task(args.task, args.scale)
    record = Path(args.records) / f"{task.name}-{task.scale}" / f"small-s{args.seed}"
    try:
        print(f"shipped -> {ship(small_model.small_cache_dir(task, args.seed), record)}")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
