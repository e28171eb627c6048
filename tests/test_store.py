"""The results store and the local executor (resume, failures, interruption)."""

from __future__ import annotations

import json
import time

import duckdb
import pytest

from ccbench import __version__
from ccbench.backends import ResultError, RunResult
from ccbench.errors import UsageError
from ccbench.executor import Progress, execute
from ccbench.store import DB_FILENAME, Store

from fakes import FakeBackend, FakeStudy, N_SAMPLES, calls, fake_result_dict, make_runs


def _write_ok(store, rs, study="fake-study", d=None):
    store.record_study(study, "src", "/x.toml")
    store.write_run(study=study, runspec=rs, backend="fake", status="ok",
                    result=RunResult.from_dict(d or fake_result_dict(rs)), wall_time_s=0.5, run_index=0)


def _count(db, sql, *args):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, list(args)).fetchall()
    finally:
        con.close()


# -- store ---------------------------------------------------------------


def test_store_round_trips_a_result(tmp_path):
    rs = make_runs(reps=1)[0]
    d = fake_result_dict(rs)
    with Store(tmp_path / "res") as store:
        _write_ok(store, rs, d=d)
        run = store.runs(with_config=True)[0]
        assert run.run_id == rs.run_id and run.config_id == rs.config_id
        assert run.params == {"topology.bottleneck.loss": "0%"}
        assert run.config == rs.config
        assert run.seed == 2**63  # UBIGINT keeps a u64 seed
        assert (run.status, run.backend, run.repetition) == ("ok", "fake", 0)
        assert run.tool_version == __version__ and run.wall_time_s == 0.5
        assert run.stats == {"events": 12345, "bottleneck_pkts": 999, "sim_time_us": 1_000_000}
        assert run.finished_at is not None

        flows = store.flows()
        assert [f["flow_id"] for f in flows] == [0, 1]
        f1 = flows[1]
        assert (f1["cca"], f1["group_name"], f1["kind"], f1["sender"]) == ("bbr", "bbr", "bulk", 0)
        assert f1["goodput_bps"] == 16e6 and f1["bytes_delivered"] == 2_000_000
        assert (f1["sent_segs"], f1["retrans_segs"]) == (1000, 20)
        assert (f1["rtt_min_us"], f1["rtt_mean_us"], f1["rtt_p99_us"]) == (20000.0, 25001.0, 31000.0)
        assert (f1["start_us"], f1["stop_us"]) == (0, 1_000_000)

        assert store.count("samples") == 2 * N_SAMPLES
        assert store.count("queue") == 10 and store.count("rpcs") == 3
        # every column survives, in order, with its values
        samples = store.reader("samples").read_all().to_pydict()
        order = sorted(range(2 * N_SAMPLES), key=lambda i: (d["samples"]["flow_id"][i], d["samples"]["time_us"][i]))
        for col, values in d["samples"].items():
            expect = [values[i] for i in order]
            assert samples[col] == expect, col
        queue = store.reader("queue").read_all().to_pydict()
        assert queue["drops"] == d["queue"]["drops"] and queue["lateness_us"] == [None] * 10
        assert store.reader("rpcs").read_all().to_pydict()["latency_us"] == [40000.0, 41000.0, 42000.0]

        st = store.studies()
        assert st[0]["study"] == "fake-study" and st[0]["source_text"] == "src" and st[0]["ok"] == 1
        assert st[0]["first_run_at"] <= st[0]["last_run_at"]


