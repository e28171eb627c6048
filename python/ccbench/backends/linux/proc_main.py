"""Shared body of emu_proc / server_proc / client_proc / iperf3_proc.

Command line (set by procs.py; never a shell string):

    python -m ccbench.backends.linux.<role>_proc CONFIG.json RESULT.json READY

0. with CCBENCH_CPUS set, run only on those CPUs (the linux backend keeps
   the hosts' processes off the emulator's CPU);
1. import the implementation (``ccbench._core``, or for iperf3_proc
   ``ccbench.backends.linux.iperf3``) — the slow part;
2. create the READY file, then wait for one line on stdin ("go"; EOF = abort);
3. read CONFIG.json (written by the backend just before "go", with t0 set);
4. call the implementation's function with the config JSON text;
5. write its returned JSON to RESULT.json (via a temporary file + rename),
   or ``{"error": ...}`` and exit status 1 when it raised.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from pathlib import Path


def _write(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    os.replace(tmp, path)


def main(function: str, argv: list[str] | None = None, impl: str = "ccbench._core") -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3:
        print(f"usage: CONFIG.json RESULT.json READY (got {args})", file=sys.stderr)
        return 2
    config_path, result_path, ready_path = (Path(a) for a in args)
    cpus = os.environ.get("CCBENCH_CPUS")
    if cpus:
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
    try:
        fn = getattr(importlib.import_module(impl), function)
    except (ImportError, AttributeError) as e:
        _write(result_path, {"error": f"{impl}.{function} is not available: {e}"})
        print(f"{impl}.{function} is not available: {e}", file=sys.stderr)
        return 1
    ready_path.touch()
    if sys.stdin.readline().strip() != "go":
        return 3  # the backend gave up before starting
    try:
        config_text = config_path.read_text()
        out = fn(config_text)
        decoded = json.loads(out)  # must be JSON
        if isinstance(decoded, dict):
            # Where this process ran: the backend records it (and tests check it).
            decoded["cpus"] = sorted(os.sched_getaffinity(0))
            out = json.dumps(decoded)
    except BaseException as e:  # noqa: BLE001 - reported to the backend
        _write(result_path, {"error": f"{type(e).__name__}: {e}"})
        traceback.print_exc()
        return 1
    _write(result_path, out)
    return 0
