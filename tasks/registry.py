"""The paper's tasks (DESIGN.md §5) at three scales, and custom pairs.

- paper: Table 4 (Appendix B.2) sizes and the §4.1 recipes exactly; numbers the paper does not state are
  marked in the task's `notes` with where they come from.
- mini: the same shape ratios (depth x2, width x1.5 or as the pair has it, head_dim kept) on the embedded data
  (Penn Treebank, Fashion-MNIST), in a regime where the models *learn* (DESIGN.md §5): 1,600 steps of 64
  sequences x 64 tokens (6.6M tokens, ~5 epochs of PTB; RoBERTa 256 sequences, the paper's 4x BERT's batch) for
  the large model and as many for the small one, so that a text small model ends well below the unigram
  cross-entropy of the eval tokens (analysis checks it against the `reference` every record carries) and the
  large model from scratch ends below it; evaluation on
  the whole PTB validation split (or 5,120 Fashion-MNIST test images); LiGO's fit <= 2% of a run. The first
  mini (300 steps of 32 x 64 tokens) ended on the unigram plateau, where a broken LiGO init cost nothing.
- regime (the default): mini's pairs (or a pair's own regime sizes: PAIRS), data and recipes trained longer (4x the
  steps, or a pair's own factor: PAIR_REGIME_STEPS; the small model pretrained as long; vision evaluated on all 10,000
  Fashion-MNIST test images), so that growth is needed: the
  small model trained on, nothing grown, stays short of the large model from scratch (analysis/regime.py's control
  check). bench/experiments/regime_probe.py measures which pairs pass; its table is REPRODUCE.md's "The regime".
- tiny: seconds; for tests (scikit-learn digits for vision).
"""
from __future__ import annotations

from models import ModelSpec, get_family
from models.family import unknown
from tasks.task import SCALES, Recipe, Task

# -- per family and scale: fixed sizes, data and recipes -----------------------------------------------------
TEXT = {  # family -> scale -> (spec defaults, data, tokenizer)
    "bert": {"paper": (dict(vocab=30522, positions=512), "wikipedia", "bert-base-uncased"),
             "mini": (dict(vocab=4096, positions=64), "ptb", "wordpiece"),
             "tiny": (dict(vocab=512, positions=32), "ptb", "wordpiece")},
    "roberta": {"paper": (dict(vocab=50265, positions=512), "wikipedia", "roberta-base"),
                "mini": (dict(vocab=4096, positions=64), "ptb", "bytelevel_bpe"),
                "tiny": (dict(vocab=512, positions=32), "ptb", "bytelevel_bpe")},
    "gpt2": {"paper": (dict(vocab=50257, positions=1024), "c4", "gpt2"),
             "mini": (dict(vocab=4096, positions=64), "ptb", "bytelevel_bpe"),
             "tiny": (dict(vocab=512, positions=32), "ptb", "bytelevel_bpe")},
    # Llama: untied output layer (Llama's choice); paper scale with the Llama-2 tokenizer (32,000 tokens) as
    # TinyLlama publishes it ungated; rotary positions have no parameters, `positions` is only the length limit
    "llama": {"paper": (dict(vocab=32000, positions=2048, tie_embeddings=False), "c4", "TinyLlama/TinyLlama_v1.1"),
              "mini": (dict(vocab=4096, positions=64, tie_embeddings=False), "ptb", "bytelevel_bpe"),
              "tiny": (dict(vocab=512, positions=32, tie_embeddings=False), "ptb", "bytelevel_bpe")},
}
VISION = {  # scale -> (spec defaults, data)
    "paper": (dict(image_size=224, patch_size=16, in_chans=3, classes=1000), "imagenet"),
    # 7x7 patches: 16 patch tokens (4x4 grid), a third of 4x4 patches' cost on the CPU
    "mini": (dict(image_size=28, patch_size=7, in_chans=1, classes=10), "fashion_mnist"),
    "tiny": (dict(image_size=8, patch_size=2, in_chans=1, classes=10), "digits"),
}

