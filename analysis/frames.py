"""Run records -> the two pandas DataFrames every table and figure reads (DESIGN.md §1: analysis reads only the
run-record format): `runs_frame`, one row per run (identity, final metrics, costs, what it grew from), and
`curves_frame`, one row per evaluation point (what every saving and every figure is computed from), with the
per-record readers they need (downstream scores, which points measured the full model, computation identity).
analysis/load.py finds, checks and identifies the records these read.

Each evaluation point carries `full_model`: whether it measured the large model at its full architecture (the
trainer logs it; savings count only those points, paper §4.1). Records made before the field existed are read
safely: a run that logged one training stage (stage names other than "init": at most one) was the full model
throughout; in a staged run (MSLT, staged training) only the points of its last stage count (the stage that
ends the run trains the large model it exports, whose eval is the summary's); its init point and earlier
stages never do, since which of them were shallower cannot be told from the record. This can only make a
staged run's saving smaller than the truth, never larger.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd

from analysis.load import SEED_SUFFIX, identity, recipe_difference, recipe_preset, scratch_recipes, trained
from analysis.record_checks import logged_spaces
from runs.record import EVAL_FILE, Run, run_machine


# eval.json result names -> the paper's column names; SQuAD gives two columns (the paper prints F1 / EM)
DOWNSTREAM_NAMES = {"sst2": "SST-2", "mnli_m": "MNLI", "mnli_mm": "MNLI-mm", "mrpc": "MRPC", "cola": "CoLA",
                    "qnli": "QNLI", "qqp": "QQP", "stsb": "STS-B", "rte": "RTE", "wnli": "WNLI",
                    "squad_v1": "SQuADv1.1", "squad_v2": "SQuADv2.0", "cifar10": "CIFAR10", "cifar100": "CIFAR100",
                    "flowers102": "Flowers", "stanford_cars": "Cars", "chestxray8": "ChestXRay8",
                    "bbc_news": "BBC News (mini)", "digits": "digits (mini)"}
SUITE_PREFIX = {"adapters": "AF "}        # Table 6's AdapterFusion scores, kept apart from Table 1's


def downstream_scores(run: Run) -> dict[str, float]:
    """Downstream scores (percent) from the run's eval.json, if it was evaluated: {"suites": {suite: {"tasks":
    {name: {"metrics": {..., "score"}}}, "average"}}}. GLUE-style tasks give their score, SQuAD its F1 and
    EM, a suite its average ("Avg. GLUE"). A run never evaluated has none; the tables then show eval loss only."""
    path = run.dir / EVAL_FILE
    try:
        record = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, json.JSONDecodeError):
        return {}
    flat = {}
    if not isinstance(record, dict) or not isinstance(record.get("suites") or {}, dict):
        return flat                   # reported by load_runs (_eval_file_problem)
    for suite, body in (record.get("suites") or {}).items():
        tasks = body.get("tasks") or {} if isinstance(body, dict) else None
        if not isinstance(tasks, dict) or not all(isinstance(e, dict) and isinstance(e.get("metrics") or {}, dict)
                                                  for e in tasks.values()):
            continue                  # reported by load_runs (_eval_file_problem)
        prefix = SUITE_PREFIX.get(suite, "")
        for name, entry in tasks.items():
            metrics, col = entry.get("metrics") or {}, prefix + DOWNSTREAM_NAMES.get(name, name)
            if name.startswith("squad"):
                for key, short in (("f1", "F1"), ("exact_match", "EM"), ("exact", "EM")):
                    if isinstance(metrics.get(key), (int, float)):
                        flat[f"{col} {short}"] = float(metrics[key])
            elif isinstance(metrics.get("score"), (int, float)):
                flat[col] = float(metrics["score"])
        if isinstance(body.get("average"), (int, float)) and len(body.get("tasks") or {}) > 1:
            flat[f"{prefix}Avg. {suite.upper() if suite == 'glue' else suite}"] = float(body["average"])
    return flat


def full_model_rows(run: Run) -> list[bool]:
    """`full_model` of each metrics row, in order; the reading of records without the field is in the module
    docstring (unknown counts as False: a shallow stage must never reach the target)."""
    stages = {m.get("stage") for m in run.metrics} - {"init"}
    last = max(run.metrics, key=lambda m: m["step"]).get("stage")
    return [bool(m["full_model"]) if "full_model" in m else len(stages) <= 1 or m.get("stage") == last
            for m in run.metrics]


def curve_digest(run: Run) -> str:
    """sha1 of every evaluation point (step, FLOPs, eval loss and accuracy, as logged): for records made before
    the computation fingerprint, two runs of one seed with the same digest are read as one computation
    (analysis/identical.py): two different computations do not log bit-equal floats at every point."""
    points = [(m["step"], m.get("flops"), m.get("eval_loss"), m.get("eval_acc")) for m in run.metrics
              if m.get("eval_loss") is not None or m.get("eval_acc") is not None]
    return hashlib.sha1(json.dumps(sorted(points), default=str).encode()).hexdigest()


def fingerprint(run: Run) -> str | None:
    """runs/computation.py's fingerprint, logged on the step-0 row (None for records made before it was)."""
    first = min(run.metrics, key=lambda m: m["step"])
    return first.get("computation") if first["step"] == 0 else None


