"""Input pipelines against the GPU step: samples/s the training DataLoader (tasks/data/loader.py) produces
with 0, 1, 2, ... workers, against the samples/s the GPU step consumes, for text and for images.

(a) Text: BERT-Base-shaped MLM batches (256 x 128, [CLS] ... [SEP] blocks, 15% masked by transformers' collator)
from a WordPiece tokenizer trained on a local corpus: the embedded Penn Treebank written to a temporary directory as
text files (`--text-repeat` times, for a larger corpus), read as a local paper-scale corpus. The one-time
tokenisation pass (tasks/data/text.py:token_ids, which packs the corpus into a memory-mapped .npy) is timed on its
own, on all cores and on one (TOKENIZERS_PARALLELISM), in documents/s and tokens/s.
(b) Images: an ImageFolder (train/ and val/) of generated JPEGs of ImageNet's typical size (500 x 375, smooth colour
fields plus grain, ~80 KB each, quality 90), and the same at 341 x 256 (a copy of ImageNet resized to a 256-pixel
short side, as fast-loading pipelines such as FFCV keep it), read through tasks.data.imagenet.load_imagenet_data at 224 with its
training transform: decode, augment and normalise are all in the timed batches.
(c) Each image folder's resized copy (tasks/data/resized_copy.py, `--resized-copy` short side, 256 by default),
read the same way: the path a run on such a copy takes (simplejpeg's decode and, under DeiT's recipe,
tasks/data/imagenet_fast.py's uint8 transform), timed beside the original's current path in the same run: the
loader's rates, the stages, and the two items in alternated rounds.

What the GPU consumes. Text: BERT-Base tokens/s of the growbench trainer from bench/results/gpu_mfu.json (measured
on an H200), and the same scaled to the issue's 45% MFU target. Images: DeiT-B at 224 at 45% MFU of the card's
dense bf16 peak (runs/hardware.py), from the family's analytic FLOPs (forward + backward = 3 x forward).

Timing: for each worker count a fresh loader, as a run makes it, for at least 8 batches a worker; the clock starts
when the first round has arrived (each worker's first batch: start-up is paid once per run, and those batches were
made side by side before the first arrived) and stops at the last, so the rate is (batches - first round) x B over
that time; alongside, samples per CPU second of the process making the batches (each batch timed where it is
made, each worker's first left out), which a machine shared with other jobs disturbs far less than the wall clock,
and the CPU the training process spends receiving them. The target is >= 1.5x
consumption on the GPU machine's 16 cores: the script prints one worker's samples per CPU second, the cores that
rate needs for 1.5x (one core left to the training process) and the ratio 15 workers would give, assuming
workers scale linearly (each makes whole batches on its own, sharing nothing). Images also get a per-stage cost
(decode, transform) of one core, and what torchvision's tensor path would cost instead (bench/perf/image_stages.py).

Run: HF_HUB_OFFLINE=1 python bench/perf/pipeline.py [--workers 0 1 2] [--images 320] [--source-sizes 500x375 341x256]
     [--deit-recipe] [--resized-copy 256]
Writes bench/results/pipeline.json (or --out).
"""
from __future__ import annotations

import json
import math
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from bench.cli import check_result_file, non_negative_int, positive_float, positive_int, refused_as_one_line  # noqa: E402
from bench.perf.image_stages import image_stage_costs, resized_copy_costs  # noqa: E402
from bench.result_file import RESULTS, write_result  # noqa: E402
from runs.cli import OneLineArgumentParser  # noqa: E402

TARGET_MFU = 0.45            # the training step's MFU target
TARGET_RATIO = 1.5           # produced / consumed, on the GPU machine's cores
GPU_MACHINE_CORES = 16
SEED = 0


# ---------------------------------------------------------------------------------------------- what the GPU eats

def text_consumption(gpu_mfu: Path, target_mfu: float, model: str = "bert_base") -> dict:
    """BERT-Base samples/s (sequences of its seq length) the GPU step consumes: as measured, and at `target_mfu`."""
    rows = {r["model"]: r for r in json.loads(gpu_mfu.read_text())["rows"]}
    if model not in rows or "mfu" not in rows[model]:
        raise ValueError(f"{gpu_mfu} has no {model} row with an MFU; run bench/perf/gpu_mfu.py on a GPU first")
    row, name = rows[model], json.loads(gpu_mfu.read_text()).get("device_name", "?")
    measured = row["tokens_per_s"]["trainer"]
    at_target = measured * target_mfu / row["mfu"]["trainer"]     # tokens/s scale with MFU at fixed FLOPs per token
    return {"model": row["spec"], "device_name": name, "seq": row["seq"], "measured_mfu": row["mfu"]["trainer"],
            "measured_samples_per_s": measured / row["seq"], "target_samples_per_s": at_target / row["seq"]}