# Paper §4.1. BERT: bs 256, lr 2e-4, 400K steps, 10K warmup, seq 128; the small models were trained 220K
# steps (App. C.1). RoBERTa: bs 1024, lr 8e-4. Weight decay, which the paper does not state, is the official code's
# (VITA-Group/LiGO configs/bert_wiki.txt and roberta_wiki.txt: 0.1, for scratch and grown runs alike); the grown
# model's own recipe (the official grow command's warm-up 0) is a preset, tasks/grown_recipes.py.
BERT_PAPER = Recipe(400_000, 256, 2e-4, 10_000, seq_len=128, weight_decay=0.1, eval_every=10_000, eval_batches=100)
# DeiT / CaiT: the paper trains both "with their default hyper-parameters" for 300 epochs at batch 1024 (§4.1): DeiT's
# recipe, as facebookresearch/deit main.py's argparse defaults give it (the same script trains CaiT). 300 epochs of
# ImageNet (1,281,167 images; an epoch is 1,251 steps of 1,024, repeated augmentation keeping its length) = 375,300
# steps. Optimiser: AdamW (--opt adamw, --opt-eps 1e-8, betas timm's 0.9/0.999), lr 5e-4 x batch/512 = 1e-3
# (main.py's linear_scaled_lr), wd 0.05, 5 warm-up epochs (6,255 steps), cosine, no gradient clipping (--clip-grad
# None). Not reproduced (the trainer drives transformers' schedules from warm-up and length alone): the cosine's floor
# (--min-lr 1e-5: here it decays to 0), the warm-up's start (--warmup-lr 1e-6: here 0), the lr stepped per epoch
# (here per step), and the EMA of the weights DeiT keeps beside the model (--model-ema; it evaluates the model itself).
# DeiT main.py: cosine to --min-lr 1e-5 (the warm-up starts at --warmup-lr 1e-6 there, at 0 here, and timm steps the
# schedule once an epoch where the trainer steps it every step: both differences under 1e-6 in lr, not modelled)
DEIT_PAPER = Recipe(375_300, 1024, 1e-3, 6_255, weight_decay=0.05, grad_clip=0.0, schedule="cosine", min_lr=1e-5,
                    eval_every=1_251, eval_batches=50, adam_eps=1e-8,
                    # main.py's augmentation: --aa, --color-jitter (timm leaves jitter off while RandAugment is on),
                    # --train-interpolation, random erasing --reprob/--remode/--recount, --mixup/--cutmix alphas,
                    # --mixup-prob, --mixup-switch-prob, --mixup-mode, --smoothing, and --repeated-aug (RASampler,
                    # 3 repeats). Stochastic depth (--drop-path) is the models' (ModelSpec.drop_path, PAIRS below).
                    auto_augment="rand-m9-mstd0.5-inc1", color_jitter=0.3, train_interpolation="bicubic",
                    re_prob=0.25, re_mode="pixel", re_count=1, mixup=0.8, cutmix=1.0, mixup_prob=1.0,
                    mixup_switch_prob=0.5, mixup_mode="batch", smoothing=0.1, repeated_aug=3)
