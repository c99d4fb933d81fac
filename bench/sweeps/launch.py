"""A sweep's runs as submitit jobs (`python -m bench.sweeps ... --launcher local|slurm`), as DeiT's and DINO's
run_with_submitit.py and Hydra's submitit launcher send theirs: on this machine (submitit's LocalExecutor, at most
`--local-parallelism` jobs at once) or onto Slurm (flags -> executor.update_parameters). The sweep waits for its jobs
and reports as it does inline (bench/sweeps/cli.py run_plan): each run's lines, the summary, exit 0 only if every run
completed.

- One job per run, or `--runs-per-job N` runs one after another in one job. A job runs bench.sweeps.run.run_one,
  the inline path's per-run function, on the run's own directory under the sweep's --out: records land where the
  inline sweep puts them, with no merge step. Runs with nothing to compute (unavailable, stale, complete and
  evaluated) are said and finished by the waiting sweep itself, as inline; it also copies the small model's record
  beside each run and prunes, one at a time.
- Twins: a job looks for its run's twin (bench/sweeps/records.py find_twin) as the inline sweep does, among the complete
  runs. So that a twin computed in another job is found, a run waits for the earlier runs of the plan that could be
  its twin (bench/sweeps/order.py), and gets the twin's record exactly where the inline sweep would have given it;
  runs that cannot be twins run side by side.
- Threads: each job sets OMP_NUM_THREADS and torch's threads before torch does any work, from the cores it was given:
  on Slurm the job's cpus_per_task (SLURM_CPUS_PER_TASK, else the cores it may run on), locally max(1, C // N) for
  N jobs at once on C cores. config.json's environment.threads records it.
- Preemption and time limits: a job is a submitit.helpers.Checkpointable; on SIGUSR2 (Slurm's warning before a
  time limit or a preemption; submitit's local executor sends it at its own timeout) submitit calls `checkpoint`,
  which resubmits the same job, and the requeued job resumes each incomplete run from its run directory's
  checkpoint (runs/experiment.py --resume: the numbers of an uninterrupted run).
- submitit's pickles and logs: `<out>/.submitit/<job id>/`.
"""
from __future__ import annotations

import math
import os
import signal
import sys
import time
from pathlib import Path

import submitit

from bench.sweeps.launch_options import FOLDER, Launch, make_executor
from bench.sweeps.order import InitialWeights, Item, find_waits, form_jobs, needs_job, release
from bench.sweeps.records import evaluate, status
from bench.sweeps.run import run_dir, run_one, train

EVAL_LOCK = ".sweep-eval.lock"     # a run directory that two jobs evaluate (the small model they grew from)
CANCEL_WAIT_S = 30                 # how long a cancelled local job may take to stop (its run's Ctrl-C) before SIGKILL
OUTCOMES = ("done", "ran", "same computation", "stale", "unavailable", "failed", "planned")


def available_cores() -> int:
    """The cores this process may run on (a job's allocation on Slurm, a taskset's locally)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def threads_per_job(cores: int, concurrent: int) -> int:
    """Torch threads for each of `concurrent` jobs sharing `cores`: never more threads than cores in all."""
    return max(1, cores // max(1, concurrent))


def local_shares(parallelism: int | None, gpus: int, cores: int, jobs: int) -> tuple[int, int]:
    """(jobs at once, threads each) for `jobs` local jobs: at most `parallelism` at once (default: one per GPU when
    the runs use them, else one per core), never more than there are jobs; the cores split evenly among them."""
    at_once = max(1, min(parallelism or gpus or cores, jobs))
    return at_once, threads_per_job(cores, at_once)


def visible_gpus() -> list[str]:
    """This process's CUDA devices, as CUDA_VISIBLE_DEVICES names them for a child."""
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [g for g in given.split(",") if g.strip()]
    import torch
    return [str(k) for k in range(torch.cuda.device_count())]


def evaluate_in_turn(run: Path, suites, options, log) -> None:
    """bench.sweeps.records.evaluate, one job at a time per directory: jobs whose runs grew from one small model
    evaluate it too (runs.evaluation takes the run's lock and would refuse the second); the second then finds its
    suites done."""
    from runs.lock import RunLock
    lock = RunLock(run, wait=True, name=EVAL_LOCK, what="evaluation").acquire()
    try:
        evaluate(run, suites, options, log)
    finally:
        lock.release(remove=True)


