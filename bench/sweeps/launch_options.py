"""How a sweep's runs are launched, as its command line asks (`--launcher inline|local|slurm`, the --slurm-* flags,
`--runs-per-job`, `--local-parallelism`): the `Launch` they make, each refused in one line before anything is written
where it does not belong to its launcher or Slurm would not take it, and submitit's executor for it. Running the
jobs and waiting for them is bench/sweeps/launch.py's.
"""
from __future__ import annotations

import ast
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import submitit

LAUNCHERS = ("inline", "local", "slurm")
FOLDER = ".submitit"               # under --out: submitit's pickles and logs, one folder per job
LOCAL_TIMEOUT_MIN = 60 * 24 * 365  # the local executor's own time limit (default 2 minutes): none, in effect
# the --slurm-* flags and the submitit parameters they set (AutoExecutor's names; `--slurm KEY=VALUE` sets slurm_KEY)
SLURM_FLAGS = {"partition": "slurm_partition", "time": "timeout_min", "gpus_per_node": "gpus_per_node",
               "cpus_per_task": "cpus_per_task", "mem_gb": "mem_gb", "array_parallelism": "slurm_array_parallelism"}
# sbatch names the flags above set: given through --slurm too, two values would compete
SLURM_FLAG_KEYS = {"partition": "partition", "time": "time", "timeout_min": "time", "gpus_per_node": "gpus_per_node",
                   "cpus_per_task": "cpus_per_task", "mem": "mem_gb", "mem_gb": "mem_gb",
                   "array_parallelism": "array_parallelism"}
ONE_TASK = ("nodes", "tasks_per_node", "ntasks_per_node")    # each task would make the same runs


@dataclass(frozen=True)
class Launch:
    """How a sweep's runs are launched: `kind` one of LAUNCHERS; `slurm`: ((submitit parameter, value), ...)."""
    kind: str = "inline"
    runs_per_job: int = 1
    local_parallelism: int | None = None      # local: jobs at once (default: one per GPU for --device cuda, else
    #                                           one per core)
    slurm: tuple = ()
    poll_s: float | None = None               # how often the waiting sweep looks at its jobs (default: 0.5 s
    #                                           locally, 10 s on Slurm)


def parse_value(text: str):
    """A --slurm value as submitit wants it: a number, true/false, a JSON or Python literal (a dict of
    additional_parameters, a list of setup lines), else the text itself."""
    for read in (json.loads, ast.literal_eval):
        try:
            return read(text)
        except (ValueError, SyntaxError):
            pass
    return text


def launch_from_args(args) -> Launch:
    """The Launch the command line asks for, refusing flags that do not belong to its launcher (one line each)."""
    kind = args.launcher
    slurm_given = {name: getattr(args, f"slurm_{name}") for name in SLURM_FLAGS
                   if getattr(args, f"slurm_{name}") is not None}
    extra = list(args.slurm or [])
    if kind != "slurm" and (slurm_given or extra):
        flag = f"--slurm-{next(iter(slurm_given)).replace('_', '-')}" if slurm_given else "--slurm"
        raise ValueError(f"{flag}: a Slurm option; it needs --launcher slurm (this sweep's is {kind})")
    if kind == "inline" and args.runs_per_job is not None:
        raise ValueError("--runs-per-job: runs are packed into submitit jobs; it needs --launcher local or slurm")
    if kind != "local" and args.local_parallelism is not None:
        raise ValueError(f"--local-parallelism: it needs --launcher local (this sweep's is {kind}; on Slurm "
                         "--slurm-array-parallelism)")
    if args.runs_per_job is not None and args.runs_per_job < 1:
        raise ValueError(f"--runs-per-job must be an integer >= 1, got {args.runs_per_job}")
    if args.local_parallelism is not None and args.local_parallelism < 1:
        raise ValueError(f"--local-parallelism must be an integer >= 1, got {args.local_parallelism}")
    params = {SLURM_FLAGS[name]: value for name, value in slurm_given.items()}
    for item in extra:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ValueError(f"--slurm {item}: give KEY=VALUE (a parameter of submitit's SlurmExecutor, e.g. "
                             "--slurm qos=high)")
        if key in SLURM_FLAG_KEYS:
            raise ValueError(f"--slurm {key}: set it with --slurm-{SLURM_FLAG_KEYS[key].replace('_', '-')}")
        if key in ONE_TASK:
            raise ValueError(f"--slurm {key}: a job is one process on one node, making its runs one after another "
                             "(more runs at once: more jobs, --slurm-array-parallelism)")
        if f"slurm_{key}" in params:
            raise ValueError(f"--slurm {key} given twice")
        params[f"slurm_{key}"] = parse_value(value)
    if kind == "slurm" and "timeout_min" not in params:
        raise ValueError("--launcher slurm needs --slurm-time MINUTES, each job's time limit (a job that reaches it "
                         "is requeued and resumes from its checkpoints)")
    return Launch(kind, args.runs_per_job or 1, args.local_parallelism, tuple(params.items()))


def check_launch(launch: Launch) -> None:
    """Refuse, before anything is written, a Slurm parameter submitit does not know or an sbatch would not take,
    and a Slurm launch where there is no Slurm."""
    if launch.kind != "slurm":
        return
    from models.family import unknown
    from submitit.auto.auto import AutoExecutor
    valid = set(submitit.SlurmExecutor._valid_parameters()) | set(AutoExecutor._valid_parameters())
    for key, _ in launch.slurm:
        name = key.removeprefix("slurm_")
        if key.startswith("slurm_") and name not in valid:
            raise ValueError(unknown("--slurm key", name, valid) + " (a parameter of submitit's SlurmExecutor)")
    if not submitit.SlurmExecutor.affinity() > 0:
        raise ValueError("--launcher slurm: no Slurm here (submitit finds no srun); submit from the cluster, or "
                         "use --launcher local")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            make_executor(launch, Path(tmp))
        except Exception as e:      # submitit's NameError/ValueError/AssertionError: its first line says what
            raise ValueError(f"--launcher slurm: {str(e).strip().splitlines()[0]}") from None


def make_executor(launch: Launch, out: Path):
    """submitit's executor for the launch, its folders under OUT/.submitit/<job id>/."""
    folder = Path(out) / FOLDER / "%j"
    if launch.kind == "local":
        executor = submitit.AutoExecutor(folder=folder, cluster="local")
        executor.update_parameters(name="sweep", timeout_min=LOCAL_TIMEOUT_MIN)
    else:
        executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
        executor.update_parameters(name="sweep", **dict(launch.slurm))
    return executor


def check_device_name(name: str) -> None:
    """--device for Slurm jobs: its name only (each job resolves it on its node; this machine may have no GPU)."""
    import re
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", name):
        raise ValueError(f"unknown device '{name}'; known: auto, cpu, cuda, cuda:N")
