"""The results store: one DuckDB file per results directory.

Tables (units in column names; see DESIGN.md "The results schema"):

    meta     (key, value)                      schema version
    studies  (study, path, source_text, first_run_at, last_run_at, profile)
    runs     (study, run_id, config_id, run_index, params, config, backend, seed,
              repetition, status, error, wall_time_s, tool_version, finished_at, stats)
    flows    (run_id, flow_id, cca, sender, kind, group_name, start_us, stop_us,
              bytes_delivered, goodput_bps, sent_segs, retrans_segs,
              rtt_min_us, rtt_mean_us, rtt_p99_us, completion_us)
    samples  (run_id, flow_id, time_us, cwnd_bytes, srtt_us, delivered_bytes,
              retrans_segs, inflight_bytes, pacing_rate_bps, delivery_rate_bps,
              cca_state, bw_est_bps)
    queue    (run_id, link, time_us, backlog_bytes, backlog_pkts, drops,
              ecn_marks, lateness_us, tx_bytes, utilisation, random_losses)
    rpcs     (run_id, flow_id, request_bytes, response_bytes, start_us, latency_us)
    events   (run_id, time_us, kind, flow_id, state, link, detail)
                                               route changes, controller states and actions

Schema versions: 1 had no events table and no flows.completion_us,
queue.tx_bytes, queue.utilisation (version 2); 2 had no queue.random_losses
nor studies.profile (version 3). Opening an older store for writing adds what it lacks (existing
rows get nulls); opened read-only it is read as it is, with an empty
temporary events table if it has none.

Each run is written in one transaction (its runs row and all its rows in the
other tables), so a crash never leaves half a run. A run whose status is ok
or suspect is *finished* and skipped by a resumed study; a failed run is
recorded with its error and replaced when it is retried.

Only one process writes a store (DuckDB locks the file); workers return
results to the parent, which writes them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import duckdb

if TYPE_CHECKING:  # pyarrow (and numpy under it) is imported when the first result is written
    import pyarrow as pa

from ccbench import __version__, tempdirs
from ccbench.backends import EVENT_COLUMNS, QUEUE_COLUMNS, RPC_COLUMNS, SAMPLE_COLUMNS, ResultError, RunResult
from ccbench.errors import UsageError
from ccbench.store_errors import DatabaseError, explain, forget_copy, is_damage, is_disk_full, note_open, register_copy

DB_FILENAME = "ccbench.duckdb"
SCHEMA_VERSION = 3
STATUSES = ("ok", "failed", "suspect")
FINISHED = ("ok", "suspect")
DATA_TABLES = ("flows", "samples", "queue", "rpcs", "events")
ALL_TABLES = ("studies", "runs") + DATA_TABLES

# (column, SQL type) per table; run_id first in every data table.
COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "studies": (
        ("study", "VARCHAR PRIMARY KEY"),
        ("path", "VARCHAR"),
        ("source_text", "VARCHAR"),
        ("first_run_at", "TIMESTAMP"),
        ("last_run_at", "TIMESTAMP"),
        ("profile", "VARCHAR"),  # the profile it was last run with: '' none, NULL unknown (written before schema 3)
    ),
    "runs": (
        ("study", "VARCHAR NOT NULL"),
        ("run_id", "VARCHAR PRIMARY KEY"),
        ("config_id", "VARCHAR NOT NULL"),
        ("run_index", "INTEGER"),
        ("params", "JSON"),
        ("config", "JSON"),
        ("backend", "VARCHAR NOT NULL"),
        ("seed", "UBIGINT"),
        ("repetition", "INTEGER"),
        ("status", "VARCHAR NOT NULL CHECK (status IN ('ok', 'failed', 'suspect'))"),
        ("error", "VARCHAR"),
        ("wall_time_s", "DOUBLE"),
        ("tool_version", "VARCHAR"),
        ("finished_at", "TIMESTAMP"),
        ("stats", "JSON"),
    ),
    "flows": (
        ("run_id", "VARCHAR NOT NULL"),
        ("flow_id", "INTEGER NOT NULL"),
        ("cca", "VARCHAR"),
        ("sender", "INTEGER"),
        ("kind", "VARCHAR"),
        ("group_name", "VARCHAR"),
        ("start_us", "BIGINT"),
        ("stop_us", "BIGINT"),
        ("bytes_delivered", "BIGINT"),
        ("goodput_bps", "DOUBLE"),
        ("sent_segs", "BIGINT"),
        ("retrans_segs", "BIGINT"),
        ("rtt_min_us", "DOUBLE"),
        ("rtt_mean_us", "DOUBLE"),
        ("rtt_p99_us", "DOUBLE"),
        ("completion_us", "BIGINT"),
    ),
    "samples": (
        ("run_id", "VARCHAR NOT NULL"),
        ("flow_id", "INTEGER"),
        ("time_us", "BIGINT"),
        ("cwnd_bytes", "BIGINT"),
        ("srtt_us", "DOUBLE"),
        ("delivered_bytes", "BIGINT"),
        ("retrans_segs", "BIGINT"),
        ("inflight_bytes", "BIGINT"),
        ("pacing_rate_bps", "DOUBLE"),
        ("delivery_rate_bps", "DOUBLE"),
        ("cca_state", "VARCHAR"),
        ("bw_est_bps", "DOUBLE"),
    ),
    "queue": (
        ("run_id", "VARCHAR NOT NULL"),
        ("link", "VARCHAR"),
        ("time_us", "BIGINT"),
        ("backlog_bytes", "BIGINT"),
        ("backlog_pkts", "BIGINT"),
        ("drops", "BIGINT"),
        ("ecn_marks", "BIGINT"),
        ("lateness_us", "DOUBLE"),
        ("tx_bytes", "BIGINT"),
        ("utilisation", "DOUBLE"),
        ("random_losses", "BIGINT"),
    ),
    "rpcs": (
        ("run_id", "VARCHAR NOT NULL"),
        ("flow_id", "INTEGER"),
        ("request_bytes", "BIGINT"),
        ("response_bytes", "BIGINT"),
        ("start_us", "BIGINT"),
        ("latency_us", "DOUBLE"),
    ),
    "events": (
        ("run_id", "VARCHAR NOT NULL"),
        ("time_us", "BIGINT"),
        ("kind", "VARCHAR"),
        ("flow_id", "INTEGER"),
        ("state", "VARCHAR"),
        ("link", "VARCHAR"),
        ("detail", "VARCHAR"),
    ),
}
# Columns added after schema version 1 (random_losses in 3, the rest in 2): an older store gets them
# when opened for writing.
ADDED_COLUMNS: dict[str, tuple[str, ...]] = {"flows": ("completion_us",),
                                             "queue": ("tx_bytes", "utilisation", "random_losses"),
                                             "studies": ("profile",)}

#: The events of a run in the order they happened: by time, then route events
#: before the controller's, a state before the moves it made, and the
#: controller's states at one instant in the order one step enters them
#: (netcore noted.rs: a release's idle, then decision, then action).
EVENTS_ORDER = ("run_id, time_us, kind, flow_id NULLS FIRST, CASE state WHEN 'idle' THEN 0 WHEN 'decision' THEN 1 "
                "WHEN 'action' THEN 2 WHEN 'released' THEN 3 END NULLS FIRST, link")

_ORDER = {
    "studies": "study",
    "runs": "study, run_index NULLS LAST, run_id",
    "flows": "run_id, flow_id",
    "samples": "run_id, flow_id, time_us",
    "queue": "run_id, link, time_us",
    "rpcs": "run_id, flow_id, start_us",
    "events": EVENTS_ORDER,
}

# The result's column tables must match the store's (checked at import).
for _t, _cols in (("samples", SAMPLE_COLUMNS), ("queue", QUEUE_COLUMNS), ("rpcs", RPC_COLUMNS),
                  ("events", EVENT_COLUMNS)):
    assert [c for c, _ in _cols] == [c for c, _ in COLUMNS[_t][1:]], _t

_JSON_COLUMNS = {"params", "config", "stats"}


def _ddl() -> list[str]:
    stmts = ["CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)"]
    for table, cols in COLUMNS.items():
        body = ", ".join(f"{c} {t}" for c, t in cols)
        stmts.append(f"CREATE TABLE IF NOT EXISTS {table} ({body})")
    return stmts


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def default_results_dir(study_name: str) -> Path:
    """``results/<study name>/`` (relative to the working directory)."""
    if not study_name or study_name in (".", "..") or any(c in study_name for c in "/\\\0?"):
        raise UsageError(
            f"study name {study_name!r} cannot be a directory name; give the results directory with --out"
        )
    return Path("results") / study_name


def find_db(results: str | Path) -> Path:
    """The database file of a results directory (or the file itself).

    Raises UsageError when there is none.
    """
    p = Path(results)
    if p.is_file():
        if not _is_duckdb_file(p):
            # A study file given where its results are meant is the usual slip.
            hint = (" (a study file: give the directory its runs were written to, `results/<study name>` "
                    "unless `ccbench run` had --out)") if p.suffix == ".toml" else ""
            raise UsageError(f"{p}: not a results directory or database{hint}")
        return p
    db = p / DB_FILENAME
    if db.is_file():
        return db
    if not p.exists():
        raise UsageError(f"{p}: no such results directory")
    raise UsageError(f"{p}: not a results directory (no {DB_FILENAME} in it)")


def _is_duckdb_file(p: Path) -> bool:
    """Whether ``p`` starts as a DuckDB database file does (its magic
    bytes follow an 8-byte checksum); an empty file may be one being made."""
    try:
        with p.open("rb") as f:
            head = f.read(12)
    except OSError:
        return True  # let DuckDB say what is wrong with it
    return len(head) == 0 or head[8:12] == b"DUCK"


@dataclass
class RunRecord:
    """One row of the runs table, JSON columns decoded."""

    study: str
    run_id: str
    config_id: str
    run_index: int | None
    params: dict
    config: dict | None
    backend: str
    seed: int | None
    repetition: int | None
    status: str
    error: str | None
    wall_time_s: float | None
    tool_version: str | None
    finished_at: datetime | None
    stats: dict | None

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        if self.finished_at is not None:
            d["finished_at"] = self.finished_at.isoformat(sep=" ", timespec="seconds")
        return d



@dataclass(frozen=True)
class RunWrite:
    """One run for :meth:`Store.write_runs`: what :meth:`Store.write_run` takes."""

    runspec: Any
    status: str
    result: RunResult | None = None
    error: str | None = None
    wall_time_s: float | None = None
    run_index: int | None = None


@contextmanager
def _ctrl_c_after():
    """Hold Ctrl-C until the block ends, then deliver it: DuckDB aborts a
    running query on SIGINT, which would cut a run's transaction in half."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread receives SIGINT
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
        if caught:
            raise KeyboardInterrupt