def test_events_read_back_in_the_order_they_happened(tmp_path):
    """At one instant the controller's states come in the order one step
    enters them (a release's idle, then decision), a state before its moves,
    whatever their names' alphabetical order; the analysis reads them so too."""
    from ccbench.analysis.data import load_runs

    rs = make_runs(reps=1)[0]
    d = fake_result_dict(rs)
    rows = [(700_000, "controller", 0, "action", "l1", "moved: path: a b"),
            (700_000, "controller", None, "action", "l1", "moving 1 flow(s)"),
            (300_000, "controller", None, "decision", "l1", "utilisation 0.95 >= threshold 0.9"),
            (300_000, "controller", None, "idle", "l1", "released"),
            (100_000, "route", 1, None, None, "path: x y")]
    d["events"] = {c: [r[i] for r in rows] for i, c in
                   enumerate(("time_us", "kind", "flow_id", "state", "link", "detail"))}
    with Store(tmp_path / "res") as store:
        _write_ok(store, rs, d=d)
        got = store.reader("events").read_pandas()
        order = [(t, s, f) for t, s, f in zip(got["time_us"], got["state"], got["flow_id"])]
        (run,) = load_runs(store)
    want = [(100_000, None, 1), (300_000, "idle", None), (300_000, "decision", None),
            (700_000, "action", None), (700_000, "action", 0)]
    clean = [(t, s if isinstance(s, str) else None, None if f != f else int(f)) for t, s, f in order]
    assert clean == want
    assert [(e["time_us"], e["state"], e["flow_id"]) for e in run.events] == want


def test_committed_run_is_finished_after_reopening(tmp_path):
    rs = make_runs(reps=1)[0]
    with Store(tmp_path) as store:
        _write_ok(store, rs)
    with Store.open_existing(tmp_path) as store:
        assert store.finished_runs() == {rs.run_id}
        assert store.finished_runs("other-study") == set()


def test_failed_run_is_not_finished_and_is_replaced_by_the_retry(tmp_path):
    rs = make_runs(reps=1)[0]
    with Store(tmp_path) as store:
        store.record_study("fake-study", "src", None)
        store.write_run(study="fake-study", runspec=rs, backend="fake", status="failed", error="RuntimeError: x")
        assert store.finished_runs() == set()
        assert store.runs()[0].error == "RuntimeError: x"
        _write_ok(store, rs)
        assert store.finished_runs() == {rs.run_id}
        assert [(r.status, r.error) for r in store.runs()] == [("ok", None)]
        # rewriting a finished run replaces its rows instead of duplicating them
        _write_ok(store, rs)
        assert store.count("runs") == 1 and store.count("flows") == 2
        assert store.count("samples") == 2 * N_SAMPLES


def test_a_result_that_does_not_fit_writes_nothing(tmp_path):
    rs = make_runs(reps=1)[0]
    d = fake_result_dict(rs)
    d["samples"]["time_us"][-1] = "soon"  # cannot become BIGINT
    with Store(tmp_path) as store:
        with pytest.raises(ResultError):
            _write_ok(store, rs, d=d)
        for t in ("runs", "flows", "samples", "queue", "rpcs"):
            assert store.count(t) == 0, t


def test_runs_written_together_are_each_stored_whole_and_replace_earlier_attempts(tmp_path):
    from ccbench.store import RunWrite

    runs = make_runs()  # 4 runs
    dicts = {rs.run_id: fake_result_dict(rs) for rs in runs}
    dicts[runs[1].run_id]["queue"] = {}  # a run without queue rows beside runs with them
    with Store(tmp_path) as store:
        store.record_study("fake-study", "src", None)
        # runs[0] failed before and runs[2] finished before: both are replaced
        store.write_run(study="fake-study", runspec=runs[0], backend="fake", status="failed", error="RuntimeError: x")
        _write_ok(store, runs[2])
        store.write_runs(study="fake-study", backend="fake", runs=[
            RunWrite(rs, "ok", RunResult.from_dict(dicts[rs.run_id]), None, 0.5, i) for i, rs in enumerate(runs)])
        assert store.finished_runs() == {rs.run_id for rs in runs}
        assert store.count("runs") == 4 and store.count("flows") == 8
        assert store.count("samples") == 4 * 2 * N_SAMPLES and store.count("queue") == 3 * 10
        per_run = dict(store.con.execute("SELECT run_id, count(*) FROM samples GROUP BY run_id").fetchall())
        assert per_run == {rs.run_id: 2 * N_SAMPLES for rs in runs}
        assert [r.run_index for r in sorted(store.runs(), key=lambda r: r.run_index)] == [0, 1, 2, 3]


