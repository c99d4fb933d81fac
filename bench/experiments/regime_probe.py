"""Is a pair, at a budget, in the regime where growth is needed? Trains what the answer needs (the small model, the
small model trained on with nothing grown, scratch) and tabulates the regime checks, one row per seed.

    python -m bench.experiments.regime_probe bert_small_base --scale mini --set steps=3200 --set small_recipe.steps=3200 \\
        --seeds 0 1 --out probes/b128-3200                 # trains what is missing (resumable), then the table
    python -m bench.experiments.regime_probe --table probes/* [--json bench/results/regime_probe.json]   # the table only
    python -m bench.experiments.regime_probe --adopt records/probes/gpt2-4x --runs records/regime \\
        --controls records/regime-control      # a probe of the regime scale's own task: its runs join the comparison

A probe is `--set` settings on a task (a budget, a custom pair: small.hidden=64 ...), trained into its own `--out`:
the control by bench/experiments/small_continued.py (which pretrains the small model, cached as every run's is), scratch by
bench.sweeps. A growth method's saving measures growth only where, at every seed, the small model learned (its final
eval loss at least UNIGRAM_MARGIN below the unigram cross-entropy), scratch ends below it, the small model was
pretrained on at least SMALL_TOKEN_SHARE of the large model's tokens, and the small model trained on under the large
recipe never reaches scratch's final value (analysis/regime.py: the same checks, the same thresholds). The table gives
each pair's shapes, parameters, tokens, tokens per parameter, the three finals, each check and the training minutes
the three runs took (evaluation excluded), with the machines (device, threads) they ran on.
"""
from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from analysis.regime import SMALL_TOKEN_SHARE, UNIGRAM_MARGIN
from bench.cli import refused_as_one_line
from bench.result_file import REPO
from runs.atomic import read_json
from runs.record import SUMMARY, load_run, run_machine

CONTROLS, RUNS, SMALL = "controls", "runs", "small"     # a probe folder's parts: self-contained once trained
CHILD_STOP_WAIT_S = 60      # a stopped tool's last checkpoint write and lock release; then it is killed


def train(task: str, scale: str, settings: list[str], seeds: list[int], out: Path) -> None:
    """The control (and with it the small model) and scratch of every seed, each a process of its own tool; each
    seed's small-model record kept in the folder as soon as the seed is done, so a probe stopped later keeps it."""
    sets = [a for kv in settings for a in ("--set", kv)]
    for seed in seeds:
        for cmd in ([sys.executable, "bench/experiments/small_continued.py", "--tasks", f"{task}:{seed}", "--scale", scale,
                     "--train-only", "--runs", str(out / CONTROLS), *sets],
                    [sys.executable, "-m", "bench.sweeps", task_sweep(task), "--runs", "scratch", "--tasks", task,
                     "--seeds", str(seed), "--scale", scale, "--out", str(out / RUNS), *sets]):
            run_tool(cmd)
        keep_small_records(out)


