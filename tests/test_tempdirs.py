"""ccbench's temporary directories: what a killed process left is removed by
the next one of the same kind, and nothing else is."""

import os
import subprocess
import sys

from ccbench import tempdirs


def _dead_pid() -> int:
    p = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(p.stdout)


def test_a_dead_process_directory_is_swept_by_the_next_of_its_kind(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    dead = _dead_pid()
    left = tmp_path / f"ccbench-snapshot-{dead}-abc"
    (left / "sub").mkdir(parents=True)
    other_kind = tmp_path / f"ccbench-dask-{dead}-abc"
    other_kind.mkdir()
    alive = tmp_path / f"ccbench-snapshot-{os.getppid()}-abc"  # the parent is alive
    alive.mkdir()
    unrelated = tmp_path / "ccbench-snapshot-notapid"
    unrelated.mkdir()
    new = tempdirs.make("snapshot")
    assert new.parent == tmp_path and new.name.startswith(f"ccbench-snapshot-{os.getpid()}-")
    assert not left.exists()
    assert other_kind.exists() and alive.exists() and unrelated.exists()
    assert tempdirs.sweep("dask") == [other_kind] and not other_kind.exists()
    assert tempdirs.sweep("snapshot") == [] and new.exists()  # this process's own stays
