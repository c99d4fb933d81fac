"""Sweep definitions: the (method, task, scale, seeds) behind every table and figure of the paper, and a runner.

    python -m bench.sweeps --list                                    # the sweeps and what each covers
    python -m bench.sweeps mini --scale mini --seeds 0 1 --out records/mini --eval mini --prune
    python -m bench.sweeps bert --dry-run                            # the plan: done / resume / new / unavailable
    python -m bench.sweeps recipes --runs ligo-warmup0 --seeds 0     # one run of a sweep, by its label
    python -m analysis --runs records/mini --out results/mini           # then the tables and figures

Runs land in OUT/<task>-<scale>/<label>-s<seed>/ (the label names a variant, e.g. ligo-fit500; analysis reads
it back from the directory name). A re-run skips complete runs (summary.json present) and resumes incomplete
ones from their checkpoint, so an interrupted sweep is continued by running the same command again. Next to the
runs of each seed the runner copies the small model's pretraining record (config, metrics, summary; no
weights) as small-s<seed>/, so the figures' dotted line and Table 5's first row travel with committed records.
An entry whose method or option does not exist yet is reported as unavailable and the rest still run.

A run that would be the same computation as one already complete beside it (runs/computation.py: StackBERT is
Net2Net on a pair that grows in width and depth; stacking, interpolation and MSLT are their width operator on a
width-only pair) is not computed again: its directory gets the twin's record, with its own method in config.json
and `same_computation_as` naming the twin, and analysis prints the two as one row. A scratch run is looked for in
the other task directories too: bert_small_large and bert_base_large share theirs, and at paper and tiny scale the
depth-only pair trains bert_small_base's large model (at mini it has its own warm-up: tasks/registry.py).
"""
from __future__ import annotations

import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.sweep_records import (copy_small_record, evaluate, find_twin, prune, record_as_twin, small_record_source,
                                 stale_reason, status, suites_not_evaluated, twin_name)
from run import OneLineArgumentParser

ALL_METHODS = ("scratch", "stackbert", "interpolation", "mslt", "net2net", "bert2bert", "ki", "ligo", "ligo_official")


@dataclass(frozen=True)
class Entry:
    task: str
    method: str
    label: str = ""                     # run directory name before -s<seed>; default: the method's name
    settings: tuple = ()                # ((key, value), ...): method options or recipe fields, as run.py --set
    small_steps_frac: float | None = None   # pretrain the small model for this fraction of its steps (Figure 7)

    @property
    def name(self) -> str:
        return self.label or self.method

    @property
    def small_label(self) -> str:
        """The directory label of the small model's record beside the run (a variant's own when it shortens it)."""
        return "small" if self.small_steps_frac is None else f"small-{self.name}"


@dataclass(frozen=True)
class Sweep:
    name: str
    covers: str                         # the paper's tables and figures it feeds
    entries: Callable[[str], list[Entry]]   # scale -> entries (some sweeps differ by scale, e.g. fit steps)


def methods(task: str, names=ALL_METHODS) -> list[Entry]:
    return [Entry(task, m) for m in names]


def fit_steps_entries(scale: str) -> list[Entry]:
    # paper Table 3: 100 (the default), 500, 1000, 10000 fit steps against 400K training steps, i.e. 1x, 5x, 10x
    # and 100x the default. At mini scale the default is 20 steps of a 1,600-step run (about 1.5% of its FLOPs,
    # where the paper's 100 are 0.03%): 10 (half), 100 (5x) and 200 (10x); 100x would
    # cost more than the whole run. The default run is the plain `ligo` label shared with the main comparison.
    steps = (500, 1000, 10000) if scale == "paper" else (10, 100, 200)
    return [Entry("bert_small_base", "scratch"), Entry("bert_small_base", "ligo")] + [
        Entry("bert_small_base", "ligo", f"ligo-fit{n}", (("fit_steps", n),)) for n in steps]


