"""Sweeps through submitit (bench/sweeps/launch.py, bench/sweeps/order.py): a tiny sweep through the local executor
lands the records of the same sweep run inline, in the same --out layout, twins included; a job preempted mid-run
(SIGUSR2, submitit's preemption signal) is requeued through its checkpoint() and resumes to the numbers of an
uninterrupted run; a sweep started in the background and stopped stops its jobs; the cores are split among the jobs;
Slurm options reach sbatch, and bad ones are refused in one line before anything is written."""
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bench.sweeps.launch import children
from runs.record import load_run

ROOT = Path(__file__).resolve().parents[1]
RUNS = ("scratch", "stackbert", "net2net")          # tiny bert_small_base: net2net is stackbert's twin
# long enough to be stopped between two checkpoints (as tests/test_reliability.py's kill-and-resume run)
SETTINGS = (("steps", 40), ("eval_every", 5), ("log_every", 1))
STABLE = ("wall",)


def numbers(run) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in STABLE} for row in run.metrics]


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """The sweep inline, then through the local executor, two jobs at once on two cores (so one thread each, as this
    process's), with scratch's job sent SIGUSR2 once it has logged past a checkpoint."""
    from bench.sweeps import launch as sweep_launch
    from bench.sweeps.launch_options import Launch
    from bench.sweeps.cli import run_sweep
    root = tmp_path_factory.mktemp("launch")
    args = dict(names=["bert"], scale="tiny", seeds=[0], only=list(RUNS), common=SETTINGS, device="cpu")
    inline_logs: list[str] = []
    inline = run_sweep(out=root / "inline", log=inline_logs.append, **args)
    assert len(inline["ran"]) == 2 and len(inline["same computation"]) == 1 and not inline["failed"], inline_logs

    cores = sweep_launch.available_cores
    sweep_launch.available_cores = lambda: 2
    logs: list[str] = []
    result: dict = {}
    out = root / "local"
    launch = Launch("local", poll_s=0.2)
    t0 = time.perf_counter()
    sweep = threading.Thread(target=lambda: result.update(run_sweep(out=out, log=logs.append, launch=launch, **args)))
    sweep.start()
    run = out / "bert_small_base-tiny" / "scratch-s0"
    preempted = None
    deadline = time.time() + 150
    try:
        while sweep.is_alive() and time.time() < deadline and preempted is None:
            metrics = run / "metrics.jsonl"
            job = next((line.rsplit(" ", 1)[1] for line in list(logs) if "scratch-s0: submitted" in line), None)
            if (job and (run / "checkpoint.pt").exists() and metrics.exists()
                    and metrics.read_text().count("\n") >= 13 and not (run / "summary.json").exists()):
                tasks = children(int(job))              # the local controller's child runs the job
                if tasks:
                    os.kill(tasks[0], signal.SIGUSR2)
                    preempted = job
            time.sleep(0.02)
        sweep.join(timeout=max(1, deadline - time.time()))
    finally:
        sweep_launch.available_cores = cores
    assert not sweep.is_alive(), logs
    return dict(root=root, inline=inline, local=result, logs=logs, inline_logs=inline_logs, preempted=preempted,
                wall=time.perf_counter() - t0)


def test_a_sweep_through_the_local_executor_lands_the_inline_records(sweeps):
    """The same outcome and, run for run, the same record as inline (every logged number but wall time, FLOPs, the
    twin's record), in --out itself; each job's record says the thread it ran with."""
    local, inline = sweeps["local"], sweeps["inline"]
    assert not local["failed"], sweeps["logs"]
    strip = lambda paths: sorted(p.replace(str(sweeps["root"] / "local"), "").replace(   # noqa: E731
        str(sweeps["root"] / "inline"), "") for p in paths)
    for key in ("ran", "same computation", "done", "failed"):
        assert strip(local[key]) == strip(inline[key]), (key, sweeps["logs"])
    for name in RUNS:
        a = load_run(sweeps["root"] / "inline" / "bert_small_base-tiny" / f"{name}-s0")
        b = load_run(sweeps["root"] / "local" / "bert_small_base-tiny" / f"{name}-s0")
        assert b.complete and numbers(b) == numbers(a), name
        assert b.summary["flops"] == a.summary["flops"] and b.summary.get("eval_loss") == a.summary.get("eval_loss")
        assert b.config.get("same_computation_as") == a.config.get("same_computation_as")
        assert b.config["environment"]["threads"] == 1 == a.config["environment"]["threads"]
        assert b.config["argv"] == a.config["argv"] == sys.argv     # the sweep's command, not submitit's bootstrap
    small = sweeps["root"] / "local" / "bert_small_base-tiny" / "small-s0"
    assert (small / "summary.json").exists()                 # the small model's record beside the runs, as inline
    assert any(p.name.endswith("_log.out") for p in (sweeps["root"] / "local" / ".submitit").rglob("*"))
    assert any("2 at once, 1 thread(s) each" in line for line in sweeps["logs"])