class SweepJob(submitit.helpers.Checkpointable):
    """One job: runs (i, entry, seed) of a plan of n, made one after another by run_one. `threads`: torch's (None:
    the job's cores, on Slurm); `environment`: variables set before torch works (None: removed).
    `results` (i -> (outcome, ok, log lines)) travels with a requeued job, so a run completed before the
    preemption is reported as made, not as found complete. `command`: the sweep's command line (its sys.argv),
    which the job's records give as theirs."""

    def __init__(self, runs: list, n: int, out: str, scale: str, common: tuple, device: str,
                 eval_suites: list[str] | None, eval_settings: tuple, threads: int | None, environment: dict,
                 command: list[str]):
        self.runs, self.n, self.out, self.scale, self.common = runs, n, out, scale, common
        self.device, self.eval_suites, self.eval_settings = device, eval_suites, eval_settings
        self.threads, self.environment, self.command = threads, environment, list(command)
        self.results: dict[int, tuple] = {}

    def __call__(self) -> dict[int, tuple]:
        # A record's argv says which command made it (runs/experiment.py reads sys.argv). In a job, sys.argv is
        # submitit's bootstrap (`.../submitit/core/_submit.py <folder>`), which names neither the sweep nor its --out:
        # the job is that sweep's, so its process takes the sweep's command line as its own.
        sys.argv = list(self.command)
        # the sweep stops a local job as Ctrl-C stops a run (cancel: SIGINT). A sweep started in the background
        # (`nohup ... &`) hands its jobs SIGINT ignored, which Python keeps, and submitit's own handler passes SIGTERM
        # by: armed here, or a cancelled job trains on unseen
        signal.signal(signal.SIGINT, signal.default_int_handler)
        threads = self.threads or int(os.environ.get("SLURM_CPUS_PER_TASK") or 0) or available_cores()
        for key, value in {**self.environment, "OMP_NUM_THREADS": str(threads),
                           "MKL_NUM_THREADS": str(threads)}.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        import torch
        torch.set_num_threads(threads)
        import transformers        # as bench.sweeps main: loading and saving weights draws no bars in the log
        transformers.utils.logging.disable_progress_bar()
        from runs.cli import resolve_device
        device = resolve_device(self.device)
        options = None
        if self.eval_suites:
            from tasks.evals import EvalOptions
            options = EvalOptions.parse(list(self.eval_settings), device=device)
        print(f"job: {len(self.runs)} run(s), {threads} thread(s), device {device}", flush=True)
        for i, entry, seed in self.runs:
            if i in self.results:
                continue
            lines: list[str] = []

            def log(msg: str) -> None:
                print(msg, flush=True)
                lines.append(msg)
            got, ok = run_one(entry, seed, i, self.n, Path(self.out), self.scale, self.common, False, device,
                              self.eval_suites, options, log, train=train, evaluate=evaluate_in_turn)
            self.results[i] = (got, ok, lines)
        return self.results

    def checkpoint(self, *args, **kwargs) -> submitit.helpers.DelayedSubmission:
        """Called by submitit on SIGUSR2, before it requeues the job: the same job again. The state is on disk (each
        run's checkpoint.pt, written at every evaluation), and a run found incomplete is resumed from it."""
        print("job: preempted or at its time limit; requeued, its incomplete run resumes from its checkpoint",
              flush=True)
        return submitit.helpers.DelayedSubmission(self, *args, **kwargs)