# Orthogonal strategies (DESIGN.md §4, paper App. B.3; runs/strategies.py): `True` is the paper's setting
# (layer dropping capped at 0.1, 15% of tokens set aside, the sub-network trained for 50K of 400K steps).
# bert2BERT's own two-stage pretraining keeps its grown upper blocks (staged_grow=keep).
ORTHOGONAL = [Entry("bert_small_base", "scratch"), Entry("bert_small_base", "ligo"),
              Entry("bert_small_base", "ligo", "ligo-layerdrop", (("layer_drop", True),)),
              Entry("bert_small_base", "ligo", "ligo-tokendrop", (("token_drop", True),)),
              Entry("bert_small_base", "bert2bert"),
              Entry("bert_small_base", "bert2bert", "bert2bert-staged", (("staged", True), ("staged_grow", "keep"))),
              Entry("bert_small_base", "ligo", "ligo-staged", (("staged", True),))]

# LEMON's own recipe for the grown model (Wang et al. 2024, "optimized learning rate scheduler"): the maximum lr
# kept, a faster decay, i.e. a shorter schedule, and the saving it reports is the training it cut (56.7% on ViT).
# lemon-decay trains the large model for the remaining 43.3% of the task's steps, its lr decay ending there; the
# savings table then says whether that still reaches scratch's final accuracy on this pair.
LEMON_VIT_SAVING = 0.567


def lemon_entries(scale: str) -> list[Entry]:
    from tasks.registry import get_task     # (imports torch: only when this sweep is planned)
    steps = max(1, round(get_task("deit_s_b", scale).recipe.steps * (1 - LEMON_VIT_SAVING)))
    return methods("deit_s_b", ("scratch", "lemon")) + [
        Entry("deit_s_b", "lemon", "lemon-decay", (("steps", steps),))]


# The runs that tell apart the candidate causes of LiGO not leading at mini scale (REPRODUCE.md, the verdict table):
# the grown model's recipe (tasks/grown_recipes.py), LiGO as its authors started it (ligo_official), and copy
# symmetry (models/twins.py, logged at every evaluation). Evaluated every 50 steps so that the first 200, where the
# weight-copying starts meet, are visible; eval_every only says when to log (runs/record.py LOGGING_FIELDS), so these
# records stand beside the 200-step ones of the same labels as the same computation.
DENSE_EVAL = (("eval_every", 50),)
SYMMETRY_BREAK = 0.1          # LiGO's fit_noise for "LiGO with symmetry broken": copies start ~10% apart


def recipe_entries(task: str, methods_: tuple[str, ...], presets: tuple[str, ...]) -> list[Entry]:
    """scratch (the task's recipe) and every method under every grown-recipe preset, labelled method-preset
    (`same` keeps the plain method name, the label the main comparison uses)."""
    out = [Entry(task, "scratch", settings=DENSE_EVAL)]
    for m in methods_:
        for name in presets:
            label = m if name == "same" else f"{m}-{name}"
            out.append(Entry(task, m, label, (("grown_recipe", name),) * (name != "same") + DENSE_EVAL))
    return out


def symmetry_entries(task: str) -> list[Entry]:
    """LiGO at its task default, with its copies kept (`ligo-copies`: fit_noise 0, the Net2Net start) and with them
    broken (`ligo-noise0.1`) first (LiGO's default rests on them; one of the two is the default's setting, and the
    sweep records it as that run's twin instead of training it again), then the other starts."""
    return [Entry(task, m, settings=DENSE_EVAL) for m in ("scratch", "ligo")] + [
        Entry(task, "ligo", "ligo-copies", (("fit_noise", 0.0),) + DENSE_EVAL),
        Entry(task, "ligo", f"ligo-noise{SYMMETRY_BREAK}", (("fit_noise", SYMMETRY_BREAK),) + DENSE_EVAL),
        Entry(task, "ligo_official", settings=DENSE_EVAL),
        # the official start with the consuming side divided as Net2Net's is (B's pseudo-inverse): random non-twin
        # rows, the small model's function kept; tells the official start's two differences from ligo apart
        Entry(task, "ligo_official", "ligo_official-pinv", (("tying", "pinv"),) + DENSE_EVAL)] + [
        Entry(task, m, settings=DENSE_EVAL) for m in ("net2net", "bert2bert", "direct_copy")]


