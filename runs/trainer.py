"""The training loop: flat, nanoGPT style. AdamW, warmup + decay from transformers.get_scheduler, gradient
clipping, periodic evaluation on held-out data, optional bf16 autocast, a FLOPs ledger, and a checkpoint
that makes a killed run continue with exactly the numbers it would have produced.

Exact resumption rests on one property of the data: batch i is a pure function of (seed, i)
(tasks.data.PretrainData.train_batch), so the data position is just the step counter. Dropout is seeded per
micro-batch the same way, which also makes a run on W processes (torchrun; runs/distributed.py) compute what one
process with W times the accumulation computes.
"""
from __future__ import annotations

import math
import time

import numpy as np
import torch
from tqdm import tqdm
from transformers import get_scheduler

from methods.base import GrowthMethod, Stage
from models import get_family
from models.flops import backward_flops, ran_forward
from models.seeding import seed_dropout
from models.canonical import grows_width
from models.twins import twin_fractions
from runs import allocator, distributed
from runs.hardware import device_peak_flops
from runs.ledger import FlopsLedger
from runs.checkpoint import CHECKPOINT, TrainState, save_checkpoint, set_rng_state
from runs.record import RunWriter
from runs.strategies import BlockRunner, Strategies
from tasks.data import derive_seed, to_device
from tasks.data.loader import train_loader

class NonFiniteLoss(RuntimeError):
    pass


def batch_dims(batch: dict) -> tuple[int, int]:
    """(batch size, sequence length) of a batch; images have no sequence length."""
    if "input_ids" in batch:
        return tuple(batch["input_ids"].shape)
    return batch["labels"].shape[0], 0


