"""Orthogonal training strategies, composable with any growth method (LiGO paper §4.4 and App. C.6; DESIGN.md
§4), switched on with `--set` (`--method ligo --set layer_drop=0.1`; `true` gives the paper's setting):

- progressive layer dropping (Zhang & He 2020, "Accelerating Training of Transformer-Based Language Models
  with Progressive Layer Dropping"): in training, block i of L is skipped (input passed through) with
  probability (i+1)/L * (1 - theta(t)), theta(t) = (1 - theta_bar) exp(-gamma t) + theta_bar, so lower blocks
  drop less and the rate grows over time towards its cap; the LiGO paper caps it at 0.1 (theta_bar = 0.9).
  gamma is given relative to the run (gamma x total steps, default 100, assumed) so the schedule keeps its
  shape at every scale;
- token dropping (Hou et al. 2022, "Token Dropping for Efficient BERT Pretraining"): the middle blocks
  [L/2, L-1) process only a random 85% of the tokens; the others bypass them and are merged back before the
  last block. Scored positions (MLM's masked tokens) and prefix tokens (ViT's class token) are never set aside;
- staged training (Shen et al. 2022, "Staged Training for Transformer Language Models"; the LiGO paper trains
  a sub-network for 50K of 400K steps): the bottom half of the blocks trains alone first (the rest skipped),
  then a depth step makes the full model: the skipped blocks become copies of the trained ones with their
  output projections (o, fc2) zeroed, which keeps a pre-LN model's function exactly (GPT-2, ViT, CaiT) and a
  post-LN one's only approximately (BERT/RoBERTa); the measured deviation is saved in staged.json.
  `staged_grow=keep` instead hands back the method's own upper blocks (bert2BERT's two-stage pretraining).

How: during a training forward (never in evaluation), each main block's `forward` is replaced by an instance
attribute, removed again on exit (state_dict keys and export never see it), that follows the step's plan:
skip, run on the kept tokens, or detach its input so that nothing below the lowest trainable block runs
backward (frozen blocks cost forward only). It records which blocks ran on what share of the tokens, and the
trainer charges exactly that (models.flops.ran_forward). Random choices come from a generator seeded by
(seed, micro-batch index): a resumed run drops what the uninterrupted one dropped.
"""
from __future__ import annotations

import dataclasses
import math
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace

import torch

from methods.base import GrowthMethod, Stage
from methods.net2net import function_deviation, probe_batch
from models import from_canonical, to_canonical
from models.canonical import copy_depth
from tasks.data import derive_seed

ON = {"layer_drop": 0.1, "token_drop": 0.15, "staged": 0.125}   # what `--set key=true` means (the paper's)
GROW_RULES = ("identity", "keep")
RESIDUAL_OUTPUTS = ("o.weight", "o.bias", "fc2.weight", "fc2.bias")   # zeroed: the block adds nothing


@dataclass(frozen=True)
class Strategies:
    layer_drop: float = 0.0           # maximum drop rate (of the top block); 0 = off
    layer_drop_gamma: float = 100.0   # PLD's temporal decay rate times the run's total steps
    token_drop: float = 0.0           # share of tokens set aside in the middle blocks; 0 = off
    staged: float = 0.0               # share of training steps on the sub-network; 0 = off
    staged_depth: float = 0.5         # the sub-network's share of the blocks (the bottom ones)
    staged_grow: str = "identity"     # "identity" (function-preserving depth step) or "keep"

    def __post_init__(self):
        for key in ("layer_drop", "token_drop", "staged"):
            if not 0 <= getattr(self, key) < 1:
                raise ValueError(f"{key} must be in [0, 1) (0 switches it off; true gives {ON[key]}), "
                                 f"got {getattr(self, key)}")
        if not 0 < self.staged_depth < 1:
            raise ValueError(f"staged_depth must be in (0, 1): the sub-network's share of the blocks, "
                             f"got {self.staged_depth}")
        if not (math.isfinite(self.layer_drop_gamma) and self.layer_drop_gamma > 0):     # NaN passes '<= 0'
            raise ValueError(f"layer_drop_gamma must be a finite number > 0, got {self.layer_drop_gamma}")
        if self.staged_grow not in GROW_RULES:
            raise ValueError(f"staged_grow must be one of {', '.join(GROW_RULES)}, got '{self.staged_grow}'")

    @property
    def active(self) -> bool:
        return bool(self.layer_drop or self.token_drop or self.staged)

    def tag(self) -> str:
        """A name suffix for run directories, e.g. '+layer_drop0.1'."""
        return "".join(f"+{k}{getattr(self, k):g}" for k in ON if getattr(self, k))

    def record(self) -> dict | None:
        return dataclasses.asdict(self) if self.active else None


