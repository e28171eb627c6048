"""The public API: ccbench.open(results) → DataFrames that match the DuckDB
tables row for row, the pipeline's views, and a consistent snapshot while a
real `ccbench run` process is writing the results."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

import ccbench
from ccbench.store import ALL_TABLES, DB_FILENAME

from analysis_study import run_study

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return run_study(tmp_path_factory.mktemp("api"), reps=2)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or (isinstance(b, float) and math.isnan(b))
    if hasattr(a, "to_pydatetime"):
        a = a.to_pydatetime()
    return a == b


def test_dataframes_match_the_duckdb_tables_row_for_row(results):
    con = duckdb.connect(str(results / DB_FILENAME), read_only=True)
    orders = {"studies": "study", "runs": "study, run_index NULLS LAST, run_id", "flows": "run_id, flow_id",
              "samples": "run_id, flow_id, time_us", "queue": "run_id, link, time_us",
              "rpcs": "run_id, flow_id, start_us"}
    with ccbench.open(results) as r:
        for table in ALL_TABLES:
            if table not in orders:
                continue
            cur = con.execute(f"SELECT * FROM {table} ORDER BY {orders[table]}")
            cols = [d[0] for d in cur.description]
            rows = cur.fetchall()
            df = getattr(r, table)
            assert list(df.columns) == cols, table
            assert len(df) == len(rows) > 0, table
            for got, want in zip(df.itertuples(index=False, name=None), rows):
                assert all(_same(g, w) for g, w in zip(got, want)), (table, got, want)
    con.close()


def test_metrics_and_by_config_are_the_pipeline(results):
    with ccbench.open(results) as r:
        a = r.analysis()
        m = r.metrics()
        by = r.by_config()
        flagged = r.flagged()
    assert set(m.run_id) == {rm.run_id for rm in a.runs()} and len(set(m.config_id)) == len(a.configs) == 4
    for c in a.configs:
        for key, s in c.stats.items():
            row = by[(by.config_id == c.config_id) & (by.key == key)]
            assert len(row) == 1
            assert _same(row["median"].iloc[0], s.median) and int(row["n"].iloc[0]) == s.n
            vals = m[(m.config_id == c.config_id) & (m.key == key)]["value"].dropna().tolist()
            assert sorted(vals) == sorted(s.values)
    # names: metric names of METRICS, the class in group
    g = by[by.key == "goodput_mean_bps[reno bulk]"]
    assert set(g.metric) == {"goodput"} and set(g.group) == {"reno bulk"}
    assert set(by[by.key == "jfi"].group.dropna()) == set()
    assert list(flagged.columns) == ["run_id", "config_id", "kind", "reason", "flow_id"]


def test_timeouts_probes_and_recoveries_come_from_the_runs_stats(results):
    with ccbench.open(results) as r:
        runs, m = r.runs, r.metrics()
    counted = {"timeouts": 0, "loss_probes": 0, "recoveries": 0}
    for run_id, text in zip(runs.run_id, runs.stats):
        stats = json.loads(text)
        for key, stat in (("timeouts", "rto_count"), ("loss_probes", "tlp_count"), ("recoveries", "recoveries")):
            (value,) = m[(m.run_id == run_id) & (m.key == key)]["value"].tolist()
            assert value == stats[stat], (run_id, key)
            counted[key] += value
    assert counted["timeouts"] + counted["loss_probes"] > 0, "the 1 % loss runs time out or probe at least once"
    assert counted["recoveries"] > 0, "the 1 % loss runs recover fast at least once"


def test_report_and_plot(results, tmp_path):
    with ccbench.open(results) as r:
        page = r.report(tmp_path / "r.html")
        fig = r.plot(metric="goodput", x="loss", group="cca", out=tmp_path / "g.svg")
    assert page.read_text().startswith("<!DOCTYPE html>") and 'id="ccbench-data"' in page.read_text()
    assert (tmp_path / "g.svg").read_text().lstrip().startswith("<?xml") and fig.axes[0].get_xlabel().startswith(
        "topology.bottleneck.loss")


def test_report_and_plot_raise_ccbenchs_error_and_leave_nothing(results, tmp_path):
    """A directory where the file goes, a missing directory, a suffix of another
    format: ccbench's UsageError naming the file, not a raw OSError, and no
    .part or half-written file left."""
    from ccbench.errors import UsageError

    taken = tmp_path / "taken"
    taken.mkdir()
    with ccbench.open(results) as r:
        with pytest.raises(UsageError, match=f"^{taken}: is a directory"):
            r.report(taken)
        with pytest.raises(UsageError, match=r"^/proc/x/y\.png: no directory /proc/x "):
            r.plot(metric="goodput", x="loss", out="/proc/x/y.png")
        with pytest.raises(UsageError, match=r"g\.svg: a \.svg file, but the format asked for is png"):
            r.plot(metric="goodput", x="loss", out=tmp_path / "g.svg", format="png")
        with pytest.raises(UsageError, match=f"^{taken}: is a directory"):
            r.plot(metric="goodput", x="loss", out=taken)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"] and not any(taken.iterdir())
        r.plot(metric="goodput", x="loss", out=tmp_path / "g.pdf")  # the format from the suffix
        r.plot(metric="goodput", x="loss", out=tmp_path / "g", format="svg")
    assert (tmp_path / "g.pdf").read_bytes().startswith(b"%PDF")
    assert (tmp_path / "g").read_text().lstrip().startswith("<?xml")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g", "g.pdf", "taken"]


def test_errors_name_the_users_results_not_the_snapshot(results, tmp_path):
    from ccbench.errors import UsageError

    other = tmp_path / "other"
    other.mkdir()
    duckdb.connect(str(other / DB_FILENAME)).execute("CREATE TABLE t (a INTEGER)").close()
    with pytest.raises(UsageError) as e:
        ccbench.open(other)
    assert str(e.value).startswith(f"{other / DB_FILENAME}: not a ccbench results database"), str(e.value)


def test_the_snapshot_is_removed_on_close(results):
    import tempfile

    def copies() -> set:
        return set(Path(tempfile.gettempdir()).glob("ccbench-snapshot-*"))

    before = copies()
    r = ccbench.open(results)
    (new,) = copies() - before
    assert (new / DB_FILENAME).is_file()
    r.close()
    assert not new.exists() and copies() <= before


CONCURRENT = """\
[study]
name = "concurrent"
duration = "3s"
repetitions = 30
seed = 1
sample_interval = "50ms"