def test_runs_written_together_write_nothing_when_one_result_does_not_fit(tmp_path):
    from ccbench.store import RunWrite

    runs = make_runs()
    bad = fake_result_dict(runs[2])
    bad["flows"].append(dict(bad["flows"][0], flow_id=7))  # not a flow of the run
    with Store(tmp_path) as store:
        store.record_study("fake-study", "src", None)
        with pytest.raises(ResultError, match=runs[2].run_id):
            store.write_runs(study="fake-study", backend="fake", runs=[
                RunWrite(rs, "ok", RunResult.from_dict(bad if rs is runs[2] else fake_result_dict(rs)))
                for rs in runs])
        for t in ("runs", "flows", "samples", "queue", "rpcs"):
            assert store.count(t) == 0, t


def test_commits_held_together_store_a_result_that_does_not_fit_as_failed_and_the_rest(tmp_path):
    from ccbench.executor.local import ExecutionSummary, Outcome, _Committer

    runs = make_runs()
    bad = fake_result_dict(runs[1])
    bad["flows"].append(dict(bad["flows"][0], flow_id=7))
    summary = ExecutionSummary(total=len(runs))
    with Store(tmp_path) as store:
        store.record_study("fake-study", "src", None)
        committer = _Committer(store, "fake-study", "fake", {rs.run_id: i for i, rs in enumerate(runs)},
                               summary, Progress())
        with committer.together():
            for rs in runs:
                d = bad if rs is runs[1] else fake_result_dict(rs)
                committer.commit(rs, Outcome(rs.run_id, "ok", RunResult.from_dict(d), None, 0.1))
            assert store.count("runs") == 0  # held until the block ends
        status = {r.run_id: (r.status, r.error) for r in store.runs()}
        assert status[runs[1].run_id][0] == "failed" and "flow_id 7" in status[runs[1].run_id][1]
        assert {rid for rid, (s, _) in status.items() if s == "ok"} == {rs.run_id for rs in runs} - {runs[1].run_id}
        assert (summary.ok, summary.failed) == (3, 1) and store.count("samples") == 3 * 2 * N_SAMPLES


def test_ctrl_c_while_the_tables_are_built_waits_for_the_commit(tmp_path, monkeypatch):
    """A Ctrl-C (or a SIGTERM made one) that comes while a result's tables are
    built, where the first run imports pyarrow, is held until the run is
    written, then delivered: an interrupt inside an import would leave the
    module half-made for the commits after it."""
    import os
    import signal

    import ccbench.store as store_mod

    build = store_mod._result_tables

    def interrupted(runspec, result):
        os.kill(os.getpid(), signal.SIGINT)
        return build(runspec, result)

    monkeypatch.setattr(store_mod, "_result_tables", interrupted)
    rs = make_runs(reps=1)[0]
    with Store(tmp_path) as store:
        with pytest.raises(KeyboardInterrupt):
            _write_ok(store, rs)
        assert store.finished_runs() == {rs.run_id}
        assert store.count("samples") > 0


def test_result_validation_names_the_problem():
    rs = make_runs(reps=1)[0]
    d = fake_result_dict(rs)
    d["samples"]["srtt_us"].pop()
    with pytest.raises(ResultError, match=r"samples: column 'srtt_us' has 1999 values, other columns have 2000"):
        RunResult.from_dict(d)
    d = fake_result_dict(rs)
    del d["flows"][0]["goodput_bps"]
    with pytest.raises(ResultError, match=r"flows\[0\]: missing 'goodput_bps'"):
        RunResult.from_dict(d)
    d = fake_result_dict(rs)
    del d["samples"]["bw_est_bps"]  # nullable: filled with nulls
    assert RunResult.from_dict(d).samples["bw_est_bps"] == [None] * 2 * N_SAMPLES


