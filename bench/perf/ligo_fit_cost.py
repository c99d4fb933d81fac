"""What LiGO's operator fit costs (Wang et al., ICLR 2023, §3.2: "100 iterations ... negligible compute cost
relative to regular training").

1. Wall time of one LiGO fit step (materialise -> functional forward/backward -> operator update) against one
   plain training step of the large model (forward/backward/AdamW), on the device given (`--device cuda`: the
   fit runs where the run trains), on the mini BERT pair (bert_small_base at mini scale: 2L/128 -> 4L/192) or
   with `--pair paper` on BERT-Small -> BERT-Base; measured in one process, alternating, several repeats,
   median (CUDA: synchronised around each step). `--bf16` runs both large forwards under bf16 autocast.
   `--profile N` then profiles N steps of each: kernel time by class and the ten kernels that take most (on an H200
   the fit step took 2.59x a training step with 0.88x its FLOPs; this says where the difference goes).
2. FLOPs of the 100-step fit as a fraction of the large model's training, at paper scale: BERT-Small
   (6L/512/8) -> BERT-Base (12L/768/12), vocab 30522, positions 512, 400K steps x batch 256 x seq 128. The
   large model's part is analytic (forward_flops); the materialisation is counted by FlopCounterMode on meta
   tensors (no memory, no compute).

Run: HF_HUB_OFFLINE=1 python bench/perf/ligo_fit_cost.py [--repeats 15] [--threads 1] [--device cuda --pair paper
--batch 256 --seq 128 --bf16]. One thread by default on the CPU: on a shared 2-core machine two synchronised
threads made single steps vary 5x; one thread varies by a few per cent. Writes bench/results/ligo_fit_cost.json
(or --out).
"""
from __future__ import annotations

import os
import statistics
import time
import types

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from bench.cli import check_result_file, checked_device, non_negative_int, positive_int, refused_as_one_line  # noqa: E402
from bench.result_file import RESULTS, write_result  # noqa: E402
from runs.cli import OneLineArgumentParser  # noqa: E402
from runs.trainer import precision  # noqa: E402
import methods  # noqa: E402,F401
from methods.ligo import FitSession, materialise_flops  # noqa: E402
from methods.ligo_operator import LigoOperator  # noqa: E402
from methods.registry import get_method  # noqa: E402
from models import ModelSpec, get_family  # noqa: E402
from models.flops import backward_flops  # noqa: E402

MINI = (ModelSpec("bert", 2, 128, 2, vocab=4096, positions=64), ModelSpec("bert", 4, 192, 3, vocab=4096, positions=64))
PAPER = (ModelSpec("bert", 6, 512, 8, vocab=30522, positions=512), ModelSpec("bert", 12, 768, 12, vocab=30522, positions=512))
PAPER_TRAIN = dict(steps=400_000, batch=256, seq=128)
FIT_STEPS = 100


PAIRS = {"mini": MINI, "paper": PAPER}


def mlm_batch(spec: ModelSpec, batch: int, seq: int, gen: torch.Generator) -> dict:
    ids = torch.randint(5, spec.vocab, (batch, seq), generator=gen)
    masked = torch.rand(batch, seq, generator=gen) < 0.15
    return {"input_ids": ids.masked_fill(masked, 4), "labels": ids.masked_fill(~masked, -100)}


def time_steps(repeats: int, batch: int, seq: int, pair: str = "mini", device: str = "cpu", bf16: bool = False,
               profile_steps: int = 0) -> dict:
    """Median fit and training step times, alternating; with `profile_steps`, then where each step's kernel time goes
    (bench/perf/step_profile.py's classes, and the kernels that take most), over that many steps of each."""
    small_spec, large_spec = PAIRS[pair]
    device = torch.device(device)
    recipe = types.SimpleNamespace(bf16=bf16, grad_accum=1)
    task = types.SimpleNamespace(small=small_spec, large=large_spec, family="bert", recipe=recipe, name=pair)
    family = get_family("bert")
    torch.manual_seed(0)
    small = family.build(small_spec).eval().to(device)     # the fit runs where the small model lives
    session = FitSession(get_method("ligo", fit_steps=10 * repeats), small, task)
    large = family.build(large_spec).train().to(device)
    opt = torch.optim.AdamW(large.parameters(), lr=2e-4, weight_decay=0.01, eps=1e-6)

    def train_step(b):
        with precision(device, bf16):
            loss = family.loss(large, b)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(large.parameters(), 1.0)
        opt.step()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    gen = torch.Generator().manual_seed(1)
    fit_t, train_t = [], []
    for i in range(repeats + 3):                # 3 warm-up rounds, not recorded
        b = {k: v.to(device) for k, v in mlm_batch(large_spec, batch, seq, gen).items()}
        for name, fn in (("fit", session.step), ("train", train_step))[:: 1 if i % 2 == 0 else -1]:
            sync()
            t = time.perf_counter()
            fn(b)
            sync()
            (fit_t if name == "fit" else train_t).append(time.perf_counter() - t)
    fit_t, train_t = fit_t[3:], train_t[3:]
    profiles = {}
    for name, fn in (("fit", session.step), ("train", train_step)) if profile_steps else ():
        profiles[name] = kernel_time(fn, b, profile_steps, device, sync)
    fit_med, train_med = statistics.median(fit_t), statistics.median(train_t)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {"pair": f"bert {pair}: {small_spec.short()} -> {large_spec.short()}", "batch": batch, "seq": seq,
            "repeats": repeats, "device": name, "bf16": bf16,
            "fit_step_s": fit_med, "train_step_s": train_med, "ratio": fit_med / train_med,
            "fit_step_s_all": fit_t, "train_step_s_all": train_t,
            "fit_step_flops": session.step_flops(b), "materialise_flops": session.materialise_flops,
            "torch_threads": torch.get_num_threads(), **({"profile": profiles} if profiles else {})}