def _stamp(p: Path) -> tuple | None:
    try:
        st = p.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class WriteCounter:
    """A counter beside the database that its writer makes odd while it
    changes the file and even when it is done (a sequence lock), so a reader
    can copy the file between two writes without waiting for a quiet moment
    (a busy writer never has one) and without ever blocking the writer."""

    #: databases this process has open for writing (DuckDB's lock does not tell a process its own)
    open_here: set[str] = set()

    def __init__(self, db: Path):
        self.path = db.with_name(db.name + ".gen")
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self.db = str(db.resolve())
        WriteCounter.open_here.add(self.db)
        self.value = WriteCounter.read(db) or 0
        if self.value % 2:  # a writer killed mid-write left it odd (only the lock holder opens one)
            self._step()

    @staticmethod
    def read(db: Path) -> int | None:
        """The counter beside ``db``, None where its writer keeps none."""
        try:
            with open(db.with_name(db.name + ".gen"), "rb") as f:
                b = f.read(8)
        except FileNotFoundError:
            return None
        return int.from_bytes(b, "little") if len(b) == 8 else None

    def _step(self) -> None:
        self.value += 1
        os.pwrite(self.fd, self.value.to_bytes(8, "little"), 0)

    @contextmanager
    def writing(self):
        self._step()
        try:
            yield
        finally:  # a failed write (a full disk) leaves the file as DuckDB left it: readers may copy it
            self._step()

    def close(self) -> None:
        os.close(self.fd)
        WriteCounter.open_here.discard(self.db)


