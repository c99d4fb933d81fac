"""bf16 training throughput and MFU on one GPU: BERT-Base and GPT-2 Medium (the paper's
large models of bert_small_base and gpt2_base_medium) trained by the growbench trainer with bf16 autocast and
SDPA attention, against the card's dense bf16 peak; the same steps in a minimal hand-written loop alongside
(target 1 on the GPU).

MFU = model FLOPs per second / dense bf16 peak. Model FLOPs are growbench's analytic count (models/*.py
forward_flops, backward = 2 x forward; attention scores included; 2 FLOPs per multiply-add; BERT's MLM head on
the masked positions only, as the trainer runs it): what the model needs, not what the hardware executed (no
recomputation counted). Peaks are looked up by device name
(runs/hardware.py PEAK_TFLOPS, dense, without 2:4 sparsity) or given with --peak-tflops.

Data are synthetic token batches (uniform ids; 15% masked for BERT's MLM, next-token labels for GPT-2): the
paper's corpora are not needed to time a step, and the tokens' values do not change its cost.

Run on a CUDA machine:
    python bench/perf/gpu_mfu.py                         # both models, trainer and raw loop, 3 repeats
    python bench/perf/gpu_mfu.py --models gpt2_medium --batch 16 --compile
Writes bench/results/gpu_mfu.json (or --out). `--device cpu --steps 6 --log-every 2 --batch 2` smoke-tests the
script without a GPU (no MFU then).
"""
from __future__ import annotations

import os
import platform
import statistics

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from bench.cli import check_result_file, checked_device, positive_float, positive_int, refused_as_one_line  # noqa: E402
from bench.result_file import RESULTS, write_result  # noqa: E402
from bench.perf.throughput import raw_run, trainer_run  # noqa: E402
from runs.cli import OneLineArgumentParser  # noqa: E402
from runs.hardware import peak_tflops  # noqa: E402
from tasks import get_task  # noqa: E402
from tasks.data import PretrainData  # noqa: E402

MODELS = {  # name -> (task whose paper-scale large model it is, default micro-batch)
    "bert_base": ("bert_small_base", 256),      # 12L/768, seq 128: the MFU target's shape (the paper's batch of 256;
    #                                             the first committed H200 figures were measured at 128)
    "gpt2_medium": ("gpt2_base_medium", 16),    # 24L/1024, seq 1024
}


class SyntheticTokens(PretrainData):
    """Uniform random token batches of the task's shape; a pure function of (seed, step) like real data."""
    kind = "text"

    def __init__(self, objective: str, vocab: int, seq_len: int):
        self.objective, self.vocab_size, self.seq_len = objective, vocab, seq_len
        self.n_train = self.n_valid = 1 << 20

    def make_batch(self, split, indices, rng_seed):
        gen = torch.Generator().manual_seed(int(rng_seed))
        ids = torch.randint(5, self.vocab_size, (len(indices), self.seq_len), generator=gen)
        if self.objective == "clm":
            return {"input_ids": ids, "labels": ids.clone()}
        masked = torch.rand(ids.shape, generator=gen) < 0.15
        return {"input_ids": ids.masked_fill(masked, 4), "labels": ids.masked_fill(~masked, -100)}


def window_flops(task, data, batch: int, first: int, stop: int) -> float:
    """Model FLOPs of training steps [first, stop) on the batches the runs see: a masked LM decodes only its
    masked positions (models/bert.py), so its step's cost follows each batch's mask count."""
    from bench.perf.throughput import SEED
    from models import get_family
    from models.flops import backward_flops
    family = get_family(task.family)
    total = 0.0
    for step in range(first, stop):
        fwd = family.batch_flops(task.large, data.train_batch(step, batch, SEED))
        total += fwd.total + backward_flops(fwd)
    return total


