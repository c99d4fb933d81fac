"""Signals as a program's stop: SIGTERM and SIGHUP handled as Ctrl-C (stop_signals_as_interrupt, used by run.py,
the sweeps and the analysis), the exit status that says which one stopped it, and a block that holds them until it
ends (signals_held: renames that must happen together)."""
from __future__ import annotations

import contextlib
import signal

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_stopped_by = [signal.SIGINT]          # the signal that stopped the program (stop_signals_as_interrupt)


@contextlib.contextmanager
def stop_signals_as_interrupt():
    """SIGTERM and SIGHUP (what `timeout`, batch schedulers, `docker stop` and a closed terminal send) handled as
    Ctrl-C: each raises KeyboardInterrupt where the program is, so a run stops as on Ctrl-C (its last checkpoint
    kept, its lock released, a write in progress taking its temporary file back) and says where it stood in one
    line, where their default action killed it without a word. A repeat while that happens is ignored (a second
    traceback-raising interrupt in the clean-up would be worse than a wait of a second); kill -9 still stops it. A
    signal the caller ignores stays ignored (nohup's SIGHUP; a background job's SIGINT). The exit status is then
    stop_status(): 128 + the signal's number, the shell's convention. Handlers are restored on leaving."""
    import threading
    if threading.current_thread() is not threading.main_thread():      # only the main thread may set handlers
        yield
        return

    def stop(signum, frame):
        _stopped_by[0] = signum
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        raise KeyboardInterrupt

    _stopped_by[0] = signal.SIGINT
    before = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s, handler in before.items():
        if handler in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(s, stop)
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


def stop_status() -> int:
    """The exit status after KeyboardInterrupt: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP."""
    return 128 + _stopped_by[0]


def stopped_by() -> str:
    """' by SIGTERM' (or SIGHUP) where a signal other than Ctrl-C stopped the program, else ''."""
    return "" if _stopped_by[0] == signal.SIGINT else f" by {signal.Signals(_stopped_by[0]).name}"


@contextlib.contextmanager
def signals_held():
    """Ctrl-C, SIGTERM and SIGHUP wait until the block is left (then arrive as usual): a few renames that must
    happen together do. Outside the main thread (where Python runs no handler anyway) nothing is held."""
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # Python-level handlers that note the signal, not pthread_sigmask: blocking it in this thread alone lets the
    # kernel hand a process-directed signal to another thread (torch's, the tokenizers' pools), whose delivery
    # still raises KeyboardInterrupt here at once
    received = []
    held = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    held = {s: h for s, h in held.items() if h is not signal.SIG_IGN and h is not None}   # ignored stays ignored
    for s in held:
        signal.signal(s, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        for s, handler in held.items():
            signal.signal(s, handler)
        for s in received:                    # now delivered as usual, to the handlers the block found
            signal.raise_signal(s)
