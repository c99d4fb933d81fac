"""How good is a grown model before any training? Eval loss (vision: accuracy) of the large model each growth
operator initialises from a small model that has learned (the mini regime's cached small model), on the task's
own evaluation set (issue: "LiGO as the paper defines it", whose first table this regenerates).

Rows: the fixed operators (StackBERT, Net2Net, bert2BERT); LiGO at fit 0 (its default operator, which is Net2Net),
after its default fit (the task's scale defaults: 20 steps at the paper's lr 2e-4 at mini), the paper's literal
tying (A = B) at fit 0 (what LiGO's default was before), and the official code's initialisation (random [I; C]
width rows, noisy stacking, literal tying) after the default fit. The fit draws the batch stream a run's fit draws
(runs/experiment.py), so these are the step-0 numbers a run would log.

    HF_HUB_OFFLINE=1 python bench/experiments/ligo_init_quality.py [--tasks bert_small_base gpt2_base_medium deit_s_b
        cait_xs_s] [--seed 0] [--device cpu] [--train-missing]

A small model is taken from the cache (runs/out/cache/small, written by any growth run or sweep); with
--train-missing a missing one is pretrained first (minutes to an hour on a CPU). Writes
bench/results/ligo_init_quality.json.
"""
from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from bench.cli import check_result_file, checked_device, refused_as_one_line  # noqa: E402
from bench.result_file import RESULTS, write_result  # noqa: E402
from runs.cli import OneLineArgumentParser  # noqa: E402
from methods import get_method  # noqa: E402
from models import get_family  # noqa: E402
from runs.experiment import pretrain_small  # noqa: E402
from runs.small_model import resolve_small, small_cache_dir  # noqa: E402
from runs.ledger import FlopsLedger  # noqa: E402
from runs.record import SUMMARY  # noqa: E402
from runs.trainer import evaluate  # noqa: E402
from tasks import get_task  # noqa: E402

# The copy-start rows fit from the Net2Net start (fit_noise 0), as when the committed results were measured (the
# families without dropout now default to perturbed copies, methods/ligo_copy.py). The committed results name the
# copy start "LiGO" and LiGO as its authors start it "LiGO, official-code init": these row names are kept so that
# they still read back.
VARIANTS = {  # row -> (method, options)
    "StackBERT": ("stackbert", {}),
    "Net2Net": ("net2net", {}),
    "bert2BERT": ("bert2bert", {}),
    "LiGO, fit 0 (default operator)": ("ligo_copy", {"fit_steps": 0}),
    "LiGO, default fit": ("ligo_copy", {"fit_noise": 0.0}),
    "LiGO, literal tying (A = B), fit 0": ("ligo_copy", {"fit_steps": 0, "tying": "literal"}),
    "LiGO, official-code init, default fit": ("ligo_copy", {"tying": "literal", "width_init": "random",
                                                            "depth_init": "stackbert_noisy", "fit_noise": 0.0}),
}


def measure(task_name: str, scale: str, seed: int, device: str, train_missing: bool, log) -> dict | None:
    task = get_task(task_name, scale)
    if not (small_cache_dir(task, seed) / SUMMARY).exists() and not train_missing:
        log(f"{task_name}: no cached small model for seed {seed} (run a growth method first, or --train-missing)")
        return None
    family, data = get_family(task.family), task.pretrain_data()
    small, info = resolve_small(task, seed, None, torch.device(device), log, False, pretrain_small)
    small = small.to(device)
    eval_batches = data.eval_batches(task.recipe.batch_size, task.recipe.eval_batches)
    small_eval = evaluate(small, family, eval_batches, torch.device(device), task.recipe.bf16)
    rows = {}
    for row, (name, options) in VARIANTS.items():
        method = get_method(name, task=task, **options)
        torch.manual_seed(seed)
        fit_batches = (data.train_batch(i, task.recipe.batch_size, seed + 1_000_003) for i in range(10 ** 9))
        started = time.perf_counter()
        method.fit(small, task, fit_batches, FlopsLedger())
        torch.manual_seed(seed)
        grown = method.grow(small, task)
        rows[row] = {**evaluate(grown.to(device), family, eval_batches, torch.device(device), task.recipe.bf16),
                     "seconds": round(time.perf_counter() - started, 1),
                     "fit_steps": getattr(method.config, "fit_steps", None)}
        log(f"{task_name}: {row}: {rows[row]}")
    return {"task": task_name, "scale": scale, "seed": seed, "small": small_eval, "small_record": info["path"],
            "rows": rows}


def table(results: list[dict]) -> str:
    metric = lambda r: r.get("eval_acc", r["eval_loss"])  # noqa: E731
    heads = [f"{r['task']} ({'acc.' if 'eval_acc' in r['small'] else 'loss'})" for r in results]
    lines = ["| grown model, before training | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(results),
             "| (small model itself) | " + " | ".join(f"{metric(r['small']):.3f}" for r in results) + " |"]
    for row in VARIANTS:
        lines.append(f"| {row} | " + " | ".join(f"{metric(r['rows'][row]):.3f}" for r in results) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = OneLineArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", default=["bert_small_base", "gpt2_base_medium", "deit_s_b", "cait_xs_s"])
    ap.add_argument("--scale", default="mini")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--train-missing", action="store_true", help="pretrain a small model that is not cached yet")
    ap.add_argument("--out", default=str(RESULTS / "ligo_init_quality.json"))
    args = ap.parse_args(argv)
    with refused_as_one_line():          # an unknown task or scale: before any model is pretrained or grown
        from runs.preflight import check_seed
        check_seed(args.seed)
        args.device = checked_device(args.device)
        check_result_file(args.out)
        for name in args.tasks:
            get_task(name, args.scale)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    results = [r for t in args.tasks if (r := measure(t, args.scale, args.seed, args.device, args.train_missing, log))]
    if not results:
        return 1
    print(table(results))
    write_result(args.out, {"results": results, "table": table(results)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
