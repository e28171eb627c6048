"""Issue 12, hardening (second part): damaged stores, full disks, odd paths and
names. Each test failed before its fix."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ccbench.cli import main
from ccbench.errors import StudyError, UsageError
from ccbench.spec import parse_study
from ccbench.store import DB_FILENAME, Store

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = (REPO / "studies" / "quickstart.toml").read_text(encoding="utf-8")


def study(duration: str = "2s", repetitions: int = 1, interval: str = "100ms", name: str = "quickstart") -> str:
    text = (QUICKSTART.replace('duration = "20s"', f'duration = "{duration}"')
            .replace('start = "5s"', 'start = "1s"')
            .replace("repetitions = 2 ", f"repetitions = {repetitions} ")
            .replace('sample_interval = "100ms"', f'sample_interval = "{interval}"')
            .replace('name = "quickstart"', f'name = "{name}"'))
    assert text != QUICKSTART
    return text


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ccbench: error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(scope="module")
def intact(tmp_path_factory) -> Path:
    """A results directory of three finished runs, and its study file."""
    d = tmp_path_factory.mktemp("intact")
    (d / "s.toml").write_text(study())
    cwd = os.getcwd()
    os.chdir(d)
    try:
        assert main(["run", "s.toml", "--out", "r"]) == 0
    finally:
        os.chdir(cwd)
    return d


def bad_checksums(data: bytes) -> bytes:
    """Every block's checksum wrong (a block is 256 KiB after the three 4 KiB
    headers, its checksum its first 8 bytes): DuckDB's message names no file."""
    out = bytearray(data)
    for start in range(3 * 4096, len(out), 256 * 1024):
        out[start:start + 8] = bytes(b ^ 0xFF for b in out[start:start + 8])
    return bytes(out)


def damaged_copies(intact: Path, dest: Path) -> dict[str, Path]:
    data = (intact / "r" / DB_FILENAME).read_bytes()
    half = len(data) // 2
    out = {}
    for kind, damaged in (("truncated", data[:half]),
                          ("flipped", data[:half] + bytes(b ^ 0xFF for b in data[half:])),
                          ("checksums", bad_checksums(data))):
        d = dest / kind
        d.mkdir()
        (d / DB_FILENAME).write_bytes(damaged)
        out[kind] = d
    return out


# ------------------------------------------------------------ damaged stores


def test_every_command_on_a_damaged_store_says_what_and_what_to_do(intact, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    shutil.copy(intact / "s.toml", tmp_path / "s.toml")
    for kind, d in damaged_copies(intact, tmp_path).items():
        for args in (["ls", str(d)], ["summary", str(d)], ["show", str(d)], ["report", str(d)],
                     ["export", str(d), "--format", "csv", "--out", str(tmp_path / f"x-{kind}")],
                     ["run", "s.toml", "--out", str(d)]):
            assert main(args) == 2, (kind, args)
            msg = one_line(capsys.readouterr().err)
            assert f"{d / DB_FILENAME}: the results database is damaged" in msg, (kind, args, msg)
            assert f"ccbench repair {d} --out NEW_DIR" in msg, msg
            assert "ccbench-snapshot" not in msg, msg  # the user's file, not a private copy


def test_repair_copies_the_runs_that_read_back(intact, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["repair", str(intact / "r"), "--out", "new"]) == 0
    assert capsys.readouterr().out.strip() == f"recovered 3 of 3 runs from {intact / 'r' / DB_FILENAME} into new"
    with Store.open_existing(intact / "r") as a, Store.open_existing("new") as b:
        assert a.finished_runs() == b.finished_runs() and len(b.finished_runs()) == 3
        for t in ("runs", "flows", "samples", "queue", "studies"):
            assert a.count(t) == b.count(t), t
    assert main(["summary", "new"]) == 0
    capsys.readouterr()
    assert main(["repair", str(intact / "r"), "--out", "new"]) == 2  # never into a store
    assert "already holds results" in one_line(capsys.readouterr().err)

    truncated = damaged_copies(intact, tmp_path)["truncated"]
    assert main(["repair", str(truncated), "--out", "none"]) == 2
    assert "nothing can be recovered" in one_line(capsys.readouterr().err)
    assert not (tmp_path / "none").exists()


# ------------------------------------------------------------ a full disk


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mount"), reason="mounting a tmpfs needs root")
def test_a_full_disk_keeps_the_finished_runs_and_says_how_to_resume(tmp_path):
    (tmp_path / "s.toml").write_text(study(duration="8s", repetitions=5, interval="10ms"))
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=700k", "tmpfs", str(disk)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        r = subprocess.run([sys.executable, "-m", "ccbench", "run", "s.toml", "--out", str(disk / "r")],
                           cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO / "python")),
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, r.stderr
        msg = one_line(r.stderr)
        assert "no space left on the disk" in msg and "every run that finished before is committed and kept" in msg
        assert "run the same command again to resume" in msg and "rollback" not in msg, msg
        with Store.open_existing(disk / "r") as s:
            done = s.finished_runs()
            assert 1 <= len(done) < 15
            for run_id in done:  # every finished run reads back whole
                assert s.count("samples", run_id) > 0 and s.count("flows", run_id) == 2
    finally:
        subprocess.run(["umount", str(disk)], check=True)


