"""An analysis's --out is written whole or not at all: everything goes into a staging folder beside --out (or inside
it, where --out cannot be renamed away), then is swapped in by renames; the files of the previous analysis are listed in
its MANIFEST, so that a re-analysis drops exactly those and keeps a user's own files."""
from __future__ import annotations

import os
import re
import shutil
from contextlib import contextmanager
from pathlib import Path

from runs.atomic import process_alive
from runs.record import enclosing_record
from runs.signals import signals_held

MANIFEST = ".written"       # the files the last analysis into an --out wrote (staged: a re-analysis drops them)

# the folders an analysis writes into before its output becomes --out, and the old output on its way out:
# .<out name>.analysis-<pid>.tmp / .<out name>.old-<pid>.tmp beside --out (.analysis-<pid>.tmp inside it, see staged)
STAGING = re.compile(r"^\.(?:(?P<name>.+)\.)?(?P<kind>analysis|old)-(?P<pid>\d+)\.tmp$")


def out_problem(out: Path) -> str | None:
    """Why an analysis cannot write into `out` (one line), or None. It must be new, empty, or an earlier analysis's
    output (it holds the MANIFEST list): another folder's files (a user's report.md) would be overwritten, and a run
    record would be mixed with tables."""
    existing = out.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"--out {out}: {'it' if existing == out.absolute() else existing} is a file, not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"--out {out}: cannot write in {existing}"
    if (record := enclosing_record(existing)) is not None:
        return f"--out {out}: inside the run record {record}; give a folder outside any run"
    folder = out.absolute()
    foreign = folder.is_dir() and any(not STAGING.match(p.name) for p in folder.iterdir())
    if foreign and not (folder / MANIFEST).exists():
        return (f"--out {out}: holds files that no earlier analysis wrote (no {MANIFEST} list), which this one "
                "could overwrite; give a new or empty folder, or one an analysis wrote")
    return None


def remove_stale_staging(folder: Path, name: str | None) -> None:
    """Delete the staging folders of analyses into `name` (None: inside --out) that were killed (SIGKILL, power cut):
    they hold only what that analysis wrote."""
    if not folder.is_dir():
        return
    for entry in folder.iterdir():
        m = STAGING.match(entry.name)
        if m and m.group("name") == name and entry.is_dir() and not process_alive(int(m.group("pid"))):
            shutil.rmtree(entry, ignore_errors=True)


def listed(out: Path) -> set[str]:
    """The files the previous analysis into `out` wrote (its MANIFEST), empty if none."""
    manifest = out / MANIFEST
    return set(manifest.read_text().splitlines()) if manifest.is_file() else set()


@contextmanager
def staged(out: Path):
    """`with staged(out) as (staging, publish):` write everything into `staging`, then `publish(written)` makes it
    --out and returns how many files of the previous analysis are gone (stale: a table of runs since removed).

    An analysis killed, interrupted or out of disk must not leave a half-written --out, which the next analysis
    refuses (files but no MANIFEST list), nor new tables beside old figures on a re-analysis. So the output is
    written into a new folder beside --out and swapped in by renames (with Ctrl-C and SIGTERM held for their
    microseconds): the old output renamed away, the new one renamed to --out, the old one deleted. A user's own
    files in the old --out (not in its MANIFEST) are moved into the new one first; only the previous analysis's files
    are dropped. Where --out cannot be renamed away (it holds the current directory, or its parent is not writable)
    the folder is inside --out and its files are moved up one by one. On failure the staging folder (and any folder
    made for it) is removed: --out is as it was."""
    out = Path(out)
    real = out.resolve() if out.is_symlink() else out.absolute()
    cwd = Path.cwd().resolve()
    beside = not (cwd == real.resolve() or real.resolve() in cwd.parents)
    made = []
    d = real.parent if beside else real
    while not d.exists():
        made.append(d)
        d = d.parent
    beside = beside and os.access(d if made else real.parent, os.W_OK | os.X_OK)
    for folder in reversed(made):
        folder.mkdir()
    if not beside and not real.exists():
        real.mkdir()
        made.insert(0, real)
    remove_stale_staging(real.parent if beside else real, real.name if beside else None)
    pid = os.getpid()
    staging = real.parent / f".{real.name}.analysis-{pid}.tmp" if beside else real / f".analysis-{pid}.tmp"
    staging.mkdir()
    done = []

    def publish(written: list[Path]) -> int:
        before, now = listed(real), {p.name for p in written}
        (staging / MANIFEST).write_text("".join(f"{name}\n" for name in sorted(now)))
        with signals_held():
            if beside and real.exists():
                for entry in real.iterdir():      # the user's own files go along with the new output
                    if entry.name not in before | {MANIFEST} and not (staging / entry.name).exists():
                        os.rename(entry, staging / entry.name)
                old = real.parent / f".{real.name}.old-{pid}.tmp"
                os.rename(real, old)
                try:
                    os.rename(staging, real)
                except OSError:
                    os.rename(old, real)          # the old output back, whole (the user's files are in staging)
                    for entry in staging.iterdir():
                        if entry.name not in now | {MANIFEST}:
                            os.rename(entry, real / entry.name)
                    raise
            elif beside:
                os.rename(staging, real)
            else:
                for name in sorted(now) + [MANIFEST]:
                    os.replace(staging / name, real / name)
                for name in before - now:
                    (real / name).unlink(missing_ok=True)
        done.append(True)
        if beside and (real.parent / f".{real.name}.old-{pid}.tmp").exists():
            shutil.rmtree(real.parent / f".{real.name}.old-{pid}.tmp")
        if not beside:
            shutil.rmtree(staging, ignore_errors=True)
        return len(before - now)

    try:
        yield staging, publish
    except OSError as e:        # name the file as the user knows it: under --out, not the staging folder
        if e.filename and Path(e.filename).is_relative_to(staging) and e.errno is not None:
            raise OSError(e.errno, e.strerror, str(out / Path(e.filename).relative_to(staging))) from None
        raise
    finally:
        if not done:
            shutil.rmtree(staging, ignore_errors=True)
            for folder in made:                 # deepest first
                try:
                    folder.rmdir()
                except OSError:
                    break