def timed_task(name: str, batch: int | None, steps: int, log_every: int, bf16: bool, scale: str = "paper"):
    """(task, micro-batch) of model `name` (MODELS) at `scale` with a timing recipe: `steps` steps, rows every
    `log_every`, no evaluation inside the window, a short warm-up. The default micro-batch is MODELS' at paper scale,
    the task's own recipe batch at any other (the regime's BERT: the README job's 64)."""
    task_name, paper_batch = MODELS[name]
    task = get_task(task_name, scale=scale)
    batch = batch or (paper_batch if scale == "paper" else task.recipe.batch_size)
    return task.with_(recipe=task.recipe.with_(steps=steps, batch_size=batch, log_every=log_every,
                                               eval_every=10 * steps, eval_batches=1, bf16=bf16,
                                               warmup=max(1, steps // 10))), batch


def measure(name: str, args, device) -> dict:
    task, batch = timed_task(name, args.batch, args.steps, args.log_every, args.bf16)
    r = task.recipe
    data = SyntheticTokens(task.objective, task.large.vocab, r.seq_len)
    timed = r.steps - 2 * r.log_every
    tokens = timed * batch * r.seq_len
    flops = window_flops(task, data, batch, r.log_every, r.steps - r.log_every)   # analytic, forward + backward
    trainer_run(task, data, device, args.compile)          # warm-up: kernels, allocator, compile
    times = {"trainer": [], "raw": []}
    for i in range(args.repeats):
        order = (("trainer", trainer_run), ("raw", raw_run))[:: 1 if i % 2 == 0 else -1]
        for key, fn in order:
            if key == "raw" and args.no_raw:
                continue
            marks = fn(task, data, device, args.compile)       # times at every log_every-th step of the window
            times[key].append(marks[-1] - marks[0])
    med = {k: statistics.median(v) for k, v in times.items() if v}
    peak = args.peak_tflops or (peak_tflops(torch.cuda.get_device_name(device)) if device.type == "cuda" else None)
    row = {"model": name, "spec": task.large.short(), "batch": batch, "seq": r.seq_len, "timed_steps": timed,
           "bf16": r.bf16, "compile": args.compile, "tokens_per_s": {k: tokens / t for k, t in med.items()},
           "model_tflops_per_s": {k: flops / t / 1e12 for k, t in med.items()},
           "seconds_all": times, "peak_tflops": peak}
    if peak:
        row["mfu"] = {k: flops / t / 1e12 / peak for k, t in med.items()}
    if "raw" in med:
        row["trainer_vs_raw"] = med["raw"] / med["trainer"]
    if device.type == "cuda":
        row["max_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    return row


def main(argv=None):
    ap = OneLineArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--batch", type=positive_int, default=None, help="micro-batch (default: per model, see MODELS)")
    ap.add_argument("--steps", type=positive_int, default=60)
    ap.add_argument("--log-every", type=positive_int, default=10)
    ap.add_argument("--repeats", type=positive_int, default=3)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--no-bf16", dest="bf16", action="store_false")
    ap.add_argument("--compile", action="store_true", help="torch.compile the forward (trainer and raw loop)")
    ap.add_argument("--no-raw", action="store_true", help="time the trainer only")
    ap.add_argument("--peak-tflops", type=positive_float, default=None, help="override the peak lookup")
    ap.add_argument("--out", default=str(RESULTS / "gpu_mfu.json"))
    args = ap.parse_args(argv)
    with refused_as_one_line():
        if args.steps < 3 * args.log_every:
            raise ValueError(f"--steps must be at least 3 x --log-every ({3 * args.log_every})")
        check_result_file(args.out)
        device = torch.device(checked_device(args.device))   # a cuda without a GPU: use --device cpu (smoke test)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    rows = []
    for name in args.models:
        row = measure(name, args, device)
        rows.append(row)
        mfu = " ".join(f"{k} MFU {v:.1%}" for k, v in row.get("mfu", {}).items()) or "MFU n/a (no peak)"
        print(f"{name} ({row['spec']}), batch {row['batch']} x seq {row['seq']}, bf16={row['bf16']}: "
              + ", ".join(f"{k} {v:,.0f} tok/s" for k, v in row["tokens_per_s"].items())
              + f"; {mfu}" + (f"; trainer/raw {row['trainer_vs_raw']:.3f}" if "trainer_vs_raw" in row else ""),
              flush=True)
        # written after every model, so a time limit that cuts the next one short keeps this one's figures
        write_result(args.out, {"rows": rows, "pending": args.models[len(rows):], "device": str(device),
                                "device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
                                else platform.processor()})


if __name__ == "__main__":
    main()
