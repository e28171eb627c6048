"""Kernel runs in tests, again while the testbed (not the code) spoiled them.

A linux or hosts run comes back suspect when its emulator was late. On
these VMs that is the hypervisor's doing: eight runs in a row of one CUBIC
flow had 1.8-22 % steal time on the emulator's CPU and late packets in
proportion (python/ccbench/backends/steal.py), and such spells last
minutes (a CI run saw three hosts runs in a row late, the fourth clean).
A test that needs a clean run tries again, waiting k × PAUSE_S before the
k-th retry as ``ccbench run --retry-suspect`` does (the same
``pause_before_retry``); each try's note (with the steal time) is
printed, so a failure says what the machine did.

A spell can outlast every try (a CI run, session 55: 20-33 % of a CPU
stolen for the whole 35 minutes of the kernel tests). When the hypervisor
took more than STEAL_MAX of a CPU in every try, the test is skipped,
saying so in pytest's summary: no kernel measurement can be judged while
the emulator cannot run, and the steal is read from /proc/stat, which the
code under test cannot influence. A try that failed with less steal than
that fails the test, as a wrong emulator or kernel setup does.
"""

from __future__ import annotations

import os
import time
from typing import Callable, TypeVar

import pytest

from ccbench.executor.retry import pause_before_retry

ATTEMPTS = 8
PAUSE_S = 5.0
#: Seconds all the retries of one pytest session may take together, pauses
#: and the runs again. A CI rehearsal (session 55) met a spell of steal
#: (20-25 % of a CPU while runs went on) that made the suite run 34 min
#: instead of 15 and spoiled six tries of one run in a row: retries spread
#: over minutes, and the budget keeps a longer spell from stretching the
#: suite towards CI's limit (the tests then fail, saying why).
PATIENCE_S = 900.0
#: The hypervisor's share of a CPU during a run above which a test that
#: measures timing (jitter, stalls, shares under contention) measures again
#: (an idle CPU of this VM loses 0.2-1.6 %, session 55).
STEAL_MAX = 0.05

T = TypeVar("T")

_spent = [0.0]  # seconds of the session's retries so far


def until_clean(run: Callable[[], T], spoiled: Callable[[T], bool], note: Callable[[T], str],
                attempts: int = ATTEMPTS, steal: Callable[[T], float] | None = None) -> list[T]:
    """``run()`` until ``spoiled`` is false of its result, at most
    ``attempts`` times and while the session's retries have taken less than
    PATIENCE_S; every result, the last one to judge. With ``steal`` (the
    largest share of a CPU the hypervisor took during a try), a test whose
    every try was spoiled with more than STEAL_MAX stolen is skipped."""
    out: list[T] = []
    for i in range(attempts):
        started = time.monotonic()
        if i:
            pause_before_retry(PAUSE_S, i, print)
        out.append(run())
        if i:
            _spent[0] += time.monotonic() - started
        if not spoiled(out[-1]):
            break
        more = i + 1 < attempts and _spent[0] < PATIENCE_S
        print(f"attempt {i + 1} of {attempts}: {note(out[-1])}; "
              + ("trying again" if more else f"giving up ({_spent[0]:.0f} s of the session's "
                                             f"{PATIENCE_S:.0f} s for retries spent)"))
        if not more:
            break
    if steal is not None and spoiled(out[-1]):
        shares = [steal(x) for x in out]
        if min(shares) > STEAL_MAX:
            pytest.skip(f"{_current_test()}the testbed could not measure: the hypervisor took "
                        f"{100 * min(shares):.1f}-{100 * max(shares):.1f}% of a CPU in each of {len(out)} "
                        f"tries (steal time, more than {100 * STEAL_MAX:.0f}%: kernel_retry.py)")
    return out


def emulator_late(stats: dict, status: str) -> bool:
    """Suspect only because the emulator could not keep up."""
    return status == "suspect" and (stats or {}).get("suspect_kinds") == ["emulator"]


def stolen(stats: dict) -> float:
    """The largest share of a CPU the hypervisor took during a run (stats
    ``steal``: {cpu: share} on linux, {role: {cpu: share}} on hosts)."""
    shares: list[float] = []
    for v in ((stats or {}).get("steal") or {}).values():
        shares += list(v.values()) if isinstance(v, dict) else [v]
    return max(shares, default=0.0)


def disturbed_testbed(stats: dict, status: str) -> bool:
    """emulator_late, or more than STEAL_MAX of a CPU stolen: a run whose
    timing says more about the hypervisor than about the emulator."""
    return emulator_late(stats, status) or stolen(stats) > STEAL_MAX


def skip_if_stolen(stats: dict, status: str, what: str) -> None:
    """Skip as until_clean does when a run that ``ccbench run --retry-suspect``
    retried itself is still late with more than STEAL_MAX of a CPU stolen."""
    share = stolen(stats)
    if emulator_late(stats, status) and share > STEAL_MAX:
        pytest.skip(f"{_current_test()}the testbed could not measure: {what} was late while the hypervisor took "
                    f"{100 * share:.1f}% of a CPU after its retries (steal time, more than "
                    f"{100 * STEAL_MAX:.0f}%: kernel_retry.py)")


def _current_test() -> str:
    """The skipped test's id for the reason ("tests/x.py::name: "): pytest's
    summary names this file, where the skip is raised."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    return f"{test}: " if test else ""
