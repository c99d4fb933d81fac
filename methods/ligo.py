"""LiGO: Learned Linear Growth Operator (Wang et al., "Learning to Grow Pretrained Models for Efficient
Transformer Training", ICLR 2023; §3.2-3.4, Appendices A and B.1), as its authors ran it: `--method ligo`.

`fit` trains the operator of methods/ligo_operator.py for `fit_steps` (100) steps on the *large* model's
pretraining objective: materialise the large canonical weights from the (constant) small ones ->
`family.state_from_canonical` -> `family.loss(skeleton, batch, params=state)` (torch.func.functional_call) ->
backward into the operator only. `grow` then materialises once more, under no_grad, into a plain large
model that trains as usual.

The defaults are what the official code (VITA-Group/LiGO: ligo.py, run_grow_distributed.py) computes with its
README's BERT grow command (`--fuse_init_scheme stackbert_noisy rand --max_steps 100`, configs/bert_wiki.txt),
because that is the start that reproduces the paper's ranking; REPRODUCE.md's verdict says on which pairs. How it
differs from Alg. 1 as printed:

- Depth first: the small layers are mixed per *large* layer, then each large layer is expanded in width with its own
  matrices (Alg. 1 expands each small layer, then mixes). Every module of every large layer owns its coefficients,
  weights and biases separately (`separate_bias_depth`); init "stackbert_noisy": U(0, 0.03) everywhere, 1 at
  l mod L1, the vector normalised to sum 1.
- Width [I; C]: the first n1 rows are the identity and stay so, only C is learned, every new row of C ~ U(0, 1)
  normalised to sum 1 ("rand"): each new unit is a positive average of all old units, no new unit a copy of another
  (so no twins, models/twins.py, and no symmetry-breaking noise: `keeps_own`).
- Literal tying: a consuming (IN) axis takes the same matrix as the producing one (W [I, C^T]: the new input columns
  are W C^T), as Alg. 1 prints. With the random rows this adds the old units' weights, averaged, onto the new inputs:
  the grown model does not compute the small model's function; it starts near it only for the old units.
- Fit: transformers' AdamW over every coefficient at lr 2e-4, weight decay 0.1, eps 1e-6, clip 1.0, linear schedule
  with configs/bert_wiki.txt's 10,000 warm-up steps, which the 100-step command does not override: the lr only
  ramps to 1% of its peak (2e-6). Here the warm-up is 100x `fit_steps` (10,000 at the paper's 100), so the fit keeps
  that property at every scale; `--set fit_warmup_steps=0` is a fit whose lr moves the operator.
- Our BERT ties the MLM decoder to the embeddings (paper §3.3), and its head transform's output is the residual
  stream's space; the official code's model differs there (REPRODUCE.md, "LiGO's start", says how and what it is
  worth).

`ligo_copy` (methods/ligo_copy.py) is the same operator started at Net2Net's copies with B's pseudo-inverse on the
consuming side: the function-preserving member of the family, which Proposition 1's reductions test.

The fit runs where the small model lives, which is the run's device (runs/experiment.py moves it there): the
operator, the large skeleton and the batches go to that device, and the large model's forward/backward runs
under bf16 autocast when the recipe says `bf16`. The materialisation itself stays float32; under bf16 on a GPU the
fit's materialisations use TF32 matmuls (`tf32_matmuls`): their error, ~1e-3 relative, is below the bf16 rounding
the forward applies to those same weights (2^-8), and its Gram products and contractions are most of the fit's
float32 work. `grow` materialises the grown model in IEEE float32.

Distributed (torchrun; runs/distributed.py): every rank materialises the operator, runs its share of the step's
micro-batches, and the operator's gradients are averaged over the ranks before the update, so W processes fit
what one process fits with W times the micro-batches (each micro-batch seeds its own dropout). The fit's batch is
the training's global batch: grad_accum micro-batches per rank per step.
"""
from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.utils.flop_counter import FlopCounterMode
from tqdm import tqdm

from methods.base import Config, GrowthMethod
from methods.depth import small_canonical
from methods.ligo_operator import (DEPTH_INITS, ORDERS, TYINGS, WIDTH_FORMS, WIDTH_INITS, LigoOperator, check_choice,
                                  check_net2net_init, check_solves)
from methods.registry import MAIN_COMPARISONS, register_method
from models import get_family
from models.canonical import Canonical
from models.flops import backward_flops
from models.seeding import seed_dropout
from tasks.data import derive_seed
from tasks.rules import above, adam_betas, at_least, integer_at_least, is_int


