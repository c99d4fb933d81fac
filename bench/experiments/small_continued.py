"""What growth buys over not growing: the pair's pretrained small model trained on at its own size, under the large
model's recipe (its steps, lr, warm-up and schedule), against scratch's final quality and cost.

Every saving in the paper's tables takes the small model as given (its pretraining is free) and asks how soon the
grown large model reaches what scratch reaches. A grown model whose added width or depth is never used (twins that
stay twins, cause 3 of REPRODUCE.md) is, in what it can represent, the small model trained on; if the small model
trained on reaches scratch's final quality by itself, cheaper per step, a saving says more about the value of the
pretrained small model than about the growth operator, and a twin start can cost nothing. This baseline measures it:
the task with its large model replaced by the small one (`<task>_smallcont`: nothing is grown, `direct_copy` copies
the small model into itself), run as any growth run is (the small model from the cache, pretrained once per seed),
its savings computed by analysis/savings.py's rule against the committed scratch run of the same seed.

    HF_HUB_OFFLINE=1 python bench/experiments/small_continued.py
        [--tasks deit_s_b cait_xs_s:0,1,2 bert_small_base bert_width_only:0 llama_small_base:0] [--seeds 0 1]
        [--scale mini] [--records records/mini] [--runs runs/out/small_continued] [--device cpu]
        [--steps N] [--set KEY=VALUE ...] [--train-only]

`TASK:S,S` gives one task its own seeds (default: --seeds). `--set` takes the recipe and small_recipe fields a
sweep's `--set` gave its runs (`--set steps=6400 --set small_recipe.steps=6400`: the large budget, and the small
model pretrained as long), so that the control is the one of those runs; `--steps N` is `--set steps=N`.
`--train-only` trains (or finds) the controls and compares nothing: for a machine that does not hold the scratch
runs yet (a lent GPU: bench/device_call.sh), the comparison then made where they are.

Each run is recorded under --runs (a complete one is reused). Writes bench/results/small_continued.json.
"""
from __future__ import annotations

import math
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.cli import check_result_file, checked_device, positive_int, refused_as_one_line  # noqa: E402
from bench.result_file import REPO, RESULTS, write_result  # noqa: E402
from runs.cli import OneLineArgumentParser  # noqa: E402

RUNS = REPO / "runs" / "out" / "small_continued"
METHOD = "direct_copy"           # equal sizes: the small model copied into a model of its own shape


def continued_task(task, settings: tuple = ()):
    """The task with its large model replaced by its small one: the small model trained on, under the large recipe
    (`settings`: (KEY, VALUE) pairs of recipe and small_recipe fields, as a sweep's --set gave the runs compared)."""
    from methods import METHODS
    from runs.settings import route
    task, _, _ = route(task, METHODS[METHOD], tuple(settings))
    return task.with_(name=f"{task.name}_smallcont", large=task.small)


def check_settings(task, settings: tuple) -> None:
    """Recipe fields, small_recipe fields and the pair's spec fields (small.*, large.*: a probed pair, so that the
    control grows from the small model the pair's runs grow from; large.* only names the pair, the control trains
    the small one). No method options: the control has no growth operator."""
    import dataclasses

    from runs.settings import SMALL_RECIPE
    fields = {f.name for f in dataclasses.fields(task.recipe)}
    spec_fields = {f.name for f in dataclasses.fields(task.small)}
    for key, _ in settings:
        which, dot, field = key.partition(".")
        if dot and which in ("small", "large"):
            if field not in spec_fields:
                raise ValueError(f"--set {key}: not a model-spec field; one of: {', '.join(sorted(spec_fields))}")
        elif key.removeprefix(SMALL_RECIPE) not in fields:
            raise ValueError(f"--set {key}: the control takes recipe fields (steps, lr, warmup, ...), "
                             f"small_recipe.<field> and small.<spec field> / large.<spec field>; recipe fields: "
                             f"{', '.join(sorted(fields))}")


def run_dir(runs: Path, task, seed: int) -> Path:
    t = continued_task(task)
    return runs / f"{t.name}-{t.scale}" / f"{METHOD}-s{seed}"


