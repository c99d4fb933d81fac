"""GrowthMethod: the one interface every growth method implements (DESIGN.md §3).

Few abstract methods, sensible defaults (lm-evaluation-harness's `LM` style): a method must say how it
initialises the large model (`grow`); everything else — an operator-fitting phase before growth, training
stages, an extra loss, frozen parameters — is an optional hook whose default does nothing. The trainer calls
the hooks and never branches on a method's name.
"""
from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Iterator

import torch
from torch import nn

from tasks.rules import SEED_RULE, Rule


@dataclass(frozen=True)
class Stage:
    """A stretch of training: `steps` optimizer steps on `model_from(previous)`, where only the main blocks
    in `trainable_blocks` (None: all parameters) receive gradients; frozen blocks cost forward FLOPs only.
    The trainer rebuilds the optimizer at every stage boundary (the parameter set changes); `reset_optimizer`
    marks a stage whose method asks for that explicitly, for the record. Main blocks outside `active_blocks`
    (None: all) are skipped, input passed through (staged training's sub-network, runs/strategies.py).
    With `trainable_blocks` set, nothing below the lowest trainable block runs backward: the embeddings
    train only where every block trains (the output layer always trains, a tied embedding with it)."""
    name: str
    steps: int
    trainable_blocks: frozenset[int] | None = None
    reset_optimizer: bool = False
    active_blocks: frozenset[int] | None = None


@dataclass
class Config:
    """Base of every method's hyperparameters; subclasses add fields with the paper's defaults, and may add `RULES`:
    field -> (test, what it must be), checked when the method is made (tasks/task.py's RECIPE_RULES, for methods),
    so that a bad value is refused before a run writes anything; a subclass's rules extend its parents'. A float
    option that is NaN or infinite is refused with or without a rule: no growth hyperparameter means anything
    there (a NaN noise or temperature would otherwise pass every `<` test and poison the grown model)."""
    RULES: ClassVar[dict[str, Rule]] = {}


def check_config(method: str, config: Config) -> None:
    """Raise the one-line ValueError of the first option of `config` that breaks its rules (see Config)."""
    rules = {"seed": SEED_RULE}       # every method's seed option (its draws' generator): as run.py --seed
    for cls in reversed(type(config).__mro__):
        rules.update(vars(cls).get("RULES", {}))
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if field.name in rules:
            ok, rule = rules[field.name]
            if not ok(value):
                raise ValueError(f"{method} {field.name} must be {rule}, got {value!r}")
        elif isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{method} {field.name} must be a finite number, got {value!r}")


# where a method's config.seed came from, as its record says: the run's --seed (GrowthMethod.for_run), or set
SEED_SOURCES = {"run": "the run's --seed", "set": "set explicitly (--set seed=N)"}