OFFICIAL_FIT_WARMUP_PER_STEP = 100   # configs/bert_wiki.txt warmup_steps 10000 over the README's --max_steps 100


@dataclass
class LigoConfig(Config):
    fit_steps: int = 100                 # paper §3.2 "e.g., 100 iterations"; the official README's --max_steps 100
    order: str = "depth_first"           # "depth_first" (official code) | "width_first" (paper Alg. 1)
    width_form: str = "identity_prefix"  # "identity_prefix" (official: [I; C], only C learned) | "full": B [D2, D1]
    tying: str = "literal"               # IN side: "literal" (A = B, Alg. 1) | "pinv", B's pseudo-inverse | "untied"
    separate_bias_depth: bool = True     # official: every module with a bias has separate weight/bias w
    depth_init: str = "stackbert_noisy"  # "stackbert_noisy" (official README) | "stackbert" | "interpolation"
    width_init: str = "random"           # "random" (official "rand": rows U(0, 1) normalised) | "net2net"
    init_noise: float = 0.03             # official --fuse_init_noise default (stackbert_noisy)
    fit_noise: float = 0.0               # symmetry-breaking noise on new width rows before a fit (for copy starts)
    seed: int = 0                        # operator init, fit noise (net2net's maps at one seed); default: run's --seed
    # Optimiser of the operator fit (prefixed fit_ so that `--set lr=...` keeps meaning the training recipe):
    # official run_grow_distributed.py `train` (transformers AdamW over every operator coefficient -- none
    # matches its no-decay names -- eps from --adam_epsilon 1e-6, clip --max_grad_norm 1.0,
    # get_linear_schedule_with_warmup) with configs/bert_wiki.txt (lr 2e-4, weight decay 0.1, warm-up as above).
    fit_lr: float = 2e-4
    fit_weight_decay: float = 0.1
    fit_adam_eps: float = 1e-6
    fit_adam_betas: tuple = (0.9, 0.999)
    fit_max_grad_norm: float = 1.0
    fit_warmup_steps: int | None = None  # None: 100 x fit_steps, the official ratio
    RULES = {"fit_steps": integer_at_least(0, " (0: grow with the initial operator)"),
             "init_noise": at_least(0), "fit_noise": at_least(0, " (0: no noise)"),
             "fit_lr": above(0), "fit_weight_decay": at_least(0), "fit_adam_eps": above(0),
             "fit_adam_betas": adam_betas("fit_adam_betas"),
             "fit_max_grad_norm": at_least(0, " (0: no clipping)"),
             "fit_warmup_steps": ((lambda v: v is None or (is_int(v) and v >= 0)),
                                  "an integer >= 0, or none (100 x fit_steps, the official ratio)")}


def materialise_flops(operator: LigoOperator, small: Canonical) -> float:
    """FLOPs of one materialisation, forward and backward into the operator: the matmuls as FlopCounterMode counts
    them, plus the pseudo-inverse's solves, which it does not count (LigoOperator.solve_flops). The backward is
    driven by a probe scalar whose own ops (mul, sum) are not matmuls, so the count is exactly what the fit
    step's backward spends in the operator (the large model's part is analytic)."""
    params = [p for p in operator.parameters() if p.requires_grad]
    with FlopCounterMode(display=False) as counter:
        large = operator(small)
        probe = sum((t * 1.0).sum() for *_, t in large.items() if t.requires_grad)
        if params and torch.is_tensor(probe):
            torch.autograd.grad(probe, params, allow_unused=True)
    return float(counter.get_total_flops()) + operator.solve_flops()


def rank_and_world() -> tuple[int, int]:
    """This process's rank and the number of processes (torchrun), (0, 1) without a process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def average_over_ranks(named_params, loss: float) -> float:
    """Average the gradients (one flat all-reduce, in name order: the same on every rank) and the loss over the
    ranks; returns the loss."""
    _, world = rank_and_world()
    if world == 1:
        return loss
    grads = [p.grad for _, p in sorted(named_params, key=lambda item: item[0]) if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= world
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()
    total = torch.tensor([loss], dtype=torch.float64, device=flat.device)     # NCCL reduces device tensors only
    dist.all_reduce(total)
    return total.item() / world


def sum_over_ranks(value: float, device) -> float:
    """`value` summed over the ranks (itself without a process group)."""
    if rank_and_world()[1] == 1:
        return value
    total = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(total)
    return total.item()


@contextmanager
def tf32_matmuls(on: bool):
    """CUDA float32 matmuls on TF32 tensor cores inside the block when `on`, as they were after it (a global flag:
    the training that follows, and any other run in the process, keep their own precision)."""
    if not on:
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def fit_uses_tf32(device: torch.device, bf16: bool) -> bool:
    """Whether the fit's materialisations run on TF32 (the module docstring says why): bf16 on a GPU only."""
    return bf16 and device.type == "cuda"


