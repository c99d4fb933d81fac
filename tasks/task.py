"""Task: a model pair + pretraining data + recipe + evaluation suite, at one scale (DESIGN.md §5).

A task is a frozen dataclass so that a run record can hold it whole and a resumed run can check it is
continuing the same thing.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property

from models import ModelSpec, build_model, check_growable, get_family
from models.flops import backward_flops
from tasks.data.vision import PER_IMAGE, check_augmentation   # PER_IMAGE: timm.data.create_transform's part
from tasks.rules import above, adam_betas, at_least, in_range, integer_at_least, one_of

from tasks.scales import SCALES  # noqa: F401  (re-exported: tasks.SCALES)
# the transformers.get_scheduler names the trainer can drive: built from (warmup, total steps) alone and stepped
# without a metric (reduce_lr_on_plateau, greedy, the *_min_lr and warmup_stable_decay ones need more; a cosine to a
# floor is schedule "cosine" with the recipe's min_lr)
SCHEDULES = ("linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
             "inverse_sqrt")


# field -> (test, what it must be): checked when a Recipe is made, so a bad value is refused before a run starts
RECIPE_RULES = {
    "steps": integer_at_least(0, " (0: grow and evaluate only)"),
    "batch_size": integer_at_least(1),
    "lr": above(0),
    "warmup": integer_at_least(0),
    "seq_len": integer_at_least(1),
    "weight_decay": at_least(0),
    "grad_clip": at_least(0, " (0: no clipping)"),
    "schedule": (lambda v: v in SCHEDULES, "one of " + ", ".join(SCHEDULES)),
    "eval_every": integer_at_least(1),
    "eval_batches": integer_at_least(1),
    "log_every": integer_at_least(1),
    "grad_accum": integer_at_least(1),
    "bf16": (lambda v: isinstance(v, bool), "true or false"),
    "adam_betas": adam_betas("adam_betas"),
    "adam_eps": above(0),
    "min_lr": at_least(0, " (0: a cosine schedule decays to 0)"),
    # DeiT's recipe (tasks/data/image_recipe.py and imagenet.py apply it; names after facebookresearch/deit main.py's options)
    "auto_augment": (lambda v: isinstance(v, str), "a timm auto-augment policy such as rand-m9-mstd0.5-inc1, "
                                                   "or empty (off)"),
    "color_jitter": at_least(0, " (0: off)"),
    "train_interpolation": one_of(("bicubic", "bilinear", "nearest", "random")),
    "re_prob": in_range(0, 1, note=" (random erasing's probability; 0: off)"),
    "re_mode": one_of(("pixel", "rand", "const")),
    "re_count": integer_at_least(1),
    "mixup": at_least(0, " (mixup's alpha; 0: off)"),
    "cutmix": at_least(0, " (cutmix's alpha; 0: off)"),
    "mixup_prob": in_range(0, 1),
    "mixup_switch_prob": in_range(0, 1),
    "mixup_mode": one_of(("batch", "pair", "elem")),
    "smoothing": in_range(0, 1, high_open=True, note=" (label smoothing; 0: off)"),
    "repeated_aug": integer_at_least(1, " (repeats of each image per epoch; 1: off)"),
}
# DeiT's recipe, off by default: `switch` fields turn a part on; the `parameters` shape a part and act only with their
# switch on (a changed one with its switch off would change nothing and is refused). A recipe with every switch off
# records none of these fields (Task.to_dict), so records made before they existed keep their fingerprints.
AUGMENT_SWITCHES = {"auto_augment": "", "color_jitter": 0.0, "re_prob": 0.0, "mixup": 0.0, "cutmix": 0.0,
                    "smoothing": 0.0, "repeated_aug": 1}
MIXING = ("mixup", "cutmix")                                  # timm.data.Mixup's part (soft targets)
AUGMENT_PARAMETERS = {  # field -> (default: DeiT main.py's, the switches it acts with)
    "train_interpolation": ("bicubic", PER_IMAGE), "re_mode": ("pixel", ("re_prob",)), "re_count": (1, ("re_prob",)),
    "mixup_prob": (1.0, MIXING), "mixup_switch_prob": (0.5, MIXING), "mixup_mode": ("batch", MIXING)}
AUGMENT_FIELDS = tuple(AUGMENT_SWITCHES) + tuple(AUGMENT_PARAMETERS)


@dataclass(frozen=True)
class Recipe:
    """Optimisation recipe. Global batch = batch_size x grad_accum (x world size when distributed)."""
    steps: int
    batch_size: int
    lr: float
    warmup: int
    seq_len: int = 128            # tokens per sequence (text); ignored for images
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    schedule: str = "linear"      # any transformers.get_scheduler name
    # the lr a cosine schedule decays to (DeiT main.py's --min-lr 1e-5; transformers' "cosine_with_min_lr"); 0: to 0.
    # Left out of records at 0, so that records made before the field existed keep their fingerprints
    min_lr: float = 0.0
    eval_every: int = 100
    eval_batches: int = 20
    log_every: int = 10
    grad_accum: int = 1
    bf16: bool = False
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-6
    # DeiT's recipe for image tasks (main.py's option in brackets); all off by default, see AUGMENT_SWITCHES
    auto_augment: str = ""             # [--aa] timm auto-augment policy (RandAugment: rand-...), "" off
    color_jitter: float = 0.0          # [--color-jitter] (timm ignores it while auto_augment is on, as DeiT's did)
    train_interpolation: str = "bicubic"  # [--train-interpolation] of the random resized crop and auto-augment
    re_prob: float = 0.0               # [--reprob] random erasing probability
    re_mode: str = "pixel"             # [--remode]
    re_count: int = 1                  # [--recount]
    mixup: float = 0.0                 # [--mixup] mixup alpha
    cutmix: float = 0.0                # [--cutmix] cutmix alpha
    mixup_prob: float = 1.0            # [--mixup-prob] probability a batch is mixed at all
    mixup_switch_prob: float = 0.5     # [--mixup-switch-prob] cutmix instead of mixup
    mixup_mode: str = "batch"          # [--mixup-mode] one draw per batch, pair or element
    smoothing: float = 0.0             # [--smoothing] label smoothing (in the soft targets)
    repeated_aug: int = 1              # [--repeated-aug, RASampler's num_repeats] each image this many times

    def __post_init__(self):
        for name, (ok, rule) in RECIPE_RULES.items():
            if not ok(getattr(self, name)):
                raise ValueError(f"recipe {name} must be {rule}, got {getattr(self, name)!r}")
        if self.steps and self.warmup > self.steps:
            raise ValueError(f"recipe warmup ({self.warmup}) must not exceed steps ({self.steps}); "
                             f"lower it with --set warmup=N")
        object.__setattr__(self, "adam_betas", tuple(self.adam_betas))   # a list from JSON or --set: one form
        if self.min_lr and (self.schedule != "cosine" or self.min_lr >= self.lr):
            raise ValueError(f"recipe min_lr {self.min_lr} needs schedule cosine (it is {self.schedule}) and a value below "
                             f"lr ({self.lr}); leave min_lr out (0) otherwise")
        for name, (default, switches) in AUGMENT_PARAMETERS.items():
            if getattr(self, name) != default and not any(self.is_on(s) for s in switches):
                off = "it is" if len(switches) == 1 else "they are"
                raise ValueError(f"recipe {name}={getattr(self, name)} acts only with {' or '.join(switches)} on, "
                                 f"and {off} off; set one or leave {name} out")
        if self.mixes and self.batch_size % 2:
            # timm's Mixup mixes each image with the one mirrored across the batch (x.flip(0)): it needs pairs
            raise ValueError(f"recipe batch_size {self.batch_size} is odd: mixup/cutmix need an even batch size "
                             "(each micro-batch is mixed with itself reversed); make it even")

    def is_on(self, name: str) -> bool:
        """Whether the switch field `name` of DeiT's recipe is on."""
        return getattr(self, name) != AUGMENT_SWITCHES[name]

    @property
    def augments(self) -> bool:
        """Whether any part of DeiT's recipe is on (what decides whether its fields are recorded)."""
        return any(self.is_on(name) for name in AUGMENT_SWITCHES)

    @property
    def mixes(self) -> bool:
        return any(self.is_on(name) for name in MIXING)

    def augmentation(self) -> dict:
        """DeiT's recipe fields by name, what tasks/data/image_recipe.py and imagenet.py read."""
        return {name: getattr(self, name) for name in AUGMENT_FIELDS}

    def with_(self, **changes) -> "Recipe":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Task:
    name: str
    scale: str
    small: ModelSpec
    large: ModelSpec
    data: str                     # pretraining data source, see tasks.data.load_pretrain_data
    recipe: Recipe                # training the large model
    small_recipe: Recipe          # pretraining the small model a method grows from
    tokenizer: str | None = None  # "wordpiece" / "bytelevel_bpe" (trained locally) or a hub name / directory
    data_path: str | None = None  # local copy of the data set
    evals: tuple[str, ...] = ()   # evaluation suites (glue, squad, transfer, mini)
    notes: str = ""               # where a number comes from when the paper does not state it
    # Scale-dependent defaults for method config fields, by field name (no method is named here): a method
    # that has the field takes the value unless the user sets it.
    method_defaults: tuple[tuple[str, object], ...] = ()
    # the preset a growth run's `recipe` was changed by; "same": the task's own recipe. Set (and its name checked) by
    # tasks/grown_recipes.py's apply_grown_recipe, a layer above this one: it reads the registry's paper recipes
    grown_recipe: str = "same"
    grown_changes: tuple[tuple[str, object], ...] = ()   # the recipe fields that preset changed, as it changed them
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        if self.scale not in SCALES:
            raise ValueError(f"unknown scale '{self.scale}'; known: {', '.join(SCALES)}")
        family = get_family(self.family)
        if (self.small.kv_heads or self.large.kv_heads) and not family.grouped_query:
            raise ValueError(f"{self.family} has no grouped-query attention: leave kv_heads out (it is for llama)")
        # a size the family has no use for would be recorded (and change the cache key) while changing nothing
        unused = ("class_layers",) if not family.class_attention else ()
        unused += (("image_size", "patch_size", "classes", "drop_path") if family.objective != "image"
                   else ("vocab", "positions"))
        for which, spec in (("small", self.small), ("large", self.large)):
            given = [f"{which}.{name}={getattr(spec, name)}" for name in unused if getattr(spec, name)]
            if given:
                raise ValueError(f"{', '.join(given)}: the {self.family} family has no use for it; leave it out")
        check_growable(self.small, self.large)
        if get_family(self.family).objective != "image":
            for which, key, recipe, spec in (("", "seq_len", self.recipe, self.large),
                                             ("small model's ", "small_recipe.seq_len", self.small_recipe, self.small)):
                if recipe.seq_len > spec.positions:
                    raise ValueError(f"the {which}seq_len ({recipe.seq_len}) exceeds the positions of "
                                     f"{spec.short()} ({spec.positions}); lower --set {key}")
        for key, recipe in (("", self.recipe), ("small_recipe.", self.small_recipe)):
            if recipe.augments:
                on = [f"{key}{name}={getattr(recipe, name)}" for name in AUGMENT_SWITCHES if recipe.is_on(name)]
                if family.objective != "image":
                    raise ValueError(f"{', '.join(on)}: DeiT's augmentation is for image tasks, and {self.name} "
                                     f"trains {self.family} on text; leave it out")
                check_augmentation(self.data, recipe.augmentation(), key)
        for key in ("data_path", "tokenizer"):
            if getattr(self, key) is not None and not str(getattr(self, key)).strip():
                raise ValueError(f"{key} is empty; give a path (or leave {key} out for the task's default)")

    @property
    def family(self) -> str:
        return self.large.family

    @property
    def objective(self) -> str:
        return get_family(self.family).objective

    def build_small(self):
        return build_model(self.small)

    def build_large(self):
        return build_model(self.large)

    def small_task(self) -> "Task":
        """The task of pretraining the small model itself (what a growth method starts from): its own recipe, never
        the grown model's preset (that changed `recipe`, which the pretraining does not train with)."""
        return dataclasses.replace(self, name=f"{self.name}:small", large=self.small, recipe=self.small_recipe,
                                   grown_recipe="same", grown_changes=())

    def with_(self, **changes) -> "Task":
        return dataclasses.replace(self, **changes)

    def seq_len(self) -> int:
        return self.recipe.seq_len if get_family(self.family).objective != "image" else 0

    def train_flops(self, batch_size: int | None = None, spec: ModelSpec | None = None) -> float:
        """Analytic FLOPs of one training step (forward + backward) of the large model."""
        fwd = get_family(self.family).forward_flops(spec or self.large, batch_size or self.recipe.batch_size,
                                                    self.recipe.seq_len)
        return fwd.total + backward_flops(fwd)

    @cached_property
    def _data(self):
        from tasks.data import load_pretrain_data
        image = get_family(self.family).objective == "image"
        data = load_pretrain_data(
            self.data, get_family(self.family).objective, seq_len=self.recipe.seq_len,
            vocab_size=None if image else self.large.vocab, tokenizer=self.tokenizer,
            image_size=self.large.image_size if image else None, path=self.data_path)
        if self.recipe.augments:          # DeiT's recipe (checked to be an image task's in __post_init__)
            data = data.with_augmentation(self.recipe.augmentation())
        return data

    def check_data(self) -> None:
        """Refuse a data path that cannot make a run (missing, binary, empty, the wrong kind), in one line and
        before any tokenizer is trained or anything is written."""
        from tasks.data import check_data_path
        check_data_path(self.data, self.objective, self.data_path)

    def data_key(self) -> str:
        """What identifies the pretraining data (the source, or a hash of a local copy's files)."""
        from tasks.data import data_key
        return data_key(self.data, self.objective, self.data_path)

    def pretrain_data(self):
        """The pretraining data (loaded once per task object, tokenizers cached on disk)."""
        return self._data

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("extra")
        if d["grown_recipe"] == "same":     # left out, so that records made before the field existed still match
            d.pop("grown_recipe")
        if not d["grown_changes"]:
            d.pop("grown_changes")
        else:
            d["grown_changes"] = dict(d["grown_changes"])
        d["small"], d["large"] = self.small.to_dict(), self.large.to_dict()
        for key in ("recipe", "small_recipe"):     # DeiT's recipe, only where it is on: older records still match
            if not getattr(self, key).augments:
                for name in AUGMENT_FIELDS:
                    d[key].pop(name)
            if not d[key]["min_lr"]:
                d[key].pop("min_lr")
        return d
