"""`--set KEY=VALUE`: how a value is read and where a key goes, one definition for run.py and bench/sweeps/cli.py.

A key is, in this order of lookup: an option of the method (`fit_steps`), a field of the large model's training
recipe (`lr`), a field of the small model's pretraining recipe (`small_recipe.warmup`), a field of either model's
spec (`large.layers`: a custom pair), the task's data (`data_path`, `tokenizer`), a training strategy
(`layer_drop`: runs/strategies.py), or the grown model's recipe preset (`grown_recipe=warmup0`:
tasks/grown_recipes.py). A value comes from a command line as text (ints, floats, true/false, none, a
comma list for a tuple field) or from a sweep's table already typed; either way it must have the type of the
field it replaces. Two command lines routing with two tables had drifted apart (the sweep took no model-spec key
and checked no type); here they share one.
"""
from __future__ import annotations

import dataclasses

SPECS = ("small", "large")
SMALL_RECIPE = "small_recipe."
TASK_KEYS = ("data_path", "tokenizer")
GROWN_RECIPE = "grown_recipe"        # a preset of the grown model's recipe (tasks/grown_recipes.py)
EVAL = "eval."


def check_repeated(items) -> None:
    """A key given twice on one command line (`--set lr=1e-3 --set lr=2e-3`) is refused: the last one silently
    winning hides a typo or a stale part of a script."""
    seen = set()
    for key, _ in items:
        if key in seen:
            raise ValueError(f"--set {key} given twice; give it once")
        seen.add(key)


def split_eval_settings(settings: list[str], evaluate_only: bool) -> tuple[list[str], list[str]]:
    """--set items -> (training, evaluation): "eval.KEY=V" always goes to the downstream evaluation (tasks/evals,
    which parses it); with run.py --evaluate (nothing is trained) every item does. Plain text here, so that
    training never imports the evaluation code."""
    train, ev = [], []
    for item in settings:
        if item.startswith(EVAL):
            ev.append(item[len(EVAL):])
        else:
            (ev if evaluate_only else train).append(item)
    return train, ev


def parse_value(text: str):
    """--set values: ints, floats, true/false, none, else the string itself."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def split_item(item: str) -> tuple[str, str]:
    """"KEY=VALUE" -> (key, raw value); a missing key or '=' is refused in one line."""
    key, sep, raw = item.partition("=")
    if not sep or not key:
        raise ValueError(f"malformed --set '{item}'; expected key=value, e.g. --set lr=1e-4")
    return key, raw


def declared_type(cls, name: str):
    """The scalar type a dataclass field of `cls` declares beside None (`snr_db: float | None` -> float), or None
    when it declares no single scalar type: what a field whose current value is None must hold."""
    import typing
    try:
        hint = typing.get_type_hints(cls)[name]
    except (KeyError, NameError, TypeError):
        return None
    members = [t for t in (typing.get_args(hint) or (hint,)) if t is not type(None)]
    return members[0] if len(members) == 1 and members[0] in (bool, int, float, str) else None


def coerce(key: str, raw, current, declared=None):
    """The value of `key` (text from a command line, or already typed) checked against the type of the field's
    current value (or, when that is None, the scalar type the field declares: `declared`): `steps=abc` or
    `steps=1.5` is refused, `lr=1` becomes 1.0; none/null keeps a None field None."""
    if isinstance(raw, str):
        if isinstance(current, tuple):   # adam_betas=0.9,0.95: a comma list (the recipe checks its length)
            return tuple(parse_value(part) for part in raw.split(","))
        value = raw if current is None and declared is str and raw.lower() not in ("none", "null") else parse_value(raw)
    else:
        value = raw
    expected = type(current) if current is not None else declared
    if current is None and (value is None or expected is None):
        return value
    if isinstance(current, (list, dict)):
        return value
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise ValueError(f"--set {key}={raw}: expected {expected.__name__}")
    return value


def _fields(obj) -> set[str]:
    return {f.name for f in dataclasses.fields(obj)}


def _spec_fields(task) -> set[str]:
    return _fields(task.small) - {"family"}         # the family is the task's, not a setting


def task_keys(task) -> set[str]:
    """Every key that means the same to any method: recipe, small_recipe.*, small.* / large.*, data, strategies."""
    from runs.strategies import FIELDS as strategy_keys
    recipe = _fields(task.recipe)
    specs = {f"{which}.{name}" for which in SPECS for name in _spec_fields(task)}
    return (recipe | {SMALL_RECIPE + name for name in recipe} | specs | set(TASK_KEYS) | set(strategy_keys)
            | {GROWN_RECIPE})


def route(task, method_cls, items) -> tuple[object, dict, dict]:
    """(key, value) pairs -> (task with its recipe, small recipe, specs and data changed; the method's options;
    the training strategies' values, for runs.strategies.strategies_from_settings). An unknown key is a KeyError
    naming the close match and every accepted key. A plain recipe key leaves the small model's pretraining
    alone, so that one small model serves every recipe variant of the growth run; `small_recipe.` changes it."""
    from methods.base import config_fields
    from models.family import unknown
    from runs.strategies import FIELDS as strategy_keys
    options_fields = config_fields(method_cls)
    recipe_keys, spec_fields = _fields(task.recipe), _spec_fields(task)
    recipe, small_recipe, specs, changes, options, strategies = {}, {}, {w: {} for w in SPECS}, {}, {}, {}
    grown = None
    for key, raw in items:
        which, _, name = key.partition(".")
        if key in options_fields:
            default = options_fields[key].default
            options[key] = coerce(key, raw, None if default is dataclasses.MISSING else default,
                                  declared_type(method_cls.Config, key))
        elif key in recipe_keys:
            recipe[key] = coerce(key, raw, getattr(task.recipe, key), declared_type(type(task.recipe), key))
        elif key.startswith(SMALL_RECIPE) and name in recipe_keys:
            small_recipe[name] = coerce(key, raw, getattr(task.small_recipe, name),
                                        declared_type(type(task.small_recipe), name))
        elif which in SPECS and name in spec_fields:
            spec = getattr(task, which)
            specs[which][name] = coerce(key, raw, getattr(spec, name), declared_type(type(spec), name))
        elif key == GROWN_RECIPE:
            grown = raw if isinstance(raw, str) else str(raw)
        elif key in TASK_KEYS:      # a path or a name: command-line text verbatim (a path "1e-4" stays one)
            changes[key] = raw if raw is None or isinstance(raw, str) else str(raw)
        elif key in strategy_keys:
            if raw == "":
                raise ValueError(f"--set {key}= has no value; e.g. --set {key}=true")
            strategies[key] = parse_value(raw) if isinstance(raw, str) else raw
        else:
            raise KeyError(unknown("key", key, task_keys(task) | set(options_fields)))
    for which, spec_changes in specs.items():
        if spec_changes:
            if "hidden" in spec_changes and "ffn" not in spec_changes:
                spec_changes["ffn"] = 4 * spec_changes["hidden"]     # keep the 4x convention unless ffn is given
            try:
                changes[which] = getattr(task, which).with_(**spec_changes)
            except ValueError as e:
                given = " ".join(f"{which}.{k}={v}" for k, v in spec_changes.items())
                raise ValueError(f"--set {given}: the {which} model's {e}") from None
    task = task.with_(recipe=task.recipe.with_(**recipe), small_recipe=task.small_recipe.with_(**small_recipe),
                      **changes)
    if grown is not None:
        from tasks.grown_recipes import apply_grown_recipe
        task = apply_grown_recipe(task, grown, getattr(method_cls, "needs_small", True), set(recipe))
    return task, options, strategies