def test_open_existing_errors(tmp_path):
    with pytest.raises(UsageError, match="no such results directory"):
        Store.open_existing(tmp_path / "nope")
    with pytest.raises(UsageError, match=f"no {DB_FILENAME} in it"):
        Store.open_existing(tmp_path)
    # A study file where its results are meant: said so, not "damaged".
    study = tmp_path / "s.toml"
    study.write_text("[study]\nname = 's'\n")
    with pytest.raises(UsageError, match=r"s\.toml: not a results directory or database \(a study file"):
        Store.open_existing(study)
    other = tmp_path / "notes.txt"
    other.write_text("hello, world\n")
    with pytest.raises(UsageError, match=r"notes\.txt: not a results directory or database$"):
        Store.open_existing(other)


# -- executor ------------------------------------------------------------


class Recorder(Progress):
    def __init__(self):
        self.events = []

    def start(self, total, done, todo):
        self.events.append(("start", total, done, todo))

    def run_finished(self, runspec, outcome):
        self.events.append((runspec.run_id, outcome.status))


@pytest.mark.parametrize("jobs", [1, 2])
def test_execute_then_resume_skips_finished_runs(tmp_path, jobs):
    runs = make_runs()
    log = tmp_path / "calls"
    out = tmp_path / "res"
    rec = Recorder()
    s = execute(FakeStudy(), runs, FakeBackend(log), out, jobs=jobs, progress=rec)
    assert (s.total, s.skipped, s.ok, s.failed, s.interrupted) == (4, 0, 4, 0, False)
    assert sorted(calls(log)) == sorted(r.run_id for r in runs)
    assert rec.events[0] == ("start", 4, 0, 4) and len(rec.events) == 5

    s = execute(FakeStudy(), runs, FakeBackend(log), out, jobs=jobs)
    assert (s.skipped, s.ok, s.failed) == (4, 0, 0)
    assert len(calls(log)) == 4  # nothing ran again
    db = out / DB_FILENAME
    assert _count(db, "SELECT count(*), count(DISTINCT run_id) FROM runs") == [(4, 4)]
    assert _count(db, "SELECT count(*) FROM flows") == [(8,)]
    assert _count(db, "SELECT count(*) FROM samples") == [(4 * 2 * N_SAMPLES,)]
    rows = _count(db, "SELECT run_id, run_index, backend, tool_version, wall_time_s FROM runs ORDER BY run_index")
    assert [r[0] for r in rows] == [r.run_id for r in runs]
    assert all(r[2] == "fake" and r[3] == __version__ and r[4] >= 0 for r in rows)


@pytest.mark.parametrize("jobs", [1, 2])
def test_failing_run_is_recorded_and_retried_next_time(tmp_path, jobs):
    runs = make_runs()
    bad = runs[1].run_id
    log = tmp_path / "calls"
    out = tmp_path / "res"
    s = execute(FakeStudy(), runs, FakeBackend(log, fail={bad}), out, jobs=jobs)
    assert (s.ok, s.failed, s.failed_run_ids) == (3, 1, [bad])
    with Store.open_existing(out) as store:
        failed = [r for r in store.runs() if r.status == "failed"]
        assert [r.run_id for r in failed] == [bad]
        assert failed[0].error.startswith(f"RuntimeError: boom in {bad}")
        assert "Traceback" in failed[0].error
        assert store.count("flows", bad) == 0
        assert bad not in store.finished_runs()

    s = execute(FakeStudy(), runs, FakeBackend(log), out, jobs=jobs)
    assert (s.skipped, s.ok, s.failed) == (3, 1, 0)
    assert calls(log).count(bad) == 2 and len(calls(log)) == 5
    assert _count(out / DB_FILENAME, "SELECT status, error, count(*) FROM runs GROUP BY ALL") == [("ok", None, 4)]


