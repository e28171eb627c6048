"""The processes of a run: the emulator, the load server and clients.

Each is started as ``ip netns exec NS <python> -m ccbench.backends.linux.<role>_proc
CONFIG RESULT READY`` (an argument list) in its own session and process
group, so a terminal's Ctrl-C does not reach it directly: the backend decides
when it stops. Start-up is two-phase (see proc_main.py): every process first
imports its implementation and signals READY; only then does the backend
pick t0, write the configs and send "go", so slow start-ups on a busy machine
cannot eat into the run.

Stopping is idempotent: SIGTERM to the process group, then SIGKILL after a
timeout. Every argv names the run directory (/run/ccbench/ccb<token>/), which
is how cleanup.py recognises a leftover process of a killed run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ccbench

# The CPUs a process may use (comma-separated), applied by proc_main before anything else.
CPUS_ENV = "CCBENCH_CPUS"
MODULES = {"emu": "emu_proc", "server": "server_proc", "client": "client_proc", "iperf3": "iperf3_proc"}


class ProcError(RuntimeError):
    """A run process failed to start, crashed or returned an error."""


@dataclass
class Proc:
    name: str  # e.g. "emu", "server", "client-s0"
    kind: str  # emu | server | client | iperf3
    ns: str
    config_path: Path
    result_path: Path
    ready_path: Path
    log_path: Path
    popen: subprocess.Popen
    started_go: bool = False

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, n: int = 8) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(line.strip() for line in lines[-n:] if line.strip())

    def result(self) -> dict:
        """The decoded result; ProcError when there is none or it is an error."""
        try:
            text = self.result_path.read_text()
        except FileNotFoundError:
            code = self.popen.poll()
            why = "still running" if code is None else f"exit status {code}"
            tail = self.log_tail()
            raise ProcError(f"{self.name} (namespace {self.ns}) produced no result ({why})"
                            + (f": {tail}" if tail else "")) from None
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ProcError(f"{self.name} wrote invalid JSON to {self.result_path}: {e}") from None
        if isinstance(d, dict) and d.get("error"):
            tail = self.log_tail()
            raise ProcError(f"{self.name} (namespace {self.ns}) failed: {d['error']}"
                            + (f" [{tail}]" if tail and d["error"] not in tail else ""))
        return d


@dataclass
class ProcSet:
    run_dir: Path
    procs: list[Proc] = field(default_factory=list)

    def start(self, name: str, kind: str, ns: str, cpus: list[int] | None = None) -> Proc:
        """Start one process; ``cpus``: the CPUs it may run on (default: inherited)."""
        d = self.run_dir
        p = Proc(name=name, kind=kind, ns=ns, config_path=d / f"{name}.config.json",
                 result_path=d / f"{name}.result.json", ready_path=d / f"{name}.ready",
                 log_path=d / f"{name}.log", popen=None)  # type: ignore[arg-type]
        argv = ["ip", "netns", "exec", ns, sys.executable, "-m", f"ccbench.backends.linux.{MODULES[kind]}",
                str(p.config_path), str(p.result_path), str(p.ready_path)]
        env = dict(os.environ)
        # The child imports this very ccbench, whether installed or not.
        pkg_root = str(Path(ccbench.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join([pkg_root] + [x for x in env.get("PYTHONPATH", "").split(os.pathsep) if x])
        env.setdefault("RUST_BACKTRACE", "1")
        env.pop(CPUS_ENV, None)
        if cpus:
            env[CPUS_ENV] = ",".join(str(c) for c in cpus)
        with open(p.log_path, "wb") as log:
            p.popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                       env=env, start_new_session=True, close_fds=True)
        self.procs.append(p)
        return p

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            waiting = [p for p in self.procs if not p.ready_path.exists()]
            if not waiting:
                return
            for p in waiting:
                if not p.alive():
                    try:
                        p.result()  # raises with its error
                    except ProcError as e:
                        raise ProcError(f"{p.name} did not start: {e}") from None
                    raise ProcError(f"{p.name} exited before it was ready: {p.log_tail()}")
            if time.monotonic() > deadline:
                raise ProcError(f"{', '.join(p.name for p in waiting)} not ready after {timeout_s:.0f} s "
                                "(machine overloaded?)")
            time.sleep(0.02)

    def go(self, configs: dict[str, dict]) -> None:
        """Write each process's config, then tell it to start."""
        for p in self.procs:
            tmp = p.config_path.with_name(p.config_path.name + ".tmp")
            tmp.write_text(json.dumps(configs[p.name]))
            os.replace(tmp, p.config_path)
        for p in self.procs:
            try:
                assert p.popen.stdin is not None
                p.popen.stdin.write(b"go\n")
                p.popen.stdin.close()
                p.started_go = True
            except (BrokenPipeError, OSError):
                pass  # it died: its missing result says why

    def wait(self, deadline_monotonic_s: float, fail_fast: bool = True) -> list[Proc]:
        """Wait until every process exited or the deadline passed; returns those still alive.

        With ``fail_fast`` a process that exits with an error stops the wait
        (ProcError) so a crash does not cost the whole run time.
        """
        while True:
            alive = [p for p in self.procs if p.alive()]
            if fail_fast:
                for p in self.procs:
                    code = p.popen.poll()
                    if code not in (None, 0):
                        p.result()  # raises ProcError with its message
                        raise ProcError(f"{p.name} exited with status {code}: {p.log_tail()}")
            if not alive or time.monotonic() >= deadline_monotonic_s:
                return alive
            time.sleep(0.05)

    def stop(self, term_timeout_s: float = 2.0, kill_timeout_s: float = 2.0) -> None:
        """Stop every process (idempotent): SIGTERM to its group, then SIGKILL."""
        alive = [p for p in self.procs if p.alive()]
        for p in self.procs:
            if p.popen.stdin is not None and not p.popen.stdin.closed:
                try:
                    p.popen.stdin.close()  # EOF: a process still waiting for "go" exits
                except OSError:
                    pass
        for p in alive:
            _killpg(p.popen, signal.SIGTERM)
        _reap(alive, term_timeout_s)
        alive = [p for p in alive if p.alive()]
        for p in alive:
            _killpg(p.popen, signal.SIGKILL)
        _reap(alive, kill_timeout_s)


def _killpg(popen: subprocess.Popen, sig: int) -> None:
    # Only while the leader is not reaped: then its pid (= the group id) cannot
    # have been reused by an unrelated process.
    if popen.poll() is not None:
        return
    try:
        os.killpg(popen.pid, sig)
    except ProcessLookupError:
        pass


def _reap(procs: list[Proc], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    for p in procs:
        try:
            p.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Decoded JSON lines; a torn last line (a killed writer) is ignored."""
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    break
    except FileNotFoundError:
        pass
    return out