def make_optimizer(model, recipe):
    # no weight decay on biases and norm parameters (the BERT/DeiT convention)
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    # on a GPU, the fused kernel: one launch for the whole update instead of a few per parameter group (the
    # CPU keeps the default implementation, whose numbers the committed CPU records were made with)
    fused = bool(decay or no_decay) and next(iter(decay or no_decay)).is_cuda
    return torch.optim.AdamW([{"params": decay, "weight_decay": recipe.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=recipe.lr, betas=recipe.adam_betas, eps=recipe.adam_eps, fused=fused or None)


def make_scheduler(optimizer, recipe, total: int):
    """The recipe's lr schedule over `total` steps (transformers.get_scheduler): warm-up, then the named decay; a
    cosine with `min_lr` decays to it (DeiT's --min-lr) instead of to 0."""
    if recipe.min_lr:
        return get_scheduler("cosine_with_min_lr", optimizer, num_warmup_steps=recipe.warmup,
                             num_training_steps=total, scheduler_specific_kwargs={"min_lr": recipe.min_lr})
    return get_scheduler(recipe.schedule, optimizer, num_warmup_steps=recipe.warmup, num_training_steps=total)


def set_trainable(model, family, stage: Stage) -> None:
    """Freeze every main block not in stage.trainable_blocks (None: train everything)."""
    for p in model.parameters():
        p.requires_grad_(True)
    if stage.trainable_blocks is None:
        return
    for i, block in enumerate(family.blocks(model)):
        if i not in stage.trainable_blocks:
            for p in block.parameters():
                p.requires_grad_(False)


def precision(device: torch.device, bf16: bool):
    """The one numeric context every forward of a run runs in (evaluation, the warm-up, the steps): bf16 autocast
    when the recipe asks for it. One place, so that no forward differs from the steps' (a compiled forward is guarded
    on autocast's state)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)


@torch.no_grad()
def evaluate(model, family, eval_batches, device, bf16: bool) -> dict:
    """Mean loss over the held-out batches (and accuracy for images). With several processes each scores its
    share of the batches and the numbers are gathered exactly (runs/distributed.py): the same result as one."""
    was_training = model.training
    model.eval()
    losses, counts = torch.zeros(len(eval_batches), dtype=torch.float64), torch.zeros(2, dtype=torch.float64)
    for i in distributed.shard(len(eval_batches), model):
        batch = to_device(eval_batches[i], device)
        with precision(device, bf16):
            if family.objective == "image":
                logits = family.logits(model, batch)
                losses[i] = torch.nn.functional.cross_entropy(logits.float(), batch["labels"]).item()
                counts += torch.tensor([(logits.argmax(-1) == batch["labels"]).sum().item(), batch["labels"].numel()])
            else:
                losses[i] = family.loss(model, batch).item()
    model.train(was_training)
    losses, counts = distributed.collect(model, losses, counts)
    (correct, seen) = counts.tolist()
    out = {"eval_loss": float(np.mean(losses.tolist()))}
    if seen:
        out["eval_acc"] = correct / seen
    return out


def stage_at(stages: list[Stage], step: int) -> tuple[int, Stage]:
    start = 0
    for i, stage in enumerate(stages):
        if step < start + stage.steps:
            return i, stage
        start += stage.steps
    return len(stages) - 1, stages[-1]


def micro_step(model, family, method: GrowthMethod, runner: BlockRunner, batch: dict, stage: Stage, step: int,
               total: int, index: int, ledger: FlopsLedger, recipe, call=None, head_tokens: int | None = None):
    """Forward and backward of micro-batch `index`; charges the FLOPs of what ran: the blocks the strategies
    kept, on the tokens they kept, frozen blocks forward only, the head on the positions the loss decodes
    (`head_tokens`, counted on the CPU copy of the batch). Returns the loss as a tensor (no host sync here).
    `call`: what the forward goes through (DDP / FSDP / torch.compile around `model`; runs/distributed.wrap),
    default `model` itself."""
    with runner.forward(model, batch, stage, step, total, index) as ran:
        with precision(batch_device(batch), recipe.bf16):
            loss = family.loss(model if call is None else call, batch)
            loss = method.extra_loss(model, batch, loss, step, total, ledger)
    (loss / recipe.grad_accum).backward()
    b, t = batch_dims(batch)
    if head_tokens is None:                  # not counted by the caller: count here (a host sync on a GPU)
        head_tokens = family.head_tokens(batch)
    fwd, trainable = ran_forward(family.forward_flops(model_spec(model, family), b, t, head_tokens), ran.tokens,
                                 stage.trainable_blocks)
    ledger.add("forward", fwd.total)
    ledger.add("backward", backward_flops(fwd, trainable))
    return loss.detach()


def batch_device(batch: dict) -> torch.device:
    return next(iter(batch.values())).device


def wrap_model(model, family, stage: Stage, strategies: Strategies | None, device, parallel: str, compile: bool):
    """The forward callable for training `model` in `stage` (runs/distributed.wrap): DDP must be told when some
    trainable parameters may get no gradient in a step (frozen-below or skipped blocks, dropped layers)."""
    partial = (stage.trainable_blocks is not None or stage.active_blocks is not None
               or bool(strategies is not None and strategies.layer_drop))
    return distributed.wrap(model, device, mode=parallel, blocks=family.blocks(model), find_unused=partial,
                            compile=compile)


def warm_up(call, model, family, data, recipe, seed: int, device) -> None:
    """One untimed, uncharged forward/backward before the clock starts: lazy kernel and allocator set-up is
    paid once per process by whichever run comes first, and would otherwise bias wall-time comparisons
    (a scratch run measured first looked slower than the same run measured second). In the steps' `precision`: a
    warm-up outside it compiled a graph the steps never use, and the first step compiled again."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        batch = to_device(data.train_batch(0, recipe.batch_size, seed), device)
        with precision(device, recipe.bf16):
            loss = family.loss(call, batch)
        loss.backward()
    model.zero_grad(set_to_none=True)


def train(model, task, method: GrowthMethod, data, ledger: FlopsLedger, writer: RunWriter, *, seed: int,
          device: torch.device, resume_from: dict | None = None, progress: bool = True,
          strategies: Strategies | None = None, parallel: str = "ddp", compile: bool = False,
          start_wall: float = 0.0, log=None, workers: int | None = None) -> dict:
    """Train `model` on `task`'s recipe; returns the final metrics row. Logs to `writer`, checkpoints beside it.
    `strategies`: layer and token dropping, applied to every training forward (runs/strategies.py).
    Under torchrun every rank calls this (runs/distributed.py): `parallel` "ddp" or "fsdp"; `compile`:
    torch.compile the forward. `log`: where a line goes at every evaluation (train loss, lr, speed, eval loss), for
    runs without a progress bar (sweeps); None: none. `workers`: DataLoader processes making the batches (None: 0
    on the CPU, the cores on a GPU; tasks/data/loader.default_workers)."""
    recipe, family = task.recipe, get_family(task.family)
    runner = BlockRunner(family, strategies, seed)
    stages = method.stages(task, recipe.steps)
    total = sum(s.steps for s in stages)
    state = TrainState(wall=start_wall)
    stage_index, stage = stage_at(stages, 0)
    if parallel == "fsdp" and distributed.world_size() > 1 and (len(stages) > 1 or (strategies and strategies.active)):
        raise ValueError("fsdp shards one fixed model over the ranks: it takes single-stage methods without "
                         "layer/token dropping or staged training (use the default ddp)")
    model = method.enter_stage(model, stage, task).to(device)
    set_trainable(model, family, stage)
    if resume_from is not None:
        # continue in the stage the checkpoint was written in (its model shape and trainable set); a boundary
        # right after it is crossed by the loop below, exactly as in the uninterrupted run
        stage_index = resume_from["stage"]
        stage = stages[stage_index]
        model = method.enter_stage(model, stage, task).to(device)
        set_trainable(model, family, stage)
        model.load_state_dict(resume_from["model"])
    call = wrap_model(model, family, stage, strategies, device, parallel, compile)   # before the optimizer: FSDP
    optimizer = make_optimizer(model, recipe)                                       # swaps the parameters
    scheduler = make_scheduler(optimizer, recipe, total)
    if resume_from is not None:
        # optimizer state after the scheduler is built: building it resets every group's lr to step 0's
        distributed.load_optimizer_state(model, optimizer, resume_from["optimizer"])
        scheduler.load_state_dict(resume_from["scheduler"])
        state = TrainState(**resume_from["state"])
        ledger.counts.update(resume_from["ledger"])
        set_rng_state(resume_from["rng"])
    eval_batches = data.eval_batches(recipe.batch_size, recipe.eval_batches)
    ckpt_path = writer.dir / CHECKPOINT
    writer.state = state     # the live step, for the message when the run is interrupted (runs/experiment.py)
    model.train()
    method.set_step(model, state.step, total)      # MSG's masks: a function of the step, here as when resuming
    if resume_from is None and total > 0:
        warm_up(call, model, family, data, recipe, seed, device)
    # refreshed at most once a second: at 10 a second its terminal writes cost ~1.5% of a tiny run's time; it stays
    # on screen when done (elapsed time and rate), and shows the time left while it runs
    bar = tqdm(total=total, initial=state.step, disable=not progress or not distributed.is_main(),
               desc=f"{method.name}:{task.name}", dynamic_ncols=True, leave=True, mininterval=1.0, unit="step")
    last, running = {}, []
    speed = Speedometer(data.unit, device, state, ledger.total)
    # the micro-batches from here to the end, made by DataLoader workers on a GPU (inline, in order, with 0 workers,
    # the CPU default): the same batches in the same order either way (tasks/data/loader.py)
    batches = iter(train_loader(data, recipe.batch_size, seed, start_step=state.step, total_steps=total,
                                grad_accum=recipe.grad_accum, index_fn=distributed.micro_index, device=device,
                                workers=workers))
    while state.step < total:
        index, current = stage_at(stages, state.step)
        if index != stage_index:               # a new stage: maybe a new model, new frozen set, new optimizer
            stage_index, stage = index, current
            model = method.enter_stage(model, stage, task).to(device)
            set_trainable(model, family, stage)
            call = wrap_model(model, family, stage, strategies, device, parallel, compile)
            # the trainable set (or the model) changed, so the optimizer is rebuilt; the schedule continues
            optimizer = make_optimizer(model, recipe)
            old = scheduler.state_dict()
            scheduler = make_scheduler(optimizer, recipe, total)
            scheduler.load_state_dict(old)
            for group in optimizer.param_groups:
                group["lr"] = scheduler.get_last_lr()[0]
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        step_loss, units, before = None, 0, ledger.as_dict()
        # the step's dropout draws must not depend on how micro-batches are spread over ranks: each micro-batch
        # seeds its own, and the run's RNG stream (used at stage boundaries) is left as it was
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            for micro in range(recipe.grad_accum):
                index, cpu_batch = next(batches)
                seed_dropout(derive_seed(seed, index, 3), device)
                head_tokens = family.head_tokens(cpu_batch)
                batch = data.on_device(cpu_batch, device)     # a GPU's loader sends uint8 images
                with distributed.accumulating(call, last=micro == recipe.grad_accum - 1):
                    loss = micro_step(model, family, method, runner, batch, stage, state.step, total, index,
                                      ledger, recipe, call, head_tokens) / recipe.grad_accum
                    step_loss = loss if step_loss is None else step_loss + loss
                units += data.units(cpu_batch)
        # The step's loss stays on the device: reading it here would make the host wait for the GPU every step
        # (measured: the trainer at 0.82 of a raw loop on BERT-Base, bench/README.md section 4). It is read, and
        # checked for NaN, at the next logged row (read_losses), before any row or checkpoint is written.
        if distributed.world_size() > 1:
            # global numbers: the mean loss and the units and FLOPs of every rank's micro-batches, in one
            # collective per step (which reads the loss: several processes still sync once a step)
            step_loss, units = distributed.sum_over_ranks(ledger, before, float(step_loss), units)
            step_loss /= distributed.world_size()
        state.units += int(units)
        if recipe.grad_clip:
            # the optimizer's parameters are the trainable ones; walking model.parameters() every step cost
            # ~0.7 ms (bench/perf/throughput.py)
            torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g["params"]], recipe.grad_clip)
        optimizer.step()
        scheduler.step()
        state.step += 1
        method.set_step(model, state.step, total)
        state.wall += time.perf_counter() - t0
        running.append((state.step - 1, step_loss))
        bar.update(1)
        is_eval = state.step % recipe.eval_every == 0 or state.step == total
        if state.step % recipe.log_every == 0 or is_eval:
            losses = read_losses(running, ckpt_path)
            row = {"step": state.step, "units": state.units, "wall": round(state.wall, 4),
                   "lr": scheduler.get_last_lr()[0], "train_loss": float(np.mean(losses)),
                   "stage": stage.name,
                   "full_model": full_model(model, family, task, stage) and method.computes_large(state.step, total),
                   **{f"flops_{k}": v for k, v in ledger.as_dict().items()},
                   "flops": ledger.total}
            running = []
            if is_eval:
                row.update(evaluate(model, family, eval_batches, device, recipe.bf16))
                if grows_width(task.small, task.large):
                    plain = distributed.plain_model(model, family)   # FSDP: gathered (a collective), rank 0 holds it
                    if distributed.is_main():
                        row.update(width_twins(plain, family, task))
                # checkpoint after the row is logged, so a resume never repeats or loses a line
                writer.log(row)
                save_checkpoint(ckpt_path, model, optimizer, scheduler, state, ledger, stage_index)
            else:
                writer.log(row)
            # the C heap's free pages back to the system: on glibc a masked LM's steps (tensors of a new size every
            # batch) fragment the heap and the resident size grew every step with nothing kept (runs/allocator.py)
            allocator.release_free_heap()
            speed.show(row, bar, log if is_eval else None)
            last = row
    bar.close()
    return {"model": model, "last": last, "state": state}


