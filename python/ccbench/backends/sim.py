"""The sim backend: ccbench's own discrete-event simulator (Rust, ccbench._core)."""

from __future__ import annotations

import json
from typing import Any

from ccbench import core
from ccbench.backends import ResultError, RunFault, RunResult


# The core's error when a run's stop flag was set (crates/sim world.rs INTERRUPTED).
INTERRUPTED = "interrupted"


def _core():
    return core.load("backend 'sim'")


def core_config(config: dict) -> dict:
    """The resolved config as the core takes it: a flow's ``tool`` (iperf3)
    says how the linux backend drives it; the simulator runs the same bulk
    flow either way, so it is dropped."""
    from ccbench.bpf import core_cca  # bpf:NAME → the cached object's path (docs/bpf.md)

    return {**config, "flows": [{**{k: v for k, v in f.items() if k != "tool"}, "cca": core_cca(f["cca"])}
                                for f in config["flows"]]}


class SimBackend:
    name = "sim"
    def check(self) -> None:
        _core()

    def stop_flag(self) -> Any:
        """A flag that stops a run given it (``run(runspec, flag)``) at its
        next sample, set from another thread: the executor's, on Ctrl-C.
        A backend with one runs in this process and holds nothing to clean
        up: the executor runs it in a thread it can stop (local.run_one)."""
        return _core().Cancel()

    def run(self, runspec: Any, stop_flag: Any = None) -> RunResult:
        core = _core()
        try:
            out = core.simulate(json.dumps(core_config(runspec.config)), stop_flag)
        except ValueError as e:
            if str(e) == INTERRUPTED:  # stopped by its flag: not the run's fault
                raise
            # the model's own refusal or a BPF program's fault: the message says it all
            raise RunFault(str(e), repeats=True) from None
        try:
            decoded = json.loads(out)
        except json.JSONDecodeError as e:
            raise ResultError(f"result: the simulator returned invalid JSON ({e})") from None
        return RunResult.from_dict(decoded)
