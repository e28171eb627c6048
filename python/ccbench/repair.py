"""``ccbench repair RESULTS --out NEW``: copy every run of a damaged results
database whose rows still read back whole into a new results directory.

The damaged file is only read. Each run is copied in one transaction of the
new store: either all of its rows (runs, flows, samples, queue, rpcs, events)
read back and are written, or none are and the run is counted as lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from ccbench.errors import UsageError
from ccbench.store import DATA_TABLES, DB_FILENAME, Store, find_db


@dataclass
class Salvage:
    out: Path
    recovered: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    studies: bool = True  # the studies table (study texts) read back

    def line(self, source: Path) -> str:
        total = len(self.recovered) + len(self.lost)
        text = f"recovered {len(self.recovered)} of {total} runs from {source} into {self.out}"
        if self.lost:
            text += f"; {len(self.lost)} could not be read (run them again: `ccbench run STUDY --out {self.out}`)"
        if not self.studies:
            text += "; the study texts were lost"
        return text


def _quote(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def salvage(results: str | Path, out: str | Path) -> Salvage:
    """Copy the readable runs of ``results`` into the new results directory ``out``."""
    src = find_db(results)
    out = Path(out)
    if (out / DB_FILENAME).exists():
        raise UsageError(f"{out}: already holds results; give a new directory with --out")
    if out.resolve() == src.parent.resolve():
        raise UsageError(f"{out}: is the damaged results directory itself; give a new directory with --out")
    created = not out.exists()
    Store(out).close()  # the new store, with the current schema
    report = Salvage(out)
    con = duckdb.connect(":memory:")
    try:
        return _copy(con, src, out, report)
    except UsageError:
        con.close()
        for p in (out / DB_FILENAME, out / (DB_FILENAME + ".wal"), out / (DB_FILENAME + ".gen")):
            p.unlink(missing_ok=True)
        if created:
            out.rmdir()
        raise
    finally:
        con.close()


def _copy(con: duckdb.DuckDBPyConnection, src: Path, out: Path, report: Salvage) -> Salvage:
    try:
        con.execute(f"ATTACH {_quote(src)} AS src (READ_ONLY)")
    except duckdb.Error as e:
        raise UsageError(
            f"{src}: cannot be read at all ({str(e).splitlines()[0]}); nothing can be recovered from it"
        ) from None
    con.execute(f"ATTACH {_quote(out / DB_FILENAME)} AS dst")
    tables = {r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'src'").fetchall()}
    try:
        run_ids = [r[0] for r in con.execute("SELECT run_id FROM src.runs ORDER BY run_id").fetchall()]
    except duckdb.Error as e:
        raise UsageError(
            f"{src}: its list of runs cannot be read ({str(e).splitlines()[0]}); nothing can be recovered"
        ) from None
    try:
        con.execute("INSERT INTO dst.studies BY NAME SELECT * FROM src.studies")
    except duckdb.Error:
        report.studies = False
    for run_id in run_ids:
        con.execute("BEGIN TRANSACTION")
        try:
            for t in ("runs",) + DATA_TABLES:
                if t in tables:
                    con.execute(f"INSERT INTO dst.{t} BY NAME SELECT * FROM src.{t} WHERE run_id = ?", [run_id])
            con.execute("COMMIT")
            report.recovered.append(run_id)
        except duckdb.Error:
            con.execute("ROLLBACK")
            report.lost.append(run_id)
    return report
