"""The grown model's training recipe: a named axis of every comparison (DESIGN.md §4, "The grown model's recipe").

A growth method's large model trains, by default, with exactly scratch's recipe (`same`: the paper's §4.1 text says
every method shares the settings). But warm-up and peak lr decide how much of an inherited function survives the
first steps: at mini scale a grown model re-warms to 5-10x the paper's peak lr, and where the small model is nearly
as good as the large one its loss climbs above the small model's and spends a third of the run getting back
(REPRODUCE.md, the verdict table). The official LiGO code grows BERT with no warm-up. A preset names such a recipe;
`--set grown_recipe=NAME` applies it to a growth run's training (never to scratch, every saving's denominator, nor
to the small model's pretraining). The run records the preset and the fields it changed (config.json
`grown_recipe`), its directory and label carry the name (`ligo-warmup0-s0`), and the analysis compares it with
scratch's own-recipe run as a labelled variant, "LiGO (warmup0)".

Presets, and where their values come from:
- same: nothing changed.
- warmup0: no warm-up, the grown model starts at the peak lr (the official BERT grow command's `--warmup_steps 0`).
- paper_lr: the peak lr of the family's paper-scale recipe (tasks/registry.py PAPER_RECIPES: BERT 2e-4, Llama 3e-4,
  ...), where the mini recipes, tuned for training from scratch, are 5-10x higher; at paper scale it is `same`.
- warmup0_paper_lr: both.
- lr_tenth: a tenth of the task's peak lr, for any family (the vision paper recipe's lr is mini's, 1e-3, where DeiT's
  linear scaling rule at mini's batch of 64 gives 6.25e-5: "a lower peak lr" needs no paper value).
- official: what the official LiGO README's grow command changes against its scratch command: BERT `--warmup_steps 0`
  (lr 2e-4 in both); RoBERTa nothing (it grows with `--warmup_steps 10000`, as from scratch). The weight decay,
  which the paper does not state, is the official config's for scratch and grown runs alike (0.1, tasks/registry.py).
  The official code grows BERT and RoBERTa only: other families are refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from models.family import unknown
from tasks.registry import PAPER_RECIPES

SAME = "same"


@dataclass(frozen=True)
class GrownRecipe:
    name: str
    what: str                                   # one line, for --list and the record
    changes: Callable[[object], dict]           # task -> recipe fields to change


def _paper_lr(task) -> dict:
    return {"lr": PAPER_RECIPES[task.family][0].lr}


# official LiGO README, "Training BERT/RoBERTa with LiGO": the grow command's recipe against the scratch command's
OFFICIAL = {"bert": {"warmup": 0}, "roberta": {}}


def _official(task) -> dict:
    if task.family not in OFFICIAL:
        raise ValueError(f"grown_recipe=official: the official LiGO code grows {' and '.join(OFFICIAL)} only, not "
                         f"{task.family}; use warmup0 or paper_lr")
    return dict(OFFICIAL[task.family])


PRESETS: dict[str, GrownRecipe] = {p.name: p for p in (
    GrownRecipe(SAME, "scratch's recipe unchanged (the paper's text)", lambda task: {}),
    GrownRecipe("warmup0", "no warm-up: the grown model starts at the peak lr", lambda task: {"warmup": 0}),
    GrownRecipe("paper_lr", "the peak lr of the family's paper-scale recipe", _paper_lr),
    GrownRecipe("warmup0_paper_lr", "no warm-up and the paper-scale peak lr",
                lambda task: {"warmup": 0, **_paper_lr(task)}),
    GrownRecipe("lr_tenth", "a tenth of the task's peak lr", lambda task: {"lr": task.recipe.lr / 10}),
    GrownRecipe("official", "what the official LiGO grow command changes (BERT: no warm-up)", _official),
)}


def preset(name) -> GrownRecipe:
    if name not in PRESETS:
        raise KeyError(unknown("grown_recipe", str(name), PRESETS))
    return PRESETS[name]


def apply_grown_recipe(task, name: str, grows: bool, explicit: set[str]):
    """`task` with preset `name` applied to its large model's recipe. `grows`: the method grows from a small model
    (scratch is refused anything but `same`); `explicit`: recipe fields the same command line sets itself, which
    a preset must not silently override or be overridden by."""
    recipe = preset(name)
    if name == SAME:
        return task.with_(grown_recipe=SAME)
    if not grows:
        raise ValueError(f"grown_recipe={name} sets a grown model's training; this method trains from its own "
                         "initialisation with the task's recipe (scratch is every saving's denominator): drop it")
    changes = recipe.changes(task)
    both = sorted(set(changes) & explicit)
    if both:
        raise ValueError(f"--set {', '.join(both)} and grown_recipe={name} both set {', '.join(both)}; give one")
    return task.with_(recipe=task.recipe.with_(**changes), grown_recipe=name, grown_changes=tuple(changes.items()))


def describe(task) -> dict:
    """What a growth run's config.json records: the preset, its line, and the recipe fields it changed, with the
    values it set (kept on the task when applied: a preset relative to the task's recipe, lr_tenth, cannot be
    recomputed from the recipe it changed)."""
    recipe = preset(task.grown_recipe)
    return {"name": recipe.name, "what": recipe.what, "changes": dict(task.grown_changes)}
