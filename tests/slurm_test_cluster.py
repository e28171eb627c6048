"""A single-node Slurm cluster for the tests: munged, slurmctld and slurmd in
the foreground, with a generated munge key and configuration, everything
under one temporary directory. Debian's slurm-wlm and munge packages
(`make install-dev` installs them).

``slurm_cluster(tmp)`` yields the environment (SLURM_CONF) for sbatch and
friends; when a daemon cannot start it raises SlurmUnavailable with the
exact reason (the daemon's own message, from its log).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator


class SlurmUnavailable(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 6) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return f"(no log at {path})"
    return " | ".join(lines[-n:]) or f"(empty log {path})"


def _stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


@contextlib.contextmanager
def slurm_cluster(tmp: Path, cpus: int = 2, memory_mb: int = 4000) -> Iterator[dict]:
    for tool in ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "sinfo"):
        if shutil.which(tool) is None:
            raise SlurmUnavailable(f"`{tool}` is not installed (apt-get install slurm-wlm munge; "
                                   "`make install-dev` does it)")
    if os.geteuid() != 0:
        raise SlurmUnavailable("the test's slurmd must run as root (it starts jobs as the submitting user)")
    d = Path(tmp)
    for sub in ("munge", "state", "spool", "log"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(d / "munge", 0o700)
    key = d / "munge" / "munge.key"
    sock = d / "munge" / "munge.socket"
    r = subprocess.run(["mungekey", "--create", "--keyfile", str(key), "--force"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SlurmUnavailable(f"mungekey failed: {r.stderr.strip()}")
    os.chmod(key, 0o600)
    host = socket.gethostname().split(".")[0]
    ctl_port, d_port = _free_port(), _free_port()
    conf = d / "slurm.conf"
    conf.write_text(f"""\
ClusterName=ccbtest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctl_port}
SlurmdPort={d_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")
    (d / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nCgroupAutomount=no\n")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    procs: list[subprocess.Popen] = []
    try:
        munged = subprocess.Popen(
            ["munged", "--foreground", "--force", f"--key-file={key}", f"--socket={sock}",
             f"--pid-file={d}/munge/munged.pid", f"--seed-file={d}/munge/munge.seed",
             f"--log-file={d}/log/munged.log"],
            stdout=subprocess.DEVNULL, stderr=open(d / "log" / "munged.err", "w"))
        procs.append(munged)
        _wait(lambda: sock.exists(), 10, lambda: munged.poll() is not None,
              lambda: f"munged did not start: {_tail(d / 'log' / 'munged.err')} {_tail(d / 'log' / 'munged.log')}")
        ctl = subprocess.Popen(["slurmctld", "-D", "-i", "-f", str(conf)], env=env,
                               stdout=subprocess.DEVNULL, stderr=open(d / "log" / "slurmctld.err", "w"))
        procs.append(ctl)
        slurmd = subprocess.Popen(["slurmd", "-D", "-f", str(conf)], env=env,
                                  stdout=subprocess.DEVNULL, stderr=open(d / "log" / "slurmd.err", "w"))
        procs.append(slurmd)

        def idle() -> bool:
            p = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=env, capture_output=True, text=True)
            return p.returncode == 0 and p.stdout.strip().startswith("idle")

        def dead() -> bool:
            return ctl.poll() is not None or slurmd.poll() is not None

        _wait(idle, 60, dead, lambda: (
            "the single-node Slurm cluster did not come up: "
            f"slurmctld {'exited ' + str(ctl.returncode) if ctl.poll() is not None else 'running'}: "
            f"{_tail(d / 'log' / 'slurmctld.err')} {_tail(d / 'log' / 'slurmctld.log')}; "
            f"slurmd {'exited ' + str(slurmd.returncode) if slurmd.poll() is not None else 'running'}: "
            f"{_tail(d / 'log' / 'slurmd.err')} {_tail(d / 'log' / 'slurmd.log')}"))
        yield env
    finally:
        subprocess.run(["scancel", "--full", "-u", "root"], env=env, capture_output=True)
        for p in reversed(procs):
            _stop(p)


def _wait(ok, timeout: float, dead, reason) -> None:
    t0 = time.monotonic()
    while not ok():
        if dead() or time.monotonic() - t0 > timeout:
            if not ok():
                raise SlurmUnavailable(reason())
        time.sleep(0.3)
