"""Where one training step's GPU time goes: the trainer's steps (runs.trainer.train, exactly as a run
trains) and the minimal raw loop's, under torch.profiler, each kernel put in one class by its name: GEMM, attention,
optimizer (AdamW and the gradient clipping's norm: multi-tensor kernels), casts (dtype conversions and copies:
autocast's per-step weight casts land here), other elementwise (norms, activations, dropout, the loss), host-to-device
copies, and idle (the step's wall time in which no kernel ran: the host is the bottleneck there). Per step, in ms.

MFU says how far a step is from the card's peak; this says why, and which change the numbers ask
for (compile, no host sync, fused AdamW, no weight casts, flash attention). Models and batches as bench/perf/gpu_mfu.py
(BERT-Base 256 x 128, GPT-2 Medium 16 x 1024, synthetic tokens, bf16 autocast).

    python bench/perf/step_profile.py                               # both models, eager
    python bench/perf/step_profile.py --compile --tag compiled      # the same with torch.compile
    python bench/perf/step_profile.py --device cpu --scale regime --models bert_base --no-bf16 --tag cpu-regime
Writes bench/results/step_profile[-TAG].json. `--scale` takes the model's task at another scale (`bert_base` at the
regime scale is the README job's grown BERT, 4L/144, 64 x 64 tokens: where that job's CPU time goes). On the CPU the
classes hold top-level operator time (the backward's are `autograd::engine::evaluate_function: <Op>Backward0`; GEMM
takes the linear layers and matrix products both ways, those inside SDPA's math path too, attention the SDPA operator
and softmax) and idle is meaningless; `--device cpu --steps 4 --batch 2` smoke-tests the script without a GPU.
"""
from __future__ import annotations

import os
import re

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from bench.cli import check_result_file, checked_device, positive_int, refused_as_one_line  # noqa: E402
from bench.perf.gpu_mfu import MODELS, SyntheticTokens, timed_task  # noqa: E402
from bench.result_file import RESULTS, write_result  # noqa: E402
from bench.perf.throughput import raw_run, trainer_run  # noqa: E402
from runs.cli import OneLineArgumentParser  # noqa: E402
from runs.experiment import environment  # noqa: E402
from runs.record import device_named  # noqa: E402
from tasks import SCALES  # noqa: E402

# first match wins; kernel names of cuBLAS/CUTLASS/cuDNN, PyTorch's native kernels and the flash/efficient attention,
# and on the CPU the top-level operators' names (aten::linear forward, AddmmBackward0 / MmBackward0 backward)
CLASSES = (
    ("attention", re.compile(r"flash|fmha|attention|attn|softmax", re.I)),
    ("optimizer", re.compile(r"adam|multi_tensor|foreach|lpnorm|norm_kernel", re.I)),
    ("gemm", re.compile(r"gemm|cutlass|xmma|cublas|nvjet|sm\d\d_|ampere|hopper|matmul|dot_kernel"
                        r"|aten::linear|addmm|bmm|\bmm\b|mmbackward", re.I)),
    ("memcpy_htod", re.compile(r"memcpy htod", re.I)),
    ("casts", re.compile(r"copy|convert|cast|to_copy", re.I)),
)


def kernel_class(name: str) -> str:
    for label, pattern in CLASSES:
        if pattern.search(name):
            return label
    return "other_elementwise"