def twin_of(run: Run) -> tuple[str, int] | None:
    """(label, seed) of the run this record was copied from as the same computation (bench/sweeps/cli.py
    record_as_twin writes config "same_computation_as": "<label>-s<seed>"), or None."""
    name = run.config.get("same_computation_as")
    # a twin in another task directory ("<task dir>/<label>-s<seed>") is no label of this task's tables
    m = SEED_SUFFIX.match(name) if isinstance(name, str) and "/" not in name else None
    return (m.group("label"), int(m.group("seed"))) if m else None


def seconds_per_flop(metrics: list[dict]) -> float | None:
    """How fast the machine ran this record's training: the median over its logged intervals of wall time per
    FLOP (the fit and step 0 left out). Per FLOP, not per step, so that cheaper steps (MSLT's frozen layers,
    a shallower stage) and dearer ones (KI's teacher) do not read as another machine speed. Two runs of one
    architecture on one idle machine agree to a few percent; on a shared machine they have differed by 2x."""
    rows = sorted((m for m in metrics if m.get("step", 0) > 0 and m.get("wall") is not None), key=lambda m: m["step"])
    rates = [(b["wall"] - a["wall"]) / (b["flops"] - a["flops"]) for a, b in zip(rows, rows[1:])
             if b["flops"] > a["flops"] and b["wall"] >= a["wall"]]
    return float(np.median(rates)) if rates else None


def best(run: Run, key: str, pick) -> float | None:
    """The best (`pick`: min or max) value of `key` over a record's evaluations of the full model (the ones a
    saving may credit: savings.py), None if it has none."""
    values = [m[key] for m, full in zip(run.metrics, full_model_rows(run)) if full and m.get(key) is not None]
    return pick(values) if values else None


def runs_frame(runs: list[Run]) -> pd.DataFrame:
    """One row per run: identity, final metrics, total cost, fit cost, the small model's pretraining cost."""
    rows, scratch = [], scratch_recipes(runs)
    for r in runs:
        task, scale, role, label, seed = identity(r)
        closing_train, distilled = r.closing_training_loss()
        first = min(r.metrics, key=lambda m: m["step"])
        small = r.config.get("small") or {}
        ref = r.config.get("reference") or {}
        rows.append({
            "task": task, "scale": scale, "role": role, "label": label, "method": r.config["method"]["name"],
            "seed": seed, "dir": str(r.dir),
            "final_loss": r.summary.get("eval_loss"), "final_acc": r.summary.get("eval_acc"),
            # the best evaluation: a saving credits the first evaluation that reaches a target (savings.cost_to_reach)
            "best_loss": best(r, "eval_loss", min), "best_acc": best(r, "eval_acc", max),
            "flops": r.summary.get("flops"), "wall": r.summary.get("wall"), "steps": r.summary.get("step"),
            "trained": trained(r),
            # step 0 is logged right after the operator fit, so its cumulative flops are the fit's cost
            "fit_flops": first.get("flops_fit", first.get("flops", 0.0)) if first["step"] == 0 else 0.0,
            # records so far log wall 0.0 at step 0 even after a fit: the fit's wall time is then unknown
            "fit_wall_missing": first["step"] == 0 and first.get("flops", 0.0) > 0 and not first.get("wall"),
            "init_loss": first.get("eval_loss") if first["step"] == 0 else None,
            "init_acc": first.get("eval_acc") if first["step"] == 0 else None,
            # has_small False: grown from nothing (scratch), so charging its small model charges zero
            "has_small": bool(r.config.get("small")),
            "pretrain_flops": small.get("pretrain_flops"), "pretrain_wall": small.get("pretrain_wall"),
            "method_config": (r.config["method"].get("config") or {}),
            "downstream": downstream_scores(r),
            # runs/computation.py's fingerprint (step-0 row): equal fingerprints are one computation
            "computation": fingerprint(r), "twin_of": twin_of(r),
            "curve": curve_digest(r),
            # what the eval numbers are read against (runs/experiment.py reference), for the regime check
            "unigram_ce": ref.get("unigram_ce"), "eval_items": ref.get("eval_items"),
            "units": r.summary.get("units"), "recipe": r.config["task"].get("recipe") or {},
            "small_recipe": r.config["task"].get("small_recipe") or {},
            "world_size": (r.config.get("distributed") or {}).get("world_size") or 1,
            "seconds_per_flop": seconds_per_flop(r.metrics),
            # device and threads of every start: wall times compare only between runs of one machine
            "machine": run_machine(r.config),
            "grown_recipe": recipe_preset(r, scratch.get((task, scale))),
            # fields trained otherwise than scratch outside any named preset ("steps 693 vs 1600"): tables mark it
            "recipe_differs": recipe_difference(r, scratch.get((task, scale))),
            # where the fit went: the training loss of the last evaluation interval, beside final_loss
            "closing_train_loss": closing_train, "closing_distilled": distilled,
        })
    cols = ["task", "scale", "role", "label", "method", "seed", "dir", "final_loss", "final_acc", "best_loss",
            "best_acc", "flops",
            "wall", "steps", "trained", "fit_flops", "fit_wall_missing", "init_loss", "init_acc", "has_small", "pretrain_flops",
            "pretrain_wall", "method_config", "downstream", "computation", "twin_of", "curve", "unigram_ce",
            "eval_items", "units", "recipe", "small_recipe", "world_size", "seconds_per_flop", "machine", "grown_recipe",
            "recipe_differs", "closing_train_loss", "closing_distilled"]
    return pd.DataFrame(rows, columns=cols)