def test_suspect_runs_count_as_finished_and_keep_their_note(tmp_path):
    runs = make_runs(reps=1)
    s = execute(FakeStudy(), runs, FakeBackend(suspect={runs[0].run_id}), tmp_path)
    assert (s.ok, s.suspect) == (1, 1)
    with Store.open_existing(tmp_path) as store:
        assert store.finished_runs() == {r.run_id for r in runs}
        r0 = store.runs(run_ids=[runs[0].run_id])[0]
        assert (r0.status, r0.error) == ("suspect", "goodput above the bottleneck rate")


def test_malformed_result_is_a_failed_run(tmp_path):
    class Broken(FakeBackend):
        def run(self, runspec):
            d = fake_result_dict(runspec)
            d["flows"].append(dict(d["flows"][0], flow_id=7))
            return d  # a plain dict is accepted and validated too

    runs = make_runs(reps=1)
    s = execute(FakeStudy(), runs, Broken(), tmp_path)
    assert s.failed == 2
    with Store.open_existing(tmp_path) as store:
        assert all("flow_id 7 is not a flow of this run" in r.error for r in store.runs())


def test_interruption_keeps_committed_runs_and_resumes(tmp_path):
    runs = make_runs()  # 4 runs
    log = tmp_path / "calls"
    out = tmp_path / "res"
    s = execute(FakeStudy(), runs, FakeBackend(log, interrupt_run=runs[2].run_id), out)
    assert s.interrupted and (s.ok, s.failed) == (2, 0)
    assert calls(log) == [r.run_id for r in runs[:3]]  # run 4 never started
    with Store.open_existing(out) as store:
        assert store.finished_runs() == {runs[0].run_id, runs[1].run_id}
        assert store.count("runs") == 2  # the interrupted run is not recorded as failed

    s = execute(FakeStudy(), runs, FakeBackend(log), out)
    assert not s.interrupted and (s.skipped, s.ok) == (2, 2)
    assert calls(log)[3:] == [runs[2].run_id, runs[3].run_id]  # resumes with run 3
    with Store.open_existing(out) as store:
        assert store.finished_runs() == {r.run_id for r in runs}


def test_interruption_in_a_worker_process_stops_the_pool(tmp_path):
    runs = make_runs(losses=("0%", "1%", "2%"), reps=2)  # 6 runs
    out = tmp_path / "res"
    s = execute(FakeStudy(), runs, FakeBackend(interrupt_run=runs[2].run_id), out, jobs=2)
    assert s.interrupted and s.failed == 0
    with Store.open_existing(out) as store:
        done = store.finished_runs()
    assert runs[2].run_id not in done and {runs[0].run_id, runs[1].run_id} <= done
    assert len(done) <= 4  # at most the runs started before the interruption

    s = execute(FakeStudy(), runs, FakeBackend(), out, jobs=2)
    assert not s.interrupted and s.skipped == len(done) and s.ok == 6 - len(done)


def test_a_crashed_worker_fails_its_run_and_the_study_goes_on(tmp_path):
    runs = make_runs(losses=("0%", "1%", "2%"), reps=1)
    s = execute(FakeStudy(), runs, FakeBackend(crash_run=runs[0].run_id), tmp_path, jobs=2)
    assert not s.interrupted
    assert runs[0].run_id in s.failed_run_ids
    assert s.ok + s.failed == 3 and s.ok >= 1  # the other in-flight run may be failed with it
    with Store.open_existing(tmp_path) as store:
        err = store.runs(run_ids=[runs[0].run_id])[0].error
    assert "worker process died" in err


def test_a_worker_dead_half_way_through_a_result_fails_its_run_and_the_study_goes_on(tmp_path):
    # The pool's manager thread waits for the rest of the message for ever;
    # without the executor's watch (local.STUCK_S) this study never ends.
    runs = make_runs(losses=("0%", "1%", "2%"), reps=1)
    t0 = time.monotonic()
    s = execute(FakeStudy(), runs, FakeBackend(half_result_run=runs[0].run_id), tmp_path, jobs=2)
    assert time.monotonic() - t0 < 60
    assert not s.interrupted
    assert runs[0].run_id in s.failed_run_ids
    assert s.ok + s.failed == 3 and s.ok >= 1
    with Store.open_existing(tmp_path) as store:
        err = store.runs(run_ids=[runs[0].run_id])[0].error
    assert "worker process died" in err