def busy_union(intervals: list[tuple[float, float]]) -> float:
    """Time covered by at least one of the (start, end) intervals: kernels on several streams may overlap."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def breakdown(prof, steps: int, device_type: str, top: int = 10) -> dict:
    """ms per step by kernel class, idle = (span of the kernels - their union) / steps, and the `top` kernels by
    name (on the CPU: top-level operators) that take most."""
    want = torch.autograd.DeviceType.CUDA if device_type == "cuda" else torch.autograd.DeviceType.CPU
    by_class: dict[str, float] = {}
    by_name: dict[str, float] = {}
    intervals = []
    for e in prof.events():
        if e.device_type != want or (device_type != "cuda" and e.cpu_parent is not None):
            continue        # on the CPU, top-level operators only (their children are inside them)
        start, end = e.time_range.start, e.time_range.end           # microseconds
        by_class[kernel_class(e.name)] = by_class.get(kernel_class(e.name), 0.0) + (end - start)
        by_name[e.name] = by_name.get(e.name, 0.0) + (end - start)
        intervals.append((start, end))
    if not intervals:
        return {"ms_per_step": {}, "idle_ms_per_step": None}
    span = max(b for _, b in intervals) - min(a for a, _ in intervals)
    out = {"ms_per_step": {k: round(v / 1e3 / steps, 3) for k, v in sorted(by_class.items())},
           "busy_ms_per_step": round(busy_union(intervals) / 1e3 / steps, 3),
           "span_ms_per_step": round(span / 1e3 / steps, 3)}
    out["idle_ms_per_step"] = round(out["span_ms_per_step"] - out["busy_ms_per_step"], 3)
    out["top_kernels_ms_per_step"] = {k: round(v / 1e3 / steps, 3)
                                      for k, v in sorted(by_name.items(), key=lambda kv: -kv[1])[:top]}
    return out


# the operators whose kernels the "casts" class holds (a kernel's name, direct_copy_kernel_cuda, does not say
# whose copy it is; the operator and its input shapes do: a weight's [1024, 1024] or an activation's [16, 1024, ...])
COPY_OPS = ("aten::copy_", "aten::_to_copy", "aten::clone", "aten::contiguous", "aten::cat", "aten::_foreach_copy_")


def copy_sources(prof, steps: int, device_type: str, top: int = 10) -> dict[str, float]:
    """ms per step of the device time spent in copy operators, by operator and input shapes (the profile must record
    shapes), most first: which tensors the "casts" class converts or copies."""
    self_time = "self_device_time_total" if device_type == "cuda" else "self_cpu_time_total"
    rows = [(f"{e.key} {e.input_shapes}", getattr(e, self_time) / 1e3 / steps)
            for e in prof.key_averages(group_by_input_shape=True) if e.key in COPY_OPS]
    return {k: round(v, 3) for k, v in sorted(rows, key=lambda kv: -kv[1])[:top] if v > 0}


def profile_loop(run, task, data, device, compile: bool) -> dict:
    # the first run warms (kernels chosen, allocator filled, graphs compiled) and, profiled with input shapes, names
    # the copies; the breakdown comes from a second run profiled without them: recording shapes costs host time a
    # step, which idle would count
    shaped, steps = profiled_window(run, task, data, device, compile, record_shapes=True)
    sources = copy_sources(shaped, steps, device.type)
    prof, steps = profiled_window(run, task, data, device, compile)
    return {**breakdown(prof, steps, device.type), "copy_sources_ms_per_step": sources}


def profiled_window(run, task, data, device, compile: bool, record_shapes: bool = False):
    """(profile, steps) of the steps between the run's first two timing marks only: model set-up, the first steps
    (lazy initialisation, compilation) and the final evaluation stay outside, so ms per step means training steps."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    prof, window = profile(activities=activities, record_shapes=record_shapes), []     # shapes: copy_sources

    def at_mark(step: int) -> None:              # called with the GPU idle (the run synchronises first)
        window.append(step)
        if len(window) == 1:
            prof.start()
        elif len(window) == 2:
            prof.stop()

    run(task, data, device, compile, at_mark=at_mark)
    if len(window) < 2:
        if window:
            prof.stop()
        raise RuntimeError(f"the run marked {len(window)} step(s); a profile window needs two")
    return prof, window[1] - window[0]


def measure(name: str, args, device, written=lambda row: None) -> dict:
    # rows (timing marks) at steps k and 2k of 3k: the profile covers steps k+1 .. 2k, well after warm-up and
    # before the final evaluation
    task, batch = timed_task(name, args.batch, 3 * args.steps, args.steps, args.bf16, scale=args.scale)
    data = SyntheticTokens(task.objective, task.large.vocab, task.recipe.seq_len)
    row = {"model": name, "scale": args.scale, "spec": task.large.short(), "batch": batch, "seq": task.recipe.seq_len,
           "steps": args.steps, "bf16": args.bf16, "compile": args.compile}
    for label, run in (("trainer", trainer_run), ("raw", raw_run)):
        row[label] = profile_loop(run, task, data, device, args.compile)
        parts = ", ".join(f"{k} {v}" for k, v in row[label]["ms_per_step"].items())
        print(f"{name} {label}: {parts}; idle {row[label]['idle_ms_per_step']} ms/step", flush=True)
        written(row)                # the trainer's part kept where a time limit ends the raw loop's
    return row


def main(argv=None):
    ap = OneLineArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--scale", default="paper", choices=list(SCALES),
                    help="the scale of each model's task (default: paper; regime: the README job's BERT)")
    ap.add_argument("--batch", type=positive_int, default=None,
                    help="micro-batch (default: per model at paper scale, the task's recipe batch at another)")
    ap.add_argument("--steps", type=positive_int, default=12,
                    help="profiled steps (after as many unprofiled; as many more follow, then the evaluation)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--no-bf16", dest="bf16", action="store_false")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--tag", default="", help="suffix of the result file (e.g. the change measured)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    out = args.out or str(RESULTS / f"step_profile{'-' + args.tag if args.tag else ''}.json")
    with refused_as_one_line():
        check_result_file(out)
        device = torch.device(checked_device(args.device))
    done: list[dict] = []

    env = environment(device)       # the device by the name a run's record gives it (a CPU by its model)

    def write(rows: list[dict]) -> None:
        finished = {r["model"] for r in rows if "raw" in r}          # a row with the trainer's loop only is pending
        write_result(out, {"rows": rows, "pending": [m for m in args.models if m not in finished],
                           "device": str(device), "tag": args.tag, "threads": env["threads"],
                           "device_name": device_named(env)})
    for name in args.models:        # written after every loop: a time limit keeps what finished
        done.append(measure(name, args, device, written=lambda row: write(done + [row])))


if __name__ == "__main__":
    main()