SWEEPS: dict[str, Sweep] = {s.name: s for s in [
    Sweep("bert", "Table 1, Figure 2(a-b), Table 5, Table 6 savings columns",
          lambda scale: methods("bert_small_base")),
    Sweep("bert_large", "Figure 2(c)",
          lambda scale: methods("bert_small_large", ("scratch", "ligo"))
          + methods("bert_base_large", ("scratch", "ligo"))),
    Sweep("roberta", "Figure 3(a-b)", lambda scale: methods("roberta_small_base")),
    Sweep("gpt2", "Figure 3(c)", lambda scale: methods("gpt2_base_medium")),
    Sweep("deit", "Table 2, Figure 4", lambda scale: methods("deit_s_b")),
    Sweep("cait", "Figure 8 (App. C.2)", lambda scale: methods("cait_xs_s")),
    Sweep("orthogonal", "Figure 5", lambda scale: ORTHOGONAL),
    Sweep("depth_only", "Figure 6(a)",
          lambda scale: methods("bert_depth_only", ("scratch", "stackbert", "interpolation", "mslt", "ligo"))),
    # net2net-noise0.5 asks why direct copy leads at mini: FPI with its new copies perturbed (noise 0.5 of each
    # tensor's std) starts as far from the small model's function as direct copy does (eval loss 5.250 against
    # 5.223 at seed 0; FPI 5.169) but keeps FPI's structure, so it separates "the new units are twins" from
    # "the grown model starts off the small model's function"
    Sweep("width_only", "Figure 6(b): direct copy, FPI (= net2net), AKI (= bert2bert), LiGO; FPI with noise",
          lambda scale: methods("bert_width_only", ("scratch", "direct_copy", "net2net", "bert2bert", "ligo"))
          + [Entry("bert_width_only", "net2net", "net2net-noise0.5", (("noise", 0.5),))]),
    Sweep("small_briefly", "Figure 7 (App. C.1): small model pretrained 50K of 220K steps",
          lambda scale: methods("bert_small_base", ("scratch", "ligo"))
          + [Entry("bert_small_base", "ligo", "ligo-smallshort", small_steps_frac=50 / 220)]),
    Sweep("fit_steps", "Table 3", fit_steps_entries),
    # Table 5's "LiGO init" row: the grown model with no further pretraining (steps=0: fit, grow, export), so
    # that --eval fine-tunes it downstream like the other rows
    Sweep("ligo_init", "Table 5 (with --eval: every row fine-tuned downstream)",
          lambda scale: methods("bert_small_base", ("scratch", "ligo"))
          + [Entry("bert_small_base", "ligo", "ligo-init", (("steps", 0),))]),
    Sweep("gpt2_xl", "App. C.5 (GPT2-Medium -> GPT2-1.5B)",
          lambda scale: methods("gpt2_medium_xl", ("scratch", "ligo"))),
    Sweep("llama", "not in the paper: a Llama-style pair (GQA, SwiGLU, RMSNorm, rotary) with every method, "
          "HyperCloning, G_stack, LEMON and MSG included",
          lambda scale: methods("llama_small_base", ALL_METHODS + ("hypercloning", "g_stack", "lemon", "msg"))),
    Sweep("recipes", "E1 (issue 41): the grown model's recipe on BERT-Small->Base: LiGO, LiGO as its authors "
          "started it, StackBERT, bert2BERT under same / warmup0 / paper_lr / warmup0_paper_lr",
          lambda scale: recipe_entries("bert_small_base", ("ligo", "ligo_official", "stackbert", "bert2bert"),
                                       ("same", "warmup0", "paper_lr", "warmup0_paper_lr"))),
    Sweep("recipes_llama", "E2 (issue 41): the grown model's recipe on the Llama-style pair (no dropout): LEMON, "
          "LiGO, StackBERT under same / warmup0 / paper_lr",
          lambda scale: recipe_entries("llama_small_base", ("lemon", "ligo", "stackbert"),
                                       ("same", "warmup0", "paper_lr"))),
    Sweep("recipes_deit", "issue 41: the grown model's recipe on DeiT (no dropout, CPU-sized): Net2Net, bert2BERT, "
          "LEMON, LiGO under same / warmup0 / lr_tenth",
          lambda scale: recipe_entries("deit_s_b", ("net2net", "bert2bert", "lemon", "ligo"),
                                       ("same", "warmup0", "lr_tenth"))),
    Sweep("symmetry", "E3 (issue 41): copy symmetry on the width-only BERT pair and DeiT (no dropout): Net2Net, "
          "direct copy, bert2BERT, LiGO, LiGO with symmetry broken, LiGO as its authors started it",
          lambda scale: symmetry_entries("deit_s_b") + symmetry_entries("bert_width_only")),
    Sweep("lemon", "not in the paper: LEMON's ViT claim (56.7% saved with its faster-decaying schedule) on the "
          "DeiT pair, with the task's schedule and with 43.3% of its steps", lemon_entries),
]}
# the committed mini-scale comparison: BERT with every method, a GPT-2 and a vision comparison
SWEEPS["mini"] = Sweep("mini", "the three main comparisons (bert + gpt2 + deit: Tables 1-2, Figures 2(a-b), 3(c), 4)",
                       lambda scale: [e for n in ("bert", "gpt2", "deit") for e in SWEEPS[n].entries(scale)])
