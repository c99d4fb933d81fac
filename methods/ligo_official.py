"""LiGO as its authors started it: the official code's operator init and fit, random non-twin width rows.

What VITA-Group/LiGO's ligo.py and run_grow_distributed.py compute with its README's BERT grow command,

    python run_grow_distributed.py --config configs/bert_wiki.txt ... --tune_width --tune_depth
        --fuse_init_scheme stackbert_noisy rand --max_steps 100

What that command computes, and how it differs from Alg. 1 and from growbench's `ligo` (methods/ligo.py):

- Depth first: the small layers are mixed per *large* layer, then each large layer is expanded in width with its own
  matrices (Alg. 1 expands each small layer, then mixes). Every module of every large layer owns its coefficients,
  weights and biases separately (`separate_bias_depth`); init "stackbert_noisy": U(0, 0.03) everywhere, 1 at
  l mod L1, the vector normalised to sum 1 (ours: one-hot, one coefficient vector per module type).
- Width [I; C]: the first n1 rows are the identity and stay so, only C is learned, every new row of C ~ U(0, 1)
  normalised to sum 1 ("rand"): each new unit is a positive average of all old units, no new unit a copy of another
  (ours: Net2Net's copy matrix, so every new unit is a twin of an old one, models/twins.py).
- Literal tying: a consuming (IN) axis takes the same matrix as the producing one (W [I, C^T]: the new input columns
  are W C^T), as Alg. 1 prints (ours: B's pseudo-inverse, which at a copy init is Net2Net's division). With the
  random rows this adds the old units' weights, averaged, onto the new inputs: the grown model does not compute the
  small model's function; it starts near it only for the old units.
- Fit: transformers' AdamW over every coefficient at lr 2e-4, weight decay 0.1, eps 1e-6, clip 1.0, linear schedule
  with configs/bert_wiki.txt's 10,000 warm-up steps, which the 100-step command does not override: the lr only
  ramps to 1% of its peak (2e-6), and the fit barely moves the operator. Here the warm-up is 100x `fit_steps`
  (10,000 at the paper's 100; 2,000 at mini's 20), so the fit keeps that property at every scale.
- One difference kept: our BERT ties the MLM decoder to the embeddings (paper §3.3) and its head transform output
  is the residual stream's space; the official code unties them and gives the head its own width matrix
  (`fuse_width_cls`), drawn the same way. The draws differ, the distribution of the init does not.

The grown model's training recipe is a separate axis (tasks/grown_recipes.py): the official grow command trains
with no warm-up (`--set grown_recipe=official`).
"""
from __future__ import annotations

from dataclasses import dataclass

from methods.ligo import Ligo, LigoConfig
from methods.registry import register_method
from tasks.rules import is_int

OFFICIAL_FIT_WARMUP_PER_STEP = 100   # configs/bert_wiki.txt warmup_steps 10000 over the README's --max_steps 100


@dataclass
class LigoOfficialConfig(LigoConfig):
    order: str = "depth_first"               # official: mix depth, then width per large layer
    width_form: str = "identity_prefix"      # official: [I; C], only C learned
    tying: str = "literal"                   # official: the IN side takes the OUT side's matrix (Alg. 1's A = B)
    separate_bias_depth: bool = True         # official: every module with a bias has separate weight/bias w
    depth_init: str = "stackbert_noisy"      # official: 1 at l mod L1 among U(0, init_noise), normalised
    width_init: str = "random"               # official "rand": new rows U(0, 1), normalised to sum 1
    fit_warmup_steps: int | None = None      # None: 100 x fit_steps, configs/bert_wiki.txt's ratio
    RULES = {"fit_warmup_steps": ((lambda v: v is None or (is_int(v) and v >= 0)),
                                  "an integer >= 0, or none (100 x fit_steps, the official ratio)")}


@register_method("ligo_official")
class LigoOfficial(Ligo):
    Config = LigoOfficialConfig
    keeps_own = ("fit_noise",)       # the official code adds no noise (its random rows have no twins to separate)

    def __init__(self, config=None, **overrides):
        super().__init__(config, **overrides)
        if self.config.fit_warmup_steps is None:
            self.config.fit_warmup_steps = OFFICIAL_FIT_WARMUP_PER_STEP * self.config.fit_steps
