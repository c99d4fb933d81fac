"""One process per run directory: an exclusive `flock` on RUN_DIR/.lock, held for the whole run.

Why flock: the kernel drops the lock when its holder dies (SIGKILL, power cut on a local disk), so a crashed
run never blocks the next one and no stale-lock heuristics are needed. The file holds the holder's pid, host
and start time, only so that the process turned away can say who holds it. The file stays after the run
(removing a lock file others may have open is racy); a directory this process created for nothing
(a run refused after taking the lock) is removed again by `release(undo=True)`.
"""
from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path

LOCK = ".lock"
SWEEP_LOCK = ".sweep.lock"     # bench/sweeps/cli.py: one sweep at a time writes into an --out


class RunLocked(RuntimeError):
    """Another process holds the run directory."""


def holder(path: Path) -> str:
    """Who holds the lock, as its holder wrote it ("pid 123 on host h since ..."), or a generic phrase."""
    try:
        text = Path(path).read_text().strip()
    except OSError:
        text = ""
    return text or "another process"


def created_parents(directory: Path) -> list[Path]:
    """The directories `mkdir -p directory` would create, deepest first."""
    missing, d = [], Path(directory).absolute()
    while not d.exists() and d != d.parent:
        missing.append(d)
        d = d.parent
    return missing


class RunLock:
    """`with RunLock(dir):` takes the directory (creating it); raises RunLocked naming the holder, or with
    `wait=True` waits for it (`on_wait(holder)` is called once first). `name`: the lock file's (a sweep locks its
    root under SWEEP_LOCK, so that the root is never mistaken for a run's directory); `what`: the words for the
    refusal ("run directory", "sweep output")."""

    def __init__(self, directory: Path, wait: bool = False, on_wait=None, name: str = LOCK,
                 what: str = "run directory"):
        self.dir, self.path, self.wait, self.on_wait = Path(directory), Path(directory) / name, wait, on_wait
        self.what = what
        self.fd: int | None = None
        self.created: list[Path] = []
        self.before: bytes | None = None       # the lock file's content before us (None: we created it)

    def acquire(self) -> "RunLock":
        self.created = created_parents(self.dir)
        try:
            self.before = self.path.read_bytes()
        except OSError:
            self.before = None
        told = False
        for _ in range(100):        # retried only when the file was replaced under us (see below)
            self.dir.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:      # the directory was removed between mkdir and open: again
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not self.wait:
                    os.close(fd)
                    raise RunLocked(f"{self.what} {self.dir} is in use by {holder(self.path)}; wait for it to "
                                    "finish or choose another --out") from None
                if not told and self.on_wait is not None:
                    self.on_wait(holder(self.path))
                    told = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            # a holder that gave up removes the file before it lets go: the inode we locked must still be
            # the one the path names, else we hold a lock nobody else can see
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                self.fd = fd
                os.ftruncate(fd, 0)
                os.write(fd, f"pid {os.getpid()} on host {socket.gethostname()} since "
                             f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n".encode())
                return self
            os.close(fd)
        raise RunLocked(f"{self.what} {self.dir}: could not take its lock {self.path}")

    def release(self, undo: bool = False, remove: bool = False) -> None:
        """Let go. `undo`: nothing was written here, so leave the directory as it was: the lock file's old
        content back, or the file and the directories acquire() created removed (while still holding the
        lock, so no other process can have taken it in between). `remove`: remove the lock file (still holding
        it; a process waiting on it sees the file replaced and takes a new one, see acquire), leaving no trace in
        a folder that outlives the lock (a sweep's root)."""
        if self.fd is None:
            return
        try:
            if undo and self.before is not None and not remove:
                os.ftruncate(self.fd, 0)
                os.pwrite(self.fd, self.before, 0)
            elif undo or remove:
                self.path.unlink(missing_ok=True)
                for d in self.created if undo else ():     # deepest first; one that now holds something stays
                    try:
                        d.rmdir()
                    except OSError:
                        break
        finally:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