def read_losses(running: list, ckpt_path) -> list[float]:
    """The losses of the steps since the last row, as numbers: the host waits for the device here, once a row, not
    once a step. A non-finite one stops the run before the row or a checkpoint is written, naming its step."""
    losses = [float(loss) for _, loss in running]
    for (step, _), loss in zip(running, losses):
        if not math.isfinite(loss):
            kept = (f"the last good checkpoint {ckpt_path} is kept" if ckpt_path.exists()
                    else "no checkpoint was written yet (the first comes with the first evaluation)")
            raise NonFiniteLoss(f"loss became {loss} at step {step}; {kept} (lower the learning rate or check the "
                                "data)")
    return losses


class Speedometer:
    """Train loss, lr, units (tokens or images) per second and, on a GPU with a known peak, MFU (model FLOPs the
    ledger charged / time / dense bf16 peak) since the previous row, as nanoGPT prints them: on the progress bar,
    and as a line through `log` at evaluations (sweeps run without a bar). Reads only the row."""

    def __init__(self, unit: str, device: torch.device, state: TrainState, flops: float):
        self.unit, self.peak = unit, device_peak_flops(device)
        self.units, self.wall, self.flops = state.units, state.wall, flops

    def show(self, row: dict, bar, log) -> None:
        seconds = row["wall"] - self.wall
        fields = {"loss": f"{row['train_loss']:.3f}", "lr": f"{row['lr']:.2e}"}
        if seconds > 0:
            fields[f"{self.unit}/s"] = f"{(row['units'] - self.units) / seconds:,.0f}"
            if self.peak:
                fields["mfu"] = f"{100 * (row['flops'] - self.flops) / seconds / self.peak:.1f}%"
        if "eval_loss" in row:
            fields["eval_loss"] = f"{row['eval_loss']:.3f}"
        if "eval_acc" in row:
            fields["eval_acc"] = f"{row['eval_acc']:.2%}"
        self.units, self.wall, self.flops = row["units"], row["wall"], row["flops"]
        bar.set_postfix(fields, refresh=False)
        if log is not None and bar.disable:
            log(f"step {row['step']}: " + ", ".join(f"{k} {v}" for k, v in fields.items()))