def _writer_holds(db: Path) -> bool:
    """Whether a process may be writing ``db``: one here, or another one that
    holds DuckDB's write lock on it (an fcntl lock over the whole file). A
    writer that was killed holds none, so its odd counter means nothing."""
    if str(db.resolve()) in WriteCounter.open_here:
        return True
    if not sys.platform.startswith("linux"):  # struct flock's layout is Linux's below
        return True
    import fcntl
    import struct

    # F_GETLK only asks (it takes no lock, so it never locks a starting writer
    # out); a read lock conflicts with a write lock only
    query = struct.pack("hhqqi", fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0)
    try:
        fd = os.open(db, os.O_RDONLY)
    except OSError:
        return False
    try:
        lock_type = struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_GETLK, query))[0]
    except OSError:
        return True
    finally:
        os.close(fd)
    return lock_type != fcntl.F_UNLCK


def _copy_quiescent(db: Path, dest: Path, quiet_s: float = 0.05, timeout_s: float = 30.0) -> None:
    """Copy ``db`` and its WAL to ``dest`` (+ .wal) when neither changed in the
    last ``quiet_s`` (longer than the file clock's tick, so a write during the
    copy moves a timestamp) and neither changed during the copy."""
    wal, dest_wal = db.with_name(db.name + ".wal"), dest.with_name(dest.name + ".wal")
    deadline = time.monotonic() + timeout_s
    while True:
        count = WriteCounter.read(db)
        before = (_stamp(db), _stamp(wal))
        newest = max((s[2] for s in before if s is not None), default=0)
        # With the writer's counter: copy between two writes (even before and
        # the same after). Without one (an older writer): after a quiet moment.
        ready = count % 2 == 0 if count is not None else time.time_ns() - newest >= quiet_s * 1e9
        if count is not None and not ready and not _writer_holds(db):
            ready = True  # odd, but its writer was killed mid-write: the file is at rest
        if ready:
            shutil.copyfile(db, dest)
            if before[1] is not None:
                try:
                    shutil.copyfile(wal, dest_wal)
                except FileNotFoundError:  # checkpointed away meanwhile: the stamps differ below
                    pass
            elif dest_wal.exists():
                dest_wal.unlink()
            if (_stamp(db), _stamp(wal)) == before and WriteCounter.read(db) == count:
                return
        if time.monotonic() > deadline:
            raise UsageError(f"{db}: changed all the time for {timeout_s:g} s; could not take a consistent copy")
        time.sleep(0.002 if count is not None else quiet_s / 2)


