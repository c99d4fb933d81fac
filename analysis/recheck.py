"""`python -m analysis.recheck [FOLDER...]`: is each committed results folder what its command writes today?

A results folder's Markdown names the command that wrote it ("Written by `python -m analysis ...`"). This runs that
command again, the same records and options, into a temporary folder, and compares every table, verdict and CSV
(.md, .tex, .csv; figures are not compared) with the committed file. The command writes beside the folder, in a
hidden sibling removed after; nothing in the checked folder is written. A folder differs when a rule of the analysis
changed after it was written and nobody regenerated it: a number the records no longer give. Prints one line a folder, the differing files and their first differing line; exit 1
where any differs, 2 on bad input.

    python -m analysis.recheck                       # every folder under results/ whose Markdown names its command
    python -m analysis.recheck results/budget-regime
"""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
REPRODUCE = ROOT / "REPRODUCE.md"       # the verdict links into it relative to --out: the one path that moves
COMPARED = (".md", ".tex", ".csv")
MARK = "Written by `"
MODULES = ("analysis", "analysis.budget")     # the commands this may run: the analysis's own, nothing else
SIBLING = ".recheck-"       # the regenerated output's folder beside the checked one, with the process id


def written_by(folder: Path) -> list[str]:
    """The analysis commands the folder's own Markdown files (not its subfolders') say wrote them, once each."""
    commands = []
    for md in sorted(folder.glob("*.md")):
        for line in md.read_text().splitlines():
            if line.startswith(MARK) and line.rstrip(".").endswith("`"):
                command = line[len(MARK):].rstrip(".")[:-1]
                if command not in commands:
                    commands.append(command)
    return commands


def analysis_argv(command: str, folder: Path) -> tuple[list[str], int]:
    """The command's argv (after `python`) and the index of its --out value, refusing a command that is not one of
    MODULES or whose --out is not `folder`."""
    argv = shlex.split(command)
    if argv[:2] != ["python", "-m"] or len(argv) < 3 or argv[2] not in MODULES:
        raise ValueError(f"{folder}: written by `{command}`, not an analysis command ({' | '.join(MODULES)})")
    if "--out" not in argv or argv.index("--out") + 1 >= len(argv):
        raise ValueError(f"{folder}: its command `{command}` names no --out")
    at = argv.index("--out") + 1
    if (ROOT / argv[at]).resolve() != folder.resolve():
        raise ValueError(f"{folder}: its command writes into {argv[at]}, not into this folder")
    return argv[1:], at - 1


def first_difference(committed: str, regenerated: str) -> str:
    a, b = committed.splitlines(), regenerated.splitlines()
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"line {i + 1}"
    return f"line {min(len(a), len(b)) + 1} (one ends)"


def command_of(folder: Path) -> tuple[list[str], int]:
    """The one analysis command `folder` names, as analysis_argv returns it; refused where it names none or several."""
    commands = written_by(folder)
    if not commands:
        raise ValueError(f"{folder}: no Markdown file in it says which command wrote it ({MARK}...`)")
    if len(commands) > 1:
        raise ValueError(f"{folder}: its files name {len(commands)} different commands; regenerate it with one")
    return analysis_argv(commands[0], folder)


def recheck(folder: Path, argv: list[str], at: int) -> list[str]:
    """The differences between `folder` and what its command (`argv`, its --out value at `at`) writes now (empty:
    the same), one string each. The command writes into a hidden sibling of `folder`, removed after: at the same
    depth, so that every path the output holds relative to its folder (the verdict's link into REPRODUCE.md, in
    Markdown and LaTeX) is the committed one; only --out itself, as the command line names it, is put back."""
    argv = list(argv)
    given = argv[at]
    out = folder.resolve().parent / f"{SIBLING}{os.getpid()}"
    argv[at] = os.path.relpath(out, ROOT) if not os.path.isabs(given) else str(out)
    try:
        done = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"})
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
            return [f"its command failed (exit {done.returncode}): {tail[0]}"]
        return compare(folder, out, argv[at], given)
    finally:       # the output and, where the command was killed before it published, its staging folder
        for left in (out, *out.parent.glob(f".{out.name}.*")):
            shutil.rmtree(left, ignore_errors=True)


def compare(folder: Path, out: Path, written: str, given: str) -> list[str]:
    names = {p.relative_to(d).as_posix() for d in (folder, out) for p in d.rglob("*")
             if p.suffix in COMPARED and p.is_file() and not any(part.startswith(".") for part in p.relative_to(d).parts)}
    differences = []
    for name in sorted(names):
        mine, theirs = folder / name, out / name
        if not theirs.exists():
            differences.append(f"{name}: committed, but its command no longer writes it")
        elif not mine.exists():
            differences.append(f"{name}: its command writes it, but it is not committed")
        else:
            regenerated = theirs.read_text().replace(f"--out {written}", f"--out {given}")
            if regenerated != mine.read_text():
                differences.append(f"{name}: differs from {first_difference(mine.read_text(), regenerated)}")
    return differences


def folders_under(root: Path) -> list[Path]:
    return sorted({md.parent for md in root.rglob("*.md") if written_by(md.parent)
                   and not any(part.startswith(".") for part in md.parent.relative_to(root).parts)})


def stop_on_sigterm(signum, frame):
    """A `kill` ends the check as Ctrl-C does: subprocess.run kills the command and recheck's `finally` removes the
    hidden sibling, which a plain SIGTERM would leave beside the checked folder."""
    raise SystemExit(128 + signum)


def main(argv=None) -> int:
    from analysis.__main__ import OneLineArgumentParser
    ap = OneLineArgumentParser(prog="python -m analysis.recheck", description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*", type=Path, help="results folders (default: every one under results/)")
    args = ap.parse_args(argv)
    folders, commands = args.folders or folders_under(RESULTS), []
    for folder in folders:          # every folder checked before any command runs
        if not folder.is_dir():
            ap.error(f"{folder}: not a folder (give results folders, e.g. results/regime)")
        try:
            commands.append(command_of(folder))
        except ValueError as e:
            ap.error(str(e))
    stale = 0
    for folder, (argv, at) in zip(folders, commands):
        differences = recheck(folder, argv, at)
        stale += bool(differences)
        print(f"{folder}: " + ("what its command writes today" if not differences
                               else f"{len(differences)} file(s) differ from what its command writes today"))
        for line in differences:
            print(f"  {line}")
    if stale:
        print(f"{stale} of {len(folders)} folder(s) stale: regenerate each with the command its Markdown names")
    return 1 if stale else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, stop_on_sigterm)      # the command line's process only: main() leaves callers' alone
    sys.exit(main())