[topology]
senders = 2

[topology.bottleneck]
rate = "50Mbit"
delay = "10ms"

[[flows]]
cca = "cubic"

[[flows]]
cca = "bbr"
sender = 1
"""


def test_open_reads_a_consistent_snapshot_while_a_study_writes(tmp_path):
    """A real `ccbench run` process writes 30 runs; meanwhile the results are
    opened again and again. Every snapshot holds whole runs only: each of its
    runs has exactly the rows it has in the finished store, in every table,
    and no table has rows of a run that is not in its runs table."""
    study = tmp_path / "s.toml"
    study.write_text(CONCURRENT)
    out = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    writer = subprocess.Popen([sys.executable, "-m", "ccbench", "run", str(study), "--out", str(out)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    seen = []
    try:
        while writer.poll() is None:
            if (out / DB_FILENAME).exists():
                with ccbench.open(out) as r:
                    counts = {t: r.table(t).groupby("run_id").size().to_dict() for t in ("flows", "samples", "queue")}
                    seen.append((set(r.runs.run_id), counts))
            time.sleep(0.05)
    finally:
        if writer.poll() is None:
            writer.kill()
    assert writer.wait() == 0, writer.stderr.read().decode()
    with ccbench.open(out) as r:
        final = {t: r.table(t).groupby("run_id").size().to_dict() for t in ("flows", "samples", "queue")}
        total = set(r.runs.run_id)
    assert len(total) == 30
    partial = [s for s in seen if 0 < len(s[0]) < 30]
    assert partial, f"no snapshot caught the study half way ({[len(s[0]) for s in seen]})"
    sizes = [len(s[0]) for s in seen]
    assert sizes == sorted(sizes)  # runs only ever appear
    for runs, counts in seen:
        for t, per_run in counts.items():
            assert set(per_run) == runs, t  # no orphan rows, no run without its rows
            assert all(per_run[rid] == final[t][rid] for rid in runs), t  # whole runs
