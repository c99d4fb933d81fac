#!/usr/bin/env python
"""growbench CLI: one growth-method run on one task.

    python run.py --method ligo --task bert_small_base            # mini scale on CPU, embedded data
    python run.py --method scratch --task deit_s_b --scale tiny
    python run.py --list
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def parse_value(text: str):
    """--set values: ints, floats, true/false, none, else the string itself."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def apply_settings(task, method_cls, settings: list[str]):
    """Split --set key=value pairs into recipe changes, task changes and method config overrides."""
    from methods.base import config_fields
    recipe_keys = {f.name for f in dataclasses.fields(task.recipe)}
    task_keys = {"data_path", "tokenizer"}
    method_keys = set(config_fields(method_cls))
    recipe, task_changes, method = {}, {}, {}
    for item in settings:
        if "=" not in item or not item.split("=", 1)[0]:
            raise ValueError(f"malformed --set '{item}'; expected key=value, e.g. --set lr=1e-4")
        key, raw = item.split("=", 1)
        value = parse_value(raw)
        if key in method_keys:
            method[key] = value
        elif key in recipe_keys:
            expected = type(getattr(task.recipe, key))
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
                raise ValueError(f"--set {key}={raw}: expected {expected.__name__}")
            recipe[key] = value
        elif key in task_keys:
            task_changes[key] = raw
        else:
            from models.family import unknown
            raise KeyError(unknown("key", key, recipe_keys | task_keys | method_keys))
    return task.with_(recipe=task.recipe.with_(**recipe), **task_changes), method


def list_everything() -> str:
    from methods import METHODS
    from tasks import PAIRS, SCALES
    lines = ["methods:"] + [f"  {n:14s} {(cls.__doc__ or '').strip().splitlines()[0] if cls.__doc__ else ''}"
                            for n, cls in sorted(METHODS.items())]
    lines += ["tasks (scales: " + ", ".join(SCALES) + "):"]
    lines += [f"  {n:20s} {fam}" for n, (fam, _, _) in sorted(PAIRS.items())]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Grow a large transformer from a small one and train it.")
    p.add_argument("--method", help="growth method (see --list)")
    p.add_argument("--task", help="task: model pair + data + recipe (see --list)")
    p.add_argument("--scale", default="mini", help="paper | mini | tiny (default: mini)")
    p.add_argument("--steps", type=int, help="training steps of the large model (default: the task's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="run directory (default: runs/out/<task>-<scale>/<method>-s<seed>)")
    p.add_argument("--small", help="pretrained small model directory (HF save_pretrained / timm export)")
    p.add_argument("--device", default="cpu", help="cpu | cuda")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                   help="override a recipe field or a method option, e.g. --set lr=1e-4 --set fit_steps=50")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace an existing run in --out")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--list", action="store_true", help="list methods and tasks")
    args = p.parse_args(argv)
    if args.scale in ("mini", "tiny"):
        # the embedded scales never need the Hugging Face hub; offline mode spares a long look-up time-out
        os.environ.setdefault("HF_HUB_OFFLINE", "1")

    try:
        if args.list:
            print(list_everything())
            return 0
        if not args.method or not args.task:
            raise ValueError("--method and --task are required (see --list)")
        import torch
        from methods import METHODS, get_method
        from models.family import unknown
        from runs.experiment import run_experiment
        from tasks import get_task
        if args.method not in METHODS:
            raise KeyError(unknown("method", args.method, METHODS))
        task = get_task(args.task, scale=args.scale)
        task, method_options = apply_settings(task, METHODS[args.method], args.settings)
        if args.steps is not None:
            if args.steps <= 0:
                raise ValueError(f"--steps must be positive, got {args.steps}")
            task = task.with_(recipe=task.recipe.with_(steps=args.steps))
        if args.device not in ("cpu", "cuda") and not args.device.startswith("cuda:"):
            raise ValueError(f"unknown device '{args.device}'; known: cpu, cuda")
        if args.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError("--device cuda asked for, but no CUDA device is available; use --device cpu")
        if args.resume and args.overwrite:
            raise ValueError("--resume and --overwrite contradict each other; give one")
        method = get_method(args.method, **method_options)
        out = run_experiment(task, method, seed=args.seed, device=args.device, out=args.out, small=args.small,
                             resume=args.resume, overwrite=args.overwrite, progress=not args.quiet,
                             log=lambda msg: print(msg, file=sys.stderr))
    except (KeyError, ValueError, FileNotFoundError, FileExistsError) as e:
        msg = e.args[0] if e.args else str(e)
        print(f"error: {msg}", file=sys.stderr)
        return 2
    from runs.record import load_run
    run = load_run(out)
    s = run.summary or {}
    acc = f", eval accuracy {s['eval_acc']:.4f}" if s.get("eval_acc") is not None else ""
    print(f"record: {out}")
    print(f"final eval loss {s.get('eval_loss', float('nan')):.4f}{acc}; {s.get('flops', 0):.3e} FLOPs; "
          f"{s.get('wall', 0):.1f} s training")
    return 0


if __name__ == "__main__":
    sys.exit(main())