FIELDS = {f.name: f for f in dataclasses.fields(Strategies)}


def strategies_from_settings(values: dict[str, object]) -> Strategies:
    """Parsed --set values -> Strategies, with one-line errors for values of the wrong kind."""
    out = {}
    for key, value in values.items():
        if isinstance(value, bool):
            if key not in ON:
                raise ValueError(f"--set {key}={value}: expected a number")
            value = ON[key] if value else 0.0
        if FIELDS[key].type in (float, "float"):
            if not isinstance(value, (int, float)):
                raise ValueError(f"--set {key}={value}: expected a number")
            value = float(value)
        elif not isinstance(value, str):
            raise ValueError(f"--set {key}={value}: expected one of {', '.join(GROW_RULES)}")
        out[key] = value
    strategies = Strategies(**out)       # each value checked first
    # a strategy's parameter without the strategy would be silently ignored (and not recorded)
    for knob, owner in (("layer_drop_gamma", "layer_drop"), ("staged_depth", "staged"), ("staged_grow", "staged")):
        if knob in out and not out.get(owner):
            raise ValueError(f"--set {knob} sets {owner}, which is off; give --set {owner}=true (or a value) too")
    return strategies


def apply_strategies(method: GrowthMethod, strategies: Strategies | None) -> GrowthMethod:
    """The method as the trainer should run it: wrapped for staged training, else unchanged (layer and token
    dropping act inside the trainer's forward, see BlockRunner)."""
    return StagedTraining(method, strategies) if strategies is not None and strategies.staged else method