def launch_plan(todo: list, out: Path, scale: str, common: tuple, device: str, eval_suites: list[str] | None,
                eval_settings: tuple, eval_options, log, launch: Launch, finish) -> dict[str, list[str]]:
    """bench.sweeps run_plan through submitit: the same outcome, each run made by run_one in a job (or here, when there
    is nothing to make). `finish(path, entry, seed, ok)`: the sweep's own after-run step (the small model's record
    copied beside the run, pruning), done here as each job ends."""
    outcome: dict[str, list[str]] = {k: [] for k in OUTCOMES}
    merge = lambda got: [outcome[k].extend(v) for k, v in got.items()]    # noqa: E731
    n, items = len(todo), []
    for i, (entry, seed) in enumerate(todo, 1):
        path = run_dir(Path(out), entry, scale, seed)
        built = needs_job(entry, seed, path, scale, common, eval_suites)
        if built is None:          # nothing to compute: said (and finished) here, as inline
            got, ok = run_one(entry, seed, i, n, Path(out), scale, common, False, device, eval_suites, eval_options,
                              log)
            merge(got)
            if ok is not None:
                finish(path, entry, seed, ok)
            continue
        items.append(Item(i, entry, seed, path, status(path), built))
    if not items:
        return outcome
    find_waits(items)
    by_i = {it.i: it for it in items}
    executor = make_executor(launch, Path(out))
    jobs_needed = math.ceil(len(items) / launch.runs_per_job)
    gpus: list[str] = []
    if launch.kind == "local":
        gpus = visible_gpus() if device == "cuda" else []
        at_once, threads = local_shares(launch.local_parallelism, len(gpus), available_cores(), jobs_needed)
        poll = launch.poll_s or 0.5
        log(f"local launcher: {len(items)} run(s) in jobs of up to {launch.runs_per_job}, {at_once} at once, "
            f"{threads} thread(s) each; submitit's logs in {Path(out) / FOLDER}")
    else:
        at_once, threads, poll = jobs_needed, None, launch.poll_s or 10.0
        log(f"slurm launcher: {len(items)} run(s) in jobs of up to {launch.runs_per_job}; submitit's logs in "
            f"{Path(out) / FOLDER}")

    def environment(slot: int) -> dict:
        if launch.kind != "local":
            return {}                       # Slurm gives each job its devices
        if device == "cuda" and gpus:
            return {"CUDA_VISIBLE_DEVICES": gpus[slot % len(gpus)]}     # one device per job, round robin
        # the local executor hides every GPU from a job asked for none: a named device keeps this process's view
        return {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES") if device.startswith("cuda") else ""}

    # initial weights compared here only on the jobs' device and threads: on Slurm, for CPU jobs of known cores
    cpus = dict(launch.slurm).get("cpus_per_task")
    weights = (InitialWeights(device, threads) if launch.kind == "local"
               else InitialWeights("cpu", cpus) if device == "cpu" and cpus else None)
    pending, finished = list(items), set()
    release(pending, by_i, finished, weights, None, n)
    for it in items:
        if it.waits_for:
            log(f"[{it.i}/{n}] {it.path}: waits for {', '.join(str(by_i[w].path.name) for w in it.waits_for)} "
                "(its twin, if one of them is the same computation)")
    running: dict = {}                       # job -> (its items, its slot)
    try:
        while pending or running:
            for job in [j for j in running if j.done()]:
                group, _ = running.pop(job)
                collect(job, group, n, outcome, merge, finish, log)
                finished.update(it.i for it in group)
            release(pending, by_i, finished, weights, log, n)
            free = sorted(set(range(at_once)) - {slot for _, slot in running.values()})
            groups = form_jobs(pending, finished, launch.runs_per_job, len(free))
            if groups:
                submitted = []
                with executor.batch():
                    for group, slot in zip(groups, free):
                        job = executor.submit(SweepJob([(it.i, it.entry, it.seed) for it in group], n, str(out),
                                                       scale, common, device, eval_suites, eval_settings, threads,
                                                       environment(slot), sys.argv))
                        submitted.append((job, group, slot))
                for job, group, slot in submitted:
                    running[job] = (group, slot)
                    for it in group:
                        pending.remove(it)
                        log(f"[{it.i}/{n}] {it.path}: submitted, {launch.kind} job {job.job_id}")
                continue
            time.sleep(poll)
    except KeyboardInterrupt:
        stopped = [it for group, _ in running.values() for it in group]
        for job in running:
            cancel(job, launch.kind)
        deadline = time.time() + CANCEL_WAIT_S
        while launch.kind == "local" and time.time() < deadline and not all(j.done() for j in running):
            time.sleep(0.2)
        # a local job still there did not stop as a run stops on Ctrl-C: killed, so that none trains on unseen
        killed = [job for job in running if launch.kind == "local" and not job.done() and kill(job)]
        where = ", ".join(str(it.path) for it in stopped) or "no run had started"
        how = (f"; {len(killed)} of them had not stopped after {CANCEL_WAIT_S} s and were killed (SIGKILL: their runs "
               "resume from the checkpoint before)" if killed else "")
        raise KeyboardInterrupt(f"interrupted while {len(running)} job(s) ran ({where}); they were cancelled, each "
                                f"run keeping its last checkpoint{how}; run the same command again to go on (complete "
                                "runs are skipped, incomplete ones resumed)") from None
    return outcome


def cancel(job, kind: str) -> None:
    """Stop a job as Ctrl-C stops a run (its last checkpoint kept). Locally the job's own processes get SIGINT: the
    controller between them would print a traceback of its own, and sends SIGKILL a second later."""
    tasks = children(int(job.job_id)) if kind == "local" else []
    for pid in tasks:
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            pass
    if not tasks:
        job.cancel(check=False)


def kill(job) -> bool:
    """SIGKILL a local job's processes (its controller last, so that it cannot start another); whether any was there."""
    pids = [*children(int(job.job_id)), int(job.job_id)]
    alive = False
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            alive = True
        except ProcessLookupError:
            pass
    return alive


def children(pid: int) -> list[int]:
    """A process's children (Linux; [] elsewhere, or when it has ended)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def collect(job, group: list[Item], n: int, outcome: dict, merge, finish, log) -> None:
    """A finished job's runs: their lines, outcome and the sweep's finishing step; a job that died says where its
    log is, and each of its runs it did not report counts as failed."""
    try:
        results, error = job.result(), None
    except Exception as e:      # submitit.FailedJobError / UncompletedJobError: the job raised, or died
        results = {}
        error = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"
    for it in group:
        if it.i in results:
            got, ok, lines = results[it.i]
            for line in lines:
                log(line)
            merge(got)
            if ok is not None:
                finish(it.path, it.entry, it.seed, ok)
            continue
        log(f"[{it.i}/{n}] {it.path}: job {job.job_id} FAILED ({error}); its log: {job.paths.stdout}")
        outcome["failed"].append(f"{it.path} (job {job.job_id}): {error}")