class GrowthMethod(ABC):
    name: str = ""                     # set by @register_method
    Config: type = Config
    needs_small: bool = True           # False for methods that never use a small model (scratch)
    preserves_function: bool = False   # True where the method claims it; contract tests then check outputs
    trains_with_small: bool = False    # the small model is used in training too (KI's teacher): resume reloads it
    # options a task's per-scale/per-family defaults never set (the method fixes them; a user still may): e.g.
    # ligo starts from random width rows, so the no-dropout families' symmetry-breaking noise is not its default
    keeps_own: tuple[str, ...] = ()
    # How tables and figures show the method, carried by every record to the analysis (describe()["display"]), and
    # the main comparisons that run it (methods/registry.py MAIN_COMPARISONS). Declared by each registered class
    # for itself, never inherited (methods/registry.py OWN): a subclass is another method.
    display_name: str | None = None    # its row's and legend's name (e.g. "LiGO"); None: the registered name
    color: str | None = None           # its colour on every figure, a matplotlib colour; None: picked by its name
    table_order: float | None = None   # its row among the others (the paper's order: scratch 0 ... msg 13); None: after
    sweeps: tuple[str, ...] = ()       # e.g. MAIN_COMPARISONS, or ("llama",); () : only the sweeps that list it

    def __init__(self, config: Config | None = None, **overrides):
        self.config = dataclasses.replace(config or self.Config(), **overrides)
        # a seed given by keyword (--set seed=N, a depth method handing its seed to its width operator) is kept by
        # for_run; otherwise a run draws with its own seed (SEED_SOURCES)
        self.seed_source = "set" if "seed" in overrides else None
        check_config(self.name or type(self).__name__, self.config)

    def for_run(self, seed: int) -> "GrowthMethod":
        """This method as a run of seed `seed` uses it: a method whose config has a `seed` (the generator of its
        random draws: index maps, noise, split coefficients) draws with the run's seed, unless the seed was set
        (then it is kept), so that runs over seeds vary the method's draws as well as the data and the model's
        initialisation. The run's seed is used as it is (seed 0 -> method seed 0: records made when every method
        drew with seed 0 stay what seed 0 computes). A fresh instance (called before the method fits or grows);
        a method without a seed is returned as it is."""
        if not any(f.name == "seed" for f in dataclasses.fields(self.config)) or self.seed_source == "set":
            return self
        method = type(self)(dataclasses.replace(self.config, seed=seed))
        method.seed_source = "run"
        return method

    # -- the initialisation ----------------------------------------------------------------------------
    @abstractmethod
    def grow(self, small: nn.Module | None, task) -> nn.Module:
        """The large model's initialisation (a plain HF/timm module of `task.large`'s spec)."""

    def fit(self, small: nn.Module, task, batches: Iterator[dict], ledger, *, progress: bool = False) -> None:
        """Optional learning before `grow` (LiGO trains its operator here); charge its FLOPs to `ledger`. The small
        model is on the run's device: learn there. `progress`: show a progress bar."""

    def check_pair(self, task) -> None:
        """Refuse a pair this method cannot grow before a run writes anything: raise ValueError with one line that
        names the method and the reason (`grow` raises the same where it is called directly). Default: none."""

    def small_recipe(self, task):
        """The recipe the small model this method grows from is pretrained with, when run.py trains it (default: the
        task's). G_stack's growth timing is this budget."""
        return task.small_recipe

    # -- training hooks ----------------------------------------------------------------------------------
    def stages(self, task, total_steps: int) -> list[Stage]:
        return [Stage("train", total_steps)]

    def enter_stage(self, model: nn.Module, stage: Stage, task) -> nn.Module:
        """Called when a stage begins (also on resume); may return a changed model (progressive stacking)."""
        return model

    def extra_loss(self, model: nn.Module, batch: dict, task_loss: torch.Tensor, step: int,
                   total_steps: int, ledger) -> torch.Tensor:
        """The loss actually minimised; distillation mixes in a teacher here and charges its FLOPs."""
        return task_loss

    def set_step(self, model: nn.Module, step: int, total_steps: int) -> None:
        """Called with the number of optimizer steps done, `step`, before the training loop starts (or resumes) and
        after every step, so before each step's forward and each evaluation: a method whose model changes with
        training progress (MSG's masks ramping from 0 to 1) sets it here, as a function of `step` alone, so a
        resumed run computes what the uninterrupted one did."""

    def computes_large(self, step: int, total_steps: int) -> bool:
        """Whether the model after `step` steps computes the large model's full function; an evaluation that does
        not (MSG's new units still masked) never counts as the large model reaching a target (paper §4.1), as
        MSLT's shallower stages do not. Default: yes."""
        return True

    def training_signature(self) -> dict | None:
        """What, beside its stages, makes this method's training differ from plain training of the model it grew:
        None for plain training; a method with its own `extra_loss` (distillation) is identified by its name and
        config. Two runs with the same initial weights, stage plan and signature are one computation
        (runs/computation.py), which the tables merge rather than print as rivals."""
        if type(self).extra_loss is GrowthMethod.extra_loss:
            return None
        return {"method": self.name, "config": dataclasses.asdict(self.config)}

    # -- records and resumption ----------------------------------------------------------------------------
    def resume_model(self, small: nn.Module | None, task, stage: Stage) -> nn.Module:
        """The module a checkpoint written during `stage` is loaded into when a run resumes (the trainer then
        calls enter_stage and load_state_dict). `small` is given where `trains_with_small`. Methods whose
        model changes shape between stages (MSLT) build that stage's shape."""
        return task.build_large()

    def describe(self) -> dict[str, Any]:
        """What goes into the run record: name and fully resolved config, how the analysis shows the method (`display`:
        presentation(), not a setting), and for a method with a seed where it came
        from (`seed_source`: SEED_SOURCES; records made before it had none, and drew with seed 0 at every run seed
        unless set). The same before the method fits and grows as after (resume compares it with the record); what
        growing produced goes in artifacts()."""
        described = {"name": self.name, "config": dataclasses.asdict(self.config), "display": self.presentation()}
        if self.seed_source is not None:      # where config.seed came from: the run's --seed or --set seed=N
            described["seed_source"] = self.seed_source
        return described

    @classmethod
    def presentation(cls) -> dict[str, Any]:
        """How the analysis shows this method (config.json `method.display`; it imports nothing from methods/): its
        name, colour and place among the rows. Not a setting: no comparison of records reads it
        (runs/preflight.py comparable_method)."""
        return {"name": cls.display_name or cls.name or cls.__name__, "color": cls.color, "order": cls.table_order}

    def artifacts(self) -> dict[str, Any]:
        """Extra things to save in the run directory (LiGO: its operator and fit curve)."""
        return {}


def config_fields(method_cls: type[GrowthMethod]) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(method_cls.Config)}

