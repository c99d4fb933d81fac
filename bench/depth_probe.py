"""Does depth pay at this scale? The pair's large model trained from scratch at several depths (its width, heads,
data and recipe kept), final eval loss against the unigram cross-entropy of the eval tokens.

A depth-only pair (Figure 6(a)) ranks growth methods only if its large model clearly beats its small one on as
many tokens; at mini, with 100 warm-up steps, the BERT depth-only pair's small model (2L/192) ended below its
4-layer scratch model, and this probe asked whether any depth at that width would pass (none did; the pair has
trained with 400 warm-up steps since, where it passes: bench/README.md section 7).

    HF_HUB_OFFLINE=1 python bench/depth_probe.py [--task bert_depth_only] [--layers 1 2 4] [--scale mini]
        [--seed 0] [--device cpu]

Each depth is an ordinary scratch run recorded under --runs (default runs/out/depth_probe/; a complete one is
reused, an interrupted one resumed). Writes bench/results/depth_probe.json (depth_probe-s<seed>.json for another seed).
"""
from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cli import check_result_file, checked_device, positive_int, refused_as_one_line  # noqa: E402
from bench.result_file import write_result  # noqa: E402
from run import OneLineArgumentParser  # noqa: E402

RUNS = Path(__file__).resolve().parents[1] / "runs" / "out" / "depth_probe"


def depth_task(task, layers: int):
    """The task's large model at `layers` layers, trained from scratch (small = large: nothing is grown)."""
    spec = dataclasses.replace(task.large, layers=layers)
    return task.with_(name=f"{task.name}_L{layers}", small=spec, large=spec, small_recipe=task.recipe)


def depth_run(task, layers: int, seed: int, runs_dir: Path):
    """(task, method, record directory) of the scratch run at `layers` layers."""
    from methods import get_method
    t = depth_task(task, layers)
    return t, get_method("scratch", task=t), runs_dir / f"{t.name}-{t.scale}" / f"scratch-s{seed}"


def check_reusable(task, layers: int, seed: int, runs_dir: Path) -> None:
    """A complete record is reused only if it is the run this probe would make now: one made under another recipe
    (the registry changed since) is refused, not read as today's number."""
    from bench.sweep_records import stale_reason
    from runs.record import SUMMARY
    t, method, out = depth_run(task, layers, seed, runs_dir)
    if (out / SUMMARY).exists() and (why := stale_reason(out, t, method, None)):
        raise ValueError(f"{out} is complete, but {why}; move it away (or give another --runs) to train it again")


def probe(task, layers: int, seed: int, device: str, runs_dir: Path, log) -> dict:
    from runs.experiment import run_experiment
    from runs.record import SUMMARY, load_run
    t, method, out = depth_run(task, layers, seed, runs_dir)
    if not (out / SUMMARY).exists():
        run_experiment(t, method, seed=seed, device=device, out=out, resume=out.exists(), progress=False, log=log)
    run = load_run(out)
    evals = [(r["step"], r["eval_loss"]) for r in run.metrics if "eval_loss" in r]
    return {"layers": layers, "spec": t.large.short(), "record": _shown(out),
            "final_eval_loss": evals[-1][1], "curve": evals, "wall_s": run.summary.get("wall"),
            "unigram_ce": run.config["reference"]["unigram_ce"]}


def _shown(path: Path) -> str:
    """A record's path as committed results show it: relative to the repository when inside it."""
    root = Path(__file__).resolve().parents[1]
    path = path.resolve()
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def table(task_name: str, recipe, rows: list[dict]) -> str:
    unigram = rows[0]["unigram_ce"]
    lines = [f"{task_name}: large model from scratch by depth (unigram cross-entropy of the eval tokens "
             f"{unigram:.3f}; lr {recipe.lr:g}, {recipe.warmup} warm-up steps of {recipe.steps})",
             "| depth | model | final eval loss | below unigram | wall (s) |", "|---:|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['layers']} | {r['spec']} | {r['final_eval_loss']:.3f} | "
                     f"{unigram - r['final_eval_loss']:.3f} | {r['wall_s']:.0f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = OneLineArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="bert_depth_only")
    ap.add_argument("--layers", nargs="+", type=positive_int, default=[1, 2, 4])
    ap.add_argument("--scale", default="mini")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--runs", type=Path, default=RUNS, help="where the scratch runs are recorded")
    ap.add_argument("--out", help="result file (default: bench/results/depth_probe.json, depth_probe-s<seed>.json "
                    "for seeds other than 0, so that one seed's result does not overwrite another's)")
    args = ap.parse_args(argv)
    args.out = args.out or str(Path(__file__).parent / "results" /
                               ("depth_probe.json" if args.seed == 0 else f"depth_probe-s{args.seed}.json"))
    with refused_as_one_line():          # an unknown task or scale, a vision task, a stale record: before anything trains
        from runs.experiment import check_seed
        from runs.preflight import check_out
        check_seed(args.seed)
        args.device = checked_device(args.device)
        check_result_file(args.out)
        check_out(args.runs, "--runs")
        from tasks import get_task
        task = get_task(args.task, args.scale)
        if task.objective == "image":
            raise ValueError(f"{args.task} is a vision task; the probe compares eval loss with unigram "
                             "cross-entropy: give a text task")
        for n in set(args.layers):
            check_reusable(task, n, args.seed, args.runs)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    rows = [probe(task, n, args.seed, args.device, args.runs, log) for n in sorted(set(args.layers))]
    text = table(args.task, task.recipe, rows)
    print(text)
    # the recipe goes with the numbers: a pair's recipe can change (the depth-only pair's warm-up did, 2026-11-26)
    write_result(args.out, {"task": args.task, "scale": args.scale, "seed": args.seed,
                            "recipe": dataclasses.asdict(task.recipe), "rows": rows, "table": text})
    return 0


if __name__ == "__main__":
    sys.exit(main())
