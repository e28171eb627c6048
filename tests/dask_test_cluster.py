"""A real Dask cluster for the tests: `dask scheduler` and `dask worker`
processes on localhost, each a separate process started here.

Workers run without a nanny, so SIGKILL to a worker's process really loses
that worker (a nanny would restart it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import ccbench

PYTHONPATH = str(Path(ccbench.__file__).resolve().parents[1])


def _env(pythonpath: str = PYTHONPATH, extra: Optional[dict] = None) -> dict:
    env = {**os.environ, "PYTHONPATH": pythonpath, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    env.update(extra or {})
    return env


class DaskProcs:
    def __init__(self, tmp: Path, allowed_failures: int = 0):
        self.tmp = Path(tmp)
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.allowed_failures = allowed_failures
        self.scheduler: Optional[subprocess.Popen] = None
        self.workers: dict[str, subprocess.Popen] = {}
        self.address = ""
        self._client = None

    def start(self, n_workers: int = 2) -> "DaskProcs":
        sched_file = self.tmp / "scheduler.json"
        env = _env(extra={"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": str(self.allowed_failures)})
        self.scheduler = subprocess.Popen(
            [sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
             "--no-dashboard", "--scheduler-file", str(sched_file)],
            env=env, stdout=subprocess.DEVNULL, stderr=open(self.tmp / "scheduler.log", "w"))
        _wait(lambda: sched_file.exists() and sched_file.stat().st_size > 0, 60,
              lambda: self.scheduler.poll() is not None, f"the dask scheduler to start ({self.tmp / 'scheduler.log'})")
        self.address = json.loads(sched_file.read_text())["address"]
        for i in range(n_workers):
            self.start_worker(f"w{i}")
        self.wait_workers(n_workers)
        return self

    def start_worker(self, name: str, pythonpath: str = PYTHONPATH) -> subprocess.Popen:
        p = subprocess.Popen(
            [sys.executable, "-m", "dask", "worker", self.address, "--name", name, "--nthreads", "1",
             "--no-nanny", "--no-dashboard", "--resources", "ccbench-linux=1"],
            env=_env(pythonpath), stdout=subprocess.DEVNULL, stderr=open(self.tmp / f"{name}.log", "w"))
        self.workers[name] = p
        return p

    def client(self):
        if self._client is None:
            import distributed

            self._client = distributed.Client(self.address, timeout=30, set_as_default=False)
        return self._client

    def worker_names(self) -> dict[str, str]:
        """address → name of the workers connected now."""
        info = self.client().scheduler_info(n_workers=-1)["workers"]
        return {addr: w.get("name") for addr, w in info.items()}

    def wait_workers(self, n: int, timeout: float = 90) -> None:
        _wait(lambda: len(self.worker_names()) == n, timeout, lambda: False, f"{n} dask workers")

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        p = self.workers.pop(name)
        p.send_signal(sig)
        p.wait(30)

    def scheduler_tasks(self) -> int:
        """Tasks the scheduler still knows (0 = nothing queued or running)."""
        # a lambda travels by value (this module is not importable on the scheduler)
        return self.client().run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        for p in list(self.workers.values()) + ([self.scheduler] if self.scheduler else []):
            if p.poll() is None:
                p.terminate()
        for p in list(self.workers.values()) + ([self.scheduler] if self.scheduler else []):
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self.workers.clear()


def _wait(ok, timeout: float, dead, what: str) -> None:
    t0 = time.monotonic()
    while not ok():
        if dead():
            raise RuntimeError(f"gave up waiting for {what}: the process exited")
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"gave up waiting for {what} after {timeout:.0f} s")
        time.sleep(0.2)