def full_model(model, family, task, stage: Stage | None = None) -> bool:
    """Whether an evaluation now measures the large model at its full architecture (task.large in every size, every
    block active): savings count only those (paper §4.1), never MSLT's shallower stacking stages, staged training's
    sub-network, or a model of another width (runs/experiment.check_grown refuses one before step 0)."""
    return model_spec(model, family) == task.large and (stage is None or stage.active_blocks is None)


def width_twins(model, family, task) -> dict:
    """{"twins": {space: fraction}, "twin_gap": {space: median gap}} for a model of the large width on a pair that
    grows width (models/twins.py: the share of added units that are still copies of another unit), else {}. Logged on every evaluation row, scratch
    included (its control value is 0), so that the records show whether a copy init ever used the width it added."""
    if not grows_width(task.small, task.large) or not family.owns(model):
        return {}
    spec = model_spec(model, family)
    if (spec.hidden, spec.heads, spec.kv, spec.ffn) != (task.large.hidden, task.large.heads, task.large.kv,
                                                         task.large.ffn):
        return {}
    return twin_fractions(family.to_canonical(model), task.small)


def model_spec(model, family):
    # cached on the module: specs only change when a stage swaps the model
    spec = getattr(model, "_growbench_spec", None)
    if spec is None:
        spec = family.spec_of(model)
        model._growbench_spec = spec
    return spec
