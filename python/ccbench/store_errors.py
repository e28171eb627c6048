"""What DuckDB's errors on a results database mean to a user: a damaged file,
a full disk, or something else, each as one line naming the file and what to
do. The store registers the files it opens (a snapshot's private copy maps
back to the results it was taken from), so a message names the user's file."""

from __future__ import annotations

import errno
import shlex
from pathlib import Path

import duckdb

from ccbench.errors import UsageError

#: the exceptions a results database raises (DuckDB's, and the OS's for a full disk)
DATABASE_ERRORS: tuple[type[BaseException], ...] = (duckdb.Error,)

_DAMAGE_MARKS = (
    "corrupt",
    "could not read enough bytes",
    "checksum",
    "not a valid duckdb database",
    "invalid block",
    "serialization",
    "failed to deserialize",
    "no more data",
    "unexpected end",
)
_FULL_MARKS = ("no space left on device", "disk quota exceeded", "file too large")

class DatabaseError(UsageError):
    """The results database is damaged, the disk is full, or DuckDB failed on it."""


#: a private copy's database file → the results database it was copied from
_SOURCES: dict[str, Path] = {}


def register_copy(copy: Path, source: Path) -> None:
    """Messages about ``copy`` (a snapshot) name ``source`` instead."""
    _SOURCES[str(copy)] = source


def forget_copy(copy: Path) -> None:
    _SOURCES.pop(str(copy), None)


_OPENED: list[Path] = []


def note_open(db: Path) -> None:
    """The database last opened: the file a message names when DuckDB's does not."""
    _OPENED[:] = [_SOURCES.get(str(db), db)]


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _name_file(text: str, db: Path | None) -> tuple[str, Path | None]:
    """Replace a snapshot copy's path by its source and find the file meant."""
    for copy, source in _SOURCES.items():
        if copy in text:
            return text.replace(copy, str(source)), source
    if db is not None and str(db) in text:
        return text, db
    return text, db


def is_damage(e: BaseException) -> bool:
    text = str(e).lower()
    if isinstance(e, (duckdb.SerializationException, duckdb.InternalException)):
        return True
    return any(m in text for m in _DAMAGE_MARKS)


def is_disk_full(e: BaseException) -> bool:
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return True
    text = str(e).lower()
    return any(m in text for m in _FULL_MARKS)


def damaged_message(db: Path, detail: str) -> str:
    results = db.parent if db.name.endswith(".duckdb") else db
    return (
        f"{db}: the results database is damaged ({detail}); recover the runs that still read back whole "
        f"into a new directory with `ccbench repair {shlex.quote(str(results))} --out NEW_DIR`"
        f" (the damaged file is left as it is)"
    )


def disk_full_message(db: Path | None, detail: str) -> str:
    where = f"{db}: " if db is not None else ""
    return (
        f"{where}no space left on the disk ({detail}); every run that finished before is committed and kept — "
        f"free some space (or give --out on another disk) and run the same command again to resume where it stopped"
    )


def explain(e: BaseException, db: Path | None = None) -> DatabaseError:
    """One line for a DuckDB (or OS) error on the results database ``db``."""
    if db is None and _OPENED:
        db = _OPENED[0]
    if db is not None:
        db = _SOURCES.get(str(db), db)
    detail, named = _name_file(_first_line(e), db)
    if is_disk_full(e):
        return DatabaseError(disk_full_message(named, detail))
    if named is not None and is_damage(e):
        return DatabaseError(damaged_message(named, detail))
    where = f"{named}: " if named is not None else ""
    return DatabaseError(f"{where}the results database could not be read or written ({detail})")
