"""Issue 13's time budgets, measured on this machine: the README main command and one seed of the whole BERT
comparison, each timed as a whole process started cold, against its target.

- `readme`: `python run.py --method ligo --task bert_small_base` exactly as README.md gives it, in a fresh
  GROWBENCH_OUT, so the small model comes as on a fresh clone: the repository's shipped one (pretrained/) where
  it ships it, pretrained first otherwise. Target: <= 30 min on the 2-core CPU, <= 2 min on one GPU.
- `comparison`: `python -m bench.sweeps bert --seeds <seed>` (the small model, then scratch, StackBERT,
  interpolation, MSLT, Net2Net (StackBERT's twin: recorded, not computed), bert2BERT, KI and LiGO) in another
  fresh GROWBENCH_OUT. Target: <= 10 min on one GPU.

    HF_HUB_OFFLINE=1 python bench/perf/budgets.py [--only readme comparison] [--device auto] [--scale regime]
        [--seed 0] [--work DIR] [--out bench/results/budgets-<cpu|cuda>.json]

--work keeps the runs (default: a temporary directory, removed afterwards); on a lent GPU give it a folder under
$OUT and tar the records back. The targets are for the default scale; at other scales the times are reported
without one. Each measurement also gives the command's peak resident memory (the largest of the process and its
children, getrusage's ru_maxrss). A measurement whose command fails is an error (its log's tail is printed), never a
time.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.cli import check_result_file, refused_as_one_line  # noqa: E402
from bench.result_file import REPO, write_result  # noqa: E402
from runs.cli import OneLineArgumentParser  # noqa: E402
from tasks.scales import DEFAULT_SCALE  # noqa: E402

README_COMMAND = ["run.py", "--method", "ligo", "--task", "bert_small_base"]
TARGETS_S = {("readme", "cpu"): 30 * 60, ("readme", "cuda"): 2 * 60, ("comparison", "cuda"): 10 * 60}
MEASURES = ("readme", "comparison")


def command(measure: str, scale: str, seed: int, device: str, work: Path) -> list[str]:
    """The measured command line (arguments after the interpreter). The README command keeps README's defaults
    (the default scale, seed 0, device auto) unless asked otherwise, so that at defaults it is the command users run."""
    if measure == "readme":
        args = list(README_COMMAND)
        args += [] if scale == DEFAULT_SCALE else ["--scale", scale]
        args += [] if seed == 0 else ["--seed", str(seed)]
    else:
        args = ["-m", "bench.sweeps", "bert", "--scale", scale, "--seeds", str(seed), "--out", str(work / "runs")]
    return args + ([] if device == "auto" else ["--device", device])


def resolved_device(device: str) -> tuple[str, str]:
    """("cpu" | "cuda", the device's name) for the device the commands will train on: run.py's --device rule, and
    the device a run's record names (runs.record.device_named: a CPU by its model where Linux reports one)."""
    import torch
    from runs.cli import resolve_device
    from runs.experiment import environment
    from runs.record import device_named
    resolved = torch.device(resolve_device(device))
    return resolved.type, device_named(environment(resolved))


def measure(name: str, args: list[str], work: Path, log) -> tuple[float, float]:
    """(wall seconds, peak resident MB) of `python <args>` run from the repository root with GROWBENCH_OUT=work (a
    fresh folder). The peak is the command's own: measured in a child process of its own (`peak_rss_child`), so
    that an earlier measurement's peak is not this one's."""
    work.mkdir(parents=True, exist_ok=False)         # fresh: a cached small model would not be a cold start
    env = {**os.environ, "GROWBENCH_OUT": str(work), "HF_HUB_OFFLINE": "1"}
    log_path = work / f"{name}.log"
    log(f"{name}: python {' '.join(args)}  (GROWBENCH_OUT={work}; log {log_path})")
    started = time.perf_counter()
    peak_file = work / "peak_rss_mb"
    with open(log_path, "w") as out:
        rc = subprocess.run([sys.executable, "-c", PEAK_RSS_CHILD, str(peak_file), sys.executable, *args], cwd=REPO,
                            env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - started
    if rc != 0:
        tail = "".join(log_path.read_text(errors="replace").splitlines(keepends=True)[-15:])
        raise RuntimeError(f"{name}: the command exited {rc} after {seconds:.0f} s; its log ends:\n{tail}")
    peak = float(peak_file.read_text())
    log(f"{name}: {seconds:.1f} s, peak resident memory {peak:.0f} MB")
    return seconds, peak


# Runs the measured command as its child and writes the child's peak resident memory (Linux: ru_maxrss in KiB) to
# the file named first: the peak of that command alone, whatever this process measured before.
PEAK_RSS_CHILD = """import resource, subprocess, sys
rc = subprocess.run(sys.argv[2:]).returncode
open(sys.argv[1], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024))
sys.exit(rc)"""


def row(name: str, args: list[str], seconds: float, kind: str, scale: str, runs: list[dict] | None = None,
        peak_mb: float | None = None) -> dict:
    target = TARGETS_S.get((name, kind)) if scale == DEFAULT_SCALE else None
    return {"measure": name, "command": "python " + " ".join(args), "seconds": round(seconds, 1),
            "peak_rss_mb": None if peak_mb is None else round(peak_mb),
            "target_s": target, "within": None if target is None else seconds <= target, "runs": runs or []}


def runs_in(work: Path) -> list[dict]:
    """Where a measurement's time went, from the records its command wrote under `work` (the small model's
    pretraining in cache/small, each large run): the record's training wall time (evaluations excluded),
    steps, seconds a step and final eval loss. The rest of the process's time is start-up, evaluation, export.
    A small model the repository shipped (its config.json's `shipped_as`) was not trained in this measurement: its
    row says `shipped` and gives no wall time."""
    from runs.atomic import read_json
    from runs.record import CONFIG, SUMMARY
    rows = []
    for summary in sorted(work.rglob(SUMMARY)):
        record = read_json(summary)
        shipped = "shipped_as" in read_json(summary.parent / CONFIG)
        wall, steps = (None if shipped else record.get("wall")), record.get("step")
        rows.append({"run": str(summary.parent.relative_to(work)), "wall_s": None if wall is None else round(wall, 2),
                     "steps": steps, "s_per_step": round(wall / steps, 4) if wall is not None and steps else None,
                     "eval_loss": record.get("eval_loss"), "shipped": shipped})
    return rows


def table(rows: list[dict], device_name: str) -> str:
    lines = [f"budgets on {device_name}", "| measure | command | wall | peak memory | target | within |",
             "|---|---|---:|---:|---:|---|"]
    for r in rows:
        target = "--" if r["target_s"] is None else f"{r['target_s'] / 60:.0f} min"
        within = "--" if r["within"] is None else ("yes" if r["within"] else "**no**")
        lines.append(f"| {r['measure']} | `{r['command']}` | {r['seconds']:.0f} s ({r['seconds'] / 60:.1f} min) | "
                     f"{_num(r.get('peak_rss_mb'), '.0f', ' MB')} | {target} | {within} |")
    runs = [(r["measure"], run) for r in rows for run in r.get("runs", [])]
    if runs:
        lines += ["", "| measure | run record | training wall | steps | s / step | final eval loss |",
                  "|---|---|---:|---:|---:|---:|"]
        lines += [f"| {m} | {run['run']} | {'shipped' if run.get('shipped') else _num(run['wall_s'], '.0f', ' s')} | "
                  f"{run['steps']} | "
                  f"{_num(run['s_per_step'], '.3f')} | {_num(run['eval_loss'], '.4f')} |" for m, run in runs]
    return "\n".join(lines)


def _num(value, spec: str, unit: str = "") -> str:
    return "--" if value is None else f"{value:{spec}}{unit}"


def main(argv=None) -> int:
    ap = OneLineArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=MEASURES, default=list(MEASURES))
    ap.add_argument("--device", default="auto", help="auto (cuda when available) | cpu | cuda")
    ap.add_argument("--scale", default=DEFAULT_SCALE)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, help="keep the runs here (must not exist yet); default: a temporary folder")
    ap.add_argument("--out", help="result file (default: bench/results/budgets-<cpu|cuda>.json)")
    args = ap.parse_args(argv)
    with refused_as_one_line():      # before anything runs: a bad scale or device, a --work that exists
        from tasks import get_task
        get_task("bert_small_base", args.scale)
        kind, device_name = resolved_device(args.device)
        if args.work is not None and args.work.exists():
            raise ValueError(f"--work {args.work} exists; give a new folder (the measurements must start cold)")
        from runs.preflight import check_seed
        check_seed(args.seed)
        out = Path(args.out or REPO / "bench" / "results" / f"budgets-{kind}.json")
        check_result_file(out)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    work = args.work or Path(tempfile.mkdtemp(prefix="growbench-budgets-")) / "work"
    rows = []
    try:
        for done, name in enumerate(args.only, start=1):
            cmd = command(name, args.scale, args.seed, args.device, work / name)
            seconds, peak = measure(name, cmd, work / name, log)
            rows.append(row(name, cmd, seconds, kind, args.scale, runs_in(work / name), peak))
            # Written after each measurement, with what is still pending: on a lent GPU whose time runs out
            # mid-measurement, the measurements already made survive (the file never holds a partial one).
            write_result(out, {"device": kind, "device_name": device_name, "scale": args.scale, "seed": args.seed,
                               "rows": rows, "pending": list(args.only[done:]), "table": table(rows, device_name)})
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        if args.work is None:
            import shutil
            shutil.rmtree(work.parent, ignore_errors=True)
    print(table(rows, device_name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