def check_reusable(task, seed: int, runs: Path, settings: tuple = ()) -> None:
    """A complete record is reused only if it is the run this baseline would make now (bench/experiments/depth_probe.py's rule)."""
    from bench.sweeps.records import stale_reason
    from methods import get_method
    from runs.record import SUMMARY
    out = run_dir(runs, task, seed)
    why = (out / SUMMARY).exists() and stale_reason(out, continued_task(task, settings), get_method(METHOD), None)
    if why:
        raise ValueError(f"{out} is complete, but {why}; move it away (or give another --runs) to train it again")


def eval_curve(directory: Path):
    """Eval rows (step, flops, eval_loss, eval_acc where present) of a record, as a DataFrame."""
    import pandas as pd

    from runs.record import load_run
    rows = [r for r in load_run(directory).metrics if "eval_loss" in r]
    return pd.DataFrame([{k: r.get(k) for k in ("step", "flops", "eval_loss", "eval_acc")} for r in rows])


def compare(task, seed: int, continued: Path, records: Path) -> dict:
    """The continued small model against scratch (same seed, from the committed records) and the small model."""
    from analysis.savings import HIGHER_IS_BETTER, cost_to_reach
    pair = records / f"{task.name}-{task.scale}"
    scratch, small = pair / f"scratch-s{seed}", pair / f"small-s{seed}"
    if not (scratch / "summary.json").exists():
        raise ValueError(f"no complete scratch run {scratch}: the comparison needs scratch's final value and cost")
    ours, theirs = eval_curve(continued), eval_curve(scratch)
    metric = "eval_acc" if task.objective == "image" else "eval_loss"
    target, scratch_flops = float(theirs.sort_values("step")[metric].iloc[-1]), float(theirs["flops"].max())
    cost = cost_to_reach(ours, target, metric)
    reached = not math.isnan(cost)
    final = float(ours.sort_values("step")[metric].iloc[-1])
    row = {"task": task.name, "seed": seed, "metric": metric, "record": _shown(continued),
           "small": task.small.short(), "large": task.large.short(),
           "continued_final": final, "scratch_final": target,
           "small_final": float(eval_curve(small).sort_values("step")[metric].iloc[-1]) if small.exists() else None,
           "reached": reached, "flops_to_target": cost if reached else None, "scratch_flops": scratch_flops,
           "saving_flops": 1 - cost / scratch_flops if reached else None,
           "continued_flops_per_step_vs_scratch": float(ours["flops"].max()) / scratch_flops}
    row["ahead_of_scratch"] = (final - target) * (1 if metric in HIGHER_IS_BETTER else -1)
    return row