PAPER_RECIPES = {
    "bert": (BERT_PAPER, BERT_PAPER.with_(steps=220_000)),
    "roberta": (BERT_PAPER.with_(batch_size=1024, lr=8e-4), BERT_PAPER.with_(batch_size=1024, lr=8e-4, steps=220_000)),
    # GPT-2: bs 384 and seq 1024 are the paper's (following Shen et al. 2022); steps, lr and warmup are not
    # stated there: 100K steps, lr 2e-4, 2K warmup assumed (see task notes).
    "gpt2": (Recipe(100_000, 384, 2e-4, 2_000, seq_len=1024, eval_every=5_000, eval_batches=50),) * 2,
    # Llama: the LLaMA paper's optimiser (AdamW b2 0.95, eps 1e-5, wd 0.1, cosine, 2K warmup) at lr 3e-4, with
    # the GPT-2 task's batch, sequence length and steps (assumed, see task notes)
    "llama": (Recipe(100_000, 384, 3e-4, 2_000, seq_len=1024, weight_decay=0.1, schedule="cosine", eval_every=5_000,
                     eval_batches=50, adam_betas=(0.9, 0.95), adam_eps=1e-5),) * 2,
    "vit": (DEIT_PAPER,) * 2,
}
PAPER_RECIPES["cait"] = PAPER_RECIPES["vit"]
# lr 2e-3 for the pre-norm text families (GPT-2, Llama). It was chosen when BERT used it too, on the old mini's small
# BERT (batch 32: slower off the unigram plateau at 1e-3; eval loss 6.006 at step 500 with 2e-3, 6.371 with 5e-3);
# the mini GPT-2 pair learns at it (scratch-large 4.146 < small 4.293); Llama has not been probed.
MINI_TEXT = Recipe(1600, 64, 2e-3, 100, seq_len=64, eval_every=200, eval_batches=25, log_every=50)
# lr 1e-3 for the post-norm families (BERT, RoBERTa): at 2e-3 the 4-layer post-LN BERT sat on the plateau until step
# ~1,200 and ended at 5.406, above its 2-layer small model (4.999); at 1e-3 it left the plateau by step 600 (eval
# 5.283 there, against 5.861 at 2e-3) and the small model learned at least as fast (5.615 at step 800, against 5.731).
# A post-LN stack takes a smaller step size than a pre-LN one (Xiong et al. 2020); at 5e-4 the large BERT was no
# faster than at 2e-3 (5.962 at step 400, against 5.939; 1e-3: 5.809).
MINI_TEXT_POST_NORM = MINI_TEXT.with_(lr=1e-3)
# RoBERTa trains at 4x BERT's batch, as in the paper (1,024 against 256): 256 x 64 tokens (26.2M), at lr 2e-3. At
# BERT's mini recipe its small model fails the regime check (6.097, 0.578 nat below the unigram cross-entropy 6.674:
# its byte-level BPE makes PTB's <unk> a special token that is never masked, where BERT's WordPiece makes it easy
# targets); at 256 and 2e-3 it ends at 4.342 (REPRODUCE.md, Figure 3).
MINI_FAMILY_RECIPES = {"roberta": MINI_TEXT.with_(batch_size=256)}
# Mini and tiny vision keep their own small recipe, without DeiT's augmentation or stochastic depth (every field of it
# off: a few thousand steps of 28x28 or 8x8 gray images, where the paper-scale regularisers would only slow learning,
# and the committed mini records were trained so); any part of it can be turned on with --set (mixup, cutmix,
# smoothing and repeated_aug on any image source; the per-image transforms need decoded images, the imagenet source).
MINI_VISION = Recipe(1600, 64, 1e-3, 100, weight_decay=0.05, schedule="linear", eval_every=200, eval_batches=80,
                     log_every=50)
TINY_TEXT = Recipe(8, 4, 1e-3, 2, seq_len=32, eval_every=4, eval_batches=2, log_every=2)
TINY_VISION = Recipe(8, 16, 1e-3, 2, eval_every=4, eval_batches=2, log_every=2)


def _recipes(family: str, scale: str) -> tuple[Recipe, Recipe]:
    if scale == "paper":
        return PAPER_RECIPES[family]
    if scale == "mini" and family in MINI_FAMILY_RECIPES:
        return MINI_FAMILY_RECIPES[family], MINI_FAMILY_RECIPES[family]
    text = family in TEXT
    mini_text = MINI_TEXT_POST_NORM if get_family(family).norm_position == "post" else MINI_TEXT
    r = {"mini": mini_text if text else MINI_VISION, "tiny": TINY_TEXT if text else TINY_VISION}[scale]
    return r, r


# The paper fits LiGO for 100 steps at lr 2e-4 against 400K training steps (0.03% of the compute). At mini scale
# the fit may cost at most 2% of a run: 20 steps (a fit step is 1.07-1.35x a training step by pair, so 20 steps
# are 1.3-1.7% of 1,600), at the paper's lr. (A higher lr does not make up for the fewer steps: from the Net2Net
# start, Adam's first steps move every coefficient by about lr, and at 1e-3 the grown BERT ended worse than at
# 2e-4 -- eval loss 5.183 against 5.066, Net2Net 5.212, grown from the lr-2e-3 small model -- and DeiT worse than
# Net2Net; bench/experiments/ligo_init_quality.py.)
# tiny: a few steps, for tests.
# MSG ramps its masks over 5,000 steps at paper scale (1.25% of 400K): the same share at mini, and 2 steps at tiny.
# Method defaults that count the run's steps, stretched with it at the regime scale (regime_of); LiGO's fit is not
# (20 steps stay under 2% of a longer run).
STEP_COUNT_DEFAULTS = ("ramp_steps",)
METHOD_DEFAULTS = {"paper": (), "mini": (("fit_steps", 20), ("ramp_steps", 20)),
                   "tiny": (("fit_steps", 3), ("ramp_steps", 2))}