def image_consumption(gpu: str, target_mfu: float) -> dict:
    """DeiT-B (the paper's deit_s_b large model, 224) images/s at `target_mfu` of `gpu`'s dense bf16 peak."""
    from runs.hardware import peak_tflops
    from models import get_family
    from models.flops import backward_flops
    from tasks import get_task
    peak = peak_tflops(gpu)
    if peak is None:
        raise ValueError(f"no dense bf16 peak known for GPU {gpu!r}; see runs/hardware.py")
    spec = get_task("deit_s_b", scale="paper").large
    fwd = get_family(spec.family).forward_flops(spec, 1)
    per_image = fwd.total + backward_flops(fwd)
    return {"model": spec.short(), "device_name": gpu, "peak_tflops": peak, "train_flops_per_image": per_image,
            "target_samples_per_s": target_mfu * peak * 1e12 / per_image}


# ------------------------------------------------------------------------------------------------- local data sets

def write_ptb_corpus(root: Path, repeat: int) -> int:
    """The embedded PTB as local text files (train.txt repeated `repeat` times, valid.txt); returns the train docs."""
    import treebank
    train = [ln.strip() for ln in treebank.penn["train"].split("\n") if ln.strip()]
    root.mkdir(parents=True)
    (root / "train.txt").write_text("\n".join(train * repeat) + "\n")
    (root / "valid.txt").write_text(treebank.penn["valid"])
    return len(train) * repeat


