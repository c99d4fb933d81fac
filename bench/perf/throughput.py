"""Trainer throughput against a minimal hand-written PyTorch loop (target: >= 0.97 of the raw loop's
tokens/s).

Both train the same model (the task's large model, same init), on the same batches (PretrainData.train_batch,
made inside the timed loop in both), with the same optimiser, schedule and clipping, on the same device, in one
process, alternating which goes first, several repeats, median. The trainer is `runs.trainer.train` exactly as a
run uses it (tqdm bar, FLOPs ledger, per-micro-batch dropout seeding, metrics rows flushed and fsync'ed every
`log_every` steps); the raw loop does forward, backward, clip, step, schedule, zero_grad and nothing else.

The timed window is the same in both: from step `log_every` to step `steps - log_every`, read off the times the
trainer's rows are written (a writer that notes the time before it writes), so neither the warm-up steps nor
the final evaluation and checkpoint fall inside it; each trainer window contains its share of fsync'ed rows.

Run: HF_HUB_OFFLINE=1 python bench/perf/throughput.py [--scale mini] [--steps 60] [--repeats 5] [--threads 1]
Writes bench/results/throughput_<scale>[_log<N>].json (or --out). `--scale tiny` (a 2-layer, 96-wide BERT; milliseconds a step)
magnifies the trainer's fixed per-step Python cost.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from transformers import get_scheduler  # noqa: E402

from bench.cli import check_result_file, checked_device, non_negative_int, positive_int, refused_as_one_line  # noqa: E402
from bench.result_file import RESULTS, write_result  # noqa: E402
from runs.cli import OneLineArgumentParser  # noqa: E402
from methods import get_method  # noqa: E402
from models import get_family  # noqa: E402
from runs.ledger import FlopsLedger  # noqa: E402
from runs.record import RunWriter  # noqa: E402
from runs.trainer import make_optimizer, precision, train  # noqa: E402
from tasks import get_task  # noqa: E402

SEED = 0


class TimedWriter(RunWriter):
    """A real run writer that notes when each row arrives (before writing it)."""

    def __init__(self, *a, at_mark=None, **k):
        super().__init__(*a, **k)
        self.times: dict[int, float] = {}
        self.device = None
        self.at_mark = at_mark

    def log(self, row):
        sync(self.device)
        self.times[row["step"]] = time.perf_counter()
        if self.at_mark is not None:
            self.at_mark(row["step"])
        super().log(row)


def sync(device) -> None:
    """Wait for queued GPU work, so that a timestamp means the steps before it are done."""
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def build(task):
    torch.manual_seed(SEED)
    return get_family(task.family).build(task.large)


def trainer_run(task, data, device, compile: bool = False, at_mark=None) -> list[float]:
    """Times at steps log_every, 2 log_every, ..., steps - log_every (as the trainer writes those rows); `at_mark(step)`
    is called at each row once the GPU has finished the steps before it (bench/perf/step_profile.py starts and stops its
    profiler there, so that set-up and the final evaluation stay out of the window)."""
    r = task.recipe
    with tempfile.TemporaryDirectory() as tmp:
        writer = TimedWriter(Path(tmp), {"bench": "throughput"}, at_mark=at_mark)
        writer.device = device
        try:
            train(build(task), task, get_method("scratch"), data, FlopsLedger(), writer, seed=SEED, device=device,
                  progress=True, compile=compile)
        finally:
            writer.close()
        return [writer.times[s] for s in range(r.log_every, r.steps - r.log_every + 1, r.log_every)]


def raw_run(task, data, device, compile: bool = False, at_mark=None) -> list[float]:
    """The same steps in a minimal loop; times (and `at_mark` calls) at the same step boundaries."""
    r, family = task.recipe, get_family(task.family)
    model = build(task).to(device).train()
    call = torch.compile(model) if compile else model
    optimizer = make_optimizer(model, r)       # the same AdamW groups (decay / no decay) as the trainer
    scheduler = get_scheduler(r.schedule, optimizer, num_warmup_steps=r.warmup, num_training_steps=r.steps)
    params = [p for p in model.parameters() if p.requires_grad]
    times = []
    for step in range(r.steps):
        if step % r.log_every == 0 and r.log_every <= step <= r.steps - r.log_every:
            sync(device)
            times.append(time.perf_counter())
            if at_mark is not None:
                at_mark(step)
        batch = {k: v.to(device) for k, v in data.train_batch(step, r.batch_size, SEED).items()}
        with precision(device, r.bf16):     # the trainer's own numeric context, so trainer/raw compares like with like
            loss = family.loss(call, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, r.grad_clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
    return times


def main(argv=None):
    ap = OneLineArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="bert_small_base")
    ap.add_argument("--scale", default="mini")
    ap.add_argument("--steps", type=positive_int, default=60)
    ap.add_argument("--repeats", type=positive_int, default=5)
    ap.add_argument("--threads", type=non_negative_int, default=1, help="torch threads (0: torch's default)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast in both loops")
    ap.add_argument("--compile", action="store_true", help="torch.compile the forward in both loops (as run.py "
                    "does on a GPU; the warm-up run compiles, the timed ones reuse it)")
    ap.add_argument("--log-every", type=positive_int, default=None, help="metrics row (flushed, fsync'ed) every N steps "
                    "(default: the recipe's); also the chunk length")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.threads:      # on a shared CPU, one thread is less exposed to neighbours than a synchronised pair
        torch.set_num_threads(args.threads)
    tag = f"_log{args.log_every}" if args.log_every else ""
    out = Path(args.out) if args.out else RESULTS / f"throughput_{args.scale}{tag}.json"
    with refused_as_one_line():
        check_result_file(out)
        device = torch.device(checked_device(args.device))
        task = get_task(args.task, scale=args.scale)
        # evaluation only at the very end, outside the window; rows every log_every steps as in a real run; the
        # warm-up capped at the run (the mini recipes warm up for 100 steps: a 60-step run was refused)
        task = task.with_(recipe=task.recipe.with_(steps=args.steps, eval_every=10 * args.steps, bf16=args.bf16,
                                                   log_every=args.log_every or task.recipe.log_every,
                                                   warmup=min(task.recipe.warmup, args.steps)))
    r = task.recipe
    if args.steps < 3 * r.log_every:
        raise SystemExit(f"error: --steps must be at least 3 x log_every ({3 * r.log_every}); give more --steps "
                         f"or a smaller --log-every")
    data = task.pretrain_data()
    per_step = data.units_per_batch(r.batch_size)
    tokens = (r.steps - 2 * r.log_every) * per_step
    trainer_run(task, data, device, args.compile), raw_run(task, data, device, args.compile)  # warm-up (and compile)
    marks = {"trainer": [], "raw": []}
    for i in range(args.repeats):
        order = (("trainer", trainer_run), ("raw", raw_run))[:: 1 if i % 2 == 0 else -1]
        for name, fn in order:
            marks[name].append(fn(task, data, device, args.compile))
        print(f"repeat {i + 1}/{args.repeats}: " + ", ".join(
            f"{k} {tokens / (m[-1][-1] - m[-1][0]):.0f} tok/s" for k, m in marks.items()), flush=True)
    # whole windows (the measure) and, robust to a neighbour's burst, the fastest log_every-step chunks
    tps = {k: [tokens / (m[-1] - m[0]) for m in v] for k, v in marks.items()}
    chunks = {k: sorted(b - a for m in v for a, b in zip(m, m[1:])) for k, v in marks.items()}
    med = {k: statistics.median(v) for k, v in tps.items()}
    paired = [t / r_ for t, r_ in zip(tps["trainer"], tps["raw"])]
    best = {k: r.log_every * per_step / v[0] for k, v in chunks.items()}
    quartile = {k: r.log_every * per_step / v[len(v) // 4] for k, v in chunks.items()}
    # the trainer's own cost per step: its chunks minus the raw loop's, fastest against fastest
    overhead_ms = (chunks["trainer"][0] - chunks["raw"][0]) / r.log_every * 1e3
    result = {"task": f"{task.name} ({args.scale})", "model": task.large.short(), "batch": r.batch_size,
              "seq": r.seq_len, "steps_per_run": r.steps, "timed_steps": r.steps - 2 * r.log_every,
              "log_every": r.log_every, "repeats": args.repeats, "device": str(device), "bf16": args.bf16,
              "compile": args.compile,
              "tokens_per_s": med, "ratio": med["trainer"] / med["raw"],
              "paired_ratio_median": statistics.median(paired), "paired_ratios": paired,
              "fastest_chunk_tokens_per_s": best, "fastest_chunk_ratio": best["trainer"] / best["raw"],
              "first_quartile_chunk_ratio": quartile["trainer"] / quartile["raw"],
              "trainer_overhead_ms_per_step": overhead_ms, "raw_step_ms": chunks["raw"][0] / r.log_every * 1e3,
              "chunk_seconds": chunks, "tokens_per_s_all": tps, "torch_threads": torch.get_num_threads(),
              "target": ">= 0.97"}
    print(f"{task.large.short()}, batch {r.batch_size} x seq {r.seq_len}, {result['timed_steps']} timed steps: "
          f"trainer {med['trainer']:.0f} tok/s, raw loop {med['raw']:.0f} tok/s, ratio {result['ratio']:.3f} "
          f"(median of {args.repeats}, alternating; paired median {result['paired_ratio_median']:.3f}; fastest "
          f"{r.log_every}-step chunks {result['fastest_chunk_ratio']:.3f}; target >= 0.97); trainer's own cost "
          f"{overhead_ms:.2f} ms per step against a {result['raw_step_ms']:.1f} ms step")
    write_result(out, result)


if __name__ == "__main__":
    main()