# Families trained without dropout (tests/test_method_options.py checks which): a copy start's twins get equal gradients
# and stay twins for the whole run (models/twins.py), so the width they add is never used. On these families a method
# with a `fit_noise` option (LiGO's copy start) breaks the symmetry by default; with dropout (BERT, RoBERTa, GPT-2) the
# copies part anyway and the default stays the exact Net2Net start. The evidence: REPRODUCE.md, Table 2 and cause 3.
NO_DROPOUT = ("vit", "cait", "llama")
FAMILY_METHOD_DEFAULTS = {family: (("fit_noise", 0.1),) for family in NO_DROPOUT}


# The regime scale (module docstring): how many times mini's steps each kind of task trains, and how many test images
# a vision task is evaluated on. Text at 4x: BERT-Small->Base fails the control check at mini's 1,600 steps and at 2x
# (the small model trained on reaches scratch's final), and passes it at 4x at both seeds (records/probes/,
# records/bert-6400; REPRODUCE.md "The regime"). Vision at 4x with every test image: at mini one evaluation's sampling
# error (~0.45 points on 5,120 images) was the size of the differences ranked.
REGIME_STEPS = {"text": 4, "image": 4}
REGIME_EVAL_IMAGES = 10_000
# A pair's own regime budget (times mini's steps), over its kind's: each set from a probe that passes every regime
# check at seeds 0 and 1 (tests/test_regime_probe.py holds the registry to the committed probes). BERT-Small->Base
# trains its own sizes at 3x: the README job's pair, whose cost on a CPU decides the budget (REPRODUCE.md "The regime").
PAIR_REGIME_STEPS: dict[str, int] = {"bert_small_base": 3}


