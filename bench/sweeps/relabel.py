"""Rename a method in committed run records, where the record is what the new name computes: without re-running.

    python -m bench.sweeps.relabel records/mini --rename ligo=ligo_copy ligo_official=ligo --why "..." [--dry-run]

A method's registered name is in each record (config.json `method.name`), in its directory's label
(`ligo_official-pinv-s0` -> `ligo-pinv-s0`; a variant's own small model `small-ligo-smallshort-s0` too) and in the
`same_computation_as` of the records that point at it. All renames are applied at once, so that names may move on
(`ligo` -> `ligo_copy` while `ligo_official` -> `ligo`).

A record is renamed only if the new method, built from the record's own configuration, describes itself as the record
says (`GrowthMethod.describe`, the configuration every sweep compares a record with before it counts it as done):
the new name then runs the same code with the same settings. A record that does not is refused, and nothing is
renamed. Each renamed record keeps the old name in config.json's `relabelled` list (from, to, why), so that a
relabel is never silent; the label-to-method mapping and the rest of the record are left as they are.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from bench.cli import refused_as_one_line
from runs.atomic import read_json, write_json_atomic
from runs.record import CONFIG

SMALL_PREFIX = "small-"


def parse_rename(text: str) -> tuple[str, str]:
    old, sep, new = text.partition("=")
    if not sep or not old or not new or old == new:
        raise argparse.ArgumentTypeError(f"--rename {text!r}: give OLD=NEW, two different method names (ligo=ligo_copy)")
    return old, new


def renamed_label(label: str, renames: dict[str, str]) -> str:
    """A directory label with its method part renamed (`ligo_official-pinv` -> `ligo-pinv`); labels of other methods
    unchanged. The method part is what precedes the first `-` or `+` (analysis.tables.method_of's rule)."""
    for sep in ("-", "+"):
        head, found, rest = label.partition(sep)
        if found and head in renames:
            return renames[head] + sep + rest
    return renames.get(label, label)


def renamed_dir(name: str, renames: dict[str, str]) -> str:
    """`<label>-s<seed>` with its label renamed; a variant's own small model (`small-<label>-s<seed>`) follows it."""
    if name.startswith(SMALL_PREFIX):
        return SMALL_PREFIX + renamed_dir(name[len(SMALL_PREFIX):], renames)
    label, sep, seed = name.rpartition("-s")
    if not sep or not seed.isdigit():
        return renamed_label(name, renames)
    return f"{renamed_label(label, renames)}-s{seed}"


def check_same_computation(config: dict, new: str, where: Path) -> None:
    """The new method built from the recorded options describes itself as the record does (module docstring)."""
    from methods import METHODS
    from runs.record import comparable_method, jsonable
    if new not in METHODS:
        raise ValueError(f"--rename ...={new}: no method '{new}' is registered")
    recorded = config["method"]
    options = dict(recorded.get("config") or {})
    defaults = METHODS[new].Config()
    fields = {f.name for f in dataclasses.fields(defaults)}
    if set(options) != fields:
        raise ValueError(f"{where}: its options {sorted(set(options) ^ fields)} are not (all) options of '{new}'")
    for key, value in options.items():                # JSON has no tuples: a tuple option comes back a list
        if isinstance(getattr(defaults, key), tuple) and isinstance(value, list):
            options[key] = tuple(value)
    method = METHODS[new](**options)
    method.seed_source = recorded.get("seed_source")
    now = comparable_method(method.describe())
    was = comparable_method({**recorded, "name": new})
    if jsonable(now) != jsonable(was):
        raise ValueError(f"{where}: '{new}' built from its options is not what it recorded "
                         f"(now {jsonable(now)}, recorded {jsonable(was)}); not renamed")


def plan(root: Path, renames: dict[str, str]) -> list[tuple[Path, Path, dict]]:
    """(directory, its new path, its config) for every record under `root` whose method, label or twin is renamed;
    all checked before anything moves."""
    moves = []
    for config_path in sorted(root.rglob(CONFIG)):
        run = config_path.parent
        config = read_json(config_path)
        if not isinstance(config, dict) or "method" not in config or "task" not in config:
            continue                                   # an exported model's config.json, not a run's
        name = config["method"].get("name")
        new_dir = run.with_name(renamed_dir(run.name, renames))
        twin = config.get("same_computation_as")
        twin_renamed = isinstance(twin, str) and "/" not in twin and renamed_dir(twin, renames) != twin
        if name in renames:
            check_same_computation(config, renames[name], run)
        elif new_dir == run and not twin_renamed:
            continue
        moves.append((run, new_dir, config))
    moving = {run for run, _, _ in moves}
    for run, new_dir, _ in moves:
        if new_dir != run and new_dir.exists() and new_dir not in moving:
            raise ValueError(f"{run} would become {new_dir}, which exists; move one away first")
    return moves


def apply(moves, renames: dict[str, str], why: str) -> None:
    """Rewrite each config, then move the directories in two steps (names may move on: ligo-s0 becomes ligo_copy-s0
    while ligo_official-s0 becomes ligo-s0)."""
    for run, new_dir, config in moves:
        name = config["method"].get("name")
        if name in renames:
            config["method"]["name"] = renames[name]
            if "display" in config["method"]:     # how the analysis shows it: the new method's (analysis/names.py)
                from methods import METHODS
                config["method"]["display"] = METHODS[renames[name]].presentation()
        twin = config.get("same_computation_as")
        if isinstance(twin, str) and "/" not in twin:      # a sibling run's directory name
            config["same_computation_as"] = renamed_dir(twin, renames)
        config.setdefault("relabelled", []).append({"from": run.name, "to": new_dir.name, "why": why})
        write_json_atomic(run / CONFIG, config)
    parked = [(run.rename(run.with_name(run.name + ".relabelling")), new_dir) for run, new_dir, _ in moves]
    for temporary, new_dir in parked:
        temporary.rename(new_dir)


def main(argv=None) -> int:
    from runs.cli import OneLineArgumentParser
    ap = OneLineArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path, help="a folder of run records (records/mini)")
    ap.add_argument("--rename", type=parse_rename, nargs="+", required=True, metavar="OLD=NEW")
    ap.add_argument("--why", required=True, help="the reason, kept in every renamed record")
    ap.add_argument("--dry-run", action="store_true", help="say what would move, move nothing")
    args = ap.parse_args(argv)
    renames = dict(args.rename)
    with refused_as_one_line():
        if not args.root.is_dir():
            raise ValueError(f"{args.root}: not a folder of run records")
        moves = plan(args.root, renames)
    for run, new_dir, _ in moves:
        print(f"{run} -> {new_dir.name}")
    if not args.dry_run:
        apply(moves, renames, args.why)
    print(f"{len(moves)} records {'would be ' if args.dry_run else ''}relabelled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
