"""Downstream evaluation of a finished run: its exported model goes through tasks/evals' suites and the results
are merged, with the recipe, options and seeds that produced them, into the run's eval.json (DESIGN.md §5).

The suites live in tasks/evals and know nothing of run directories; this is the side that reads the record,
locks the directory and writes into it.
"""
from __future__ import annotations

import time
from pathlib import Path

from models import ModelSpec
from runs.lock import RunLock
from runs.atomic import read_json, write_json_atomic
from runs.record import EVAL_FILE, Run, load_run
from tasks.evals import EvalOptions, Pretrained, format_table, plan, run_suites, suite_average


def pretrained_from_run(run_dir) -> Pretrained:
    """The model a complete run exported, with its family, spec and task config (for its tokenizer)."""
    return exported_model(load_run(Path(run_dir)))   # FileNotFoundError naming the directory when it is not a run


def exported_model(run: Run) -> Pretrained:
    """pretrained_from_run for a record already read."""
    if not run.complete:
        raise ValueError(f"{run.dir} is an incomplete run (no summary.json): finish it with --resume first")
    model_dir = run.dir / "model"
    if not model_dir.is_dir():
        raise FileNotFoundError(f"{run.dir} has no exported model (expected {model_dir})")
    task = run.config["task"]
    return Pretrained(task["large"]["family"], model_dir, ModelSpec(**task["large"]), task)


def evaluate_run(run_dir, suites: list[str] | None = None, only: list[str] | None = None,
                 options: EvalOptions | None = None, log=print) -> dict:
    """Evaluate a finished run and merge the results into RUN_DIR/eval.json (returns the whole file). The
    file is rewritten as each suite finishes, so a later suite's failure keeps the earlier ones' results;
    bad input is refused by `plan` before anything runs."""
    options = options or EvalOptions()
    run = load_run(Path(run_dir))
    pre = exported_model(run)
    planned = plan(pre.kind, suites, only, pre.task.get("scale"), pre.task.get("evals"))
    path = Path(run_dir) / EVAL_FILE

    def merge(name: str, res: dict) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        suite = record.setdefault("suites", {}).setdefault(name, {"tasks": {}})
        for task, entry in res["tasks"].items():   # a re-run of some tasks keeps the others' results
            suite["tasks"][task] = {**entry, "options": options.to_dict(), "created": stamp}
        suite.update({k: v for k, v in res.items() if k != "tasks"})
        suite["average"] = suite_average(name, suite["tasks"])
        record["last_evaluated"].append(name)
        write_json_atomic(path, record)

    with RunLock(run_dir):     # one process at a time: two evaluations merging into eval.json would lose one's
        record = read_json(path) if path.exists() else {}
        record.update({"run": str(Path(run_dir)), "task": run.task, "scale": pre.task.get("scale"),
                       "method": run.method, "run_seed": run.config.get("seed"), "last_evaluated": []})
        run_suites(pre, planned, options, log, done=merge)
    return record


def run_and_report(run_dir, suites, names, options: EvalOptions, log) -> str:
    """Evaluate, write eval.json, return the table and where it went (for the CLI)."""
    record = evaluate_run(run_dir, suites, names, options, log)
    return f"{format_table(record, record['last_evaluated'])}\nevaluation: {Path(run_dir) / EVAL_FILE}"