BEYOND_PAPER = ("llama", "lemon", "recipes_llama", "recipes_deit")     # not the paper's: `all` leaves them out
SWEEPS["all"] = Sweep("all", "every table and figure",
                      lambda scale: [e for s in list(SWEEPS.values()) if s.name not in ("mini", "all") + BEYOND_PAPER
                                     for e in s.entries(scale)])


def plan(names: list[str], scale: str, seeds: list[int], only: list[str] | None = None,
         labels: list[str] | None = None) -> list[tuple[Entry, int]]:
    """(entry, seed) pairs of the named sweeps, without repeats (sweeps share runs, e.g. scratch); `only`: these
    methods, `labels`: these runs (their directory labels, e.g. ligo-warmup0), in the sweeps' order."""
    seen, out = set(), []
    for name in names:
        if name not in SWEEPS:
            from models.family import unknown     # (imports torch: only when there is something to say)
            raise KeyError(unknown("sweep", name, SWEEPS))
    entries = [e for name in names for e in SWEEPS[name].entries(scale)]
    for what, given, used in (("method", only, {e.method for e in entries}),
                              ("run label", labels, {e.name for e in entries})):
        for item in given or []:      # a typo must not silently select nothing
            if item not in used:
                from models.family import unknown
                raise KeyError(unknown(what, item, used) + f" (in sweeps {', '.join(names)})")
    for name in names:
        for e in SWEEPS[name].entries(scale):
            for seed in seeds:
                key = (e.task, e.name, seed)
                if key not in seen and (not only or e.method in only) and (not labels or e.name in labels):
                    seen.add(key)
                    out.append((e, seed))
    return out


def run_dir(out: Path, entry: Entry, scale: str, seed: int) -> Path:
    return out / f"{entry.task}-{scale}" / f"{entry.name}-s{seed}"