def write_image_folder(root: Path, n_train: int, classes: int, size=(500, 375)) -> None:
    """An ImageFolder of JPEGs of `size`: smooth random colour fields (a 16 x 12 grid upsampled) plus grain."""
    from PIL import Image
    rng = np.random.default_rng(0)
    for split, n in (("train", n_train), ("val", max(classes, n_train // 10))):
        for i in range(n):
            folder = root / split / f"class{i % classes:03d}"
            folder.mkdir(parents=True, exist_ok=True)
            low = Image.fromarray(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)).resize(size, Image.BICUBIC)
            pixels = np.asarray(low, dtype=np.float32) + rng.normal(0, 15, (size[1], size[0], 3))
            Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(folder / f"{i:06d}.jpg", quality=90)


def tokenisation_pass(data, corpus: Path, cache: Path) -> dict:
    """token_ids over the training documents again (into a fresh file), on all cores and on one."""
    from tasks.data.corpora import iter_documents
    from tasks.data.text import _separator, token_ids
    docs = list(iter_documents("wikipedia", "train", str(corpus), cache_root=cache))
    sep = _separator(data.tokenizer, "mlm")
    out = {"documents": len(docs)}
    for label, parallel in (("all_cores", "true"), ("one_thread", "false")):
        os.environ["TOKENIZERS_PARALLELISM"] = parallel          # read by `tokenizers` at each batch call
        file = cache / f"timing-{label}.npy"
        t0 = time.perf_counter()
        ids = token_ids(data.tokenizer, iter(docs), sep, file)
        seconds = time.perf_counter() - t0
        out[label] = {"seconds": seconds, "documents_per_s": len(docs) / seconds, "tokens_per_s": len(ids) / seconds}
        out["tokens"] = int(len(ids))
    os.environ["TOKENIZERS_PARALLELISM"] = "false"               # workers fork after this: no Rust pool in them
    return out


# ------------------------------------------------------------------------------------------------------- the loop

class CpuTimed:
    """The data, its batches carrying the CPU seconds the process that made them spent on them (a key the trainer
    never sees): in a worker, one core's steady cost of a batch, whatever else runs on the machine."""

    def __init__(self, data):
        self.data = data

    def train_batch(self, index: int, batch_size: int, seed: int) -> dict:
        t0 = time.process_time()
        batch = self.data.train_batch(index, batch_size, seed)
        return {**batch, "bench_cpu_s": torch.tensor(time.process_time() - t0, dtype=torch.float64)}


ROUNDS_PER_WORKER = 8      # batches each worker makes at least, so that the first round is a small part of the timing


def loader_rate(data, batch_size: int, batches: int, workers: int) -> dict:
    """Samples/s of a fresh train_loader with `workers`, in steady state: from the end of the first round (the
    workers' first batches, made side by side before anything arrives) to the last batch, over at least
    ROUNDS_PER_WORKER rounds (its first run, with 10 batches for 12 workers, timed nothing but that first round and
    reported 2.3x what 12 cores can make); and per CPU second: of the process that makes a batch (the median over
    batches, each worker's first left out: its pages are still being copied from the parent), and of this process's
    share (starting the workers, receiving the batches)."""
    from tasks.data.loader import train_loader
    batches = max(batches, ROUNDS_PER_WORKER * workers)
    loader = train_loader(CpuTimed(data), batch_size, SEED, start_step=0, total_steps=batches, workers=workers)
    t0, own0 = time.perf_counter(), time.process_time()
    arrivals, making = [], []
    for k, (_, batch) in enumerate(loader):
        arrivals.append(time.perf_counter())
        if k >= workers:                               # items 0 .. workers-1 are the workers' first batches
            making.append(float(batch["bench_cpu_s"]))
    if len(arrivals) != batches or not making:
        raise RuntimeError(f"{workers} workers delivered {len(arrivals)} of {batches} batches, {len(making)} timed")
    first_round = max(workers, 1)                      # the batches already made when the first arrives
    span, own = arrivals[-1] - arrivals[first_round - 1], time.process_time() - own0
    received = own - (sum(making) if not workers else 0.0)   # with 0 workers this process made them too
    return {"workers": workers, "batches": batches, "first_batch_s": arrivals[0] - t0,
            "samples_per_s": (batches - first_round) * batch_size / span,
            "samples_per_cpu_s": batch_size / float(np.median(making)),
            "receiving_cpu_ms_per_batch": 1e3 * received / batches}


def measure(kind: str, data, batch_size: int, batches: int, workers: list[int], consumed: float) -> dict:
    rows = []
    for w in workers:
        row = loader_rate(data, batch_size, batches, w)
        row["ratio"] = row["samples_per_s"] / consumed
        rows.append(row)
        print(f"  {kind}: {w} workers: {row['samples_per_s']:,.0f} samples/s, {row['samples_per_cpu_s']:,.0f} per CPU s "
              f"({row['ratio']:.2f}x the GPU's {consumed:,.0f}/s; first batch after {row['first_batch_s']:.1f} s)",
              flush=True)
    # one core's rate: samples per CPU second of a worker making batches (robust to neighbours' load); the
    # wall-clock rate of one worker alongside
    one = next((r for r in rows if r["workers"] == 1), None) or rows[0]
    per_worker, wall = one["samples_per_cpu_s"], one["samples_per_s"]
    need = math.ceil(TARGET_RATIO * consumed / per_worker) + 1              # + the training process's core
    on_gpu_machine = (GPU_MACHINE_CORES - 1) * per_worker / consumed
    print(f"  {kind}: one worker makes {per_worker:,.0f} samples per CPU second ({wall:,.0f}/s wall-clock here); "
          f"{TARGET_RATIO}x the GPU's consumption needs {need} cores at that rate; {GPU_MACHINE_CORES} cores "
          f"(15 workers) would make {on_gpu_machine:.2f}x if workers scale linearly", flush=True)
    return {"rows": rows, "per_worker_samples_per_cpu_s": per_worker, "per_worker_wall_samples_per_s": wall,
            "consumed_samples_per_s": consumed,
            "cores_needed_for_target": need, "projected_ratio_on_16_cores": on_gpu_machine}


def training_images(folder: Path, deit_recipe: bool):
    """`folder` read as a run reads it, with the training transform (DeiT's recipe under `deit_recipe`)."""
    from tasks.data.imagenet import load_imagenet_data
    data = load_imagenet_data(str(folder))
    if deit_recipe:
        from tasks import get_task
        data = data.with_augmentation(get_task("deit_s_b", scale="paper").recipe.augmentation())
    return data


def measure_resized_copy(folder: Path, dest: Path, args, current, consumed: float, current_per_worker: float) -> dict:
    """The loader's rates and the stage costs of `folder`'s resized copy at --resized-copy, the path a run on such a
    copy takes (under --deit-recipe, tasks/data/imagenet_fast.py's uint8 transform), beside `current` (the original
    folder's data as a GPU run's loader sends it), and one worker's rate against the current path's."""
    from tasks.data.resized_copy import write_resized_copy
    t0 = time.process_time()
    manifest = write_resized_copy(folder, dest, short_side=args.resized_copy, workers=1)
    conversion_ms = (time.process_time() - t0) / sum(manifest["images"].values()) * 1e3
    data = training_images(dest, args.deit_recipe)
    sent = data.for_transfer()
    print(f"  resized copy at short side {args.resized_copy}: {conversion_ms:.1f} CPU ms an image to convert; "
          f"training transform {type(data.file_transform).__name__}", flush=True)
    rates = measure(f"images resized copy {args.resized_copy}", sent, args.image_batch, args.image_batches,
                    args.workers, consumed)
    per_worker = rates["per_worker_samples_per_cpu_s"]
    print(f"  resized copy: one worker {per_worker:,.0f} images per CPU second against {current_per_worker:,.0f} on "
          f"the original images ({per_worker / current_per_worker:.2f}x); {TARGET_RATIO}x of the 45%-MFU step on "
          f"{GPU_MACHINE_CORES - 1} workers needs {TARGET_RATIO * consumed / (GPU_MACHINE_CORES - 1):,.0f}", flush=True)
    return {"short_side": args.resized_copy, "manifest": manifest, "conversion_cpu_ms_per_image": conversion_ms,
            "transform": repr(data.file_transform), **rates,
            "per_worker_against_current": per_worker / current_per_worker,
            "needed_per_worker_for_target": TARGET_RATIO * consumed / (GPU_MACHINE_CORES - 1),
            "cpu_ms_per_image": resized_copy_costs(current, sent, min(args.images, 100))}


def image_size(text: str) -> tuple[int, int]:
    """argparse type: WxH, both >= 32 pixels."""
    import argparse
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not WxH (e.g. 500x375)") from None
    if min(width, height) < 32:
        raise argparse.ArgumentTypeError(f"{text}: both sides must be >= 32 pixels")
    return width, height


def main(argv=None):
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    ap = OneLineArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=non_negative_int, nargs="+", default=list(range(cores + 1)),
                    help=f"worker counts to time (default 0 .. the {cores} cores here)")
    ap.add_argument("--only", choices=("text", "images"), default=None)
    ap.add_argument("--text-batch", type=positive_int, default=256)
    ap.add_argument("--seq", type=positive_int, default=128)
    ap.add_argument("--text-batches", type=positive_int, default=40,
                    help="batches timed per worker count (at least 8 a worker)")
    ap.add_argument("--text-repeat", type=positive_int, default=1, help="PTB's training text this many times over")
    ap.add_argument("--images", type=positive_int, default=320, help="training JPEGs generated (val: a tenth)")
    ap.add_argument("--source-sizes", type=image_size, nargs="+", default=[(500, 375), (341, 256)],
                    help="JPEG sizes WxH: ImageNet's typical 500x375, and a copy resized to a 256 short side")
    ap.add_argument("--image-batch", type=positive_int, default=32)
    ap.add_argument("--image-batches", type=positive_int, default=10,
                    help="batches timed per worker count (at least 8 a worker)")
    ap.add_argument("--gpu", default="NVIDIA H200", help="whose dense bf16 peak sets the images' consumption")
    ap.add_argument("--gpu-mfu", default=str(RESULTS / "gpu_mfu.json"), help="measured BERT-Base tokens/s")
    ap.add_argument("--target-mfu", type=positive_float, default=TARGET_MFU)
    ap.add_argument("--deit-recipe", action="store_true", help="images with DeiT's training recipe (RandAugment, "
                    "random erasing, Mixup/CutMix: deit_s_b's paper-scale recipe) instead of crop and flip")
    ap.add_argument("--resized-copy", type=non_negative_int, default=256, metavar="SHORT_SIDE",
                    help="also time each image folder's resized copy (tasks/data/resized_copy.py) at this short side, "
                    "beside the original (default 256; 0: not)")
    ap.add_argument("--out", default=str(RESULTS / "pipeline.json"))
    args = ap.parse_args(argv)
    with refused_as_one_line():
        check_result_file(args.out)
        if min(args.text_batches, args.image_batches) < 2:
            raise ValueError("--text-batches and --image-batches must be >= 2 (a rate needs two arrivals)")
        if args.target_mfu > 1:
            raise ValueError(f"--target-mfu is a fraction of the peak (0 < x <= 1), got {args.target_mfu}")
        consumption = {"text": text_consumption(Path(args.gpu_mfu), args.target_mfu),
                       "images": image_consumption(args.gpu, args.target_mfu)}
    torch.set_num_threads(1)                       # the training process's share; workers take one thread each
    result = {"cores": cores, "target_mfu": args.target_mfu, "target_ratio": TARGET_RATIO,
              "load_average_at_start": os.getloadavg(), "consumption": consumption}
    from tasks.data import load_pretrain_data
    with tempfile.TemporaryDirectory(prefix="growbench-pipeline-") as tmp:
        tmp = Path(tmp)
        if args.only in (None, "text"):
            docs = write_ptb_corpus(tmp / "corpus", args.text_repeat)
            t0 = time.perf_counter()
            data = load_pretrain_data("wikipedia", "mlm", seq_len=args.seq, vocab_size=30522, tokenizer="wordpiece",
                                      path=str(tmp / "corpus"), cache_dir=str(tmp / "cache"))
            prepare = time.perf_counter() - t0
            tok = tokenisation_pass(data, tmp / "corpus", tmp / "cache")
            print(f"text: {docs:,} PTB documents, WordPiece vocab {data.vocab_size:,}, {data.n_train:,} blocks of "
                  f"{args.seq}; tokeniser trained and corpus tokenised in {prepare:.1f} s; tokenisation pass alone "
                  f"(token_ids, {tok['tokens']:,} tokens): all cores {tok['all_cores']['documents_per_s']:,.0f} docs/s "
                  f"{tok['all_cores']['tokens_per_s']:,.0f} tokens/s; one thread "
                  f"{tok['one_thread']['documents_per_s']:,.0f} docs/s {tok['one_thread']['tokens_per_s']:,.0f} "
                  f"tokens/s", flush=True)
            consumed = consumption["text"]["target_samples_per_s"]
            result["text"] = {"documents": docs, "vocab": data.vocab_size, "batch": args.text_batch, "seq": args.seq,
                              "prepare_seconds": prepare, "tokenisation_pass": tok,
                              **measure("text", data, args.text_batch, args.text_batches, args.workers, consumed)}
            # against the step as fast as it is today (gpu_mfu.json's MFU), not at the target
            measured = consumption["text"]["measured_samples_per_s"]
            result["text"]["projected_ratio_on_16_cores_vs_measured_step"] = (
                (GPU_MACHINE_CORES - 1) * result["text"]["per_worker_samples_per_cpu_s"] / measured)
        if args.only in (None, "images"):
            result["images"] = {}
            for width, height in args.source_sizes:
                folder = tmp / f"imagenet-{width}x{height}"
                t0 = time.perf_counter()
                write_image_folder(folder, args.images, classes=10, size=(width, height))
                data = training_images(folder, args.deit_recipe)
                sent = data.for_transfer()
                print(f"images: {args.images} JPEGs of {width} x {height} written in {time.perf_counter() - t0:.1f} s, "
                      f"read at {data.image_size} with the training transform", flush=True)
                result["images"][f"{width}x{height}"] = {
                    "images": args.images, "source_size": [width, height], "image_size": data.image_size,
                    "batch": args.image_batch, "transform": repr(getattr(data, "transforms", {}).get("train")),
                    "deit_recipe": args.deit_recipe,
                    # what a GPU run's workers make: uint8 pixels where the device converts them (for_transfer)
                    "sends_uint8": sent.sends_uint8,
                    **measure(f"images {width}x{height}", sent, args.image_batch, args.image_batches,
                              args.workers, consumption["images"]["target_samples_per_s"]),
                    "cpu_ms_per_image": image_stage_costs(data, folder, min(args.images, 100), sent)}
                if args.resized_copy:
                    result["images"][f"{width}x{height}"]["resized_copy"] = measure_resized_copy(
                        folder, tmp / f"{folder.name}-copy", args, sent, consumption["images"]["target_samples_per_s"],
                        result["images"][f"{width}x{height}"]["per_worker_samples_per_cpu_s"])
    result["load_average_at_end"] = os.getloadavg()
    write_result(args.out, result)


if __name__ == "__main__":
    main()
