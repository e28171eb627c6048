"""The ccbench command line, on fake results (no Rust core needed)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from ccbench import backends
from ccbench.cli import main
from ccbench.spec import load_study
from ccbench.store import Store

from fakes import FakeBackend, N_SAMPLES, calls

REPO = Path(__file__).resolve().parents[1]

STUDY = """\
[study]
name = "cli-test"
repetitions = 2
duration = "1s"

[topology]
senders = 2

[topology.bottleneck]
rate = "100Mbit"
delay = "10ms"

[[flows]]
cca = "cubic"
group = "cubic bulk"

[[flows]]
cca = "bbr"
sender = 1
group = "bbr bulk"

[sweep]
"topology.bottleneck.loss" = ["0%", "1%"]
"""


@pytest.fixture
def study_file(tmp_path, monkeypatch):
    """A 2 × 2-run study in an empty working directory."""
    monkeypatch.chdir(tmp_path)
    p = tmp_path / "study.toml"
    p.write_text(STUDY)
    return p


@pytest.fixture
def fake_sim(tmp_path):
    """The 'sim' backend replaced by a fake one for the duration of a test."""
    backend = FakeBackend(tmp_path / "calls")
    with backends.registered("sim", backend):
        yield backend


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ccbench: error: "), err
    return lines[0]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    return subprocess.run([sys.executable, "-m", "ccbench", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def filled(study_file, fake_sim, capsys):
    """results/cli-test filled by `ccbench run` with the fake backend."""
    assert main(["run", str(study_file)]) == 0
    capsys.readouterr()
    return study_file.parent / "results" / "cli-test"


# -- run ------------------------------------------------------------------


def test_run_of_a_bad_study_is_one_line_and_creates_nothing(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(STUDY.replace('rate = "100Mbit"', 'rate = "100MB"'))
    r = cli("run", "bad.toml", cwd=tmp_path)
    assert r.returncode == 2
    line = one_line_error(r.stderr)
    assert "bad.toml" in line and "topology.bottleneck.rate" in line and "100MB" in line
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert not (tmp_path / "results").exists()

    r = cli("run", "missing.toml", cwd=tmp_path)
    assert r.returncode == 2 and "missing.toml" in one_line_error(r.stderr)
    assert not (tmp_path / "results").exists()


def test_run_with_an_unavailable_backend_creates_nothing(study_file, capsys):
    # linux is available when run as root with the core built: make it unavailable here.
    with backends.registered("linux", backends._Unavailable("linux", "not here")):
        assert main(["run", str(study_file), "--backend", "linux"]) == 2
    assert "backend 'linux' is not available" in one_line_error(capsys.readouterr().err)
    assert main(["run", str(study_file), "--backend", "nope"]) == 2
    assert "nope" in one_line_error(capsys.readouterr().err)
    assert not (study_file.parent / "results").exists()


def test_usage_mistakes_are_one_line(study_file, capsys):
    for argv in (["run", str(study_file), "--jobs", "-1"], ["run", str(study_file), "--jobs", "two"],
                 ["run", str(study_file), "--jobs", "99999999999"],
                 ["run"], ["frobnicate"], [], ["ls", "nowhere"], ["summary", "nowhere"],
                 ["show", "abc"], ["export", "nowhere", "--format", "xlsx"]):
        assert main(argv) == 2, argv
        one_line_error(capsys.readouterr().err)
    assert not (study_file.parent / "results").exists()


def test_run_writes_results_prints_summary_and_resumes(study_file, fake_sim, capsys):
    study = load_study(study_file)
    run_ids = [r.run_id for r in study.runs()]
    assert main(["run", str(study_file)]) == 0
    out = capsys.readouterr().out
    res = Path("results") / "cli-test"
    assert f"results: {res}" in out
    assert "cli-test: median over repetitions" in out and "cubic bulk" in out and "bbr bulk" in out
    assert "topology.bottleneck.loss" in out and "1%" in out
    assert "[4/4]" in out  # plain progress lines when stdout is not a terminal
    # each ends with the run's wall time, in ms under a second (a fast run is not "0.0s")
    walls = re.findall(r"^\[\d/4\] .* ok (\S+ \S+)$", out, re.M)
    assert len(walls) == 4 and all(re.fullmatch(r"\d+\.\d\d ms|\d+\.\d{3} s", w) for w in walls), walls
    assert sorted(calls(fake_sim.log)) == sorted(run_ids)
    with Store.open_existing(res) as store:
        assert store.finished_runs() == set(run_ids)
        st = store.studies()[0]
        assert st["study"] == "cli-test" and st["source_text"] == STUDY
        assert {r.backend for r in store.runs()} == {"fake"}

    # again: everything is finished, nothing runs, the summary is printed again
    assert main(["run", str(study_file), "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert "4 of 4 runs already finished" in out and "cubic bulk" in out
    assert len(calls(fake_sim.log)) == 4


def test_run_in_parallel(study_file, fake_sim, capsys):
    assert main(["run", str(study_file), "--jobs", "3", "--out", "par"]) == 0
    with Store.open_existing("par") as store:
        assert len(store.finished_runs()) == 4
        assert store.count("samples") == 4 * 2 * N_SAMPLES


def test_failed_runs_exit_1_and_are_retried(study_file, tmp_path, capsys):
    bad = load_study(study_file).runs()[1].run_id
    with backends.registered("sim", FakeBackend(tmp_path / "calls", fail={bad})):
        assert main(["run", str(study_file)]) == 1
    cap = capsys.readouterr()
    assert "1 of 4 runs failed" in cap.err and f"boom in {bad}" in cap.out
    assert main(["ls", "results/cli-test"]) == 0
    out = capsys.readouterr().out
    assert "failed" in out and f"RuntimeError: boom in {bad}" in out
    with backends.registered("sim", FakeBackend(tmp_path / "calls")):
        assert main(["run", str(study_file)]) == 0
    assert calls(tmp_path / "calls").count(bad) == 2 and len(calls(tmp_path / "calls")) == 5


def test_retry_suspect_runs_suspect_runs_again(study_file, tmp_path, capsys):
    """A suspect run is finished: a resumed study skips it, unless
    --retry-suspect sets it aside and runs it again (also one left suspect
    by an earlier invocation); a degenerate run is not run again."""
    runs = [r.run_id for r in load_study(study_file).runs()]
    stalled, empty = runs[1], runs[2]
    log = tmp_path / "calls"
    with backends.registered("sim", FakeBackend(log, suspect={stalled}, degenerate={empty})):
        assert main(["run", str(study_file)]) == 0
        assert main(["run", str(study_file)]) == 0  # resumed: nothing runs again
    assert sorted(calls(log)) == sorted(runs)
    assert "1 of 4 runs are suspect (see `ccbench ls results/cli-test`); `--retry-suspect N` runs them again" \
        in capsys.readouterr().err
    with Store.open_existing("results/cli-test") as store:
        status = {r.run_id: r.status for r in store.runs()}
    assert status[stalled] == status[empty] == "suspect"
    capsys.readouterr()

    # still suspect at the first retry, ok at the second
    with backends.registered("sim", FakeBackend(log, suspect={stalled}, degenerate={empty})):
        assert main(["run", str(study_file), "--retry-suspect", "1", "--retry-pause", "10ms"]) == 0
    err = capsys.readouterr().err
    assert "1 runs are suspect; running them again (retry 1 of 1)" in err
    assert "waiting 0.01 s first" in err
    assert calls(log)[4:] == [stalled]
    with backends.registered("sim", FakeBackend(log, degenerate={empty})):
        assert main(["run", str(study_file), "--retry-suspect", "3", "--retry-pause", "0s"]) == 0
    err = capsys.readouterr().err
    assert "retry 1 of 3" in err and "retry 2" not in err and "waiting" not in err
    assert calls(log)[5:] == [stalled]
    assert "runs are suspect (see" not in err  # the degenerate one is not worth running again
    with Store.open_existing("results/cli-test") as store:
        rows = {r.run_id: r for r in store.runs()}
        assert rows[stalled].status == "ok" and rows[stalled].error is None
        assert rows[empty].status == "suspect" and rows[empty].error.startswith("degenerate run: ")
        assert store.count("flows") == 4 * 2  # the rerun replaced the stalled run's rows

    assert main(["run", str(study_file), "--retry-suspect", "-1"]) == 2
    assert "--retry-suspect" in one_line_error(capsys.readouterr().err)
    for bad, why in (("-1s", "must not be negative"), ("10min", "allowed: a time from 0s to 300s"),
                     ("5 parsecs", "unknown time unit")):
        assert main(["run", str(study_file), "--retry-suspect", "1", f"--retry-pause={bad}"]) == 2
        err = one_line_error(capsys.readouterr().err)
        assert "--retry-pause" in err and why in err and repr(bad) in err, err


def test_interrupted_run_exits_130_and_says_how_to_resume(study_file, tmp_path, capsys):
    runs = load_study(study_file).runs()
    with backends.registered("sim", FakeBackend(tmp_path / "calls", interrupt_run=runs[2].run_id)):
        assert main(["run", str(study_file)]) == 130
    err = capsys.readouterr().err
    assert "2 of 4 runs are finished" in err
    assert f"resume with: ccbench run {study_file} --out results/cli-test" in err
    with backends.registered("sim", FakeBackend(tmp_path / "calls")):
        assert main(["run", str(study_file)]) == 0
    assert calls(tmp_path / "calls")[3:] == [runs[2].run_id, runs[3].run_id]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_on_a_real_process(study_file, tmp_path, jobs):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) during `ccbench run`:
    exit 130 without tracebacks, what finished is kept, a re-run resumes."""
    import signal

    script = tmp_path / "slow.py"
    script.write_text(
        "import sys, time\n"
        "sys.path.insert(0, %r)\n"
        "from ccbench import backends\n"
        "from ccbench.cli import main\n"
        "from fakes import FakeBackend\n"
        "class Slow(FakeBackend):\n"
        "    def run(self, rs):\n"
        "        r = super().run(rs)\n"
        "        time.sleep(0.4)\n"
        "        return r\n"
        "if __name__ == '__main__':\n"
        "    backends.register('sim', Slow(%r), replace=True)\n"
        "    sys.exit(main(sys.argv[1:]))\n" % (str(Path(__file__).parent), str(tmp_path / "calls"))
    )
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    p = subprocess.Popen([sys.executable, str(script), "run", str(study_file), "--jobs", jobs], cwd=tmp_path,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    deadline = time.time() + 60
    while len(calls(tmp_path / "calls")) < int(jobs) + 1 and time.time() < deadline:  # ≥ 1 run finished
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "resume with: ccbench run" in err and "Traceback" not in err
    with Store.open_existing(tmp_path / "results" / "cli-test") as store:
        done = store.finished_runs()
        assert 1 <= len(done) < 4
        rows = store.con.execute("SELECT run_id, status, error FROM runs").fetchall()
        assert store.count("runs") == len(done), rows  # the interrupted run is not recorded
    n = len(calls(tmp_path / "calls"))
    r = subprocess.run([sys.executable, str(script), "run", str(study_file)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert len(calls(tmp_path / "calls")) - n == 4 - len(done)


LONG_SIM = """
[study]
name = "long-sim"
duration = "60s"
repetitions = 2
[topology.bottleneck]
rate = "1Gbit"
delay = "10ms"
[[flows]]
cca = "cubic"
count = 10
"""


def test_ctrl_c_stops_the_simulators_run_and_joins_its_thread(tmp_path):
    """The simulator runs in a thread that Ctrl-C does not reach: on an
    interruption its stop flag ends it at its next sample and the thread is
    joined, never left inside the core (which, returning while Python shuts
    down, aborted the process: SIGABRT instead of exit status 130)."""
    import signal
    import threading

    from ccbench.backends.sim import SimBackend
    from ccbench.executor import signals
    from ccbench.spec import parse_study

    (rs, _) = parse_study(LONG_SIM, filename="long.toml").runs()
    backend = SimBackend()
    flag = backend.stop_flag()
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        signals.call_interruptibly(backend.run, rs, flag, stop=flag.set)
    assert time.monotonic() - t0 < 5  # the 60 s run takes ~20 s of CPU
    assert not [t for t in threading.enumerate() if t.name == "ccbench-run" and t.is_alive()]
    # a flag that is set stops the core with "interrupted"; a fresh flag does not
    with pytest.raises(ValueError, match="^interrupted$"):
        backend.run(rs, flag)
    short = parse_study(LONG_SIM.replace('"60s"', '"200ms"'), filename="long.toml").runs()[0]
    assert backend.run(short, backend.stop_flag()).flows


@pytest.mark.parametrize("sig, status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_during_a_real_simulation_exits_with_its_status(tmp_path, sig, status):
    import signal

    study = tmp_path / "long.toml"
    study.write_text(LONG_SIM)
    p = subprocess.Popen([sys.executable, "-m", "ccbench", "run", str(study), "--out", str(tmp_path / "r")],
                         env=dict(os.environ, PYTHONPATH=str(REPO / "python")), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 60
    while not (tmp_path / "r").exists() and time.time() < deadline:  # the study has started
        time.sleep(0.05)
    time.sleep(1.0)
    t0 = time.monotonic()
    os.kill(p.pid, getattr(signal, sig))
    _, err = p.communicate(timeout=60)
    assert p.returncode == status, err
    assert time.monotonic() - t0 < 10 and "0 of 2 runs are finished" in err and "Traceback" not in err


def test_ctrl_c_while_the_cli_loads_ends_quietly(tmp_path):
    """The entry point (``python -m ccbench``, the ``ccbench`` command)
    imports the CLI itself: a Ctrl-C during that import (here raised by an
    import hook, as Python raises it wherever the signal lands) exits 130
    with the CLI's one line, not a traceback."""
    code = textwrap.dedent("""
        import runpy, sys
        class CtrlC:
            def find_spec(self, name, path=None, target=None):
                if name == "ccbench.cli":
                    raise KeyboardInterrupt
        sys.meta_path.insert(0, CtrlC())
        runpy.run_module("ccbench", run_name="__main__")
    """)
    p = subprocess.run([sys.executable, "-c", code, "ls", str(tmp_path)], env=dict(os.environ, PYTHONPATH=str(REPO / "python")),
                       capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stderr) == (130, "ccbench: interrupted\n")


# -- ls / show / summary / export ------------------------------------------


def test_ls(filled, capsys):
    assert main(["ls", str(filled)]) == 0
    out = capsys.readouterr().out
    with Store.open_existing(filled) as store:
        runs = store.runs()
    assert "cli-test: 4 runs (4 ok, 0 suspect, 0 failed)" in out
    for r in runs:
        assert r.run_id in out
    assert "topology.bottleneck.loss=0%" in out and "topology.bottleneck.loss=1%" in out
    # without an argument: the results directories under ./results
    assert main(["ls"]) == 0
    out = capsys.readouterr().out
    assert "results/cli-test" in out and "cli-test" in out


def test_show_table_csv_json(filled, capsys):
    with Store.open_existing(filled) as store:
        run = store.runs()[0]
    prefix = run.run_id[:6]
    assert main(["show", prefix, "--results", str(filled)]) == 0
    out = capsys.readouterr().out
    assert run.run_id in out and "cubic bulk" in out and "bbr bulk" in out
    assert re.search(rf"^results +{re.escape(str(filled))} *$", out, re.M), out  # the user's, not a snapshot's
    assert "topology.bottleneck.loss" in out and "8.00 Mbit/s" in out  # flow 0 of rep 0

    # without --results: found under ./results
    assert main(["show", prefix, "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["flow_id"] for r in rows] == ["0", "1"]
    assert rows[1]["group_name"] == "bbr bulk" and float(rows[1]["goodput_bps"]) == 16e6
    assert {r["run_id"] for r in rows} == {run.run_id}

    assert main(["show", run.run_id, "--results", str(filled), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["run"]["run_id"] == run.run_id and doc["run"]["params"] == run.params
    assert doc["run"]["config"]["duration_ns"] == 1_000_000_000
    assert [f["cca"] for f in doc["flows"]] == ["cubic", "bbr"]
    assert doc["rows"] == {"samples": 2 * N_SAMPLES, "queue": 10, "rpcs": 3}


def test_show_unknown_or_ambiguous_run(filled, capsys):
    assert main(["show", "zzzz", "--results", str(filled)]) == 2
    assert one_line_error(capsys.readouterr().err) == f"ccbench: error: no run 'zzzz' in {filled}"
    with Store.open_existing(filled) as store:
        ids = [r.run_id for r in store.runs()]
    # a prefix shared by several runs (the empty-ish one: first hex digit if shared, else "")
    shared = next((i[:1] for i in ids if sum(j.startswith(i[:1]) for j in ids) > 1), None)
    if shared:
        assert main(["show", shared, "--results", str(filled)]) == 2
        assert "ambiguous" in one_line_error(capsys.readouterr().err)


def test_summary(filled, capsys):
    assert main(["summary", str(filled)]) == 0
    out = capsys.readouterr().out
    assert "cli-test: median over repetitions" in out
    assert "cubic bulk" in out and "bbr bulk" in out
    # fake goodput: cubic 8 and 9 Mbit/s over the two reps → median 8.5, spread 8–9
    assert "Mbit/s" in out and "8.50" in out and "8.00–9.00" in out and "16.0–17.0" in out
    assert "0.907" in out  # JFI median of 0.9 and 0.9135


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_export(filled, tmp_path, capsys, fmt):
    out_dir = tmp_path / f"exp-{fmt}"
    assert main(["export", str(filled), "--format", fmt, "--out", str(out_dir)]) == 0
    printed = capsys.readouterr().out
    expect = {"studies": 1, "runs": 4, "flows": 8, "samples": 4 * 2 * N_SAMPLES, "queue": 40, "rpcs": 12}
    for table, n in expect.items():
        path = out_dir / f"{table}.{fmt}"
        assert str(path) in printed
        t = pq.read_table(path) if fmt == "parquet" else pcsv.read_csv(path)
        assert t.num_rows == n, table
    runs = pq.read_table(out_dir / "runs.parquet") if fmt == "parquet" else pcsv.read_csv(out_dir / "runs.csv")
    assert set(runs.column("status").to_pylist()) == {"ok"}
    # default output directory: RESULTS/export
    assert main(["export", str(filled), "--format", fmt]) == 0
    assert (filled / "export" / f"samples.{fmt}").is_file()


def test_show_names_the_directory_given_and_refuses_two_results(filled, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["show", str(empty)]) == 2
    assert one_line_error(capsys.readouterr().err) == f"ccbench: error: {empty}: not a results directory (no ccbench.duckdb in it)"
    # a results directory and --results: which one was meant is not clear
    assert main(["show", str(filled), "--results", str(empty)]) == 2
    assert "--results" in one_line_error(capsys.readouterr().err)


def test_export_refuses_a_directory_in_the_way_and_leaves_nothing(filled, tmp_path, capsys):
    out = tmp_path / "exp"
    (out / "flows.csv").mkdir(parents=True)
    assert main(["export", str(filled), "--format", "csv", "--out", str(out)]) == 2
    assert f"{out / 'flows.csv'}: is a directory" in one_line_error(capsys.readouterr().err)
    assert sorted(p.name for p in out.iterdir()) == ["flows.csv"] and not any((out / "flows.csv").iterdir())


def test_report_and_plot_leave_nothing_behind_and_plot_keeps_to_its_format(filled, tmp_path, capsys):
    tmp_path = tmp_path / "figs"  # beside the study's own files
    tmp_path.mkdir()
    (tmp_path / "taken").mkdir()
    assert main(["report", str(filled), "--out", str(tmp_path / "taken")]) == 2
    assert f"{tmp_path / 'taken'}: is a directory" in one_line_error(capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]

    # the format follows the file's suffix; a suffix of another format is refused
    plot = ["plot", str(filled), "--x", "loss"]
    assert main([*plot, "--out", str(tmp_path / "q.svg")]) == 0
    assert (tmp_path / "q.svg").read_text().lstrip().startswith("<?xml")
    assert main([*plot, "--out", str(tmp_path / "q.pdf")]) == 0
    assert (tmp_path / "q.pdf").read_bytes().startswith(b"%PDF")
    capsys.readouterr()
    assert main([*plot, "--format", "svg", "--out", str(tmp_path / "q2.png")]) == 2
    assert "q2.png: a .png file, but the format asked for is svg" in one_line_error(capsys.readouterr().err)
    # a missing directory is refused, as report and export refuse it
    assert main([*plot, "--out", str(tmp_path / "nonexist" / "x.png")]) == 2
    assert f"no directory {tmp_path / 'nonexist'}" in one_line_error(capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.pdf", "q.svg", "taken"]


def test_run_refuses_a_missing_inventory_whatever_the_backend(study_file, fake_sim, capsys):
    assert main(["run", str(study_file), "--inventory", "missing.toml"]) == 2
    assert "--inventory missing.toml: no such file" in one_line_error(capsys.readouterr().err)
    assert main(["run", str(study_file), "--inventory", "/dev/null"]) == 2
    assert "--inventory /dev/null: not a regular file" in one_line_error(capsys.readouterr().err)
    assert not (study_file.parent / "results").exists()


def test_run_refuses_an_inventory_for_another_backend(study_file, fake_sim, capsys, tmp_path):
    """An inventory means the lab: forgetting --backend hosts ran the study on
    the simulator (or linux) without a word."""
    inv = tmp_path / "lab.toml"
    inv.write_text("[hosts]\n")
    assert main(["run", str(study_file), "--inventory", str(inv), "--out", str(tmp_path / "r")]) == 2
    assert ("--inventory is for the hosts backend (--backend hosts); this study runs on 'sim'"
            in one_line_error(capsys.readouterr().err))
    assert not (tmp_path / "r").exists()
    # ... and hosts runs do not go to a cluster, which ran two at once on the same machines
    argv = ["run", str(study_file), "--backend", "hosts", "--inventory", str(inv), "--cluster", "local:2"]
    assert main([*argv, "--out", str(tmp_path / "r")]) == 2
    assert "--cluster: hosts runs go one at a time on the inventory's machines" in one_line_error(
        capsys.readouterr().err)
    assert not (tmp_path / "r").exists()


def test_a_local_cluster_has_a_bounded_number_of_workers(tmp_path, monkeypatch):
    """local:99999999999 made Dask build workers until memory ran out."""
    monkeypatch.setenv("CCBENCH_CLUSTER_CONFIG", str(tmp_path / "none.toml"))  # no user settings
    from ccbench.errors import UsageError
    from ccbench.executor.cluster_config import max_local_workers, resolve

    most = max_local_workers()
    assert most == max(32, 4 * (os.cpu_count() or 1))
    assert resolve(f"local:{most}").workers == most
    for spec in ("local:99999999999", f"local:{most + 1}", "local:0", "local:\u00b2"):
        with pytest.raises(UsageError, match=rf"local:N needs a number of workers from 1 to {most} "):
            resolve(spec)
    with pytest.raises(UsageError, match=rf"workers: got 99999999999; expected a number of local worker processes "
                                         rf"from 1 to {most}"):
        resolve("local", {"workers": 99999999999})


def test_doctor(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "sim" in out and "linux" in out
    if "for the linux backend" in out:
        assert "ACK watch for BPF runs" in out  # tcp_watch.check()