def regime_of(task: Task, factor: int | None = None) -> Task:
    """A mini task (mini's pair or the pair's regime sizes) at the regime scale: both recipes' steps times
    REGIME_STEPS, vision evaluated on every test image, and the step-count method defaults (MSG's ramp) stretched with
    the run, so that they keep their share of it. `factor`: a pair's own budget (PAIR_REGIME_STEPS), else its kind's."""
    kind = "image" if get_family(task.family).objective == "image" else "text"
    factor = REGIME_STEPS[kind] if factor is None else factor
    recipe = task.recipe.with_(steps=task.recipe.steps * factor)
    small_recipe = task.small_recipe.with_(steps=task.small_recipe.steps * factor)
    if kind == "image":
        batches = -(-REGIME_EVAL_IMAGES // recipe.batch_size)
        recipe, small_recipe = recipe.with_(eval_batches=batches), small_recipe.with_(eval_batches=batches)
    stretched = tuple((k, v * factor if k in STEP_COUNT_DEFAULTS else v) for k, v in task.method_defaults)
    return task.with_(scale="regime", recipe=recipe, small_recipe=small_recipe, method_defaults=stretched)


def make_task(family: str, small: dict, large: dict, scale: str = "mini", name: str | None = None,
              **recipe_changes) -> Task:
    """A task for any pair of one family: `small`/`large` give layers, hidden, heads (and optionally ffn,
    class_layers); data, vocabulary and recipe are the family's at `scale`."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale '{scale}'; known: {', '.join(SCALES)}")
    if scale == "regime":
        return regime_of(make_task(family, small, large, "mini", name, **recipe_changes))
    if family in TEXT:
        fixed, data, tokenizer = TEXT[family][scale]
    elif family in ("vit", "cait"):
        (fixed, data), tokenizer = VISION[scale], None
    else:
        raise KeyError(unknown("family", family, list(TEXT) + ["vit", "cait"]))
    if family == "cait":
        fixed = {"class_layers": 2, **fixed}
    recipe, small_recipe = _recipes(family, scale)
    return Task(name or f"custom_{family}", scale, ModelSpec(family, **{**fixed, **small}),
                ModelSpec(family, **{**fixed, **large}), data, recipe.with_(**recipe_changes),
                small_recipe.with_(**recipe_changes), tokenizer=tokenizer,
                method_defaults=METHOD_DEFAULTS[scale] + FAMILY_METHOD_DEFAULTS.get(family, ()),
                evals=("glue", "squad", "mini") if family in TEXT else ("transfer", "mini"))


def _pair(layers, hidden, heads, **kw) -> dict:
    return dict(layers=layers, hidden=hidden, heads=heads, **kw)


# name -> family, {scale: (small, large)}, notes.  head_dim is kept everywhere (64; 48 for CaiT, 24 below paper scale;
# 32 at tiny and for the mini GPT-2 pair; 16 for the mini and tiny Llama), and so is Llama's group size (query heads
# per key/value head: 4 at paper scale, 2 below); Llama's FFN is models.llama.swiglu_ffn (multiple of 256; 32 below
# paper scale).
PAIRS: dict[str, tuple[str, dict, str]] = {
    # regime: three quarters of mini's widths (x1.5 and head_dim kept) at 3x mini's steps, the cheapest budget probed
    # at which every regime check passes at seeds 0 and 1 (records/probes/bert-96-144-3x; PAIR_REGIME_STEPS). Mini's
    # pair passes at 4x (records/bert-6400, records/bert-6400-cpu) and fails the control check at 2x; the 96-wide
    # pair fails it at 2x at seed 1 (records/probes/bert-96-144-2x; bench/results/regime_probe.md).
    "bert_small_base": ("bert", {"paper": (_pair(6, 512, 8), _pair(12, 768, 12)),
                                 "mini": (_pair(2, 128, 2), _pair(4, 192, 3)),
                                 "regime": (_pair(2, 96, 2, ffn=384), _pair(4, 144, 3, ffn=576)),
                                 "tiny": (_pair(1, 64, 2), _pair(2, 96, 3))}, ""),
    "bert_base_large": ("bert", {"paper": (_pair(12, 768, 12), _pair(24, 1024, 16)),
                                 "mini": (_pair(4, 192, 3), _pair(8, 256, 4)),
                                 "tiny": (_pair(2, 96, 3), _pair(4, 128, 4))}, ""),
    "bert_small_large": ("bert", {"paper": (_pair(6, 512, 8), _pair(24, 1024, 16)),
                                  "mini": (_pair(2, 128, 2), _pair(8, 256, 4)),
                                  "tiny": (_pair(1, 64, 2), _pair(4, 128, 4))}, ""),
    "bert_depth_only": ("bert", {"paper": (_pair(6, 768, 12), _pair(12, 768, 12)),
                                 "mini": (_pair(2, 192, 3), _pair(4, 192, 3)),
                                 "tiny": (_pair(1, 96, 3), _pair(2, 96, 3))}, "paper Figure 6(a)"),
    # mini at 2 layers, not the main pair's 4: the 4-layer small model (4L/128) ended 0.956 nat below unigram at
    # seed 1, short of the regime's 1 nat; 2L/128 (bert_small_base's small model) clears it at both seeds and
    # 2L/192 from scratch ends over 1 nat below that (bench/results/depth_probe*.json). Width x1.5 at equal depth,
    # the paper's shape.
    "bert_width_only": ("bert", {"paper": (_pair(12, 512, 8), _pair(12, 768, 12)),
                                 "mini": (_pair(2, 128, 2), _pair(2, 192, 3)),
                                 "tiny": (_pair(2, 64, 2), _pair(2, 96, 3))}, "paper Figure 6(b)"),
    "roberta_small_base": ("roberta", {"paper": (_pair(6, 512, 8), _pair(12, 768, 12)),
                                       "mini": (_pair(2, 128, 2), _pair(4, 192, 3)),
                                       "tiny": (_pair(1, 64, 2), _pair(2, 96, 3))}, ""),
    "gpt2_base_medium": ("gpt2", {"paper": (_pair(12, 768, 12), _pair(24, 1024, 16)),
                                  # head_dim 32: the paper's x1.33 width at a third of 192 -> 256's cost
                                  "mini": (_pair(2, 96, 3), _pair(4, 128, 4)),
                                  "tiny": (_pair(1, 64, 2), _pair(2, 96, 3))},
                         "GPT-2 steps/lr/warmup not stated in the paper: 100K steps, lr 2e-4, 2K warmup assumed"),
    "gpt2_medium_xl": ("gpt2", {"paper": (_pair(24, 1024, 16), _pair(48, 1600, 25)),
                                "mini": (_pair(2, 256, 4), _pair(4, 384, 6)),
                                "tiny": (_pair(1, 64, 2), _pair(2, 96, 3))},
                       "paper App. C.5: 15K steps on C4, target log-perplexity 3.3"),
    "llama_small_base": ("llama", {"paper": (_pair(12, 768, 12, kv_heads=3, ffn=2048),
                                             _pair(24, 1024, 16, kv_heads=4, ffn=2816)),
                                   # head_dim 16: x1.33 with the group size kept, at the mini GPT-2 pair's cost
                                   "mini": (_pair(2, 96, 6, kv_heads=3, ffn=256), _pair(4, 128, 8, kv_heads=4, ffn=352)),
                                   "tiny": (_pair(1, 64, 4, kv_heads=2, ffn=192), _pair(2, 96, 6, kv_heads=3, ffn=256))},
                         "Llama-style pair (~124M -> ~336M, GQA, SwiGLU, RMSNorm, rotary, untied head), not from the "
                         "LiGO paper: c4 with the GPT-2 task's batch/seq/steps, the LLaMA paper's AdamW settings"),
    # stochastic depth at paper scale: DeiT main.py's --drop-path default, 0.1 (DeiT-B's; DeiT-S was trained with it too)
    # regime: half mini's widths (x2 kept, head_dim 32). Mini's pair at the regime's budget failed the control
    # check (the 64-wide small model trained on touched scratch's final at seed 0: records/deit-6400); at half the
    # widths every regime check passes at seeds 0 and 1 (records/probes/deit-32-64-4x, bench/results/regime_probe.md).
    "deit_s_b": ("vit", {"paper": (_pair(12, 384, 6, drop_path=0.1), _pair(12, 768, 12, drop_path=0.1)),
                         "mini": (_pair(4, 64, 1), _pair(4, 128, 2)),
                         "regime": (_pair(4, 32, 1), _pair(4, 64, 2)),
                         "tiny": (_pair(2, 32, 1), _pair(2, 64, 2))}, ""),
    # stochastic depth at paper scale: the CaiT paper sets it per model (its table of model variants; recalled, not
    # checked against a copy here: XS-24 0.05, S-24 0.1). A pair has one rate (models/spec.check_growable): S-24's,
    # the model whose training the pair compares, so CaiT-XS24 is pretrained at 0.1 rather than 0.05. timm's Cait,
    # like CaiT's code, gives every patch block the rate.
    "cait_xs_s": ("cait", {"paper": (_pair(24, 288, 6, drop_path=0.1), _pair(24, 384, 8, drop_path=0.1)),
                           # head_dim 24: at 144 -> 192 (head_dim 48) scratch ended 0.53 points above the small model,
                           # at 72 -> 96 1.33, at 48 -> 64 0.71 (seed 0, 5,120 test images; REPRODUCE, Figure 8)
                           "mini": (_pair(4, 72, 3), _pair(4, 96, 4)),
                           "tiny": (_pair(1, 48, 2), _pair(2, 72, 3), )},
                  "paper App. C.2 (CaiT-XS24 -> CaiT-S24); tiny grows depth too so every method has depth to grow"),
}


# A pair's own method defaults, over its scale's. LiGO's fit at mini is 20 steps (<= 2% of a run), but a CaiT fit step
# is 2.05x a training step (the operator's materialisation, 3.3 GFLOPs forward and backward, outweighs a batch of 64
# images of 17 tokens): 20 steps were 2.57% of scratch's FLOPs, 15 are 1.93%.
PAIR_METHOD_DEFAULTS: dict[tuple[str, str], tuple[tuple[str, object], ...]] = {
    ("cait_xs_s", "mini"): (("fit_steps", 15),)}


# A pair's own recipe fields at one scale, over its family's, for pretraining and growth alike. At mini, BERT's
# 100-step warm-up (at lr 1e-3) holds the deeper post-LN models on the unigram plateau: the 8-layer BERT-Large
# from scratch evaluates 6.202, 5.931, 5.818, 5.678 at steps 200-800 at 100 and 6.179, 5.682, 4.820, 4.365 at
# 400 (it ends at 3.721 there, 4.531 at 100), so at 100 BERT-Base -> Large failed the regime (its 4-layer small
# model ended at 4.111, below the large one); and at 100 depth did not pay (2L/192 4.094, 4L/192 4.111), at 400
# it does (4.020, 3.923). So the pairs that grow into the 8-layer model (they share its scratch run) and the
# depth-only pair take 400. The other BERT pairs keep 100: they pass the regime there, and their small model
# (2L/128) learns slower at 400 (5.232 against 5.163 at seed 0). REPRODUCE.md, Figures 2(c) and 6(a).
# The depth-only pair also trains both models 3,200 steps (13.1M tokens): at 1,600, depth paid at seed 0 (2L 4.020,
# 4L 3.923) but not at seed 1 (4.042, 4.038), so the pair's cross-seed regime check failed; at 3,200 the 4-layer
# model ends 0.125 / 0.120 nat below the 2-layer one at seeds 0 / 1 (3.267 vs 3.392, 3.295 vs 3.415; H200).
PAIR_RECIPE_CHANGES: dict[tuple[str, str], tuple[tuple[str, object], ...]] = {
    ("bert_small_large", "mini"): (("warmup", 400),),
    ("bert_base_large", "mini"): (("warmup", 400),),
    ("bert_depth_only", "mini"): (("warmup", 400), ("steps", 3200))}

# A pair's own recipe fields for the large model's training only (its small model is pretrained as the family's):
# the paper grows GPT2-Medium -> GPT2-1.5B for 15K steps (App. C.5) from a fully pretrained GPT2-Medium.
PAIR_LARGE_RECIPE_CHANGES: dict[tuple[str, str], tuple[tuple[str, object], ...]] = {
    ("gpt2_medium_xl", "paper"): (("steps", 15_000),)}


def get_task(name: str, scale: str = "mini") -> Task:
    if name not in PAIRS:
        raise KeyError(unknown("task", name, PAIRS))
    _family, sizes, _notes = PAIRS[name]
    if scale not in SCALES:
        raise ValueError(f"unknown scale '{scale}'; known: {', '.join(SCALES)}")
    if scale == "regime":    # mini's pair, or the pair's own regime sizes, as mini trains them, then longer
        return regime_of(_pair_task(name, "mini", sizes.get("regime", sizes["mini"])), PAIR_REGIME_STEPS.get(name))
    return _pair_task(name, scale, sizes[scale])


def _pair_task(name: str, scale: str, pair: tuple[dict, dict]) -> Task:
    """The task of a registered pair at `scale` with the models `pair` gives: the family's data and recipe at that
    scale, the pair's own recipe, large-recipe and method-default tables."""
    family, _sizes, notes = PAIRS[name]
    small, large = pair
    own_recipe = dict(PAIR_RECIPE_CHANGES.get((name, scale), ()))
    task = make_task(family, small, large, scale=scale, name=name, **own_recipe)
    task = task.with_(recipe=task.recipe.with_(**dict(PAIR_LARGE_RECIPE_CHANGES.get((name, scale), ()))))
    if (name, scale) in PAIR_METHOD_DEFAULTS:
        own = dict(PAIR_METHOD_DEFAULTS[name, scale])
        task = task.with_(method_defaults=tuple({**dict(task.method_defaults), **own}.items()))
    return task.with_(notes=notes)


def list_tasks() -> list[str]:
    return sorted(PAIRS)
