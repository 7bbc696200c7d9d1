"""Signal handling of the `placement-gym` command, in one place.

While a command runs (`signals_interrupt`, around `placement_gym.cli.main`'s call of the command), SIGINT and
SIGTERM both raise KeyboardInterrupt, so a SIGTERM (from ``timeout``, CI cancellation, ``docker stop``, Slurm)
takes the path Ctrl-C takes: finished runs saved, one line, exit 128 + the signal's number. While the results
of finished runs are written (`signals_deferred`) a signal is only noted, and a block that starts Ray
(`signal_handlers_kept`) gets this handling back after Ray replaced it. Which signal stopped the command is
state of this module (`stopped_by`), read by the commands for their one-line messages and exit statuses.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

#: The signal stopping the command `main` runs, set by `signals_interrupt`'s handler; None while none came
#: (a KeyboardInterrupt then is Ctrl-C as Python delivers it, or raised by code). Kept here rather than on the
#: exception, because a library may replace the KeyboardInterrupt with one of its own (Ray's waits do).
_stopped_by: signal.Signals | None = None


def stopped_by() -> signal.Signals | None:
    """The signal that stopped the command, or None (none came, or Ctrl-C as Python delivers it)."""
    return _stopped_by


def interruption() -> str:
    """What stopped the command, for its one-line message: "interrupted", or "interrupted by SIGTERM"."""
    return "interrupted" if _stopped_by in (None, signal.SIGINT) else f"interrupted by {_stopped_by.name}"


def exit_status() -> int:
    """128 + the number of the signal that stopped the command (130 for Ctrl-C, 143 for SIGTERM), as a shell
    reports a command a signal ended."""
    return 128 + (_stopped_by or signal.SIGINT)


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM both raise KeyboardInterrupt (noting the signal in
    `stopped_by`), so a SIGTERM (from ``timeout``, CI cancellation, ``docker stop``, Slurm) takes the path
    Ctrl-C takes: finished runs saved, one line, exit 128 + the signal's number. The previous handlers come
    back after, so `main` called from a program leaves its signal handling as it was.

    A signal is taken over only while Python handles it its default way: one the parent ignores (SIGINT of a
    background job, say) or that the calling program handles itself is left alone, and so is every signal
    outside the main thread, where Python cannot set handlers."""
    global _stopped_by
    _stopped_by = None
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    defaults = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
    previous = {signum: signal.signal(signum, _raise_interrupt) for signum, default in defaults.items()
                if signal.getsignal(signum) is default}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _stopped_by = None


def _raise_interrupt(signum: int, frame: object) -> None:
    """`signals_interrupt`'s handler: note the signal, raise KeyboardInterrupt."""
    global _stopped_by
    _stopped_by = signal.Signals(signum)
    raise KeyboardInterrupt(_stopped_by.name)


def _note_signal(signum: int, frame: object) -> None:
    """`signals_deferred`'s handler: note the signal only (the first one is kept)."""
    global _stopped_by
    _stopped_by = _stopped_by or signal.Signals(signum)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """While the block runs, a SIGINT or SIGTERM that `signals_interrupt` would raise is only noted in
    `stopped_by`: writing the results of finished runs is never cut short (a KeyboardInterrupt there would lose
    every record). The caller checks `stopped_by` after the block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    taken = {signum: signal.signal(signum, _note_signal) for signum in (signal.SIGINT, signal.SIGTERM)
             if signal.getsignal(signum) is _raise_interrupt}
    try:
        yield
    finally:
        for signum in taken:
            signal.signal(signum, _raise_interrupt)


@contextlib.contextmanager
def signal_handlers_kept() -> Iterator[None]:
    """Put SIGINT's and SIGTERM's handlers back as they were before the block, once it ends.

    For a block that starts Ray (``compare --ray``, ``benchmark --ray``): ``ray.init`` gives the driver SIGTERM
    handlers of its own (a Python one that exits at once, and a C++ one that prints a stack trace and dies),
    which would skip the saving of finished runs that `signals_interrupt` arranges."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in before.items():
            if handler is not None:  # None: set outside Python; it cannot be put back from here
                signal.signal(signum, handler)