class FitSession:
    """One operator fit: the large skeleton, the optimiser and schedule, and `step(batch)`; `fit` loops over it,
    bench/perf/ligo_fit_cost.py times single steps of it."""

    def __init__(self, method: "Ligo", small, task):
        c, self.family, self.task = method.config, get_family(task.family), task
        self.canon = small_canonical(small, task)
        self.device = next(iter(self.canon.embed.values())).device     # the run's device (the small model's)
        self.bf16 = bool(getattr(getattr(task, "recipe", None), "bf16", False))
        self.tf32 = fit_uses_tf32(self.device, self.bf16)
        self.op = method.build_operator(self.canon, task)
        if c.fit_noise:
            self.op.break_symmetry(c.fit_noise, c.seed)
        with torch.random.fork_rng(devices=[]):     # the skeleton's random init must not shift the run's RNG
            self.skeleton = self.family.build(task.large).to(self.device)
        self.skeleton.train()                       # official fit runs model.train(): dropout on
        for p in self.skeleton.parameters():        # only its structure and buffers are used
            p.requires_grad_(False)
        self.optimizer = torch.optim.AdamW(self.op.parameters(), lr=c.fit_lr, betas=tuple(c.fit_adam_betas),
                                           eps=c.fit_adam_eps, weight_decay=c.fit_weight_decay)
        from transformers import get_linear_schedule_with_warmup
        self.schedule = get_linear_schedule_with_warmup(self.optimizer, c.fit_warmup_steps, c.fit_steps)
        self.max_grad_norm = c.fit_max_grad_norm
        method.materialise_flops = self.materialise_flops = materialise_flops(self.op, self.canon)
        self.steps = 0
        # dropout: a function of (this draw, global micro-batch index), whichever rank runs the micro-batch
        self.dropout_seed = int(torch.randint(2**31, ()).item())

    def step(self, *batches: dict) -> float:
        """One update from this rank's micro-batches (gradients averaged over them and over the ranks); returns
        the mean loss over all of them.

        The large weights are materialised once a step, not once a micro-batch: the micro-batches' losses
        backpropagate into detached copies of them, whose summed gradients then go through the operator once
        (the chain rule: J^T (g_1 + g_2) = J^T g_1 + J^T g_2). With one micro-batch that is the computation a
        single backward makes; with k it saves k - 1 materialisations, forward and backward, which do not
        shrink with the micro-batch (BERT-Small->Base: 1.41 TFLOP each, against 17.9 for the large model's
        forward/backward on 256 x 128; as 8 micro-batches of 32 a fit step was 29.1 TFLOP, now 19.3;
        bench/results/ligo_fit_cost-gpu.json, `step_flops`). What it holds for that across the micro-batches: the
        materialisation's graph and the large weights' gradients (one float32 copy of the large model)."""
        rank, world = rank_and_world()
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum = 0.0
        solves: list = []
        with tf32_matmuls(self.tf32):
            state = self.family.state_from_canonical(self.op(self.canon, solve_infos=solves))
        leaves = {k: v.detach().requires_grad_(v.requires_grad) for k, v in state.items()}
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            for m, batch in enumerate(batches):
                index = (self.steps * world + rank) * len(batches) + m        # runs/distributed.micro_index
                seed_dropout(derive_seed(self.dropout_seed, index), self.device)
                batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
                with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
                    loss = self.family.loss(self.skeleton, batch, params=leaves)
                (loss / len(batches)).backward()
                loss_sum += loss.detach()
        reached = [k for k, leaf in leaves.items() if leaf.grad is not None]
        with tf32_matmuls(self.tf32):
            torch.autograd.backward([state[k] for k in reached], [leaves[k].grad for k in reached])
        loss_sum = float(loss_sum)             # one host sync per step, not one per micro-batch
        check_solves(solves)                   # read after that wait, when the queue is already empty
        loss = average_over_ranks(self.op.named_parameters(), loss_sum / len(batches))
        if self.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.op.parameters(), self.max_grad_norm)
        self.optimizer.step()
        self.schedule.step()
        self.steps += 1
        return loss

    def step_flops(self, *batches: dict) -> float:
        """One step on this rank's micro-batches (give them on the CPU): the large model's forward + backward on
        each (its weights get gradients, which flow on into the operator, so every layer counts as trainable)
        plus the materialisation's own forward + backward, once (`step`)."""
        large = 0.0
        for batch in batches:
            fwd = self.family.batch_flops(self.task.large, batch)
            large += fwd.total + backward_flops(fwd)
        return large + self.materialise_flops