def check_common_key(key: str, method: str, shared: set) -> None:
    """A --set key must mean something to every run it is given to: refused before any run, in one line (an
    entry's own unknown setting, by contrast, is a method or option not written yet: that entry is unavailable)."""
    from methods import METHODS
    from methods.base import config_fields
    from models.family import unknown
    if key in shared or key in config_fields(METHODS[method]):
        return
    owners = sorted(name for name, cls in METHODS.items() if key in config_fields(cls))
    if owners:
        raise ValueError(f"--set {key}: an option of {', '.join(owners)}, not of method '{method}'; "
                         f"select the methods that have it with --methods")
    raise ValueError(unknown("--set key", key, shared | set(config_fields(METHODS[method])))
                     + f" (recipe fields, small_recipe.<recipe field>, small.<spec field>, large.<spec field>, "
                       f"training strategies, data_path, tokenizer, and the options of '{method}')")


def build(entry: Entry, scale: str, common: tuple = ()):
    """(task, method, strategies) for an entry, or raise LookupError saying what is missing. Settings go where
    run.py --set sends them (runs/settings.py: method options, recipe and small_recipe fields, model specs,
    data, training strategies), typed as the fields they replace. `common` settings (--set, as text) apply to
    every entry, e.g. data_path=... at paper scale; they never enter the run's label."""
    from methods import METHODS, get_method
    from methods.base import config_fields
    from runs.settings import route, task_keys
    from runs.strategies import strategies_from_settings
    from tasks import get_task
    if entry.method not in METHODS:
        raise LookupError(f"method '{entry.method}' is not registered yet")
    task = get_task(entry.task, scale=scale)
    shared = task_keys(task)
    for key, _ in common:
        check_common_key(key, entry.method, shared)
    for key, _ in entry.settings:
        if key not in shared and key not in config_fields(METHODS[entry.method]):
            raise LookupError(f"neither method '{entry.method}', the recipe nor the training strategies have "
                              f"an option '{key}' yet")
    task, options, strategies = route(task, METHODS[entry.method], tuple(common) + tuple(entry.settings))
    if entry.small_steps_frac is not None:
        steps = max(1, round(task.small_recipe.steps * entry.small_steps_frac))
        task = task.with_(small_recipe=task.small_recipe.with_(steps=steps))
    chosen = strategies_from_settings(strategies) if strategies else None
    return task, get_method(entry.method, task=task, **options), chosen


def train(task, method, strategies, path: Path, seed: int, device: str, resume: bool, log) -> None:
    from runs.experiment import run_experiment
    extra = {"strategies": strategies} if strategies is not None else {}
    run_experiment(task, method, seed=seed, device=device, out=path, resume=resume, progress=False,
                   eval_lines=True, log=lambda msg: log(f"    {msg}"), **extra)


