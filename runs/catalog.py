"""What `run.py --list` prints, without importing torch or transformers (importing them costs ~9 s on a small
machine; this costs ~0.1 s).

The registries stay the one source: this module reads their source files with `ast` instead of importing them.
Methods are the classes decorated `@register_method("name")` in methods/*.py, described by the first sentence of
the class docstring or, failing that, of their module's docstring; tasks are the `PAIRS` table of
tasks/registry.py (family and small/large layers, hidden size and heads, and key/value heads where fewer, per
scale). tests/test_cli.py checks that
this reading agrees with the imported registries, so a registration this reader cannot see fails a test.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


ABBREVIATIONS = ("et al.", "e.g.", "i.e.", "eq.", "cf.", "vs.")


def summary(doc: str | None) -> str:
    """One line from a docstring: its first sentence without references (parenthesised asides, ": Chen et al.
    2021, ..." citations, "; ..." clauses); when that leaves only a name ("StackBERT"), the next paragraph's
    first sentence is added."""
    out = ""
    for para in [" ".join(p.split()) for p in (doc or "").strip().split("\n\n") if p.strip()][:2]:
        text = para
        for abbr in ABBREVIATIONS:                                   # not sentence ends
            text = text.replace(abbr, abbr.replace(".", "\0"))
        while True:                                                  # asides, innermost first
            shorter = re.sub(r"\s*\((?![A-Z0-9]{2,6}\))[^()]*\)", "", text)
            if shorter == text:
                break
            text = shorter
        text = re.sub(r":\s*[A-Z][^:;]*?et al\0.*$", "", text)         # a citation after a colon
        text = re.split(r"(?<=[.!?])\s|;\s", text, maxsplit=1)[0].strip().rstrip(".").replace("\0", ".")
        out = f"{out}: {text[0].lower()}{text[1:]}" if out else text
        if len(out.split()) > 1:
            break
    return out


def _literal(node, calls: dict):
    """A literal, allowing calls of the helper functions in `calls` (tasks/registry.py's `_pair`)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in calls:
        return calls[node.func.id](*[_literal(a, calls) for a in node.args],
                                   **{k.arg: _literal(k.value, calls) for k in node.keywords})
    if isinstance(node, ast.Dict):
        return {_literal(k, calls): _literal(v, calls) for k, v in zip(node.keys, node.values)}
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_literal(e, calls) for e in node.elts)
    return ast.literal_eval(node)


def _assigned(tree: ast.Module, name: str):
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == name:
            return node.value
    raise LookupError(f"{name} not found")


def methods(root: Path = ROOT) -> dict[str, str]:
    """Registered method name -> one-line description."""
    found = {}
    for file in sorted((root / "methods").glob("*.py")):
        tree = ast.parse(file.read_text(), str(file))
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            for deco in node.decorator_list:
                if (isinstance(deco, ast.Call) and getattr(deco.func, "id", None) == "register_method"
                        and deco.args and isinstance(deco.args[0], ast.Constant)):
                    found[deco.args[0].value] = summary(ast.get_docstring(node) or ast.get_docstring(tree))
    return found


def tasks(root: Path = ROOT) -> tuple[tuple[str, ...], dict[str, tuple[str, dict]]]:
    """(scales, task name -> (family, {scale: (small, large)})), each model as {layers, hidden, heads}."""
    from tasks.scales import PAIRS_OF, SCALES     # (no torch: the scale names only)
    registry = ast.parse((root / "tasks" / "registry.py").read_text())
    pairs = _literal(_assigned(registry, "PAIRS"), {"_pair": lambda layers, hidden, heads, **kw: dict(
        layers=layers, hidden=hidden, heads=heads, **kw)})
    # a scale of PAIRS_OF trains the other scale's pair unless the pair gives its own sizes there
    return SCALES, {name: (family, {**{s: sizes[of] for s, of in PAIRS_OF.items()}, **sizes})
                    for name, (family, sizes, _notes) in pairs.items()}


def shape(size: dict) -> str:
    kv = f"({size['kv_heads']}kv)" if size.get("kv_heads") else ""     # grouped-query attention: key/value heads
    return f"{size['layers']}L/{size['hidden']}H/{size['heads']}{kv}"


def listing(scale: str = "regime", root: Path = ROOT) -> str:
    scales, pairs = tasks(root)
    if scale not in scales:
        raise ValueError(f"unknown scale '{scale}'; known: {', '.join(scales)}")
    lines = ["methods:"] + [f"  {name:14s} {text}" for name, text in sorted(methods(root).items())]
    lines += [f"tasks (small -> large at {scale} scale: layers L / hidden H / heads; --scale {' | '.join(scales)}):"]
    lines += [f"  {name:20s} {family:8s} {shape(sizes[scale][0]):>12s} -> {shape(sizes[scale][1])}"
              for name, (family, sizes) in sorted(pairs.items())]
    return "\n".join(lines)


def _field_comments(cls) -> dict[str, str]:
    """field -> the comment on its line in the class body (`fit_steps: int = 100   # paper §3.2 ...`), for `cls` and
    the Config classes it inherits from (a subclass's own line wins)."""
    import inspect
    import io
    import tokenize
    comments: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if "__dataclass_fields__" not in vars(klass):
            continue
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        last_field = None
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.NAME and tok.start[1] == 4:          # a name at the class body's indent
                last_field = (tok.string, tok.start[0])
            elif tok.type == tokenize.COMMENT and last_field and tok.start[0] == last_field[1]:
                comments[last_field[0]] = tok.string.lstrip("# ").strip()
    return comments


def method_options(name: str) -> str:
    """`run.py --list --method NAME`: the method's line, then each option settable with --set, its type, default,
    what it accepts (the Config's RULES) and what it means (the comment on its line in the Config), and the
    defaults a scale or a family gives it (tasks/registry.py METHOD_DEFAULTS, FAMILY_METHOD_DEFAULTS). Imports the
    registry (torch): one method only."""
    import dataclasses
    import typing

    from methods import METHODS
    from methods.base import SEED_RULE
    from models.family import unknown
    from tasks.registry import FAMILY_METHOD_DEFAULTS, METHOD_DEFAULTS
    if name not in METHODS:
        raise KeyError(unknown("method", name, METHODS))
    config = METHODS[name].Config
    rules = {"seed": SEED_RULE}
    for klass in reversed(config.__mro__):
        rules.update(vars(klass).get("RULES", {}))
    hints, comments = typing.get_type_hints(config), _field_comments(config)
    lines = [f"{name}: {methods().get(name, '')}", "options (--set KEY=VALUE):" if dataclasses.fields(config)
             else "options: none"]
    for f in dataclasses.fields(config):
        kind = getattr(hints.get(f.name), "__name__", None) or str(hints.get(f.name)).replace("typing.", "")
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        by_scale = [f"{scale} {dict(d)[f.name]}" for scale, d in METHOD_DEFAULTS.items() if f.name in dict(d)]
        families = [family for family, d in FAMILY_METHOD_DEFAULTS.items() if f.name in dict(d)]
        if families and f.name not in METHODS[name].keeps_own:
            values = {dict(FAMILY_METHOD_DEFAULTS[family])[f.name] for family in families}
            by_scale.append(f"{', '.join(families)}: {', '.join(map(str, sorted(values)))}")
        lines.append(f"  {f.name:20s} {kind:14s} default {default!r}" + (f" ({', '.join(by_scale)})" if by_scale else ""))
        details = [comments.get(f.name, "")] + ([f"accepts {rules[f.name][1]}"] if f.name in rules else [])
        lines += [f"  {'':20s} {d}" for d in details if d]
    return "\n".join(lines)