def test_parallel_and_serial_store_the_same_rows(tmp_path):
    runs = make_runs()
    execute(FakeStudy(), runs, FakeBackend(), tmp_path / "a", jobs=1)
    execute(FakeStudy(), runs, FakeBackend(), tmp_path / "b", jobs=3)
    q = "SELECT * EXCLUDE (wall_time_s, finished_at) FROM runs ORDER BY run_id"
    assert _count(tmp_path / "a" / DB_FILENAME, q) == _count(tmp_path / "b" / DB_FILENAME, q)
    q = "SELECT * FROM samples ORDER BY run_id, flow_id, time_us"
    assert _count(tmp_path / "a" / DB_FILENAME, q) == _count(tmp_path / "b" / DB_FILENAME, q)


def test_results_of_another_backend_are_not_mixed_in(tmp_path):
    runs = make_runs(reps=1)
    execute(FakeStudy(), runs, FakeBackend(), tmp_path)

    class Other(FakeBackend):
        name = "other"

    with pytest.raises(UsageError, match="already holds fake results of study 'fake-study'"):
        execute(FakeStudy(), runs, Other(), tmp_path)
    assert _count(tmp_path / DB_FILENAME, "SELECT DISTINCT backend FROM runs") == [("fake",)]


def test_params_json_is_queryable(tmp_path):
    execute(FakeStudy(), make_runs(), FakeBackend(), tmp_path)
    rows = _count(tmp_path / DB_FILENAME,
                  "SELECT params->>'$.\"topology.bottleneck.loss\"' AS loss, count(*) FROM runs GROUP BY 1 ORDER BY 1")
    assert rows == [("0%", 2), ("1%", 2)]
    cfg = _count(tmp_path / DB_FILENAME, "SELECT config FROM runs LIMIT 1")[0][0]
    assert json.loads(cfg)["duration_ns"] == 1_000_000_000


# -- readers after a failed or killed writer, foreign files, snapshots, export ----


def _gen(results) -> int:
    return int.from_bytes((results / (DB_FILENAME + ".gen")).read_bytes(), "little")


def test_a_write_that_fails_leaves_the_counter_even_and_readers_do_not_wait(tmp_path):
    """A failed commit (a full disk) used to leave the write counter odd, so
    that every reader waited 30 s for a write that was over."""
    rs = make_runs(reps=1)[0]
    with Store(tmp_path / "res") as store:
        _write_ok(store, rs)
        with pytest.raises(RuntimeError):
            with store._writing():
                raise RuntimeError("disk full")
        assert _gen(tmp_path / "res") % 2 == 0
        started = time.monotonic()
        with Store.snapshot(tmp_path / "res") as snap:
            assert snap.finished_runs() == {rs.run_id}
        assert time.monotonic() - started < 5


def test_a_killed_writers_odd_counter_does_not_hold_up_readers(tmp_path):
    """A writer killed mid-write leaves the counter odd; no process holds the
    store's lock then, so readers copy it at once."""
    rs = make_runs(reps=1)[0]
    with Store(tmp_path / "res") as store:
        _write_ok(store, rs)
    gen = tmp_path / "res" / (DB_FILENAME + ".gen")
    gen.write_bytes((_gen(tmp_path / "res") + 1).to_bytes(8, "little"))
    started = time.monotonic()
    with Store.snapshot(tmp_path / "res") as snap:
        assert snap.finished_runs() == {rs.run_id}
    assert time.monotonic() - started < 5
    with Store(tmp_path / "res"):  # the next writer makes it even again
        assert _gen(tmp_path / "res") % 2 == 0


