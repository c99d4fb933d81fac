"""Does depth pay at this scale? The pair's large model trained from scratch at several depths (its width, heads,
data and recipe kept), final eval loss against the unigram cross-entropy of the eval tokens. With `--width small`,
at the small model's width instead (hidden, FFN, heads and key/value heads): does the width the pair adds pay?

A depth-only pair (Figure 6(a)) ranks growth methods only if its large model clearly beats its small one on as
many tokens; at mini, with 100 warm-up steps, the BERT depth-only pair's small model (2L/192) ended below its
4-layer scratch model, and this probe asked whether any depth at that width would pass (none did; the pair has
trained with 400 warm-up steps since, where it passes: bench/README.md section 7). Where a pair grows width and a
start's added units stay exact twins for the whole run (Net2Net's on the dropout-free families), the grown model
has only the small width's degrees of freedom (its norms still average over the copies); the large model's depth at
the small width, trained from scratch, says what the added width is worth to the pair at this budget (bench/README.md
section 7).

    HF_HUB_OFFLINE=1 python bench/experiments/depth_probe.py [--task bert_depth_only] [--layers 1 2 4] [--width large|small]
        [--scale mini] [--seed 0] [--device cpu]

Each depth is an ordinary scratch run recorded under --runs (default runs/out/depth_probe/; a complete one is
reused, an interrupted one resumed). Writes bench/results/depth_probe.json (depth_probe-s<seed>.json for another
seed; another task or the small width: depth_probe-<task>[-small_width][-s<seed>].json).
"""
from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.cli import check_result_file, checked_device, positive_int, refused_as_one_line  # noqa: E402
from bench.result_file import REPO, RESULTS, write_result  # noqa: E402
from runs.cli import OneLineArgumentParser  # noqa: E402

RUNS = REPO / "runs" / "out" / "depth_probe"
DEFAULT_TASK = "bert_depth_only"
WIDTHS = ("large", "small")
WIDTH_FIELDS = ("hidden", "ffn", "heads", "kv_heads")    # what a width operator changes (kv_heads: Llama's groups)


def depth_task(task, layers: int, width: str = "large"):
    """The task's large model at `layers` layers, trained from scratch (small = large: nothing is grown); with
    `width` "small", at the small model's width."""
    spec = dataclasses.replace(task.large, layers=layers)
    if width == "small":
        spec = dataclasses.replace(spec, **{f: getattr(task.small, f) for f in WIDTH_FIELDS})
    name = f"{task.name}_L{layers}" + ("_small_width" if width == "small" else "")
    return task.with_(name=name, small=spec, large=spec, small_recipe=task.recipe)


def default_out(task_name: str, width: str, seed: int) -> str:
    """The result file: depth_probe.json for the default task at its large width and seed 0, as committed first;
    anything else names what differs, so that one probe's result does not overwrite another's."""
    name = "depth_probe" + ("" if task_name == DEFAULT_TASK else f"-{task_name}")
    name += ("-small_width" if width == "small" else "") + (f"-s{seed}" if seed else "")
    return str(RESULTS / f"{name}.json")


def depth_run(task, layers: int, seed: int, runs_dir: Path, width: str = "large"):
    """(task, method, record directory) of the scratch run at `layers` layers."""
    from methods import get_method
    t = depth_task(task, layers, width)
    return t, get_method("scratch", task=t), runs_dir / f"{t.name}-{t.scale}" / f"scratch-s{seed}"


def check_reusable(task, layers: int, seed: int, runs_dir: Path, width: str = "large") -> None:
    """A complete record is reused only if it is the run this probe would make now: one made under another recipe
    (the registry changed since) is refused, not read as today's number."""
    from bench.sweeps.records import stale_reason
    from runs.record import SUMMARY
    t, method, out = depth_run(task, layers, seed, runs_dir, width)
    if (out / SUMMARY).exists() and (why := stale_reason(out, t, method, None)):
        raise ValueError(f"{out} is complete, but {why}; move it away (or give another --runs) to train it again")