def run_tool(cmd: list[str]) -> None:
    """One training tool, stopped with the probe. A SIGTERM to the probe alone (`kill`, a scheduler) reached only the
    probe, and the tool trained on without it (2026-11-29: a killed CaiT probe's control ran to its end); now the
    tool gets SIGTERM too, which it takes as Ctrl-C (its last checkpoint kept: the probe's re-run resumes it), and
    is killed if it has not stopped CHILD_STOP_WAIT_S later."""
    tool = subprocess.Popen(cmd, cwd=REPO)
    try:
        status = tool.wait()
    except KeyboardInterrupt:
        tool.send_signal(signal.SIGTERM)     # after a terminal's Ctrl-C, which reached it too, a repeat it ignores
        try:
            tool.wait(timeout=CHILD_STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            tool.kill()
            tool.wait()
        raise
    if status != 0:
        raise subprocess.CalledProcessError(status, cmd)


def small_record(config: dict) -> Path:
    """The small model's pretraining record a run grew from: its cache entry (`small.path`), or the folder above an
    exported model given with --small; the path as recorded where neither holds a record (the cache of another
    checkout: its name is what a probe folder keeps the copy under)."""
    path = Path(config["small"]["path"])
    return path.parent if not (path / SUMMARY).exists() and (path.parent / SUMMARY).exists() else path


def keep_small_records(out: Path) -> None:
    """Copy each control's small-model record (config, metrics, summary; no weights) from the cache into
    `out/small/<cache entry>/`, so that the probe folder holds all three records its table reads."""
    from runs.record import CONFIG, copy_record
    for control_dir in sorted((out / CONTROLS).glob("*/direct_copy-s*")):
        cached = small_record(read_json(control_dir / CONFIG))
        if (cached / SUMMARY).exists() and not (out / SMALL / cached.name / SUMMARY).exists():
            copy_record(cached, out / SMALL / cached.name, read_json(cached / CONFIG))


def adopt(probe: Path, runs: Path, controls: Path, scale: str = "regime",
          settings: tuple = ()) -> list[tuple[Path, Path]]:
    """Copy a probe's scratch runs and controls into a comparison's roots (`runs`, `controls`), where the probe trained
    exactly `scale`'s task with `settings` ((KEY, VALUE) pairs, as the comparison's sweep is given them with --set:
    a budget point of the regime's pair): the comparison then takes them as its own (a sweep says "complete,
    skipped"), with config.json `copied_from` naming the source. Each seed's small-model record comes too, as the
    `small-s<seed>` a sweep keeps beside its runs, filed under the comparison's task, where it is bit for bit the
    pretraining the sweep's runs grow from (runs.computation.computed_elsewhere; the probe's control pretrained it
    under its own task's name), so the comparison's regime checks read the small model before any growth run
    exists; one already there (the sweep's own copy) is kept. Everything is checked before anything is copied: a
    probe of other settings (a budget or a pair `--set` differently) is refused, naming what differs, and so is a
    destination that holds another record; one that holds this very copy is left as it is. Returns the (source,
    destination) pairs copied."""
    from bench.experiments.small_continued import METHOD, check_settings, continued_task
    from bench.experiments.small_continued import run_dir as control_dir
    from bench.sweeps.records import stale_reason
    from bench.sweeps.registry import SMALL_LABEL
    from methods import METHODS, get_method
    from runs.computation import computed_elsewhere
    from runs.record import CONFIG, copy_record, jsonable
    from runs.settings import route
    from tasks import get_task
    plan, complete = [], 0
    for control in sorted((probe / CONTROLS).glob(f"*-{scale}/{METHOD}-s*")):
        seed = int(control.name.rsplit("-s", 1)[1])
        name = control.parent.name.removesuffix(f"-{scale}").removesuffix("_smallcont")
        scratch = probe / RUNS / f"{name}-{scale}" / f"scratch-s{seed}"
        if not (control / SUMMARY).exists() or not (scratch / SUMMARY).exists():
            continue                                  # a seed the probe has not finished: nothing of it moves
        complete += 1
        base = get_task(name, scale)
        check_settings(base, tuple(settings))            # what a control takes: no method options
        task = route(base, METHODS["scratch"], tuple(settings))[0]       # as the sweep's --set builds its runs
        for src, dst, why in (
                (scratch, runs / scratch.parent.name / scratch.name,
                 stale_reason(scratch, task, get_method("scratch", task=task).for_run(seed), None)),
                (control, control_dir(controls, base, seed),         # where the control's own tool writes it
                 stale_reason(control, continued_task(base, settings), get_method(METHOD), None))):
            if why:
                given = f" with {' '.join(f'--set {k}={v}' for k, v in settings)}" if settings else ""
                raise ValueError(f"{src} is not {name}'s run at the {scale} scale{given}: {why}")
            if dst.exists():
                if read_json(dst / CONFIG).get("copied_from") == str(src) and (dst / SUMMARY).exists():
                    continue                          # adopted before
                raise ValueError(f"{dst} exists and is not a copy of {src}; move it away to adopt the probe's run")
            plan.append((src, dst, {}))
        small = probe / SMALL / small_record(read_json(control / CONFIG)).name
        small_dst = runs / scratch.parent.name / f"{SMALL_LABEL}-s{seed}"
        if (small / SUMMARY).exists() and not (small_dst / SUMMARY).exists():
            if computed_elsewhere(task.small_task(), get_method("scratch"), None, seed, [small]) is None:
                raise ValueError(f"{small} is not the pretraining {task.name}'s runs grow from at seed {seed}")
            plan.append((small, small_dst, {"task": jsonable(task.small_task().to_dict())}))
    if not complete:
        raise ValueError(f"{probe}: no seed with its control and scratch complete at the {scale} scale "
                         f"(a probe of another scale is not that scale's runs)")
    for src, dst, changed in plan:
        copy_record(src, dst, {**read_json(src / CONFIG), **changed, "copied_from": str(src)})
    return [(src, dst) for src, dst, _ in plan]


def task_sweep(task: str) -> str:
    """A sweep whose plan holds `task`'s scratch run (the main comparison of its family)."""
    from bench.sweeps.registry import SWEEPS
    for name in ("bert", "roberta", "gpt2", "deit", "cait", "llama", "depth_only", "width_only", "bert_large",
                 "gpt2_xl"):
        if any(e.task == task and e.method == "scratch" for e in SWEEPS[name].entries("mini")):
            return name
    raise ValueError(f"no sweep trains {task}'s scratch run")


def final(run) -> tuple[float, str]:
    """(final eval metric, its name): loss for text, accuracy for images."""
    rows = [r for r in run.metrics if r.get("eval_acc") is not None or r.get("eval_loss") is not None]
    last = rows[-1]
    return (last["eval_acc"], "acc") if last.get("eval_acc") is not None else (last["eval_loss"], "loss")


def best(run, metric: str) -> float:
    vals = [r[f"eval_{metric}"] for r in run.metrics if r.get(f"eval_{metric}") is not None]
    return max(vals) if metric == "acc" else min(vals)


def params(spec: dict) -> int:
    """Parameters of a model of this recorded spec (built, not estimated: the embeddings and heads count)."""
    from models import ModelSpec, build_model
    return sum(p.numel() for p in build_model(ModelSpec(**spec)).parameters())


def minutes(*runs) -> float:
    return sum(float(read_json(r.dir / SUMMARY).get("wall") or 0) for r in runs) / 60


def probe_rows(root: Path) -> list[dict]:
    """One row per seed of a probe folder: what the module docstring says the table holds."""
    rows = []
    for control_dir in sorted((root / CONTROLS).glob("*/direct_copy-s*")):
        if not (control_dir / SUMMARY).exists():
            continue
        control = load_run(control_dir)
        seed = int(control_dir.name.rsplit("-s", 1)[1])
        task = control.config["task"]
        name = task["name"].removesuffix("_smallcont")
        scratch_dir = next(iter(sorted((root / RUNS).glob(f"{name}-*/scratch-s{seed}"))), None)
        small_dir = small_record(control.config)
        if (root / SMALL / small_dir.name / SUMMARY).exists():      # the probe's own copy first: the cache may be gone
            small_dir = root / SMALL / small_dir.name               # (a fresh clone) or hold a later pretraining
        if scratch_dir is None or not (scratch_dir / SUMMARY).exists() or not (small_dir / SUMMARY).exists():
            continue
        scratch, small = load_run(scratch_dir), load_run(small_dir)
        s_task = scratch.config["task"]
        metric = final(scratch)[1]
        small_final, scratch_final = final(small)[0], final(scratch)[0]
        control_best = best(control, metric)
        large_tokens = float(read_json(scratch_dir / SUMMARY)["units"])
        small_tokens = float(read_json(small_dir / SUMMARY)["units"])
        large_params = params(s_task["large"])
        higher = metric == "acc"
        row = {"probe": root.name, "task": name, "scale": s_task["scale"], "seed": seed,
               "small": f"{s_task['small']['layers']}L/{s_task['small']['hidden']}",
               "large": f"{s_task['large']['layers']}L/{s_task['large']['hidden']}",
               "small_params": params(s_task["small"]), "large_params": large_params,
               "steps": s_task["recipe"]["steps"], "small_steps": s_task["small_recipe"]["steps"],
               "large_tokens": large_tokens, "tokens_per_param": large_tokens / large_params,
               "metric": metric, "small_final": small_final, "control_final": final(control)[0],
               "control_best": control_best, "scratch_final": scratch_final,
               "minutes": minutes(small, control, scratch),
               # each run's starts' machines, once each: a minute is comparable only where all ran on one
               "machine": " / ".join(dict.fromkeys(run_machine(r.config) for r in (small, control, scratch)))}
        checks = {"tokens": small_tokens >= SMALL_TOKEN_SHARE * large_tokens,
                  "control": (control_best < scratch_final) if higher else (control_best > scratch_final)}
        if higher:
            checks["scratch_vs_small"] = scratch_final >= small_final + 0.01
        else:
            unigram = (small.config.get("reference") or {}).get("unigram_ce")
            checks["unigram"] = None if unigram is None else small_final <= unigram - UNIGRAM_MARGIN
            checks["scratch_vs_small"] = scratch_final < small_final
        row.update({f"check_{k}": v for k, v in checks.items()})
        row["passes"] = all(v is True for v in checks.values())
        rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    ok = {True: "PASS", False: "FAIL", None: "n/a"}
    # a vision run's units are images, a text run's tokens: the row names its own (the check column is the share)
    lines = ["| probe | pair | steps (small) | params (small / large) | large trained on | per param | small | control "
             "(best) | scratch | unigram | scratch < small | small's share | control short | regime | minutes |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---|---|---|---|---|---:|"]
    for r in rows:
        fmt = (lambda v: f"{100 * v:.2f}%") if r["metric"] == "acc" else (lambda v: f"{v:.3f}")
        lines.append(
            f"| {r['probe']} s{r['seed']} | {r['task']} {r['small']} → {r['large']} | {r['steps']:,} "
            f"({r['small_steps']:,}) | {r['small_params'] / 1e6:.2f}M / {r['large_params'] / 1e6:.2f}M | "
            f"{r['large_tokens'] / 1e6:.1f}M {'images' if r['metric'] == 'acc' else 'tokens'} | "
            f"{r['tokens_per_param']:.1f} | {fmt(r['small_final'])} | "
            f"{fmt(r['control_final'])} ({fmt(r['control_best'])}) | {fmt(r['scratch_final'])} | "
            f"{ok[r.get('check_unigram')]} | {ok[r['check_scratch_vs_small']]} | {ok[r['check_tokens']]} | "
            f"{ok[r['check_control']]} | {'PASS' if r['passes'] else 'FAIL'} | {r['minutes']:.0f} "
            f"({r['machine']}) |")
    return "\n".join(lines)


def parser():
    """The command line; the documents' commands are parsed with it too (tests/test_doc_commands.py)."""
    from runs.cli import OneLineArgumentParser
    ap = OneLineArgumentParser(prog="python -m bench.experiments.regime_probe", description=__doc__.splitlines()[0])
    ap.add_argument("task", nargs="?", help="the pair to probe (bert_small_base); omit with --table")
    ap.add_argument("--scale", default="mini", help="the scale whose pair and recipe --set changes (default: mini)")
    ap.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                    help="the probe: recipe, small_recipe.* and small.* / large.* fields (steps=3200)")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    ap.add_argument("--out", type=Path, help="the probe's folder (its runs, then its table)")
    ap.add_argument("--table", nargs="+", type=Path, metavar="PROBE", help="tabulate these probe folders only")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here, and the table beside it (.md)")
    ap.add_argument("--adopt", type=Path, metavar="PROBE", help="copy this probe's scratch runs and controls into "
                    "--runs and --controls (the regime scale's roots), where it trained the regime scale's task "
                    "(with --set: that task so changed, as the comparison's sweep is given it)")
    ap.add_argument("--runs", type=Path, help="with --adopt: the comparison's root (records/regime)")
    ap.add_argument("--controls", type=Path, help="with --adopt: its controls' root (records/regime-control)")
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.adopt is not None:
        with refused_as_one_line():
            if args.runs is None or args.controls is None or args.task or args.table:
                raise ValueError("--adopt PROBE takes --runs and --controls (and no task or --table)")
            if not (args.adopt / CONTROLS).is_dir():
                raise ValueError(f"--adopt {args.adopt}: not a probe folder (no {CONTROLS}/ in it)")
            from runs.settings import check_repeated, split_item
            settings = tuple(split_item(kv) for kv in args.settings)
            check_repeated(settings)
            copied = adopt(args.adopt, args.runs, args.controls, settings=settings)
        for src, dst in copied:
            print(f"{dst}: copied from {src}")
        print(f"adopted {len(copied)} record(s) from {args.adopt}" + ("" if copied else " (all there already)"))
        return 0
    with refused_as_one_line():
        if args.table is None and (args.task is None or args.out is None):
            raise ValueError("give a task and --out to probe one, or --table PROBE... to tabulate probes")
        for folder in args.table or []:
            if not (folder / CONTROLS).is_dir():
                raise ValueError(f"--table {folder}: not a probe folder (no {CONTROLS}/ in it)")
        if args.task is not None:
            from bench.experiments.small_continued import check_settings
            from runs.settings import split_item
            from tasks import get_task
            check_settings(get_task(args.task, args.scale), tuple(split_item(kv) for kv in args.settings))
            task_sweep(args.task)
    if args.table is None:
        from runs.signals import stop_signals_as_interrupt, stop_status, stopped_by
        try:
            with stop_signals_as_interrupt():
                train(args.task, args.scale, args.settings, args.seeds, args.out)
        except KeyboardInterrupt:
            print(f"regime_probe: stopped{stopped_by()}; the same command goes on from the runs' checkpoints",
                  file=sys.stderr)
            return stop_status()
    rows = [r for folder in (args.table or [args.out]) for r in probe_rows(folder)]
    text = table(rows)
    print(text)
    if args.json is not None:        # and the table beside it as Markdown (REPRODUCE.md links that)
        from bench.result_file import write_result
        write_result(str(args.json), {"rows": rows, "table": text})
        args.json.with_suffix(".md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