def test_a_preempted_job_is_requeued_and_resumes_to_the_uninterrupted_numbers(sweeps):
    """SIGUSR2 to a running job: submitit calls SweepJob.checkpoint (the same job again) and requeues it; the run
    resumes from its checkpoint to the rows of the uninterrupted inline run, bit for bit, no row lost or doubled,
    and the sweep counts it as made."""
    if sweeps["preempted"] is None:
        pytest.skip("the run finished before it could be preempted (machine too fast for this test)")
    job = sweeps["preempted"]
    log = (sweeps["root"] / "local" / ".submitit" / job / f"{job}_0_log.out").read_text()
    assert "requeued, its incomplete run resumes from its checkpoint" in log and "resuming ..." in log, log
    run = load_run(sweeps["root"] / "local" / "bert_small_base-tiny" / "scratch-s0")
    whole = load_run(sweeps["root"] / "inline" / "bert_small_base-tiny" / "scratch-s0")
    steps = [r["step"] for r in run.metrics]
    assert steps == sorted(set(steps))
    assert [r for r in numbers(run) if "eval_loss" in r] == [r for r in numbers(whole) if "eval_loss" in r]
    assert numbers(run) == numbers(whole)
    assert any(p.endswith("scratch-s0") for p in sweeps["local"]["ran"])


def test_a_sweep_started_in_the_background_stops_its_jobs_when_it_is_stopped(tmp_path):
    """`nohup python -m bench.sweeps ... --launcher local &` hands its jobs SIGINT ignored, and submitit passes SIGTERM
    by: the sweep said "they were cancelled" while its jobs trained on. SIGTERM to such a sweep now stops the job's
    run as Ctrl-C does (its checkpoint kept, no summary), with no process left training."""
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "bench.sweeps", "bert", "--scale", "tiny", "--seeds", "0", "--methods", "scratch",
           "--set", "steps=100000", "--set", "eval_every=20", "--out", str(out), "--launcher", "local"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))   # as a background job
    run = out / "bert_small_base-tiny" / "scratch-s0"
    deadline = time.time() + 180
    while time.time() < deadline and proc.poll() is None and not (run / "checkpoint.pt").exists():
        time.sleep(0.1)
    assert (run / "checkpoint.pt").exists(), proc.communicate(timeout=60)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "they were cancelled, each run keeping its last checkpoint;" in err, err
    assert "were killed" not in err, err                  # stopped as a run stops on Ctrl-C, not by SIGKILL
    jobs = [int(d.name) for d in (out / ".submitit").iterdir() if d.name.isdigit()]
    assert jobs and not any(Path(f"/proc/{pid}").exists() for pid in jobs)
    rows = (run / "metrics.jsonl").read_text().count("\n")
    time.sleep(2)
    assert (run / "metrics.jsonl").read_text().count("\n") == rows and not (run / "summary.json").exists()


