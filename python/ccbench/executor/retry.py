"""Runs that came back suspect, set aside to be run again.

A linux or hosts run is *suspect* when the testbed, not the network under
test, may have shaped it (the emulator was late, a queue outside it
dropped, a sender was limited by its host: docs/linux-backend.md, "Honesty
checks"). Such a run is finished, so a resumed study skips it;
``ccbench run --retry-suspect N`` and ``ccbench validate --retry-suspect N``
set it aside (failed, with a note) and run it again, up to N times. A
degenerate run (suspect because its configuration measures nothing) is
left alone: running it again gives the same nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ccbench import degenerate


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
