"""The store's schema versions 2 (the events table, flows.completion_us,
queue.tx_bytes and queue.utilisation) and 3 (queue.random_losses): results
with them round-trip, and an older store still opens — read-only as it is,
for writing migrated."""

from __future__ import annotations

import duckdb
import pyarrow.parquet as pq

from ccbench.backends import RunResult
from ccbench.cli import main
from ccbench.store import COLUMNS, DB_FILENAME, SCHEMA_VERSION, Store

from fakes import fake_result_dict, make_runs

V1_MISSING = {"flows": ("completion_us",), "queue": ("tx_bytes", "utilisation", "random_losses"),
              "studies": ("profile",)}
V2_MISSING = {"queue": ("random_losses",), "studies": ("profile",)}


def _result(rs) -> dict:
    d = fake_result_dict(rs, n_samples=10)
    d["flows"][0]["completion_us"] = 812_345
    d["queue"]["tx_bytes"] = [1500 * i for i in range(10)]
    d["queue"]["utilisation"] = [0.1 * i for i in range(10)]
    d["queue"]["random_losses"] = [i // 3 for i in range(10)]
    d["events"] = {"time_us": [3_000_000, 3_000_000, 9_000_000], "kind": ["controller", "route", "controller"],
                   "flow_id": [None, 0, None], "state": ["action", None, "released"],
                   "link": ["primary", None, "primary"],
                   "detail": ["utilisation 0.97 >= 0.9 for 2s", "a-r1 r1-r3 alt r2-b", "transfers done"]}
    return d


def _write(store: Store, rs, d: dict) -> None:
    store.record_study("s", "src", "/s.toml")
    store.write_run(study="s", runspec=rs, backend="sim", status="ok", result=RunResult.from_dict(d), run_index=0)


def test_events_completion_and_utilisation_round_trip(tmp_path):
    rs = make_runs(reps=1)[0]
    with Store(tmp_path / "res") as store:
        _write(store, rs, _result(rs))
        ev = store.reader("events").read_all().to_pydict()
        flows = store.flows()
        queue = store.reader("queue").read_all().to_pydict()
    assert ev["run_id"] == [rs.run_id] * 3
    assert ev["time_us"] == [3_000_000, 3_000_000, 9_000_000]
    assert ev["kind"] == ["controller", "route", "controller"] and ev["flow_id"] == [None, 0, None]
    assert ev["state"] == ["action", None, "released"] and ev["detail"][1] == "a-r1 r1-r3 alt r2-b"
    assert [f["completion_us"] for f in flows] == [812_345, None]
    assert queue["tx_bytes"][:3] == [0, 1500, 3000] and abs(queue["utilisation"][9] - 0.9) < 1e-9
    assert queue["random_losses"] == [i // 3 for i in range(10)]


def test_a_result_without_the_new_columns_stores_nulls(tmp_path):
    rs = make_runs(reps=1)[0]
    with Store(tmp_path / "res") as store:
        _write(store, rs, fake_result_dict(rs, n_samples=10))
        assert store.count("events") == 0
        assert {f["completion_us"] for f in store.flows()} == {None}
        assert set(store.reader("queue").read_all().to_pydict()["utilisation"]) == {None}


def _v1_store(path) -> None:
    """A results directory as schema version 1 wrote it, with one run."""
    path.mkdir(parents=True)
    con = duckdb.connect(str(path / DB_FILENAME))
    con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    for table, cols in COLUMNS.items():
        if table == "events":
            continue
        body = ", ".join(f"{c} {t}" for c, t in cols if c not in V1_MISSING.get(table, ()))
        con.execute(f"CREATE TABLE {table} ({body})")
    con.execute("INSERT INTO studies VALUES ('old', '/old.toml', 'src', now(), now())")
    con.execute("""INSERT INTO runs VALUES ('old', 'abcdef123456', 'cfg', 0, '{"x": "1"}', '{}', 'sim', 1, 0,
                   'ok', NULL, 0.5, '0.1', now(), '{}')""")
    con.execute("INSERT INTO flows VALUES ('abcdef123456', 0, 'cubic', 0, 'bulk', 'cubic bulk', 0, 1000000, "
                "1000, 8000.0, 10, 0, 20000.0, 21000.0, 25000.0)")
    con.execute("INSERT INTO queue VALUES ('abcdef123456', 'bottleneck', 100000, 0, 0, 0, 0, NULL)")
    con.close()


def test_a_version_1_store_opens_read_only_as_it_is(tmp_path, capsys):
    res = tmp_path / "old"
    _v1_store(res)
    with Store.open_existing(res) as store:
        assert store.count("events") == 0
        assert [r.run_id for r in store.runs()] == ["abcdef123456"]
        assert store.flows()[0]["goodput_bps"] == 8000.0
    # the file is untouched: still version 1, no events table
    con = duckdb.connect(str(res / DB_FILENAME), read_only=True)
    assert con.execute("SELECT value FROM meta").fetchall() == [("1",)]
    assert "events" not in {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    con.close()
    assert main(["ls", str(res)]) == 0
    assert "abcdef123456" in capsys.readouterr().out
    assert main(["show", "abcdef", "--results", str(res)]) == 0
    assert "cubic bulk" in capsys.readouterr().out
    assert main(["export", str(res), "--format", "parquet", "--out", str(tmp_path / "exp")]) == 0
    assert pq.read_table(tmp_path / "exp" / "events.parquet").num_rows == 0
    assert pq.read_table(tmp_path / "exp" / "flows.parquet").num_rows == 1


def test_a_version_1_store_is_migrated_when_opened_for_writing(tmp_path):
    res = tmp_path / "old"
    _v1_store(res)
    rs = make_runs(reps=1)[0]
    with Store(res) as store:
        _write(store, rs, _result(rs))
        flows = {(f["run_id"], f["flow_id"]): f for f in store.flows()}
        assert flows[("abcdef123456", 0)]["completion_us"] is None  # old rows: nulls
        assert flows[(rs.run_id, 0)]["completion_us"] == 812_345
        assert store.count("events") == 3
        q = store.reader("queue").read_all().to_pydict()
        assert q["utilisation"][q["run_id"].index("abcdef123456")] is None
    con = duckdb.connect(str(res / DB_FILENAME), read_only=True)
    assert con.execute("SELECT value FROM meta").fetchall() == [(str(SCHEMA_VERSION),)]
    assert [c for c, _ in COLUMNS["flows"]] == [r[0] for r in con.execute("DESCRIBE flows").fetchall()]
    con.close()
    # and it opens again (migration is idempotent)
    with Store(res) as store:
        assert store.count("runs") == 2


def _v2_store(path) -> None:
    """A results directory as schema version 2 wrote it (no queue.random_losses), with one run."""
    path.mkdir(parents=True)
    con = duckdb.connect(str(path / DB_FILENAME))
    con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '2')")
    for table, cols in COLUMNS.items():
        body = ", ".join(f"{c} {t}" for c, t in cols if c not in V2_MISSING.get(table, ()))
        con.execute(f"CREATE TABLE {table} ({body})")
    con.execute("INSERT INTO studies VALUES ('old', '/old.toml', 'src', now(), now())")
    con.execute("""INSERT INTO runs VALUES ('old', 'abcdef123456', 'cfg', 0, '{"x": "1"}', '{}', 'sim', 1, 0,
                   'ok', NULL, 0.5, '0.1', now(), '{}')""")
    con.execute("INSERT INTO flows VALUES ('abcdef123456', 0, 'cubic', 0, 'bulk', 'cubic bulk', 0, 1000000, "
                "1000, 8000.0, 10, 0, 20000.0, 21000.0, 25000.0, NULL)")
    con.execute("INSERT INTO queue VALUES ('abcdef123456', 'bottleneck', 100000, 0, 0, 3, 0, NULL, 1500, 0.5)")
    con.close()


def test_a_version_2_store_reads_with_no_random_losses_and_migrates_when_written(tmp_path):
    """Read-only: the analysis has drops but no random losses (None, not 0,
    which would claim none were lost). Written: the column is added, old rows null."""
    import pandas as pd

    import ccbench

    res = tmp_path / "old"
    _v2_store(res)
    values = ccbench.open(res).metrics()
    got = dict(zip(values.metric, values.value))
    assert got["drops"] == 3 and pd.isna(got["random_losses"]), got
    con = duckdb.connect(str(res / DB_FILENAME), read_only=True)
    assert con.execute("SELECT value FROM meta").fetchall() == [("2",)]  # read: untouched
    con.close()
    rs = make_runs(reps=1)[0]
    with Store(res) as store:
        _write(store, rs, _result(rs))
        q = store.reader("queue").read_all().to_pydict()
    rows = [(r, v) for r, v in zip(q["run_id"], q["random_losses"])]
    assert [v for r, v in rows if r == "abcdef123456"] == [None]
    assert [v for r, v in rows if r == rs.run_id] == [i // 3 for i in range(10)]
    con = duckdb.connect(str(res / DB_FILENAME), read_only=True)
    assert con.execute("SELECT value FROM meta").fetchall() == [(str(SCHEMA_VERSION),)]
    assert [c for c, _ in COLUMNS["queue"]] == [r[0] for r in con.execute("DESCRIBE queue").fetchall()]
    con.close()