class BlockRunner:
    """Runs the main blocks of one training forward by the step's plan and records what ran."""

    def __init__(self, family, strategies: Strategies | None, seed: int):
        self.family, self.s, self.seed = family, strategies or Strategies(), seed

    def keep_probability(self, i: int, layers: int, step: int, total: int) -> float:
        rate = self.s.layer_drop * (1 - math.exp(-self.s.layer_drop_gamma * step / max(total, 1)))
        return 1 - (i + 1) / layers * rate

    @contextmanager
    def forward(self, model, batch: dict, stage: Stage, step: int, total: int, index: int):
        """Yield the record of what ran: `.tokens` maps each block that ran to the share of tokens it saw."""
        blocks = self.family.blocks(model)
        L = len(blocks)
        gen = torch.Generator().manual_seed(derive_seed(self.seed, index, 0x5eed))
        active = [i for i in range(L) if stage.active_blocks is None or i in stage.active_blocks] or [0]
        run = [i for i in active
               if not self.s.layer_drop or torch.rand((), generator=gen).item() < self.keep_probability(i, L, step, total)]
        run = run or active[:1]                        # never skip everything
        middle = range(L // 2, L - 1) if self.s.token_drop and L >= 3 else range(0)
        st = SimpleNamespace(run=set(run), tokens={i: 1.0 for i in run}, gen=gen, idx=None, stash=None, share=1.0,
                             middle=middle, tuple=False, detach_in=None, detach_out=None, batch=batch, model=model,
                             kept=None)
        self.last = st                                 # for inspection (tests, debugging)
        if stage.trainable_blocks is not None:
            # no backward below the lowest trainable block that runs (or below the head if none runs)
            lowest = [i for i in run if i in stage.trainable_blocks]
            st.detach_in, st.detach_out = (lowest[0], None) if lowest else (None, run[-1])
        if len(run) == L and not middle and stage.trainable_blocks is None:
            yield st                                    # nothing to change: leave the model untouched
            return
        saved = [(block, block.__dict__.get("forward")) for block in blocks]
        for i, block in enumerate(blocks):
            block.forward = self._replacement(i, block, block.forward, st)
        try:
            yield st
        finally:
            for block, previous in saved:
                del block.forward
                if previous is not None:
                    block.forward = previous

    def _replacement(self, i, block, original, st):
        def forward(*args, **kwargs):
            if not block.training:                     # evaluation always runs the whole model
                return original(*args, **kwargs)
            return self._run(i, original, st, list(args), kwargs)
        return forward

    def _run(self, i, original, st, args, kwargs):
        key = None if args else next(k for k in ("hidden_states", "x") if k in kwargs)
        x = args.pop(0) if key is None else kwargs.pop(key)
        if st.middle and i == st.middle.start:
            x = self._set_aside(x, st)
        inside = st.idx is not None and i in st.middle
        if inside:                                     # attention masks and per-token inputs shrink with the tokens
            n = st.stash.shape[1]
            args = [_gather_tokens(a, st.idx, n) for a in args]
            kwargs = {k: _gather_tokens(v, st.idx, n) for k, v in kwargs.items()}
        if i == st.detach_in:
            x = _cut(x, st)
        rest = ()
        if i in st.run:
            out = original(x, *args, **kwargs) if key is None else original(*args, **{key: x}, **kwargs)
            st.tuple = isinstance(out, tuple)          # HF layers of older versions return tuples
            x, rest = (out[0], tuple(out[1:])) if st.tuple else (out, ())
            st.tokens[i] = st.share if inside else 1.0
        if inside and i == st.middle[-1]:              # merge the set-aside tokens back in
            x = st.stash.scatter(1, _expand(st.idx, x), x.to(st.stash.dtype))
            st.idx = None
        if i == st.detach_out:
            x = _cut(x, st)
        return (x, *rest) if st.tuple else x

    def _set_aside(self, x, st):
        """Keep a random (1 - token_drop) of the tokens, never scored or prefix ones; same count in every row."""
        B, n = x.shape[:2]
        protect = torch.zeros(B, n, dtype=torch.bool)
        scored = self.family.scored(st.batch)
        if scored is not None and tuple(scored.shape) == (B, n):
            protect |= scored.cpu()
        if self.family.objective == "image":          # ViT's class token; CaiT's patch blocks have none
            spec = self.family.spec_of(st.model)
            protect[:, :n - (spec.image_size // spec.patch_size) ** 2] = True
        drop = min(round(self.s.token_drop * n), int((~protect).sum(1).min()))
        if drop <= 0:
            return x
        score = torch.rand(B, n, generator=st.gen).masked_fill(protect, 2.0)
        # sorted back into sequence order, so causal attention among the kept tokens stays causal
        st.idx = score.topk(n - drop, dim=1).indices.sort(dim=1).values.to(x.device)
        st.stash, st.share, st.kept = x, (n - drop) / n, st.idx
        return x.gather(1, _expand(st.idx, x))


def _expand(idx, x):
    return idx[..., None].expand(-1, -1, x.shape[-1])


def _cut(x, st):
    """Detach x, and the set-aside tokens that will be merged back, so backward stops here. The cut still asks
    for x's gradient: a trainable block reading it then costs 2x forward whatever its norm placement (a pre-LN
    block needs that gradient for its norm weights anyway), which is the ledger's rule (models/flops.py)."""
    if st.stash is not None:
        st.stash = st.stash.detach()
    return x.detach().requires_grad_(torch.is_grad_enabled())


def _gather_tokens(v, idx, n):
    """A block's argument restricted to the kept tokens: 4-D attention masks (`_gather_mask`), and per-token inputs
    [B or 1, n, ...] such as Llama's rotary (cos, sin), so that a kept token keeps its own position; tuples
    element-wise; anything else passes."""
    if isinstance(v, tuple):
        return tuple(_gather_tokens(e, idx, n) for e in v)
    if not torch.is_tensor(v) or v.dim() < 2 or v.shape[1] != n:
        return v
    if v.dim() == 4:
        return _gather_mask(v, idx, n)
    v = v.expand(idx.shape[0], *v.shape[1:])
    return v.gather(1, idx.reshape(*idx.shape, *[1] * (v.dim() - 2)).expand(-1, -1, *v.shape[2:]))


def _gather_mask(m, idx, n):
    """A 4-D attention mask [B, 1, q, k] over n tokens, restricted to the kept ones (other arguments pass)."""
    if not (torch.is_tensor(m) and m.dim() == 4 and m.shape[-1] == n):
        return m
    m = m.expand(idx.shape[0], *m.shape[1:])
    m = m.gather(3, idx[:, None, None, :].expand(-1, m.shape[1], m.shape[2], -1))
    if m.shape[2] == n:
        m = m.gather(2, idx[:, None, :, None].expand(-1, m.shape[1], -1, m.shape[3]))
    return m


class StagedTraining(GrowthMethod):
    """Any growth method, with its first `staged` share of steps spent on the bottom `staged_depth` share of
    the blocks (a sub-stage split off the method's first stage), then the depth step described above."""

    def __init__(self, inner: GrowthMethod, strategies: Strategies):
        self.inner, self.strategies = inner, strategies
        self.name, self.config, self.Config = inner.name, inner.config, inner.Config
        self.needs_small, self.trains_with_small = inner.needs_small, inner.trains_with_small
        self.report, self._inner, self._grow_at, self._resuming = {}, {}, None, None

    def __getattr__(self, name):                       # whatever else the wrapped method offers
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    # every hook GrowthMethod defines is delegated (__getattr__ only sees what the base class lacks)
    def grow(self, small, task):
        return self.inner.grow(small, task)

    def check_pair(self, task):
        self.inner.check_pair(task)

    def set_step(self, model, step, total_steps):
        self.inner.set_step(model, step, total_steps)

    def computes_large(self, step, total_steps):
        return self.inner.computes_large(step, total_steps)

    def fit(self, small, task, batches, ledger, *, progress=False):
        return self.inner.fit(small, task, batches, ledger, progress=progress)

    def extra_loss(self, model, batch, task_loss, step, total_steps, ledger):
        return self.inner.extra_loss(model, batch, task_loss, step, total_steps, ledger)

    def describe(self):
        return self.inner.describe()

    def training_signature(self):
        return self.inner.training_signature()

    def artifacts(self):
        return {**self.inner.artifacts(), **({"staged.json": self.report} if self.report else {})}

    def stages(self, task, total_steps):
        inner = self.inner.stages(task, total_steps)
        first = inner[0]
        n_sub = min(max(1, round(self.strategies.staged * total_steps)), first.steps - 1)
        if n_sub < 1:
            return inner
        depth = max(1, round(self.strategies.staged_depth * task.large.layers))
        sub = dataclasses.replace(first, name="staged_sub", steps=n_sub, active_blocks=frozenset(range(depth)))
        rest = dataclasses.replace(first, steps=first.steps - n_sub)
        self._inner, self._grow_at, self._depth = {sub: first, rest: first}, rest, depth
        return [sub, rest, *inner[1:]]

    def enter_stage(self, model, stage, task):
        if stage == self._grow_at and stage != self._resuming and self.strategies.staged_grow == "identity":
            model = self._grow_depth(model)
        self._resuming = None                          # a resumed stage's weights come from the checkpoint
        return self.inner.enter_stage(model, self._inner.get(stage, stage), task)

    def resume_model(self, small, task, stage):
        self._resuming = stage
        return self.inner.resume_model(small, task, self._inner.get(stage, stage))

    @torch.no_grad()
    def _grow_depth(self, model):
        canon = to_canonical(model)
        L, n = canon.spec.layers, self._depth
        if n >= L:
            return model
        with torch.random.fork_rng(devices=[]):       # a measurement only: leave the training RNG alone
            sub = from_canonical(copy_depth(canon, list(range(n)))).to(next(model.parameters()).device)
        canon = copy_depth(canon, [l % n for l in range(L)])
        for block in canon.blocks[n:]:
            for key in RESIDUAL_OUTPUTS:
                if key in block:
                    block[key] = torch.zeros_like(block[key])
        grown = from_canonical(canon, like=model).train(model.training)
        # what trained so far is the bottom blocks alone: the depth step should not change its function
        probe = {k: v.to(next(model.parameters()).device) for k, v in probe_batch(canon.spec).items()}
        self.report = {"sub_blocks": n, "blocks": L, "function_deviation": function_deviation(sub, grown, probe)}
        return grown