def kernel_time(fn, batch: dict, steps: int, device, sync) -> dict:
    """Per step: ms by kernel class and idle (bench/perf/step_profile.py's breakdown), and the ten kernels (by name) that
    take most. On the GPU it says whether the fit's extra time is its float32 materialisation, the solves, or the
    large model's step itself."""
    from torch.profiler import ProfilerActivity, profile

    from bench.perf.step_profile import breakdown
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sync()
    with profile(activities=activities) as prof:
        for _ in range(steps):
            fn(batch)
        sync()
    return breakdown(prof, steps, device.type)


def paper_fraction() -> dict:
    small_spec, large_spec = PAPER
    family = get_family("bert")
    with torch.device("meta"):                  # shapes only: counting needs no memory and no compute
        small = family.build(small_spec)
    canon = family.to_canonical(small)
    out = {}
    for order in ("width_first", "depth_first"):
        op = LigoOperator(canon, large_spec, order=order).to("meta")
        out[order] = materialise_flops(op, canon)
    b, s = PAPER_TRAIN["batch"], PAPER_TRAIN["seq"]
    fwd = family.forward_flops(large_spec, b, s)
    train_step = fwd.total + backward_flops(fwd)
    fit_step = train_step + out["width_first"]
    return {"pair": "BERT-Small 6L/512/8 -> BERT-Base 12L/768/12 (paper)", **PAPER_TRAIN,
            "fit_steps": FIT_STEPS, "train_step_flops": train_step,
            "materialise_flops": out, "fit_step_flops": fit_step,
            "fit_flops": FIT_STEPS * fit_step, "train_flops": PAPER_TRAIN["steps"] * train_step,
            "fit_fraction": FIT_STEPS * fit_step / (PAPER_TRAIN["steps"] * train_step),
            "materialise_fraction_of_step": out["width_first"] / train_step}


def main(argv=None):
    ap = OneLineArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=positive_int, default=15)
    ap.add_argument("--batch", type=positive_int, default=64)     # mini text recipe: batch 64, seq 64
    ap.add_argument("--seq", type=positive_int, default=64)
    ap.add_argument("--threads", type=non_negative_int, default=1, help="torch threads (0: torch's default)")
    ap.add_argument("--device", default="cpu", help="cpu | cuda: where both steps run")
    ap.add_argument("--pair", default="mini", choices=sorted(PAIRS), help="mini BERT pair or BERT-Small->Base")
    ap.add_argument("--bf16", action="store_true", help="large forwards under bf16 autocast (the paper recipe on a GPU)")
    ap.add_argument("--profile", type=non_negative_int, default=0,
                    help="then profile this many steps of each (kernel time by class, and the top kernels)")
    ap.add_argument("--out", default=str(RESULTS / "ligo_fit_cost.json"))
    args = ap.parse_args(argv)
    with refused_as_one_line():
        args.device = checked_device(args.device)
        check_result_file(args.out)
    if args.threads:      # on a shared CPU, one thread is less exposed to neighbours than a synchronised pair
        torch.set_num_threads(args.threads)
    timing = time_steps(args.repeats, args.batch, args.seq, args.pair, args.device, args.bf16, args.profile)
    paper = paper_fraction()
    print(f"{args.pair} BERT on {timing['device']}{' bf16' if args.bf16 else ''}, batch {args.batch} x seq "
          f"{args.seq}: LiGO fit step {timing['fit_step_s'] * 1e3:.1f} ms, train step "
          f"{timing['train_step_s'] * 1e3:.1f} ms, ratio {timing['ratio']:.2f} (median of {args.repeats}, alternating)")
    for name, prof in timing.get("profile", {}).items():
        print(f"  {name} step, ms: " + ", ".join(f"{k} {v}" for k, v in prof["ms_per_step"].items())
              + f"; idle {prof['idle_ms_per_step']}", flush=True)
    print(f"paper BERT-Small->Base: materialisation {paper['materialise_flops']['width_first'] / 1e9:.1f} GFLOP "
          f"({paper['materialise_fraction_of_step']:.2%} of a train step); 100-step fit = "
          f"{paper['fit_flops']:.3g} FLOPs = {paper['fit_fraction']:.4%} of 400K steps ({paper['train_flops']:.3g})")
    write_result(args.out, {f"timing_{args.pair}": timing, "paper_flops": paper})


if __name__ == "__main__":
    main()
