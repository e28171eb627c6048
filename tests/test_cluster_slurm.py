"""`ccbench run --cluster slurm` on a real single-node Slurm cluster
(slurmctld, slurmd and munged started here; see slurm_test_cluster.py).

Where the daemons cannot start this FAILS with their own message: the test
is part of `make test`, which installs slurm-wlm and munge.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from ccbench import backends
from ccbench.executor import execute
from ccbench.spec import load_study

from dask_test_cluster import PYTHONPATH
from slurm_test_cluster import SlurmUnavailable, slurm_cluster
from test_cluster import SWEEP, assert_tables_equal, ccbench_proc, read_until, run_counts

SMALL = SWEEP.replace('"topology.bottleneck.loss" = ["0%", "0.5%", "1%"]', '"topology.bottleneck.loss" = ["0%", "1%"]')


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    try:
        with slurm_cluster(tmp_path_factory.mktemp("slurm")) as env:
            yield env
    except SlurmUnavailable as e:
        pytest.fail(f"the test's Slurm cluster cannot start: {e}", pytrace=False)


def ccbench(env: dict, cwd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ccbench", "run", *args], cwd=cwd, capture_output=True, text=True,
                          env={**env, "PYTHONPATH": PYTHONPATH, "CCBENCH_CLUSTER_CONFIG": os.devnull},
                          timeout=300)


def test_sweep_through_slurm_jobs(slurm, tmp_path):
    study = tmp_path / "small.toml"
    study.write_text(SMALL)
    serial = tmp_path / "serial"
    s = load_study(study)
    execute(s, s.runs(), backends.get("sim"), serial)
    out = tmp_path / "out"
    # port 8787 taken (another user's Dask on a login node): the scheduler's HTTP server took
    # it on every interface by default, and warned in four lines when it could not
    import socket

    try:
        taken = socket.create_server(("0.0.0.0", 8787))
    except OSError:  # taken already: the same case
        taken = None
    try:
        p = ccbench(slurm, tmp_path, str(study), "--out", str(out), "--cluster", "slurm", "--jobs", "1",
                    "--cores", "2", "--memory", "1GB", "--walltime", "00:10:00", "--queue", "debug")
    finally:
        if taken is not None:
            taken.close()
    assert p.returncode == 0, p.stderr + p.stdout
    assert "8787" not in p.stderr, p.stderr
    assert "cluster: 2 workers up" in p.stdout
    assert run_counts(out) == {"ok": 8}
    assert_tables_equal(out, serial)
    # the batch jobs are gone with the sweep
    q = subprocess.run(["squeue", "-h"], env=slurm, capture_output=True, text=True)
    assert q.stdout.strip() == "" or "CG" in q.stdout, q.stdout


def test_options_slurm_rejects_are_one_error(slurm, tmp_path):
    study = tmp_path / "small.toml"
    study.write_text(SMALL)
    out = tmp_path / "out"
    p = ccbench(slurm, tmp_path, str(study), "--out", str(out), "--cluster", "slurm", "--queue", "nosuch")
    assert p.returncode == 2, p.stderr
    assert "ccbench: error: --cluster slurm: sbatch rejected the worker job: sbatch: error: " in p.stderr
    assert "invalid partition specified: nosuch" in p.stderr.lower()
    assert p.stderr.count("\n") == 1
    assert not out.exists()
    # named in the study's [cluster] table: the error names the table, not --cluster
    study.write_text(SMALL + '\n[cluster]\nkind = "slurm"\nqueue = "nosuch"\n')
    p = ccbench(slurm, tmp_path, str(study), "--out", str(out), "--cluster")
    assert p.returncode == 2, p.stderr
    assert f"ccbench: error: {study} [cluster] (slurm): sbatch rejected the worker job: " in p.stderr, p.stderr
    assert not out.exists()


def test_ctrl_c_ends_a_slurm_sweep_with_130_and_leaves_no_job(slurm, tmp_path):
    """Importing dask_jobqueue installs a SIGINT handler that calls
    sys.exit() (exit 0, no resume line, as if the sweep had finished):
    ccbench keeps its own, so Ctrl-C ends the sweep as with any executor."""
    study = tmp_path / "small.toml"
    study.write_text(SMALL)
    out = tmp_path / "out"
    proc = ccbench_proc(str(study), "--out", str(out), "--cluster", "slurm", "--cores", "2", "--memory", "1GB",
                        "--walltime", "00:10:00", "--queue", "debug",
                        env={**slurm, "CCBENCH_CLUSTER_CONFIG": os.devnull}, cwd=tmp_path)
    try:
        read_until(proc, r"^\[1/8\]")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted:" in err and "resume with: ccbench run" in err
    assert 1 <= run_counts(out).get("ok", 0) < 8
    q = subprocess.run(["squeue", "-h"], env=slurm, capture_output=True, text=True)
    assert q.stdout.strip() == "" or "CG" in q.stdout, q.stdout
