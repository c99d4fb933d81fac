"""Downstream evaluation (DESIGN.md §5; paper Tables 1, 2, 5, 6): does growth hurt what the model is for?

Suites, registered by name with `@register_suite`:
    glue      GLUE by full fine-tuning (paper Table 1; §4.1: 3 epochs, lr 1e-4, batch 32, mean of 3 seeds)
    squad     SQuAD v1.1 and v2.0 (Table 1; 2 epochs, lr 5e-5, batch 12)
    transfer  DeiT/CaiT image transfer: CIFAR-10/100, Flowers102, Stanford Cars, ChestX-ray8 (Table 2)
    adapters  GLUE with adapters instead of full fine-tuning (Table 6, App. C.4)
    mini      embedded suites that run on a CPU without the hub: BBC News topics (text), digits (images)

A suite is `run(pretrained, names, options, log) -> {"tasks": {name: result}}`, where `pretrained` is a
`Pretrained` (an exported model directory, its family and tokenizer: from a run directory or from a model
in memory) and `options` an `EvalOptions`. Evaluating a finished run and merging the results into its record
(RUN_DIR/eval.json) is the run side's: runs/evaluation.py.
"""
from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from models import ModelSpec, get_family
from models.family import unknown
from tasks.evals.finetune import EvalOptions, FinetuneRecipe  # noqa: F401  (re-exported)
from tasks.evals.registry import SUITES, Suite, register_suite  # noqa: F401  (re-exported)
# each suite module registers its suite (tasks/evals/registry.py) when imported
from tasks.evals import adapters, glue, mini, squad, transfer  # noqa: F401,I001


def model_kind(family: str) -> str:
    """What the suites call a model of `family`: "image" or "text"."""
    return "image" if get_family(family).objective == "image" else "text"


@dataclass
class Pretrained:
    """What a suite fine-tunes: an exported model directory (HF save_pretrained for text, timm
    safetensors + config.json for vision), its family and spec, and for text the pretraining tokenizer."""
    family: str
    model_dir: Path
    spec: ModelSpec
    task: dict = field(default_factory=dict)      # the run's task config (tokenizer, data, scale)
    _tokenizer: object = None

    @property
    def kind(self) -> str:
        return model_kind(self.family)

    @property
    def tokenizer(self):
        if self._tokenizer is None and self.kind == "text":
            self._tokenizer = load_run_tokenizer(self.model_dir, self.family, self.spec, self.task)
        return self._tokenizer

    @classmethod
    def from_model(cls, model, tokenizer=None, directory=None) -> "Pretrained":
        """A model in memory: exported (as a run would export it) to `directory` or a temporary one."""
        from models.family import family_of
        fam = family_of(model)
        directory = Path(directory or tempfile.mkdtemp(prefix="growbench-eval-"))
        fam.export(model, directory)
        return cls(fam.name, directory, fam.spec_of(model), {}, tokenizer)


def load_run_tokenizer(model_dir: Path, family: str, spec: ModelSpec, task: dict):
    """The tokenizer the model was pretrained with: saved next to the model at export, else (older runs)
    rebuilt from the task config, which reloads the locally trained tokenizer from its on-disk cache."""
    from transformers import AutoTokenizer
    if (Path(model_dir) / "tokenizer.json").exists():
        return AutoTokenizer.from_pretrained(str(model_dir))
    if not task:
        raise ValueError(f"{model_dir} holds no tokenizer and no task config says which to use")
    from tasks.data.text import DEFAULT_CACHE, load_tokenizer
    objective = get_family(family).objective
    kind = task.get("tokenizer") or ("wordpiece" if objective == "mlm" else "bytelevel_bpe")
    root = Path(os.environ.get("GROWBENCH_CACHE") or DEFAULT_CACHE).expanduser() / "tokenizers"
    tok, _ = load_tokenizer(kind, objective, task["data"], task.get("data_path"), spec.vocab, root)
    return tok


# --------------------------------------------------------------------------------------- planning

def default_suites(kind: str, scale: str | None, evals) -> tuple[str, ...]:
    """Paper-scale runs get the task's suites; mini/tiny runs the embedded one (no hub needed)."""
    if scale == "paper" and evals:
        return tuple(evals)
    return ("mini",)