def os_reason(e: OSError) -> str:
    """What went wrong, without the path (the message names it): pyarrow's
    OSErrors carry no strerror."""
    if e.strerror:
        return e.strerror
    text = str(e).strip()
    return text.splitlines()[-1] if text else type(e).__name__


def _no_snapshot(db: Path, where: Path, e: OSError) -> str:
    return (f"{db}: cannot copy the results to read them (into {where}: {os_reason(e)}); "
            f"free space there or set TMPDIR to a directory with room")


class Store:
    """A results store. Use as a context manager or call :meth:`close`.

    ``Store(results_dir)`` creates the directory and database if needed;
    ``Store.open_existing(path, read_only=True)`` opens one that must exist;
    ``Store.snapshot(path)`` reads a copy (while a study may be writing it).
    """

    def __init__(self, results_dir: str | Path, *, read_only: bool = False, _db: Path | None = None,
                 _source: Path | None = None):
        if _db is None:
            self.results_dir = Path(results_dir)
            self.db_file = self.results_dir / DB_FILENAME
            if not read_only and "?" in str(self.db_file.absolute()):
                # DuckDB takes what follows a '?' as options and writes its log beside another name
                raise UsageError(
                    f"{self.results_dir}: a results directory cannot have '?' in its path (DuckDB reads it as "
                    f"options); give another directory with --out"
                )
            if not read_only:
                try:
                    self.results_dir.mkdir(parents=True, exist_ok=True)
                except OSError as e:
                    raise UsageError(f"{self.results_dir}: cannot create results directory ({e.strerror})") from None
        else:
            self.db_file = _db
            self.results_dir = _db.parent
        self.read_only = read_only
        # the user's database file and directory, which messages name (a snapshot opens a private copy)
        self.source_db = _source if _source is not None else self.db_file
        self.source_dir = self.source_db.parent
        self._snapshot_dir: Path | None = None
        self._counter: WriteCounter | None = None
        try:
            self.con = duckdb.connect(str(self.db_file), read_only=read_only)
        except duckdb.IOException as e:
            msg = str(e)
            if "lock" in msg.lower():
                raise UsageError(
                    f"{self.source_db}: in use by another ccbench process; wait for it to finish"
                ) from None
            if is_damage(e) or is_disk_full(e):
                raise explain(e, self.source_db) from None
            raise UsageError(f"{self.source_db}: cannot open results database ({msg.splitlines()[0]})") from None
        except duckdb.Error as e:
            if is_damage(e) or is_disk_full(e):
                raise explain(e, self.source_db) from None
            raise UsageError(f"{self.source_db}: not a ccbench results database ({str(e).splitlines()[0]})") from None
        note_open(self.db_file)
        if not read_only:  # DuckDB's lock is ours now: no other writer touches the counter
            try:
                self._refuse_foreign()  # before the counter: nothing is written beside another program's file
                self._counter = WriteCounter(self.db_file)
            except UsageError:
                self.con.close()
                raise
            except duckdb.Error as e:
                self.con.close()
                raise explain(e, self.source_db) from None
            except OSError as e:
                self.con.close()
                raise UsageError(f"{self.source_db}: cannot write beside the results database ({e.strerror})") from None
        try:
            with self._writing():
                self._init_schema()
        except BaseException as e:
            self.close()
            if isinstance(e, duckdb.Error):
                raise explain(e, self.source_db) from None
            raise

    @classmethod
    def open_existing(cls, results: str | Path, *, read_only: bool = True) -> "Store":
        return cls(Path(results), read_only=read_only, _db=find_db(results))

    def _tables(self) -> set[str]:
        return {r[0] for r in self.con.execute("SELECT table_name FROM information_schema.tables").fetchall()}

    def _refuse_foreign(self) -> None:
        """A DuckDB file of something else where the results are to go: refused
        before ccbench adds a table to it (an empty file is a new store)."""
        tables = self._tables()
        if not tables:
            return
        try:
            version = self._version() if "meta" in tables else 0
        except duckdb.Error:  # a meta table of its own
            version = 0
        if version < 1:
            raise UsageError(
                f"{self.source_db}: a DuckDB database that is not a ccbench results database (its tables: "
                f"{', '.join(sorted(tables)[:5])}{', ...' if len(tables) > 5 else ''}); ccbench leaves it alone: "
                f"give another results directory with --out"
            )

    def _init_schema(self) -> None:
        tables = self._tables()
        if self.read_only:
            missing = [t for t in ("meta",) + ALL_TABLES if t not in tables and t != "events"]
            if missing:
                raise UsageError(f"{self.source_db}: not a ccbench results database (no table {missing[0]})")
        version = self._version() if "meta" in tables else None
        if version is not None and version > SCHEMA_VERSION:
            raise UsageError(
                f"{self.source_db}: written by a newer ccbench (schema {version}, this one reads {SCHEMA_VERSION})"
            )
        if self.read_only:
            if "events" not in tables:  # a version-1 store: read as having no events
                body = ", ".join(f"{c} {t.replace(' NOT NULL', '')}" for c, t in COLUMNS["events"])
                self.con.execute(f"CREATE TEMP TABLE events ({body})")
            return
        self.con.execute("BEGIN TRANSACTION")
        for stmt in _ddl():
            self.con.execute(stmt)
        for table, cols in ADDED_COLUMNS.items():
            types = dict(COLUMNS[table])
            for c in cols:
                self.con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {c} {types[c]}")
        self.con.execute(
            "INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT DO UPDATE SET value = excluded.value",
            [str(SCHEMA_VERSION)],
        )
        self.con.execute("COMMIT")

    def _version(self) -> int:
        rows = self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
        return int(rows[0][0]) if rows else 0

    # -- lifecycle ---------------------------------------------------------

    @contextmanager
    def _writing(self):
        """Around every change of the database file (readers copy between them)."""
        if self._counter is None:
            yield
        else:
            with self._counter.writing():
                yield

    def close(self) -> None:
        if self.con is not None:
            with self._writing():  # closing checkpoints the log into the file
                self.con.close()
            self.con = None  # type: ignore[assignment]
        if self._counter is not None:
            self._counter.close()
            self._counter = None
        if self._snapshot_dir is not None:
            shutil.rmtree(self._snapshot_dir, ignore_errors=True)
            self._snapshot_dir = None

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        # said before close: a snapshot's copy is then still known, and a message names its source
        explained = explain(exc, self.source_db) if isinstance(exc, duckdb.Error) else None
        self.close()
        if explained is not None:
            raise explained from None

    @classmethod
    def snapshot(cls, results: str | Path) -> "Store":
        """A read-only store of the results as they are now, safe to open while
        a study is writing them.

        DuckDB lets no other process open a file that one process has open for
        writing, and a reader would in turn lock a starting writer out; so the
        database file and its write-ahead log are copied into a private
        temporary directory (removed on close) and the copy is opened. The copy
        is taken between two of the writer's changes (its WriteCounter is even
        and the same before and after the copy; with an older writer that keeps
        none, when neither file has changed for a moment) and is taken again
        otherwise: it is the state after some commit, never half a run, and the
        writer never waits for a reader.
        """
        db = find_db(results)
        try:
            tmp = tempdirs.make("snapshot")  # (and removes those of readers killed with -9)
        except OSError as e:
            raise UsageError(_no_snapshot(db, Path(tempfile.gettempdir()), e)) from None
        register_copy(tmp / DB_FILENAME, db)
        deadline = time.monotonic() + 3.0
        try:
            while True:
                try:
                    _copy_quiescent(db, tmp / DB_FILENAME)
                except OSError as e:
                    raise UsageError(_no_snapshot(db, tmp.parent, e)) from None
                try:
                    store = cls(tmp, read_only=True, _db=tmp / DB_FILENAME, _source=db)
                    break
                except DatabaseError:
                    raise
                except UsageError:
                    # a store that its writer has just created has no tables yet
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        except BaseException:
            forget_copy(tmp / DB_FILENAME)
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        store.con.execute("SET enable_progress_bar = false")  # readers are libraries too: no bars on stdout
        store._snapshot_dir = tmp
        return store

    # -- writing -----------------------------------------------------------

    def record_study(self, name: str, source_text: str | None, path: str | Path | None,
                     profile: str | None = None) -> None:
        """Insert or update a study (its source text and profile are the latest run)."""
        now = _now()
        with self._writing():
            self._record_study(name, source_text, path, now, profile)

    def _record_study(self, name: str, source_text: str | None, path: str | Path | None, now: Any,
                      profile: str | None = None) -> None:
        self.con.execute(
            """INSERT INTO studies (study, path, source_text, first_run_at, last_run_at, profile)
               VALUES (?, ?, ?, ?, NULL, ?)
               ON CONFLICT (study) DO UPDATE SET path = excluded.path, source_text = excluded.source_text,
                                                 profile = excluded.profile""",
            [name, None if path is None else str(path), source_text, now, profile or ""],
        )

    def study_profile(self, name: str) -> tuple[bool, str | None]:
        """(recorded, profile) of the study's latest run: recorded is False in a
        store written before schema 3 kept it (the profile is then unknown)."""
        have = {r[0] for r in self.con.execute("SELECT column_name FROM information_schema.columns "
                                               "WHERE table_name = 'studies'").fetchall()}
        if "profile" not in have:
            return False, None
        row = self.con.execute("SELECT profile FROM studies WHERE study = ?", [name]).fetchone()
        if row is None or row[0] is None:
            return False, None
        return True, row[0] or None

    def write_run(
        self,
        *,
        study: str,
        runspec: Any,
        backend: str,
        status: str,
        result: RunResult | None = None,
        error: str | None = None,
        wall_time_s: float | None = None,
        run_index: int | None = None,
    ) -> None:
        """Write one run (replacing any earlier attempt) in one transaction.

        ``status`` 'ok'/'suspect' needs ``result``; 'failed' needs ``error``.
        Raises ResultError (nothing written) when the result does not fit the
        schema or the run's flows.
        """
        self.write_runs(study=study, backend=backend,
                        runs=[RunWrite(runspec, status, result, error, wall_time_s, run_index)])

    def write_runs(self, *, study: str, backend: str, runs: Sequence[RunWrite]) -> None:
        """Write several runs (each replacing any earlier attempt) in one
        transaction: all of them or none. A DuckDB statement costs about a
        millisecond whatever its rows, so runs that finished together are
        written with one statement per table (a sweep of short runs is
        otherwise bound by its commits). Raises ResultError naming the run
        (nothing written) when a result does not fit."""
        for w in runs:
            if w.status not in STATUSES:
                raise ValueError(f"status must be one of {STATUSES}, got {w.status!r}")
            if w.status in FINISHED and w.result is None:
                raise ValueError("a finished run needs its result")
        # Ctrl-C (and SIGTERM, which the executor turns into it) waits from
        # here, not only for the transaction: the first result's tables
        # import pyarrow, and an interrupt inside an import leaves the module
        # half-made for every later commit, the stop's own included.
        with _ctrl_c_after():
            self._write_runs(study, backend, runs)

    def _write_runs(self, study: str, backend: str, runs: Sequence[RunWrite]) -> None:
        rows: list[list] = []
        parts: dict[str, list[tuple[str, pa.Table]]] = {t: [] for t in DATA_TABLES}
        for w in runs:
            run_id = w.runspec.run_id
            stats = None
            if w.result is not None and w.status in FINISHED:
                try:
                    tables = _result_tables(w.runspec, w.result)
                except ResultError as e:
                    raise ResultError(str(e) if len(runs) == 1 else f"run {run_id}: {e}") from None
                for name, table in tables.items():
                    if table.num_rows:
                        parts[name].append((run_id, table))
                stats = json.dumps(w.result.stats)
            rows.append([
                study,
                run_id,
                w.runspec.config_id,
                w.run_index,
                json.dumps(w.runspec.params),
                json.dumps(w.runspec.config),
                backend,
                w.runspec.seed,
                w.runspec.repetition,
                w.status,
                w.error,
                w.wall_time_s,
                __version__,
                _now(),
                stats,
            ])
        with self._writing():
            self._write_runs_transaction(self.con, rows, parts, study)

    def _write_runs_transaction(self, con: Any, rows: list[list], parts: dict, study: str) -> None:
        import pyarrow as pa  # loaded already: the results' tables are Arrow

        insert_run = f"INSERT INTO runs VALUES ({', '.join('?' * len(rows[0]))})"

        def insert_runs(rows: list[list]) -> None:
            # executemany costs about 0.7 ms more than execute for one row
            if len(rows) == 1:
                con.execute(insert_run, rows[0])
            else:
                con.executemany(insert_run, rows)

        con.execute("BEGIN TRANSACTION")
        try:
            try:
                insert_runs(rows)
            except duckdb.ConstraintException:
                # runs' primary key holds a run id: a rerun, whose old rows
                # go first. A run's rows are written and replaced in one
                # transaction with its row in runs, so a new run id has no
                # rows elsewhere, and only a rerun pays for these deletes
                # (the data tables have no index: each scans its table, which
                # grows with the study).
                con.execute("ROLLBACK")
                con.execute("BEGIN TRANSACTION")
                ids = [r[1] for r in rows]
                old = [r[0] for r in con.execute("SELECT run_id FROM runs WHERE list_contains(?, run_id)",
                                                 [ids]).fetchall()]
                for t in (*DATA_TABLES, "runs"):
                    con.execute(f"DELETE FROM {t} WHERE list_contains(?, run_id)", [old])
                insert_runs(rows)
            for t, tables in parts.items():
                if not tables:
                    continue
                cols = COLUMNS[t][1:]
                select = ", ".join(f"CAST({c} AS {typ.split()[0]})" for c, typ in cols)
                names = ", ".join(c for c, _ in COLUMNS[t])
                # `incoming` is read by DuckDB's replacement scan (a local
                # Arrow table named in the query), which costs less than
                # registering a view and dropping it per table
                if len(tables) == 1:  # the run id as a parameter: 0.3 ms less than a column of it
                    run_id, incoming = tables[0]
                    con.execute(f"INSERT INTO {t} ({names}) SELECT ?, {select} FROM incoming", [run_id])
                    continue
                incoming = pa.concat_tables(
                    [tbl.append_column("run_id", pa.array([run_id] * tbl.num_rows, pa.string()))
                     for run_id, tbl in tables], promote_options="default")
                con.execute(f"INSERT INTO {t} ({names}) SELECT run_id, {select} FROM incoming")
            con.execute("UPDATE studies SET last_run_at = ? WHERE study = ?", [_now(), study])
            con.execute("COMMIT")
        except BaseException as e:
            try:
                con.execute("ROLLBACK")
            except duckdb.Error:
                # a failed COMMIT (e.g. a full disk) leaves nothing to roll back: the
                # transaction is gone and the runs committed before it are kept
                pass
            if isinstance(e, duckdb.Error) and (is_disk_full(e) or is_damage(e)):
                raise explain(e, self.source_db) from None
            if isinstance(e, (duckdb.ConversionException, duckdb.InvalidInputException)):
                raise ResultError(f"result does not fit the results schema: {str(e).splitlines()[0]}") from None
            raise

    def set_aside(self, run_ids: Sequence[str], note: str) -> None:
        """Mark these runs failed, ``note`` before their own note, so that the
        executor runs them again; the new run replaces the row and its data
        (what a resumed study does with any failed run)."""
        self.con.execute("UPDATE runs SET status = 'failed', error = ? || coalesce(error, '') "
                         "WHERE list_contains(?, run_id)", [note, list(run_ids)])

    # -- reading -----------------------------------------------------------

    def finished_runs(self, study: str | None = None) -> set[str]:
        """run_ids whose status is ok or suspect (a resumed study skips them)."""
        q = "SELECT run_id FROM runs WHERE status IN ('ok', 'suspect')"
        args: list = []
        if study is not None:
            q += " AND study = ?"
            args.append(study)
        return {r[0] for r in self.con.execute(q, args).fetchall()}

    def other_backend_runs(self, run_ids: Iterable[str], backend: str) -> dict[str, str]:
        """run_id → backend for the given runs stored from a different backend."""
        # Filtered here, not in SQL: handing DuckDB a list of 10,000 ids cost a tenth of a
        # second before a large study's first run; the other backend's runs are few.
        wanted = run_ids if isinstance(run_ids, (set, dict)) else set(run_ids)
        rows = self.con.execute("SELECT run_id, backend FROM runs WHERE backend <> ?", [backend]).fetchall()
        return {r: b for r, b in rows if r in wanted}

    def study_names(self) -> list[str]:
        return [r[0] for r in self.con.execute("SELECT study FROM studies ORDER BY study").fetchall()]

    def run_ids_of(self, study: str, backend: str) -> set[str]:
        """Every run id stored for ``study`` from ``backend`` (finished or failed)."""
        rows = self.con.execute("SELECT run_id FROM runs WHERE study = ? AND backend = ?", [study, backend])
        return {r[0] for r in rows.fetchall()}

    def studies(self) -> list[dict[str, Any]]:
        cur = self.con.execute(
            """SELECT s.study, s.path, s.source_text, s.first_run_at, s.last_run_at,
                      count(r.run_id) AS runs,
                      count(r.run_id) FILTER (WHERE r.status = 'ok') AS ok,
                      count(r.run_id) FILTER (WHERE r.status = 'suspect') AS suspect,
                      count(r.run_id) FILTER (WHERE r.status = 'failed') AS failed
               FROM studies s LEFT JOIN runs r ON r.study = s.study
               GROUP BY ALL ORDER BY s.study"""
        )
        return _dicts(cur)

    def runs(
        self,
        study: str | None = None,
        run_ids: Iterable[str] | None = None,
        *,
        with_config: bool = False,
    ) -> list[RunRecord]:
        cols = [c for c, _ in COLUMNS["runs"]]
        if not with_config:
            cols = [c if c != "config" else "NULL AS config" for c in cols]
        q = f"SELECT {', '.join(cols)} FROM runs WHERE 1 = 1"
        args: list = []
        if study is not None:
            q += " AND study = ?"
            args.append(study)
        if run_ids is not None:
            q += " AND list_contains(?, run_id)"
            args.append(list(run_ids))
        q += f" ORDER BY {_ORDER['runs']}"
        out = []
        for d in _dicts(self.con.execute(q, args)):
            for c in _JSON_COLUMNS:
                if d[c] is not None:
                    d[c] = json.loads(d[c])
            d["params"] = d["params"] or {}
            out.append(RunRecord(**d))
        return out

    def flows(self, run_ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
        q = "SELECT * FROM flows"
        args: list = []
        if run_ids is not None:
            q += " WHERE list_contains(?, run_id)"
            args.append(list(run_ids))
        q += f" ORDER BY {_ORDER['flows']}"
        return _dicts(self.con.execute(q, args))

    def resolve_run(self, prefix: str) -> str:
        """The run_id starting with ``prefix``; UsageError if none or several."""
        if not prefix:
            raise UsageError("empty run id")
        rows = self.con.execute(
            "SELECT run_id FROM runs WHERE starts_with(run_id, ?) ORDER BY run_id LIMIT 6", [prefix]
        ).fetchall()
        if not rows:
            raise UsageError(f"no run '{prefix}' in {self.source_dir}")
        if len(rows) > 1:
            shown = ", ".join(r[0] for r in rows[:5])
            raise UsageError(f"run id prefix '{prefix}' is ambiguous (matches {shown}{', ...' if len(rows) > 5 else ''})")
        return rows[0][0]

    def count(self, table: str, run_id: str | None = None) -> int:
        if table not in ALL_TABLES:
            raise ValueError(table)
        if run_id is None:
            return self.con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]
        return self.con.execute(f"SELECT count(*) FROM {table} WHERE run_id = ?", [run_id]).fetchall()[0][0]

    def reader(self, table: str, batch_size: int = 65536) -> pa.RecordBatchReader:
        """Stream a whole table as Arrow record batches (stable order)."""
        if table not in ALL_TABLES:
            raise ValueError(table)
        return self.con.sql(f"SELECT * FROM {table} ORDER BY {_ORDER[table]}").to_arrow_reader(batch_size)

    def export(self, out_dir: str | Path, fmt: str) -> list[Path]:
        """Write every table to ``out_dir/<table>.<fmt>`` (parquet or csv).

        All or nothing: the files are written into a temporary directory in
        ``out_dir`` and moved into place once every one is whole, so an
        export that fails (a full disk) leaves the files of an earlier export
        as they were and nothing of its own. UsageError naming the file and
        the cause."""
        if fmt not in ("parquet", "csv"):
            raise UsageError(f"unknown export format '{fmt}' (allowed: parquet, csv)")
        out = Path(out_dir)
        paths = [out / f"{table}.{fmt}" for table in ALL_TABLES]
        if out.exists() and not out.is_dir():
            raise UsageError(f"{out}: not a directory; give a directory for the exported files with --out")
        for path in paths:
            if path.is_dir():
                raise UsageError(f"{path}: is a directory, where the export writes a file; move it away "
                                 f"or give another directory with --out")
        if not out.parent.is_dir():
            raise UsageError(f"{out}: no directory {out.parent} to create it in")
        created = not out.exists()
        try:
            out.mkdir(exist_ok=True)
            part = Path(tempfile.mkdtemp(prefix=".export-", suffix=".part", dir=out))
        except OSError as e:
            raise UsageError(f"{out}: cannot create directory ({os_reason(e)})") from None
        try:
            for path in paths:
                try:
                    self._export_table(path.stem, part / path.name, fmt)
                except OSError as e:
                    raise UsageError(f"{path}: cannot write the export ({os_reason(e)}); "
                                     f"nothing of this export was kept") from None
            for path in paths:
                (part / path.name).replace(path)
        except BaseException:
            shutil.rmtree(part, ignore_errors=True)
            if created:
                with suppress(OSError):
                    out.rmdir()
            raise
        part.rmdir()
        return paths

    def _export_table(self, table: str, path: Path, fmt: str) -> None:
        reader = self.reader(table)
        if fmt == "parquet":
            import pyarrow.parquet as pq

            with pq.ParquetWriter(str(path), reader.schema) as w:
                for batch in reader:
                    w.write_batch(batch)
        else:
            import pyarrow.csv as pcsv

            with pcsv.CSVWriter(str(path), reader.schema) as w:
                for batch in reader:
                    w.write_batch(batch)