def curves_frame(runs: list[Run]) -> pd.DataFrame:
    """One row per evaluation point of every run, sorted by step: the curves savings and figures read."""
    rows = []
    for r in runs:
        task, scale, role, label, seed = identity(r)
        unigram = (r.config.get("reference") or {}).get("unigram_ce")
        # per run, repeated on its rows: figures merge the lines of runs that are one computation (identical.py)
        comp, twin, curve = fingerprint(r), twin_of(r), curve_digest(r)
        shapes = {f"{part}_spec": r.config["task"].get(part) for part in ("small", "large")}   # figure titles
        machine = run_machine(r.config)
        for m, full in sorted(zip(r.metrics, full_model_rows(r)), key=lambda mf: mf[0]["step"]):
            if m.get("eval_loss") is None and m.get("eval_acc") is None:
                continue
            rows.append({"task": task, "scale": scale, "role": role, "label": label,
                         "method": r.config["method"]["name"], "seed": seed, "step": m["step"],
                         "flops": float(m["flops"]), "wall": float(m.get("wall") or 0.0),
                         "eval_loss": m.get("eval_loss"), "eval_acc": m.get("eval_acc"),
                         "stage": m.get("stage"), "full_model": full, "unigram_ce": unigram,
                         "computation": comp, "twin_of": twin, "curve": curve,
                         # copy symmetry at this evaluation (models/twins.py), where the pair grows width
                         "twins": logged_spaces(m.get("twins")), "twin_gap": logged_spaces(m.get("twin_gap")),
                         "machine": machine, **shapes})
    cols = ["task", "scale", "role", "label", "method", "seed", "step", "flops", "wall", "eval_loss",
            "eval_acc", "stage", "full_model", "unigram_ce", "computation", "twin_of", "curve", "twins", "twin_gap",
            "machine", "small_spec", "large_spec"]
    df = pd.DataFrame(rows, columns=cols)
    for c in ("eval_loss", "eval_acc", "unigram_ce"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
    df["full_model"] = df["full_model"].astype(bool)
    return df


def one_machine(cur: pd.DataFrame) -> tuple[pd.DataFrame, list[tuple[str, int]]]:
    """A task's curves for a wall-time panel: only runs made on the machine (device and thread count) scratch's runs
    were made on, as wall time compares nothing across machines; and the runs left out, (label, seed). Where scratch's
    seeds ran on several machines, the one most of them used.
    Load on a shared machine is not recorded: the savings tables' ‡ flags a run whose speed per FLOP differs from its
    scratch seed's."""
    if "machine" not in cur or cur.empty:
        return cur, []
    scratch = cur[(cur["role"] == "large") & (cur["label"] == "scratch")]
    if scratch.empty:
        return cur, []
    machine = scratch.groupby("seed")["machine"].first().mode().iloc[0]
    keep = (cur["role"] != "large") | (cur["machine"] == machine)
    gone = cur[~keep].groupby(["label", "seed"]).size().index
    return cur[keep], [(label, int(seed)) for label, seed in gone]