def test_local_jobs_share_the_cores_without_oversubscribing_them():
    from bench.sweeps.launch import local_shares, threads_per_job
    assert threads_per_job(8, 3) == 2 and threads_per_job(2, 4) == 1 and threads_per_job(16, 1) == 16
    assert local_shares(None, 0, 16, 3) == (3, 5)        # one job per core by default, never more than the jobs
    assert local_shares(None, 0, 2, 5) == (2, 1)
    assert local_shares(2, 0, 16, 10) == (2, 8)
    assert local_shares(None, 4, 32, 10) == (4, 8)       # on GPUs: one job per device
    for parallelism, gpus, cores, jobs in ((None, 0, 7, 9), (3, 0, 7, 9), (None, 2, 7, 1)):
        at_once, threads = local_shares(parallelism, gpus, cores, jobs)
        assert at_once * threads <= max(cores, at_once)


def test_slurm_options_reach_sbatch(tmp_path, monkeypatch):
    """A launch's Slurm options (what launch_from_args makes of the --slurm-* flags and --slurm KEY=VALUE, whose
    refusals the next test checks) become submitit's SlurmExecutor parameters and the sbatch lines (no cluster here:
    submitit is told srun exists, and nothing is submitted)."""
    import submitit
    from bench.sweeps.launch_options import Launch, make_executor, parse_value
    monkeypatch.setattr(submitit.SlurmExecutor, "affinity", classmethod(lambda cls: 1))
    launch = Launch("slurm", slurm=(("slurm_partition", "dev"), ("timeout_min", 90), ("gpus_per_node", 1),
                                    ("cpus_per_task", 4), ("mem_gb", 16.0), ("slurm_array_parallelism", 8),
                                    ("slurm_qos", "high"), ("slurm_additional_parameters", parse_value('{"requeue": true}'))))
    executor = make_executor(launch, tmp_path)
    params = executor._executor.parameters
    assert (params["partition"], params["time"], params["gpus_per_node"], params["cpus_per_task"]) == ("dev", 90, 1, 4)
    assert params["array_parallelism"] == 8 and params["qos"] == "high"
    text = executor._executor._make_submission_file_text("python -m submitit.core._submit x", "uid")
    for line in ("#SBATCH --partition=dev", "#SBATCH --time=90", "#SBATCH --cpus-per-task=4", "#SBATCH --gpus-per-node=1",
                 "#SBATCH --mem=16GB", "#SBATCH --qos=high", "#SBATCH --requeue", "#SBATCH --signal=USR2@90"):
        assert line in text, (line, text)
    assert str(tmp_path / ".submitit" / "%j") in text
    assert parse_value("3") == 3 and parse_value("true") is True and parse_value("volta32gb") == "volta32gb"


@pytest.mark.parametrize("args, needle", [
    (["--slurm-partition", "dev"], "--slurm-partition: a Slurm option; it needs --launcher slurm (this sweep's is inline)"),
    (["--launcher", "local", "--slurm", "qos=high"], "--slurm: a Slurm option; it needs --launcher slurm"),
    (["--runs-per-job", "2"], "--runs-per-job: runs are packed into submitit jobs; it needs --launcher local or slurm"),
    (["--launcher", "local", "--runs-per-job", "0"], "--runs-per-job must be an integer >= 1, got 0"),
    (["--launcher", "slurm"], "--launcher slurm needs --slurm-time MINUTES"),
    (["--launcher", "slurm", "--slurm-time", "60", "--slurm", "time=30"], "--slurm time: set it with --slurm-time"),
    (["--launcher", "slurm", "--slurm-time", "60", "--slurm", "partitoin=dev"], "did you mean 'partition'"),
    (["--launcher", "slurm", "--slurm-time", "60", "--slurm", "ntasks_per_node=2"], "a job is one process on one node"),
    (["--launcher", "slurm", "--slurm-time", "60"], "--launcher slurm: no Slurm here (submitit finds no srun)"),
    (["--launcher", "slurm", "--slurm-time", "60", "--device", "gpu"], "unknown device 'gpu'"),
])
def test_launch_options_are_refused_in_one_line_before_anything_is_written(args, needle, tmp_path, capsys):
    import shutil
    from bench.sweeps.cli import main
    if "no Slurm here" in needle and shutil.which("srun"):
        pytest.skip("a Slurm cluster is reachable here")
    out = tmp_path / "out"
    assert main(["bert", "--scale", "tiny", "--seeds", "0", "--methods", "scratch", "--out", str(out), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and needle in err and "\n" not in err, err
    assert not out.exists()