def _dicts(cur) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def arrow_column(table: str, name: str, values: Sequence) -> pa.Array:
    import pyarrow as pa

    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as e:
        if name == "cca_state":  # mixed numbers/names: keep them all as text
            return pa.array([None if v is None else str(v) for v in values], type=pa.string())
        raise ResultError(f"result: {table}.{name}: {e}") from None


def _result_tables(runspec: Any, result: RunResult) -> dict[str, pa.Table]:
    """Arrow tables (without run_id) for flows, samples, queue, rpcs, events."""
    import pyarrow as pa

    meta = {int(m["id"]): m for m in (runspec.flow_meta or [])}
    got = {int(f["flow_id"]) for f in result.flows}
    extra = sorted(got - set(meta))
    missing = sorted(set(meta) - got)
    if extra:
        raise ResultError(f"result: flow_id {extra[0]} is not a flow of this run (flows: {sorted(meta)})")
    if missing:
        raise ResultError(f"result: no summary for flow {missing[0]}")
    flow_cols: dict[str, list] = {c: [] for c, _ in COLUMNS["flows"][1:]}
    for f in sorted(result.flows, key=lambda f: int(f["flow_id"])):
        m = meta[int(f["flow_id"])]
        start = f.get("active_start_us")
        stop = f.get("active_stop_us")
        row = {
            "flow_id": int(f["flow_id"]),
            "cca": m.get("cca"),
            "sender": m.get("sender"),
            "kind": m.get("kind"),
            "group_name": m.get("group") or m.get("cca"),
            "start_us": start if start is not None else m.get("start_us"),
            "stop_us": stop if stop is not None else m.get("stop_us"),
        }
        for c in flow_cols:
            flow_cols[c].append(row[c] if c in row else f.get(c))
    out = {"flows": pa.table({c: arrow_column("flows", c, v) for c, v in flow_cols.items()})}
    for t, data in (("samples", result.samples), ("queue", result.queue), ("rpcs", result.rpcs),
                    ("events", result.events)):
        cols = [c for c, _ in COLUMNS[t][1:]]
        n = len(data.get(cols[0], [])) if data else 0
        if n == 0:
            out[t] = pa.table({c: pa.array([], type=pa.null()) for c in cols})
            continue
        out[t] = pa.table({c: arrow_column(t, c, data.get(c) or [None] * n) for c in cols})
    return out