def check_plan(todo: list[tuple[Entry, int]], out: Path, scale: str, common: tuple,
               eval_suites: list[str] | None, eval_options) -> None:
    """Refuse, before any run trains, what would fail a run later: a bad value refused at the fifth entry must not
    come after four runs of an hour each. Every entry is built once (task, recipe, method options); every run
    directory must be creatable, or hold a readable run record; the run's inputs (seed, data path, the method's
    constraints on the pair) and the --eval suites must be accepted, the suites' data loadable, and a complete run
    they have not evaluated must still hold its model (not pruned). Each run then builds its own method (methods
    keep state: LiGO's operator, KI's teacher)."""
    from runs.experiment import check_inputs
    from runs.preflight import check_out, inspect_out
    from runs.record import CONFIG, SUMMARY, enclosing_record
    if (record := enclosing_record(out)) is not None:      # runs nested in it would be read as part of that run
        raise ValueError(f"--out {out}: inside the run record {record}; give a folder outside any run")
    from tasks.evals import check_data, model_kind, plan as plan_suites
    built: dict[Entry, tuple | None] = {}
    pruned: list[Path] = []                    # complete, not evaluated on eval_suites, and no model/ left
    checked: set[tuple] = set()                # the suites' data is loaded once per kind of model
    for entry, seed in todo:
        if entry not in built:
            try:
                built[entry] = build(entry, scale, common)
            except LookupError:
                built[entry] = None            # reported as unavailable when its turn comes
        if built[entry] is None:
            continue
        task, method, _ = built[entry]
        path = run_dir(out, entry, scale, seed)
        if (path / SUMMARY).exists() and not (path / CONFIG).exists():
            raise ValueError(f"{path} holds {SUMMARY} but no {CONFIG}: a damaged record, neither skipped nor "
                             "resumed; move it away to run it again")
        check_out(path)
        inspect_out(path, resume=True, overwrite=False)    # a directory that is not a run's record is refused
        check_inputs(task, method, seed, None)
        kind = (model_kind(task.family), task.scale, tuple(task.evals))
        if eval_suites and kind not in checked:
            checked.add(kind)
            check_data(plan_suites(kind[0], eval_suites, None, task.scale, task.evals), eval_options)
        if (eval_suites and (path / SUMMARY).exists() and not (path / "model").is_dir()
                and suites_not_evaluated(path, eval_suites)):
            pruned.append(path)
    if pruned:
        raise ValueError(f"--eval {' '.join(eval_suites)}: {len(pruned)} complete run(s) were pruned before this "
                         f"evaluation and hold no model/ to evaluate (first: {pruned[0]}); leave out --eval, or "
                         "give another --out to train them again")


def run_sweep(names: list[str], scale: str = "mini", seeds: list[int] | None = None, out: Path | None = None,
              only: list[str] | None = None, dry_run: bool = False, prune_done: bool = False,
              device: str = "cpu", common: tuple = (), eval_suites: list[str] | None = None,
              eval_settings: tuple[str, ...] = (), log=print, labels: list[str] | None = None
              ) -> dict[str, list[str]]:
    """Run (or with dry_run, list) every (entry, seed) of the named sweeps, evaluate them downstream on
    `eval_suites` (and the small models they grew from) with `eval_settings` ("KEY=VALUE" of
    tasks.evals.EvalOptions, run.py's --set eval.KEY=VALUE), prune; returns runs by outcome."""
    seeds = seeds if seeds is not None else ([0] if scale == "paper" else [0, 1])
    from runs.experiment import OUT_ROOT, SEED_LIMIT
    if isinstance(out, str) and not out.strip():      # Path("") is ".": the runs would land in the current directory
        raise ValueError("--out is empty; give the root folder of the run directories")
    out = OUT_ROOT if out is None else out
    if any(not 0 <= seed < SEED_LIMIT for seed in seeds):
        raise ValueError(f"--seeds must be integers in [0, 2**63), got {' '.join(map(str, seeds))}")
    if eval_settings and not eval_suites:
        raise ValueError("--set eval.* settings need --eval SUITE (they set the downstream evaluation)")
    eval_options = None
    if eval_suites:
        from tasks.evals import EvalOptions
        eval_options = EvalOptions.parse(list(eval_settings), device=device)
    todo = plan(names, scale, seeds, only, labels)
    check_plan(todo, Path(out), scale, common, eval_suites, eval_options)
    at: list = []
    if dry_run:
        return run_plan(todo, out, scale, common, dry_run, prune_done, device, eval_suites, eval_options, log, at)
    # two sweeps into one --out: the second waits for the first (each run's own lock would refuse it, run by run,
    # although the first was making those very runs), then skips what the first completed
    from runs.lock import SWEEP_LOCK, RunLock
    lock = RunLock(Path(out), wait=True, name=SWEEP_LOCK, what="sweep output",
                   on_wait=lambda who: log(f"waiting for {who}: it runs a sweep into {out}; complete runs are then "
                                           "skipped"))
    lock.acquire()
    try:
        return run_plan(todo, out, scale, common, dry_run, prune_done, device, eval_suites, eval_options, log, at)
    except KeyboardInterrupt as e:     # Ctrl-C, or SIGTERM/SIGHUP (run.py stop_signals_as_interrupt)
        if not at:
            raise
        said = (e.args[0] if e.args else "interrupted").split(";")[0]    # runs.preflight.RunInterrupted's
        i, n, path = at
        raise KeyboardInterrupt(f"{said} in {path} (run {i} of {n}); run the same command again to go on (complete "
                                "runs are skipped, this one resumed)") from None
    finally:
        lock.release(remove=True)


