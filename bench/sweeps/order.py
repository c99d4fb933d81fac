"""Which runs of a sweep may run side by side (bench/sweeps/launch.py): all but a run and the earlier runs of the plan
that could be its twin.

The inline sweep makes its runs in plan order, and a run whose computation is that of an earlier, complete one is
given its record instead (bench/sweeps/records.py find_twin). Jobs run side by side, so a run waits for the earlier runs
find_twin would look at and that could be its computation: those of the same directory and seed recorded with its
settings; for a method that grows without a fit, those whose computation agrees with its own in all but the initial
weights (runs.computation.computation_record); for a run without a small model, the same run of another task that
reads all it reads of its task. Its job then finds the twin complete, and the run gets the record the inline sweep
would have given it. Once a run's small model is in the cache, the waiting sweep compares initial weights too
(runs.computation.initial_fingerprint, on the jobs' device and threads) and lets a run go where they differ; a
method with a fit is its own computation only once fitted, so a run waits for it to the end."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from bench.sweeps.records import small_record_source, stale_reason, status, suites_not_evaluated
from bench.sweeps.run import build


@dataclass
class Item:
    """A run of the plan that needs a job."""
    i: int
    entry: object
    seed: int
    path: Path
    state: str
    built: tuple
    waits_for: list[int] = field(default_factory=list)    # earlier items that could be its twin
    keys: dict = field(default_factory=dict)              # twin_keys


def needs_job(entry, seed: int, path: Path, scale: str, common: tuple, eval_suites) -> tuple | None:
    """(task, method, strategies) of a run a job must make (train, resume, record as its twin, or evaluate), or None
    for one the waiting sweep says and finishes itself: unavailable, stale, complete with nothing to evaluate."""
    try:
        task, method, strategies = build(entry, scale, common)
    except LookupError:
        return None
    method = method.for_run(seed)
    if status(path) != "done":
        return task, method, strategies
    if stale_reason(path, task, method, strategies):
        return None
    small = small_record_source(path)
    pending = eval_suites and (suites_not_evaluated(path, eval_suites)
                               or (small is not None and suites_not_evaluated(small, eval_suites)))
    return (task, method, strategies) if pending else None


def twin_keys(item: Item) -> dict:
    """What must agree for an earlier run to be this one's twin, known before any weights exist: the settings
    (find_twin's same_settings_beside), the computation but the initial weights (what the fingerprint of a method
    growing without a fit also hashes), and, for a run without a small model, all it reads of its task
    (runs.computation.computed_elsewhere)."""
    from methods.base import GrowthMethod
    from runs.computation import computation_record, read_without_small
    from runs.record import comparable_method, compared_task, jsonable
    task, method, strategies = item.built
    dump = lambda obj: json.dumps(jsonable(obj), sort_keys=True, default=str)     # noqa: E731
    active = strategies if strategies is not None and strategies.active else None
    return {"settings": dump([compared_task(task.to_dict()), comparable_method(method.describe()),
                              active.record() if active is not None else None]),
            "computation": dump(computation_record(method, task, item.seed, strategies)),
            "without_small": dump([read_without_small(task.to_dict()), comparable_method(method.describe()),
                                   strategies.record() if strategies is not None else None]),
            "needs_small": method.needs_small, "fits": type(method).fit is not GrowthMethod.fit}


def find_waits(items: list[Item]) -> None:
    """Give each new run the earlier runs of the plan it must wait for: those find_twin could find as its twin."""
    for it in items:
        it.keys = twin_keys(it)
    for k, r in enumerate(items):
        if r.state != "new":
            continue               # find_twin looks only for a run not started
        mine = r.keys
        for t in items[:k]:
            theirs = t.keys
            if not mine["needs_small"]:
                could = (t.path.name == r.path.name and t.path.parent != r.path.parent
                         and not theirs["needs_small"] and theirs["without_small"] == mine["without_small"])
            else:
                could = t.path.parent == r.path.parent and t.seed == r.seed and (
                    theirs["settings"] == mine["settings"]
                    or (not mine["fits"] and theirs["computation"] == mine["computation"]))
            if could:
                r.waits_for.append(t.i)


class InitialWeights:
    """Runs' initial fingerprints, computed where they can be before the run: without a fit, and with the small model
    in the cache (or none needed). `device` and `threads`: the jobs' (grown weights may differ in their last bits
    elsewhere)."""

    def __init__(self, device: str, threads: int):
        self.device, self.threads = device, threads
        self.known: dict[int, str | None] = {}
        self.smalls: dict[Path, object] = {}

    def of(self, item: Item) -> str | None:
        if item.i in self.known:
            return self.known[item.i]
        if item.keys["fits"]:
            self.known[item.i] = None        # its fit is its computation: known once it has run
            return None
        import torch
        from runs.computation import initial_fingerprint
        from runs.record import SUMMARY
        from runs.small_model import small_cache_dir
        task, method, strategies = item.built
        small = None
        if method.needs_small:
            cache = small_cache_dir(task, item.seed)
            if not (cache / SUMMARY).exists():
                return None                  # not pretrained yet: asked again later
            if cache not in self.smalls:
                from runs.small_model import resolve_small
                try:                         # in the cache: never pretrained here
                    self.smalls[cache], _ = resolve_small(task, item.seed, None, torch.device(self.device),
                                                          lambda msg: None, False, None)
                except Exception:
                    self.smalls[cache] = None
            if self.smalls[cache] is None:
                self.known[item.i] = None
                return None
            small = self.smalls[cache].to(self.device)
        before = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        try:
            self.known[item.i] = initial_fingerprint(task, method, item.seed, small, strategies)
        except Exception:         # (a cache entry it cannot read: its job will say why) the run waits, as before
            self.known[item.i] = None
        finally:
            torch.set_num_threads(before)
        return self.known[item.i]


def release(pending: list[Item], by_i: dict[int, Item], finished: set[int], weights: InitialWeights | None,
            log, n: int) -> None:
    """Let a waiting run go of the earlier runs whose initial weights differ from its own (not twins after all);
    `log`: where to say so (None: quietly, before the waits are first said)."""
    if weights is None:
        return
    for r in pending:
        waiting = [w for w in r.waits_for if w not in finished and by_i[w].keys["settings"] != r.keys["settings"]]
        if not waiting or not r.keys["needs_small"] or r.keys["fits"] or (mine := weights.of(r)) is None:
            continue
        other = [w for w in waiting if (theirs := weights.of(by_i[w])) is not None and theirs != mine]
        if other:
            r.waits_for = [w for w in r.waits_for if w not in other]
            if log is not None:
                log(f"[{r.i}/{n}] {r.path}: not the same computation as "
                    f"{', '.join(by_i[w].path.name for w in other)} (initial weights differ): no longer waits for it")


def form_jobs(pending: list[Item], finished: set[int], per_job: int, max_jobs: int) -> list[list[Item]]:
    """Up to `max_jobs` jobs of up to `per_job` runs, in plan order, of the runs whose possible twins are finished or
    earlier in the same job (a job makes its runs in order, as the inline sweep)."""
    jobs: list[list[Item]] = []
    current: list[Item] = []
    for it in pending:
        if len(jobs) == max_jobs:
            break
        inside = {c.i for c in current}
        if all(w in finished or w in inside for w in it.waits_for):
            current.append(it)
            if len(current) == per_job:
                jobs.append(current)
                current = []
    if current and len(jobs) < max_jobs:
        jobs.append(current)
    return jobs
