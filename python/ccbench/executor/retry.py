"""Runs that came back suspect, set aside to be run again.

A linux or hosts run is *suspect* when the testbed, not the network under
test, may have shaped it (the emulator was late, a queue outside it
dropped, a sender was limited by its host: docs/linux-backend.md, "Honesty
checks"). Such a run is finished, so a resumed study skips it;
``ccbench run --retry-suspect N`` and ``ccbench validate --retry-suspect N``
set it aside (failed, with a note) and run it again, up to N times. A
degenerate run (suspect because its configuration measures nothing) is
left alone: running it again gives the same nothing.

Each retry waits first (``--retry-pause``; retry k waits k times it):
other work on the machine, or on a VM's host, comes in bursts that last
from seconds to minutes (a CI run saw three hosts runs in a row, about
20 s apart, 1.5-2.4 % of their packets late, and the fourth clean), and a
run started again at once meets the same burst.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from ccbench import degenerate

DEFAULT_RETRY_PAUSE = "5s"
MAX_RETRY_PAUSE_S = 300


def retry_pause_s(value: Optional[str]) -> float:
    """``--retry-pause``'s value in seconds (None: the default); UsageError on a bad one."""
    from ccbench.errors import UsageError
    from ccbench.spec.units import UnitError, parse_time

    value = DEFAULT_RETRY_PAUSE if value is None else value
    try:
        ns = parse_time(value, "s")
    except UnitError as e:
        raise UsageError(f"--retry-pause: {e.problem} (got {value!r}; allowed: {e.allowed})") from None
    if ns > MAX_RETRY_PAUSE_S * 1e9:
        raise UsageError(f"--retry-pause: too long (got {value!r}; allowed: a time from 0s to {MAX_RETRY_PAUSE_S}s)")
    return ns / 1e9


def pause_before_retry(pause_s: float, retry: int, say: Callable[[str], None]) -> None:
    """Wait ``retry`` × ``pause_s`` before retry number ``retry`` (from 1),
    saying so when there is a wait."""
    wait = pause_s * retry
    if wait > 0:
        say(f"waiting {wait:g} s first: other work on this machine may have made the testbed late")
        time.sleep(wait)


def retriable_suspect(out: Path, run_ids: Sequence[str]) -> list[str]:
    """The runs among ``run_ids`` stored suspect in ``out`` for a reason
    other than a degenerate configuration."""
    from ccbench.store import DB_FILENAME, Store

    if not (out / DB_FILENAME).exists():
        return []
    with Store.open_existing(out) as store:
        return [r.run_id for r in store.runs(run_ids=run_ids)
                if r.status == "suspect" and not degenerate.is_degenerate_note(r.error)]


def set_aside_suspect(out: Path, run_ids: Sequence[str], command: str) -> list[str]:
    """Set aside the :func:`retriable_suspect` runs among ``run_ids``;
    returns them. ``command`` names who sets them aside in their note
    ("ccbench run")."""
    from ccbench.store import Store

    ids = retriable_suspect(out, run_ids)
    if ids:
        with Store(out) as store:
            store.set_aside(ids, f"set aside to be run again by {command} (suspect): ")
    return ids