def run_plan(todo: list[tuple[Entry, int]], out: Path, scale: str, common: tuple, dry_run: bool, prune_done: bool,
             device: str, eval_suites: list[str] | None, eval_options, log, at: list) -> dict[str, list[str]]:
    """run_sweep's loop over the checked plan; `at` says which run it is in."""
    outcome: dict[str, list[str]] = {"done": [], "ran": [], "same computation": [], "stale": [], "unavailable": [],
                                     "failed": [], "planned": []}
    for i, (entry, seed) in enumerate(todo, 1):
        path = run_dir(Path(out), entry, scale, seed)
        at[:] = [i, len(todo), path]             # where an interrupt stopped the sweep (run_sweep says so)
        state, where = status(path), f"[{i}/{len(todo)}] {path}"
        try:
            task, method, strategies = build(entry, scale, common)
            method = method.for_run(seed)      # the draws run_experiment gives it: what its record says
        except LookupError as e:
            log(f"{where}: unavailable ({e})")
            outcome["unavailable"].append(f"{path}: {e}")
            continue
        stale = stale_reason(path, task, method, strategies) if state == "done" else None
        if stale:
            log(f"{where}: complete, but {stale}: not this sweep's result; move it away to re-run it")
            outcome["stale"].append(f"{path}: {stale}")
            continue
        if dry_run or state == "done":
            log(f"{where}: " + ("complete, skipped" if state == "done" else f"would {state.replace('new', 'run')}"))
            outcome["done" if state == "done" else "planned"].append(str(path))
            if dry_run:
                continue
        step, ok = "training", True
        try:   # one failing run must not stop the rest of the sweep
            twin = find_twin(task, method, strategies, path, seed, device, log) if state == "new" else None
            if twin is not None:
                record_as_twin(path, twin, method, task)
                log(f"{where}: the same computation as {twin_name(path, twin)}: its record, not run again")
                outcome["same computation"].append(f"{path} = {twin_name(path, twin)}")
                state = "done"
            if state != "done":
                log(f"{where}: {'resuming' if state == 'resume' else 'running'} ...")
                t0 = time.perf_counter()
                train(task, method, strategies, path, seed, device, state == "resume", log)
                log(f"{where}: finished in {time.perf_counter() - t0:.0f} s")
                outcome["ran"].append(str(path))
            step = "evaluation"
            for target in ([path, small_record_source(path)] if eval_suites else []):
                if target is not None:
                    evaluate(target, eval_suites, eval_options, log)
        except Exception as e:
            log(f"{where}: {step} FAILED {type(e).__name__}: {e}")
            log("".join(traceback.format_exception(e)[-3:]))
            outcome["failed"].append(f"{path} ({step}): {type(e).__name__}: {e}")
            if step == "training":
                continue
            ok = False          # trained but not evaluated: keep the weights for another try
        copy_small_record(path, entry.small_label, seed)
        if prune_done and ok:
            prune(path)
    return outcome