@register_method("ligo")
class Ligo(GrowthMethod):
    display_name = "LiGO"
    color = "tab:red"
    table_order = 7
    sweeps = MAIN_COMPARISONS

    Config = LigoConfig
    preserves_function = False           # learned: neither the init nor the fit claims function preservation
    keeps_own = ("fit_noise",)           # random rows have no twins to separate: a family's noise default is not its

    def __init__(self, config=None, **overrides):
        super().__init__(config, **overrides)
        c = self.config
        if c.fit_warmup_steps is None:
            c.fit_warmup_steps = OFFICIAL_FIT_WARMUP_PER_STEP * c.fit_steps
        check_choice("order", c.order, ORDERS)
        check_choice("width_form", c.width_form, WIDTH_FORMS)
        check_choice("depth_init", c.depth_init, DEPTH_INITS)
        check_choice("width_init", c.width_init, WIDTH_INITS)
        check_choice("tying", c.tying, TYINGS)
        self.operator: LigoOperator | None = None
        self._pair = None                # (small spec, large spec) the operator was built for
        self.fit_loss: list[float] = []
        self.flops_per_step: float | None = None
        self.materialise_flops: float | None = None

    def check_pair(self, task):
        if self.config.width_init == "net2net":
            check_net2net_init(task.small, task.large, self.name)

    # -- the operator ------------------------------------------------------------------------------------------
    def build_operator(self, canon: Canonical, task) -> LigoOperator:
        """The operator at its initialisation (kept: `fit` trains it, `grow` uses it)."""
        c = self.config
        if self.operator is None or self._pair != (task.small, task.large):
            op = LigoOperator(canon, task.large, order=c.order, width_form=c.width_form,
                              tying=c.tying, separate_bias_depth=c.separate_bias_depth)
            self.operator = op.init_(c.depth_init, c.width_init, c.init_noise, c.seed)
            self._pair = (task.small, task.large)
            self.fit_loss, self.flops_per_step = [], None
        return self.operator.to(next(iter(canon.embed.values())).device)

    # -- fit ---------------------------------------------------------------------------------------------------
    def fit(self, small, task, batches, ledger, *, progress: bool = False) -> None:
        if self.config.fit_steps == 0:
            return
        session = FitSession(self, small, task)
        accum = getattr(getattr(task, "recipe", None), "grad_accum", 1)   # the training's global batch
        bar = tqdm(range(self.config.fit_steps), desc="ligo operator fit", disable=not progress,
                   dynamic_ncols=True, mininterval=1.0)
        mine = 0.0
        for step in bar:
            try:
                micro = [next(batches) for _ in range(accum)]
            except StopIteration:
                raise RuntimeError(f"the fit batches ran out after {step} of {self.config.fit_steps} steps") from None
            self.fit_loss.append(session.step(*micro))
            bar.set_postfix(loss=f"{self.fit_loss[-1]:.3f}", refresh=False)
            flops = session.step_flops(*micro)      # this rank's; the caller sums the ledger over ranks
            ledger.add("fit", flops)
            mine += flops
        # for the record: the mean cost of one (global) fit step; a masked LM's head cost varies from batch to batch
        self.flops_per_step = sum_over_ranks(mine, session.device) / self.config.fit_steps

    # -- grow --------------------------------------------------------------------------------------------------
    def grow(self, small, task):
        canon = small_canonical(small, task)
        op = self.build_operator(canon, task)
        with torch.no_grad():
            large = op(canon)
        return get_family(task.family).from_canonical(large)

    # -- records -----------------------------------------------------------------------------------------------
    def describe(self):
        d = super().describe()
        d["config"]["fit_adam_betas"] = list(self.config.fit_adam_betas)
        return d      # the same before the fit and after: the operator's size is an outcome, in ligo_fit.json

    def artifacts(self):
        if self.operator is None:
            return {}
        return {"ligo_operator.pt": {k: v.detach().cpu() for k, v in self.operator.state_dict().items()},
                "ligo_fit.json": {"loss": list(self.fit_loss), "flops_per_step": self.flops_per_step,
                                  "materialise_flops": self.materialise_flops,
                                  "operator": {"parameters": sum(p.numel() for p in self.operator.parameters()),
                                               "width_slots": len(self.operator.slots),
                                               "depth_types": list(self.operator.depth)},
                                  "config": dataclasses.asdict(self.config)}}
