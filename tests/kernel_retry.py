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
"""

from __future__ import annotations

from typing import Callable, TypeVar

from ccbench.executor.retry import pause_before_retry

ATTEMPTS = 6
PAUSE_S = 5.0

T = TypeVar("T")


def until_clean(run: Callable[[], T], spoiled: Callable[[T], bool], note: Callable[[T], str],
                attempts: int = ATTEMPTS) -> list[T]:
    """``run()`` until ``spoiled`` is false of its result, at most
    ``attempts`` times; every result, the last one to judge."""
    out: list[T] = []
    for i in range(attempts):
        if i:
            pause_before_retry(PAUSE_S, i, print)
        out.append(run())
        if not spoiled(out[-1]):
            break
        print(f"attempt {i + 1} of {attempts}: {note(out[-1])}; trying again" if i + 1 < attempts
              else f"attempt {i + 1} of {attempts}: {note(out[-1])}; giving up")
    return out


def emulator_late(stats: dict, status: str) -> bool:
    """Suspect only because the emulator could not keep up."""
    return status == "suspect" and (stats or {}).get("suspect_kinds") == ["emulator"]