def main(argv=None) -> int:
    p = OneLineArgumentParser(prog="python -m bench.sweeps", description="Run the sweeps behind the paper's "
                                "tables and figures; complete runs are skipped, incomplete ones resumed.")
    p.add_argument("names", nargs="*", help="sweep names (see --list)")
    p.add_argument("--scale", default="mini", help="paper | mini | tiny (default: mini)")
    p.add_argument("--seeds", type=int, nargs="+", help="default: 0 1 (paper scale: 0)")
    p.add_argument("--out", help="root of the run directories (default: runs/out)")
    p.add_argument("--methods", nargs="+", help="only these methods")
    p.add_argument("--runs", nargs="+", metavar="LABEL", help="only these runs, by the label their directories "
                   "carry before -s<seed> (e.g. ligo-warmup0 stackbert-warmup0; --list shows them)")
    p.add_argument("--device", default="auto", help="auto (cuda when available) | cpu | cuda")
    p.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    p.add_argument("--prune", action="store_true", help="delete checkpoints and weights of complete runs "
                   "(keep the records only, for committing)")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                   help="for every run, as run.py --set: a recipe field (small_recipe.FIELD: the small model's "
                        "pretraining), a model-spec field (large.FIELD, small.FIELD), a training strategy or method "
                        "option, e.g. --set data_path=/data/wiki; eval.KEY=VALUE sets the --eval fine-tuning "
                        "(eval.seeds=0,1,2)")
    p.add_argument("--eval", nargs="+", metavar="SUITE", help="evaluate each finished run (and its small model) "
                   "downstream with these tasks/evals suites before pruning, e.g. --eval mini, --eval glue squad")
    p.add_argument("--list", action="store_true")
    args = p.parse_args(argv)
    if args.list or not args.names:
        for s in SWEEPS.values():
            by_task: dict[str, list[str]] = {}
            for e in s.entries(args.scale):
                if e.name not in by_task.setdefault(e.task, []):
                    by_task[e.task].append(e.name)
            print(f"{s.name:14s} {s.covers}")
            for task, labels in by_task.items():
                print(f"{'':14s} {task}: {', '.join(labels)}")
        if args.list:
            return 0
        print("error: no sweep named; give one or more of the sweeps listed above", file=sys.stderr)
        return 2
    if args.scale in ("mini", "tiny"):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")   # the embedded scales never need the hub
    import transformers          # (after HF_HUB_OFFLINE: it is read when transformers is imported)
    transformers.utils.logging.disable_progress_bar()   # as run.py: the runs load and save weights in this process,
    #                                                     and those bars would drown the sweep's own lines
    from run import error_line, stop_line, stop_signals_as_interrupt, stop_status
    from runs.lock import RunLocked
    try:
        with stop_signals_as_interrupt():
            return sweep_main(args)
    except KeyboardInterrupt as e:      # bench.sweeps.run_sweep says which run it stopped in
        print(stop_line(e.args[0] if e.args else "interrupted before any run started; nothing was written"),
              file=sys.stderr)
        return stop_status()
    except (KeyError, ValueError, OSError, RunLocked) as e:   # OSError: a data path or --out that cannot be used
        print(error_line(e), file=sys.stderr)
        return 2


def sweep_main(args) -> int:
    if args.out is not None and args.out.strip():
        args.out = Path(args.out)
    from run import resolve_device   # the one definition of --device (run.py at the repository root)
    args.device = resolve_device(args.device)
    from runs.settings import check_repeated, split_eval_settings, split_item   # one --set (run.py's too)
    train_settings, eval_settings = split_eval_settings(args.settings, evaluate_only=False)
    common = tuple(split_item(item) for item in train_settings)
    check_repeated(common)
    result = run_sweep(args.names, args.scale, args.seeds, args.out, args.methods, args.dry_run, args.prune,
                       args.device, common, args.eval, tuple(eval_settings), labels=args.runs)
    print("; ".join(f"{k}: {len(v)}" for k, v in result.items() if v))
    for line in result["stale"] + result["unavailable"] + result["failed"]:
        print(f"  {line}")
    return 1 if result["failed"] or result["unavailable"] or result["stale"] else 0


if __name__ == "__main__":
    sys.exit(main())