def probe(task, layers: int, seed: int, device: str, runs_dir: Path, log, width: str = "large") -> dict:
    from runs.experiment import run_experiment
    from runs.record import SUMMARY, load_run
    t, method, out = depth_run(task, layers, seed, runs_dir, width)
    if not (out / SUMMARY).exists():
        run_experiment(t, method, seed=seed, device=device, out=out, resume=out.exists(), progress=False, log=log)
    run = load_run(out)
    evals = [(r["step"], r["eval_loss"]) for r in run.metrics if "eval_loss" in r]
    # the training loss beside the eval loss: at the same eval loss, how much of a grown start's lower training loss
    # is fit the held-out tokens do not share (analysis: generalisation-<task>-<scale>.md)
    return {"layers": layers, "spec": t.large.short(), "record": _shown(out),
            "final_eval_loss": evals[-1][1], "closing_train_loss": run.closing_training_loss()[0],
            "curve": evals, "wall_s": run.summary.get("wall"),
            "unigram_ce": run.config["reference"]["unigram_ce"]}


def _shown(path: Path) -> str:
    """A record's path as committed results show it: relative to the repository when inside it."""
    root = REPO
    path = path.resolve()
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def table(task_name: str, recipe, rows: list[dict], width: str = "large") -> str:
    unigram = rows[0]["unigram_ce"]
    at = " at the small model's width" if width == "small" else ""
    lines = [f"{task_name}: large model from scratch by depth{at} (unigram cross-entropy of the eval tokens "
             f"{unigram:.3f}; lr {recipe.lr:g}, {recipe.warmup} warm-up steps of {recipe.steps})",
             "| depth | model | final eval loss | below unigram | training loss (last eval interval) | wall (s) |",
             "|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['layers']} | {r['spec']} | {r['final_eval_loss']:.3f} | "
                     f"{unigram - r['final_eval_loss']:.3f} | {r['closing_train_loss']:.3f} | {r['wall_s']:.0f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = OneLineArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default=DEFAULT_TASK)
    ap.add_argument("--layers", nargs="+", type=positive_int, default=[1, 2, 4])
    ap.add_argument("--width", choices=WIDTHS, default="large",
                    help="the large model's width (default) or the small model's (hidden, ffn, heads, kv_heads)")
    ap.add_argument("--scale", default="mini")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--runs", type=Path, default=RUNS, help="where the scratch runs are recorded")
    ap.add_argument("--out", help="result file (default: bench/results/depth_probe.json; another seed, task or width: "
                    "depth_probe-<task>[-small_width][-s<seed>].json, so that one probe's result does not overwrite "
                    "another's)")
    args = ap.parse_args(argv)
    args.out = args.out or default_out(args.task, args.width, args.seed)
    with refused_as_one_line():          # an unknown task or scale, a vision task, a stale record: before anything trains
        from runs.preflight import check_out, check_seed
        check_seed(args.seed)
        args.device = checked_device(args.device)
        check_result_file(args.out)
        check_out(args.runs, "--runs")
        from tasks import get_task
        task = get_task(args.task, args.scale)
        if task.objective == "image":
            raise ValueError(f"{args.task} is a vision task; the probe compares eval loss with unigram "
                             "cross-entropy: give a text task")
        from models.canonical import grows_width
        if args.width == "small" and not grows_width(task.small, task.large):
            raise ValueError(f"--width small: {args.task} does not grow width (its small and large models are both "
                             f"{task.large.hidden} wide); leave --width out")
        for n in set(args.layers):
            check_reusable(task, n, args.seed, args.runs, args.width)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    rows = [probe(task, n, args.seed, args.device, args.runs, log, args.width) for n in sorted(set(args.layers))]
    text = table(args.task, task.recipe, rows, args.width)
    print(text)
    # the recipe goes with the numbers: a pair's recipe can change (the depth-only pair's warm-up did)
    write_result(args.out, {"task": args.task, "scale": args.scale, "seed": args.seed, "width": args.width,
                            "recipe": dataclasses.asdict(task.recipe), "rows": rows, "table": text})
    return 0


if __name__ == "__main__":
    sys.exit(main())