@pytest.mark.parametrize("their_table", ["runs", "stuff"])
def test_a_duckdb_file_that_is_not_ccbenchs_is_left_alone(tmp_path, their_table):
    d = tmp_path / "theirs"
    d.mkdir()
    con = duckdb.connect(str(d / DB_FILENAME))
    con.execute(f"CREATE TABLE {their_table} (a INTEGER)")
    con.execute(f"INSERT INTO {their_table} VALUES (1)")
    con.close()
    before = (d / DB_FILENAME).read_bytes()
    with pytest.raises(UsageError) as e:
        Store(d)
    msg = str(e.value)
    assert msg.startswith(f"{d / DB_FILENAME}: a DuckDB database that is not a ccbench results database "
                          f"(its tables: {their_table})") and "--out" in msg, msg
    assert (d / DB_FILENAME).read_bytes() == before and sorted(p.name for p in d.iterdir()) == [DB_FILENAME]
    Store(tmp_path / "new").close()  # a new store (an empty file at first) is made as ever


def test_a_snapshot_names_the_users_results_not_its_copy(tmp_path):
    rs = make_runs(reps=1)[0]
    with Store(tmp_path / "res") as store:
        _write_ok(store, rs)
    with Store.snapshot(tmp_path / "res") as snap:
        assert snap.source_dir == tmp_path / "res" and snap.source_db == tmp_path / "res" / DB_FILENAME
        with pytest.raises(UsageError, match=f"^no run 'zzzz' in {tmp_path / 'res'}$"):
            snap.resolve_run("zzzz")
    # a file that is not a store: tests/test_api.py, test_errors_name_the_users_results_not_the_snapshot


def test_a_snapshot_that_cannot_be_copied_is_one_line_and_leaves_no_copy(tmp_path, monkeypatch):
    import errno
    import shutil
    import tempfile

    rs = make_runs(reps=1)[0]
    with Store(tmp_path / "res") as store:
        _write_ok(store, rs)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()

    def full(src, dst):
        open(dst, "wb").close()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "copyfile", full)
    with pytest.raises(UsageError) as e:
        Store.snapshot(tmp_path / "res")
    assert str(e.value) == (f"{tmp_path / 'res' / DB_FILENAME}: cannot copy the results to read them "
                            f"(into {tmp_path / 'tmp'}: No space left on device); free space there or set "
                            f"TMPDIR to a directory with room")
    assert list((tmp_path / "tmp").iterdir()) == []


def _tree(d) -> dict:
    return {str(p.relative_to(d)): (p.read_bytes() if p.is_file() else None) for p in sorted(d.rglob("*"))}


def test_an_export_is_all_or_nothing(tmp_path, monkeypatch):
    import errno

    rs = make_runs(reps=1)[0]
    with Store(tmp_path / "res") as store:
        _write_ok(store, rs)
    with Store.snapshot(tmp_path / "res") as snap:
        # a directory where a file goes: refused before anything is written
        (tmp_path / "a" / "flows.csv").mkdir(parents=True)
        with pytest.raises(UsageError, match=r"a/flows\.csv: is a directory, where the export writes a file"):
            snap.export(tmp_path / "a", "csv")
        assert _tree(tmp_path / "a") == {"flows.csv": None}
        with pytest.raises(UsageError, match=r"no directory .*/missing to create it in"):
            snap.export(tmp_path / "missing" / "x", "csv")
        assert not (tmp_path / "missing").exists()

        # a full disk half way: an earlier export stays as it was, a new directory goes
        snap.export(tmp_path / "b", "parquet")
        earlier = _tree(tmp_path / "b")
        real = Store._export_table

        def samples_fail(self, table, path, fmt):
            real(self, table, path, fmt)
            if table == "samples":
                raise OSError(errno.EFBIG, "File too large")

        monkeypatch.setattr(Store, "_export_table", samples_fail)
        for out in (tmp_path / "b", tmp_path / "c"):
            with pytest.raises(UsageError) as e:
                snap.export(out, "parquet")
            assert str(e.value) == (f"{out / 'samples.parquet'}: cannot write the export (File too large); "
                                    f"nothing of this export was kept")
        assert _tree(tmp_path / "b") == earlier and not (tmp_path / "c").exists()
