"""Files written so that a crash never leaves half of one: a temporary beside the file, fsynced and renamed over
it (atomic_path), and the temporaries a killed writer leaves behind, removed once their writer is dead. The run
record (runs/record.py) writes every file of a run this way; the analysis, which stages its output folder whole
(analysis/output.py), removes a killed analysis's staging by the same rule (process_alive).
"""
from __future__ import annotations

import json
import os
import re
import shutil
from contextlib import contextmanager
from pathlib import Path


TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.tmp$")    # atomic_path's: .<name>.<pid>.tmp
TRASH = ".cleared-"       # clear_run's folder of a run's files on their way out (.cleared-<pid>)
TRASH_DIR = re.compile(rf"^(?P<name>{re.escape(TRASH)})(?P<pid>\d+)$")


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:          # EPERM: it exists, under another user
        return True
    return True


def remove_stale_temporaries(directory: Path, name: str | None = None) -> list[Path]:
    """Delete atomic_path's temporaries in `directory` (of `name` only, if given; else clear_run's folders too)
    whose writer is dead: a process killed mid-write (SIGKILL, power cut, OOM) cannot remove its own, and a
    checkpoint's would stay for good. A live writer's (another process on this host, or ours) is left alone.
    Returns what was deleted."""
    gone = []
    try:
        entries = list(Path(directory).iterdir())
    except OSError:
        return gone
    for entry in entries:
        m = TEMPORARY.match(entry.name) or (TRASH_DIR.match(entry.name) if name is None else None)
        if m and (name is None or m.group("name") == name) and not process_alive(int(m.group("pid"))):
            try:
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
                gone.append(entry)
            except FileNotFoundError:
                pass
    return gone


@contextmanager
def atomic_path(path: Path):
    """`with atomic_path(p) as tmp:` write `tmp`; on leaving it is fsynced and renamed to `p`, so readers see
    the old file or the new one, never half. The temporary name carries the pid (two processes never write
    into one temporary file) and is removed when writing fails (disk full, Ctrl-C); one left by a writer that was
    killed is removed by the next write of the same file (remove_stale_temporaries)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    remove_stale_temporaries(path.parent, path.name)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        stop = program_stop_behind(e)
        if stop is not None and stop is not e:
            # Ctrl-C (or SIGTERM) inside torch.save's record write makes its zip writer's clean-up fail with
            # "unexpected pos"; that RuntimeError would hide the interrupt and turn exit 130 into a traceback
            raise stop.with_traceback(stop.__traceback__) from None
        # a full disk surfaces as an OSError without a file name, or (torch.save) as a RuntimeError raised while
        # handling one: report it as an OSError naming the file being written
        cause = e if isinstance(e, OSError) else e.__context__ if isinstance(e, RuntimeError) else None
        if isinstance(cause, OSError) and cause.errno is not None:
            raise OSError(cause.errno, cause.strerror, str(path)) from None
        raise


def program_stop_behind(error: BaseException) -> BaseException | None:
    """The KeyboardInterrupt or SystemExit that `error` was raised while handling (or `error` itself), if any:
    a stop asked for by the user, which a failure in the clean-up it caused must not replace."""
    seen = set()
    while error is not None and id(error) not in seen:
        if not isinstance(error, Exception):
            return error
        seen.add(id(error))
        error = error.__context__
    return None


def write_json_atomic(path: Path, obj) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str))


def save_atomic(obj, path: Path) -> None:
    """torch.save, atomically (see atomic_path). Through a Python file object, so that a failed write keeps its
    OSError (disk full) instead of torch's bare `basic_ios::clear` RuntimeError."""
    import torch        # here, not at the top: analysis reads records without torch
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        torch.save(obj, f)


def read_json(path: Path):
    """A JSON file; a damaged one is a ValueError that names it (json's own message does not)."""
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e.msg}, line {e.lineno} column {e.colno})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not valid JSON (not UTF-8 text)") from None
