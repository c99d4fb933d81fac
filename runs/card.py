"""The model card of an exported `model/` (README.md), as HF's Trainer writes one beside a saved model: what the model
is, how it was grown and trained, what it scored, and the command that made it. Everything in it comes from the run's
record (config.json, summary.json), so the card never says more than the record does.
"""
from __future__ import annotations

import shlex
import subprocess
from importlib import metadata
from pathlib import Path

from models.spec import ModelSpec
from runs.tracking import unit_name

CARD = "README.md"


def growbench_revision() -> str:
    """`git describe` of the source tree the run ran from (`-dirty` when it had uncommitted changes), else the
    installed package's version."""
    try:
        described = subprocess.run(["git", "describe", "--tags", "--always", "--dirty"], capture_output=True,
                                   text=True, cwd=Path(__file__).resolve().parent, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        described = ""
    if described:
        return f"git {described}"
    try:
        return f"version {metadata.version('growbench')}"
    except metadata.PackageNotFoundError:
        return "unknown"


def _small_model(config: dict) -> str:
    small = config.get("small")
    if not small:
        return "none: the large model was trained from its own initialisation"
    if small.get("source") == "given":
        return f"given with --small: `{small.get('resolved') or small.get('path')}`"
    return f"cache entry `{small.get('path')}` (pretrained by growbench from scratch)"


def _number(value, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def model_card(config: dict, summary: dict) -> str:
    task, method = config["task"], config["method"]
    large, small = ModelSpec(**task["large"]), ModelSpec(**task["small"])
    unit = unit_name(config)
    library = "timm" if unit == "images" else "transformers"
    grown = bool(config.get("small"))
    label = config.get("grown_recipe", {}).get("name")
    recipe = task["recipe"]
    data = task["data"] + (f" (from `{task['data_path']}`)" if task.get("data_path") else "")
    options = ", ".join(f"{k}={v}" for k, v in sorted((method.get("config") or {}).items())) or "none"
    phases = ", ".join(f"{k} {v:.3e}" for k, v in sorted(summary.get("flops_by_phase", {}).items()) if v)
    versions = config.get("environment", {}).get("versions", {})
    lines = [
        "---", f"library_name: {library}", "tags:", "- growbench", "- model-growth", f"- {method['name']}", "---", "",
        f"# {task['name']}-{task['scale']}: {method['name']}, seed {config.get('seed')}", "",
        f"A {large.short()} model "
        + (f"grown with growbench's `{method['name']}` method from a pretrained {small.short()} model, then trained."
           if grown else f"trained by growbench's `{method['name']}` method."),
        "It is a benchmark artefact (how well a growth method starts a larger model), not a model tuned for use.", "",
        "## Training procedure", "",
        f"- Method: `{method['name']}` (options: {options})",
        f"- Small model: {_small_model(config)}",
        f"- Task: `{task['name']}` at `{task['scale']}` scale"
        + (f", grown-model recipe `{label}`" if label and label != "same" else ""),
        f"- Data: {data}" + (f", tokenizer `{task['tokenizer']}`" if task.get("tokenizer") else ""),
        f"- Trained: {summary.get('units', 0):,} {unit} in {summary.get('step', 0):,} steps "
        f"(batch size {recipe.get('batch_size')} x {recipe.get('grad_accum', 1)} accumulated, peak lr "
        f"{recipe.get('lr')}, {recipe.get('schedule')} schedule, {recipe.get('warmup')} warm-up steps), "
        f"{summary.get('wall', 0):.1f} s",
        f"- FLOPs: {summary.get('flops', 0):.3e}" + (f" ({phases})" if phases else "")
        + (f"; the small model's pretraining: {config['small']['pretrain_flops']:.3e}"
           if grown and config["small"].get("pretrain_flops") else ""), "",
        "## Evaluation (held-out split of the pretraining data, at the last step)", "",
        "| eval loss | eval accuracy |", "| --- | --- |",
        f"| {_number(summary.get('eval_loss'))} | {_number(summary.get('eval_acc'))} |", "",
        "## Framework versions", "",
        f"- growbench {growbench_revision()}",
        *(f"- {name} {version}" for name, version in versions.items() if version), "",
        "## Command", "", "```", f"python {shlex.join(str(a) for a in config.get('argv') or [])}", "```", "",
    ]
    return "\n".join(lines)


def write_model_card(directory: Path, config: dict, summary: dict) -> None:
    (Path(directory) / CARD).write_text(model_card(config, summary))
