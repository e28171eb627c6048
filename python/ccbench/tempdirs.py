"""ccbench's own temporary directories, named after the process that made
them, so that what a killed process left (kill -9: no handler runs) is
removed by the next one that makes a directory of the same kind.

    $TMPDIR/ccbench-<kind>-<pid>-<random>

A directory is stale when it belongs to this user and its process no longer
exists; a process that exists (or that this user may not signal) keeps its
directories. Kinds: "snapshot" (a reader's copy of a store, store.py),
"dask" (a local Dask cluster's scratch space, executor/cluster.py).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

_NAME = re.compile(r"^ccbench-(?P<kind>[a-z]+)-(?P<pid>\d+)-")


def make(kind: str) -> Path:
    """A new private directory of this kind (OSError as mkdtemp raises it),
    after removing the stale ones of the same kind."""
    sweep(kind)
    return Path(tempfile.mkdtemp(prefix=f"ccbench-{kind}-{os.getpid()}-"))


def stale(kind: str, base: str | None = None) -> list[Path]:
    """This user's directories of ``kind`` under ``base`` (the temporary
    directory) whose process has exited."""
    base_dir = Path(base or tempfile.gettempdir())
    out = []
    try:
        entries = list(base_dir.iterdir())
    except OSError:
        return []
    for p in entries:
        m = _NAME.match(p.name)
        if not m or m["kind"] != kind:
            continue
        try:
            if not p.is_dir() or p.is_symlink() or p.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        if not _alive(int(m["pid"])):
            out.append(p)
    return out


def sweep(kind: str, base: str | None = None) -> list[Path]:
    """Remove the stale directories of ``kind``; the ones removed."""
    gone = stale(kind, base)
    for p in gone:
        shutil.rmtree(p, ignore_errors=True)
    return gone


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: not ours to judge
        return True
    return True
