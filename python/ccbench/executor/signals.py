"""Ending a study by a signal, and workers that never outlive their parent.

SIGTERM and SIGHUP end ``ccbench run`` exactly like Ctrl-C (SIGINT): the run
in progress is ended (a backend cleans up on KeyboardInterrupt; a simulation
is stopped by its flag, ``call_interruptibly``), what
finished is committed, the CLI prints the resume line and exits 128 + the
signal (143 for SIGTERM, 129 for SIGHUP; 130 for Ctrl-C). The handler hands
the signal to whatever handles SIGINT at that moment — normally Python's
KeyboardInterrupt, but while the store writes a run it holds Ctrl-C until the
transaction ends, and a SIGTERM must not cut that transaction in half either.

Pool workers (``--jobs N``) ask the kernel for a parent-death signal
(``prctl(PR_SET_PDEATHSIG, SIGTERM)``): if ``ccbench run`` is killed — even
by SIGKILL, when no handler can run — every worker gets SIGTERM and exits,
and with the workers gone the multiprocessing resource tracker (which stays
only while a process holds its pipe) exits too.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

TERMINATING = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s)
PR_SET_PDEATHSIG = 1


class Termination:
    """Which terminating signal (if any) ended the study."""

    signum: Optional[int] = None


@contextmanager
def terminate_as_interrupt() -> Iterator[Termination]:
    """Within the block, SIGTERM and SIGHUP act like Ctrl-C; ``.signum`` says which came."""
    state = Termination()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return

    owner = os.getpid()

    def handler(signum: int, frame: Any) -> None:
        if os.getpid() != owner:
            # a process forked inside the block (a local Dask worker) inherited
            # this handler: it ends as it would have without it
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if state.signum is None:
            state.signum = signum
        current = signal.getsignal(signal.SIGINT)
        if callable(current):
            current(signal.SIGINT, frame)  # KeyboardInterrupt, or held by the store until a commit ends
        else:
            raise KeyboardInterrupt

    previous = {s: signal.signal(s, handler) for s in TERMINATING}
    try:
        yield state
    finally:
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread within the block: a process it spawns
    keeps the mask across exec, so a Ctrl-C to the process group while the
    child imports waits for it to unblock (unblock_sigint) instead of raising
    a KeyboardInterrupt traceback in its imports; here it waits for the block's
    end (or reaches another thread), so nothing is lost."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def unblock_sigint() -> None:
    """Undo an inherited sigint_blocked (in a worker, once its handler is set)."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def exit_status(signum: Optional[int]) -> int:
    """The exit status of an interrupted study: 130 for Ctrl-C, 128 + the signal otherwise."""
    return 128 + (signum or signal.SIGINT)


def die_with_parent(parent_pid: int) -> None:
    """In a child process: be sent SIGTERM when the parent exits (Linux; elsewhere nothing).
    If the parent is already gone (it died before this ran), exit now."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no libc/prctl: the pool's own checks remain
            pass
    if os.getppid() != parent_pid:
        os._exit(128 + signal.SIGTERM)


#: Seconds an interrupted call is waited for after ``stop`` (the simulator
#: stops at its next sample: milliseconds); past them it is abandoned.
STOP_WAIT_S = 10.0


def call_interruptibly(fn: Callable[..., Any], *args: Any, stop: Callable[[], None]) -> Any:
    """``fn(*args)`` in a daemon thread, waited for in short steps, so that Ctrl-C or
    SIGTERM is acted on at once while ``fn`` runs native code that never looks at
    signals (the simulator releases the GIL). On an interruption ``stop()`` asks
    ``fn`` to return early and the thread is joined (up to STOP_WAIT_S), then the
    interruption goes on. A thread left inside native code would take the GIL back
    while the interpreter shuts down, which aborts the process (SIGABRT instead of
    exit status 130)."""
    if threading.current_thread() is not threading.main_thread():
        return fn(*args)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    t = threading.Thread(target=target, name="ccbench-run", daemon=True)
    try:
        t.start()
        while t.is_alive():
            t.join(0.2)
    except BaseException:
        stop()
        if t.is_alive():
            t.join(STOP_WAIT_S)
        raise
    if "error" in box:
        raise box["error"]
    return box["result"]