def _shown(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def table(rows: list[dict]) -> str:
    lines = ["| task | seed | small → large | metric | small | small trained on | scratch | reached | FLOPs saved |",
             "|---|---:|---|---|---:|---:|---:|---|---:|"]
    for r in rows:
        fmt = (lambda v: f"{100 * v:.2f}%") if r["metric"] == "eval_acc" else (lambda v: f"{v:.3f}")
        saved = f"{100 * r['saving_flops']:.1f}%" if r["reached"] else "-"
        small = fmt(r["small_final"]) if r["small_final"] is not None else "-"
        lines.append(f"| {r['task']} | {r['seed']} | {r['small']} → {r['large']} | {r['metric']} | {small} | "
                     f"{fmt(r['continued_final'])} | {fmt(r['scratch_final'])} | {'yes' if r['reached'] else 'no'} | "
                     f"{saved} |")
    return "\n".join(lines)


def task_seeds(entry: str, default: list[int]) -> tuple[str, list[int]]:
    """"TASK" or "TASK:S,S,..." -> (task name, seeds)."""
    name, _, seeds = entry.partition(":")
    if not seeds:
        return name, list(default)
    try:
        return name, [int(s) for s in seeds.split(",")]
    except ValueError:
        raise ValueError(f"--tasks {entry}: seeds after ':' are integers separated by commas "
                         "(cait_xs_s:0,1,2)") from None


def train_controls(tasks, settings: tuple, args) -> list[dict]:
    """Train each task's control of each seed where its record is not complete (a started one resumes), then
    compare it with its scratch run unless --train-only: the table's rows."""
    from methods import get_method
    from runs.experiment import run_experiment
    from runs.record import SUMMARY
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    rows = []
    for task, seeds in tasks:
        for seed in seeds:
            out = run_dir(args.runs, task, seed)
            if not (out / SUMMARY).exists():
                run_experiment(continued_task(task, settings), get_method(METHOD), seed=seed, device=args.device,
                               out=out, resume=out.exists(), progress=False, log=log)
            if args.train_only:
                print(f"control trained: {out}")
            else:
                rows.append(compare(task, seed, out, args.records))
    return rows


def parser() -> OneLineArgumentParser:
    """The command line; the documents' commands are parsed with it too (tests/test_doc_commands.py)."""
    ap = OneLineArgumentParser(prog="python bench/experiments/small_continued.py",
                               description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+",
                    default=["deit_s_b", "cait_xs_s:0,1,2", "bert_small_base", "bert_width_only:0",
                             "llama_small_base:0", "roberta_small_base", "gpt2_base_medium"],
                    help="task names, each optionally with its own seeds: cait_xs_s:0,1,2")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    ap.add_argument("--scale", default="mini")
    ap.add_argument("--records", type=Path, default=REPO / "records" / "mini",
                    help="the committed runs holding each pair's scratch and small runs")
    ap.add_argument("--runs", type=Path, default=RUNS, help="where the continued small models are recorded")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=positive_int, default=None,
                    help="train the control this many steps (default: the task's), against a scratch run in --records "
                         "trained as long (e.g. `bench.sweeps deit --methods scratch --set steps=6400`)")
    ap.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                    help="a recipe or small_recipe field, as the compared runs' sweep --set (small_recipe.steps=6400)")
    ap.add_argument("--train-only", action="store_true",
                    help="train the controls, compare nothing (no scratch records needed, no result written)")
    ap.add_argument("--out", default=str(RESULTS / "small_continued.json"))
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    with refused_as_one_line():          # unknown tasks, seeds, missing scratch records: before anything trains
        from methods import get_method
        from runs.preflight import check_inputs, check_out, check_seed
        from runs.settings import check_repeated, split_item
        from tasks import get_task
        plan = [task_seeds(entry, args.seeds) for entry in args.tasks]
        for _, seeds in plan:
            for seed in seeds:
                check_seed(seed)
        settings = tuple(split_item(item) for item in args.settings)
        if args.steps is not None:
            settings += (("steps", str(args.steps)),)
        check_repeated(settings)
        args.device = checked_device(args.device)
        if not args.train_only:
            check_result_file(args.out)
        check_out(args.runs, "--runs")
        tasks = [(get_task(name, args.scale), seeds) for name, seeds in plan]
        for task, seeds in tasks:
            check_settings(task, settings)
            for seed in seeds:
                check_inputs(continued_task(task, settings), get_method(METHOD), seed, None)  # the run's own checks
                scratch = args.records / f"{task.name}-{task.scale}" / f"scratch-s{seed}" / "summary.json"
                if not args.train_only and not scratch.exists():
                    raise ValueError(f"no complete scratch run {scratch.parent} to compare with (--records)")
                check_reusable(task, seed, args.runs, settings)
    from runs.signals import stop_signals_as_interrupt, stop_status, stopped_by
    try:
        with stop_signals_as_interrupt():     # SIGTERM as Ctrl-C: the run keeps its last checkpoint, as run.py's
            rows = train_controls(tasks, settings, args)
    except KeyboardInterrupt:
        print(f"small_continued: stopped{stopped_by()}; the same command resumes from the last checkpoint",
              file=sys.stderr)
        return stop_status()
    if args.train_only:
        return 0
    text = table(rows)
    print(text)
    write_result(args.out, {"scale": args.scale, "steps": args.steps, "settings": [list(kv) for kv in settings],
                            "records": _shown(args.records), "rows": rows, "table": text})
    return 0


if __name__ == "__main__":
    sys.exit(main())