# ------------------------------------------------------------ odd paths and names


def test_a_question_mark_in_the_path_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text(study())
    assert main(["run", "s.toml", "--out", "odd?x=1#y"]) == 2
    assert "cannot have '?' in its path" in one_line(capsys.readouterr().err)
    (tmp_path / "n.toml").write_text(study(name="a?b"))
    assert main(["run", "n.toml"]) == 2
    assert "--out" in one_line(capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.toml", "s.toml"]


@pytest.mark.parametrize("name", ["a\\nb", "a\\u001b[31mb", "  ", "\\t", "x\\u0085"])
def test_study_names_are_printable_and_not_blank(name):
    with pytest.raises(StudyError) as ei:
        parse_study(study(name=name), filename="s.toml")
    msg = str(ei.value)
    assert msg.startswith("s.toml: study.name: ") and "\n" not in msg and "\x1b" not in msg, msg
    assert "printable" in msg and "pattern" not in msg, msg
    assert parse_study(study(name="cubic vs bbr (2)"), filename="s.toml").name == "cubic vs bbr (2)"


# ------------------------------------------------------------ live results


def finished(results: str) -> set[str]:
    try:
        with Store.snapshot(results) as s:
            return s.finished_runs()
    except UsageError:  # created, no tables yet
        return set()


def test_ls_summary_show_and_export_read_a_study_while_it_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text(study(duration="20s", repetitions=8))
    writer = subprocess.Popen([sys.executable, "-m", "ccbench", "run", "s.toml", "--out", "r"], cwd=tmp_path,
                              env=dict(os.environ, PYTHONPATH=str(REPO / "python")),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "r" / DB_FILENAME).exists() or not finished("r"):
            assert writer.poll() is None and time.monotonic() < deadline, "the study ended before it could be read"
            time.sleep(0.05)
        assert main(["ls", "r"]) == 0
        assert writer.poll() is None, "read too late to test a live store"
        assert main(["ls", "."]) == 0  # every results directory below
        assert main(["summary", "r"]) == 0
        run_id = next(iter(finished("r")))
        assert main(["show", run_id, "--results", "r"]) == 0
        assert main(["export", "r", "--format", "csv"]) == 0
        out = capsys.readouterr()
        assert "in use" not in out.err and out.err == "", out.err
        assert (tmp_path / "r" / "export" / "runs.csv").exists()
    finally:
        assert writer.wait(timeout=120) == 0, writer.stderr.read()
    with Store.open_existing("r") as s:
        assert len(s.finished_runs()) == 24


# ------------------------------------------------------------ silent mixing


def test_an_edited_study_is_refused_or_kept_apart_as_a_new_version(intact, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(intact / "r", tmp_path / "r")
    (tmp_path / "s.toml").write_text(study())
    (tmp_path / "e.toml").write_text(study(duration="3s"))  # edited: 2 s → 3 s
    assert main(["run", "e.toml", "--out", "r"]) == 2
    msg = one_line(capsys.readouterr().err)
    assert "holds 3 runs of study 'quickstart' that this study file no longer makes" in msg, msg
    assert "(it or a file it names changed since they ran: duration_ns)" in msg, msg  # what the edit changed
    assert "--new-version" in msg and "'quickstart v2'" in msg, msg
    with Store.open_existing("r") as s:
        assert s.study_names() == ["quickstart"] and len(s.finished_runs()) == 3  # nothing written

    assert main(["run", "e.toml", "--out", "r", "--new-version"]) == 0
    assert main(["run", "e.toml", "--out", "r"]) == 0  # the new version resumes, nothing runs again
    assert main(["run", "s.toml", "--out", "r"]) == 0  # and so does the old one
    capsys.readouterr()
    with Store.open_existing("r") as s:
        assert s.study_names() == ["quickstart", "quickstart v2"]
        assert len(s.run_ids_of("quickstart", "sim")) == 3 and len(s.run_ids_of("quickstart v2", "sim")) == 3
    assert main(["summary", "r"]) == 0
    out = capsys.readouterr().out
    assert "quickstart: median" in out and "quickstart v2: median" in out, out
    # the report's summary names each row's study (the versions share config ids)
    assert main(["report", "r", "--out", "r.html"]) == 0
    html = (tmp_path / "r.html").read_text()
    summary = html[html.index('<h2 id="summary">'):html.index('<h2 id="sweeps">')]
    assert "<th>study</th>" in summary.replace(' class="l"', ""), summary[:600]
    assert summary.count(">quickstart v2<") == 3 and summary.count(">quickstart<") == 3, summary
    # and so do the per-configuration figures and the runs list
    assert html.count("<h3>quickstart v2: ") == 3 and html.count("<h3>quickstart: ") == 3


def test_changed_fields_names_the_edit_not_what_follows_from_it():
    from ccbench.executor.versions import changed_fields

    old = [{"seed": 1, "duration_ns": 2, "flows": [{"cca": "bpf:aa.bpf.o", "start_ns": 5}],
            "hosts": {"d": {"kernel": "6.1"}}}]
    new = [{"seed": 9, "duration_ns": 3, "flows": [{"cca": "bpf:bb.bpf.o", "start_ns": 7}]}]
    # seed and start_ns are drawn from each run's configuration; hosts is what the hosts backend found
    assert changed_fields(old, new) == ["duration_ns", "flows.0.cca (a BPF source changed)"]
    assert changed_fields([{"seed": 1, "x": 1}], [{"seed": 2, "x": 1}]) == ["seed"]  # the study's seed
    assert changed_fields(old, old) == []
    # a sweep of a BPF CCA against a native one: only the BPF value changed
    assert changed_fields([{"f": "reno"}, {"f": "bpf:aa.bpf.o"}], [{"f": "reno"}, {"f": "bpf:bb.bpf.o"}]) == \
        ["f (a BPF source changed)"]
    assert changed_fields([{"f": "reno"}], [{"f": "bpf:bb.bpf.o"}]) == ["f"]


def test_validate_grids_share_one_directory(intact, tmp_path):
    """`ccbench validate` picks its grid's runs out of one directory, so its
    executor calls keep every version under one study name (versions_apart=False)."""
    from ccbench import backends
    from ccbench.executor import execute
    from ccbench.spec import parse_study

    shutil.copytree(intact / "r", tmp_path / "r")
    edited = parse_study(study(duration="3s"), filename="e.toml", backend="sim")
    s = execute(edited, edited.runs(), backends.get("sim"), tmp_path / "r", versions_apart=False)
    assert s.executed == 3 and s.study == "quickstart"
    with Store.open_existing(tmp_path / "r") as st:
        assert st.study_names() == ["quickstart"] and len(st.finished_runs()) == 6


def test_nothing_a_store_holds_reaches_the_terminal_raw(intact, tmp_path, monkeypatch, capsys):
    from ccbench import console

    assert console.params({"flows.0.cca": "x\x1b[31m"}) == "flows.0.cca=x\\x1b[31m"
    assert console.first_line("boom\x1b]0;title\x07\nmore") == "boom\\x1b]0;title\\x07"
    assert console.escape_text("[red]a\nb") == "\\[red]a\\nb"
    shutil.copytree(intact / "r", tmp_path / "r")
    with Store(tmp_path / "r") as s:  # a store written before names were checked
        s.con.execute("UPDATE studies SET study = 'evil\x1b[2J[red]x\nname', path = 'p\x1bq'")
        s.con.execute("UPDATE runs SET study = 'evil\x1b[2J[red]x\nname', error = 'e\x1b[31m'")
    for d in (tmp_path / "r", tmp_path):
        assert main(["ls", str(d)]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "evil\\x1b[2J[red]x" in out.replace("\n", ""), out


def test_the_api_on_a_damaged_store_raises_ccbenchs_error(intact, tmp_path):
    """ccbench.open(...) on a store damaged past its header: the one-line
    DatabaseError the CLI prints, whether opening or a later query meets it."""
    import ccbench
    from ccbench.store_errors import DatabaseError

    for kind, d in damaged_copies(intact, tmp_path).items():
        with pytest.raises(DatabaseError) as e:
            with ccbench.open(d) as r:
                for t in ("studies", "runs", "flows", "samples", "queue"):
                    r.table(t)
                r.metrics()
        msg = str(e.value)
        assert f"{d / DB_FILENAME}: the results database is damaged" in msg, (kind, msg)
        assert "\n" not in msg and "ccbench-snapshot" not in msg, msg


# ------------------------------------------------------------ a failed or killed writer, a closed pipe

BIG_COMMIT = """\
[study]
name = "bigw"
duration = "3s"
repetitions = 3
sample_interval = "1ms"
[topology]
senders = 4
[topology.bottleneck]
rate = "20Mbit"
delay = "10ms"
[[flows]]
cca = "cubic"
count = 4
"""


def test_a_commit_that_overflows_the_file_size_limit_does_not_hold_up_readers(tmp_path, monkeypatch, capsys):
    """`ulimit -f` below a run's commit: the run fails with the one-line full
    disk error, and readers then read at once (they waited 30 s for the write
    counter the failed commit had left odd)."""
    import resource

    import ccbench
    from ccbench.store import WriteCounter

    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.toml").write_text(BIG_COMMIT)
    limit = 3000 * 1024

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    r = subprocess.run([sys.executable, "-m", "ccbench", "run", "w.toml", "--out", "r"], cwd=tmp_path,
                       env=dict(os.environ, PYTHONPATH=str(REPO / "python")), preexec_fn=small_files,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "no space left on the disk" in one_line(r.stderr)
    assert WriteCounter.read(tmp_path / "r" / DB_FILENAME) % 2 == 0
    started = time.monotonic()
    assert main(["ls", "r"]) == 0
    with ccbench.open("r") as res:
        assert len(res.runs) < 3
    assert time.monotonic() - started < 10
    assert "changed all the time" not in capsys.readouterr().err


def test_a_closed_stdout_does_not_stop_a_study(tmp_path):
    """`ccbench run ... | head -1`: the study goes on to its end with its output
    dropped (a note on stderr) and exits 0; it used to stop with exit 1 and no word."""
    (tmp_path / "s.toml").write_text(study(repetitions=8))  # long enough to print after the pipe closed
    p = subprocess.Popen([sys.executable, "-m", "ccbench", "run", "s.toml", "--out", "r"], cwd=tmp_path,
                         env=dict(os.environ, PYTHONPATH=str(REPO / "python")),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().startswith("running 24 runs")
    p.stdout.close()  # as `head -1` does
    assert p.wait(timeout=120) == 0
    err = p.stderr.read()
    assert err.strip() == ("note: standard output was closed; the study goes on without printing its progress "
                           "(Ctrl-C stops it)"), err
    with Store.open_existing(tmp_path / "r") as s:
        assert len(s.finished_runs()) == 24
