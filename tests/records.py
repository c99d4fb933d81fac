"""Synthetic run records in the real format (written by runs.record.RunWriter), for the tests of analysis and of
the sweep runner. Scratch reaches loss 4.0 at 400 FLOPs; a method that reaches it at 200 saves exactly 0.5."""
from pathlib import Path

from runs.record import RunWriter

SCRATCH = [(0, 0, 10.0), (1, 100, 8.0), (2, 200, 6.0), (3, 300, 5.0), (4, 400, 4.0)]   # (step, flops, loss)


def write_run(root: Path, method: str, points, seed=0, label=None, task="bert_small_base", scale="mini",
              small=None, complete=True, acc=False, method_config=None, wall_per_flop=0.01, steps=4, recipe=None,
              grown_recipe=None, environment=None, small_recipe=None):
    """A run directory in the real format; points are (step, cumulative flops, eval metric). `recipe`: recipe fields
    beside `steps`; `grown_recipe`: the config's record of a grown-recipe preset ({"name", "changes"});
    `small_recipe`: the small model's recipe a growth run records; `environment`: config.json's (device, threads:
    the machine wall times compare on)."""
    d = root / f"{task}-{scale}" / f"{label or method}-s{seed}"
    config = {"task": {"name": task, "scale": scale, "recipe": {"steps": steps, **(recipe or {})}}, "seed": seed,
              "small": small, "method": {"name": method, "config": method_config or {}},
              "environment": environment or {}}
    if grown_recipe is not None:
        config["grown_recipe"] = grown_recipe
    if small_recipe is not None:
        config["task"]["small_recipe"] = small_recipe
    w = RunWriter(d, config)
    for step, flops, value in points:
        row = {"step": step, "units": step * 10, "wall": flops * wall_per_flop, "flops": float(flops),
               "flops_fit": float(points[0][1]), "stage": "init" if step == 0 else "train"}
        row.update({"eval_loss": 1.0 - value, "eval_acc": value} if acc else {"eval_loss": value})
        w.log(row)
    if complete:
        last = points[-1]
        w.finish({"step": last[0], "flops": float(last[1]), "wall": last[1] * wall_per_flop,
                  "eval_loss": 1.0 - last[2] if acc else last[2], "eval_acc": last[2] if acc else None})
    else:
        w.close()
    return d