def plan(kind: str, suites: list[str] | None, only: list[str] | None, scale: str | None = None,
         evals=()) -> list[tuple[str, list[str]]]:
    """[(suite, task names)] to run, checked before anything runs or is written: unknown suites, suites of
    the other modality, and --only names no selected suite knows are one-line errors."""
    names = list(suites) if suites else list(default_suites(kind, scale, evals))
    out = []
    for name in names:
        if name not in SUITES:
            raise KeyError(unknown("suite", name, SUITES))
        if kind not in SUITES[name].tasks:
            raise ValueError(f"suite '{name}' evaluates {'/'.join(SUITES[name].tasks)} models; this is a {kind} model")
        reason = SUITES[name].unavailable() if SUITES[name].unavailable else None
        if reason:
            raise ValueError(reason)
    known = {t for n in names for t in SUITES[n].tasks[kind]}
    for t in only or []:
        if t not in known:
            raise KeyError(unknown("--only task", t, known) + f" (suites: {', '.join(names)})")
    for name in names:
        tasks = [t for t in (only or SUITES[name].default[kind]) if t in SUITES[name].tasks[kind]]
        if tasks:
            out.append((name, tasks))
    return out


def run_suites(pretrained: Pretrained, planned, options: EvalOptions, log=print, done=None) -> dict:
    """Run the planned suites in order; `done(name, result)` is called as each one finishes."""
    results = {}
    for name, tasks in planned:
        start = time.perf_counter()
        log(f"evaluating suite {name}: {', '.join(tasks)}")
        res = SUITES[name].run(pretrained, tasks, options, log)
        res["wall"] = time.perf_counter() - start
        results[name] = res
        if done:
            done(name, res)
    return results


MNLI_PARTS = {"mnli_m": "mnli", "mnli_mm": "mnli"}


def suite_average(suite: str, tasks: dict) -> float | None:
    """Mean task score (GLUE convention: a task's score is the mean of its metrics; MNLI m/mm count once)."""
    groups: dict[str, list[float]] = {}
    for name, entry in tasks.items():
        score = entry.get("metrics", {}).get("score")
        if score is not None:
            groups.setdefault(MNLI_PARTS.get(name, name), []).append(score)
    return sum(sum(v) / len(v) for v in groups.values()) / len(groups) if groups else None


def format_table(record: dict, suites=None) -> str:
    """Plain-text table of eval.json: one row per suite task, metrics as the paper prints them (percent)."""
    lines = [f"{'suite':9s} {'task':14s} {'seeds':8s} metrics"]
    for name, suite in record.get("suites", {}).items():
        if suites and name not in suites:
            continue
        for task, entry in suite["tasks"].items():
            metrics = "  ".join(f"{k} {v:.2f}" for k, v in entry["metrics"].items()
                                if k != "score" and not k.endswith(("total", "_thresh"))
                                and not k.startswith(("HasAns_", "NoAns_")))   # those stay in eval.json
            seeds = ",".join(str(s) for s in entry.get("seeds", []))
            lines.append(f"{name:9s} {task:14s} {seeds:8s} {metrics}")
        if suite.get("average") is not None:
            lines.append(f"{name:9s} {'average':14s} {'':8s} score {suite['average']:.2f}  "
                         f"(wall {suite.get('wall', 0):.1f} s)")
    return "\n".join(lines)



# ---------------------------------------------------------------------------------------- CLI helpers

def comma_list(text: str | None) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


def prepare(kind: str, scale: str | None, evals, suite: str | None, only: str | None, settings: list[str],
            device: str = "cpu") -> tuple[list[str] | None, list[str] | None, EvalOptions]:
    """Check --suite / --only / eval settings up front (before any training or writing)."""
    suites, names = comma_list(suite), comma_list(only)
    options = EvalOptions.parse(settings, device=device)
    check_data(plan(kind, suites, names, scale, evals), options)
    return suites, names, options


def check_data(planned: list[tuple[str, list[str]]], options: EvalOptions) -> None:
    """Load the data of every planned task once before the model trains: a missing or damaged local file, or a
    hub dataset that cannot be had (offline and not cached), must not be found after an hour of pretraining."""
    for name, tasks in planned:
        if SUITES[name].load_data is None:
            continue
        try:
            SUITES[name].load_data(tasks, options)
        except ConnectionError as e:          # the hub, unreachable or offline, without a cached copy
            raise ConnectionError(f"suite {name}: {e}; local copies are read with --set eval.data_dir=DIR "
                                  f"(formats: tasks/evals/{name}.py)") from None

