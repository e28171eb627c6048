"""Fakes for store/executor/CLI tests: run specs, results and backends that
do not need the Rust core or a study file.

Backends here are module-level classes so they pickle into the process pool.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccbench.backends import RunResult


@dataclass
class FakeRunSpec:
    run_id: str
    config_id: str
    params: dict
    repetition: int
    seed: int
    config: dict
    flow_meta: list[dict] = field(default_factory=list)


@dataclass
class FakeStudy:
    name: str = "fake-study"
    backend: str = "fake"
    path: str = "/nowhere/fake.toml"
    source_text: str = "[study]\nname = 'fake-study'\n"


def _h(*parts: Any) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


FLOW_META = [
    {"id": 0, "cca": "cubic", "sender": 0, "kind": "bulk", "group": "cubic", "start_us": 0, "stop_us": None},
    {"id": 1, "cca": "bbr", "sender": 0, "kind": "bulk", "group": "bbr", "start_us": 0, "stop_us": None},
]


def make_runs(study: str = "fake-study", losses=("0%", "1%"), reps: int = 2) -> list[FakeRunSpec]:
    """losses × reps runs, in the stable order of a spec expansion."""
    runs = []
    for loss in losses:
        config = {"duration_ns": 1_000_000_000, "bottleneck": {"loss_text": loss}, "flows": FLOW_META}
        config_id = _h(study, config)
        for rep in range(reps):
            runs.append(
                FakeRunSpec(
                    run_id=_h(study, config, rep),
                    config_id=config_id,
                    params={"topology.bottleneck.loss": loss},
                    repetition=rep,
                    seed=2**63 + rep,  # u64 above the signed range on purpose
                    config={**config, "seed": 2**63 + rep},
                    flow_meta=[dict(m) for m in FLOW_META],
                )
            )
    return runs


N_SAMPLES = 1000


def fake_result_dict(runspec: Any, n_samples: int = N_SAMPLES) -> dict:
    """A core result (interfaces.md §2) for a run; numbers depend on the run."""
    rep = runspec.repetition
    flows = []
    for m in runspec.flow_meta:
        fid = m["id"]
        flows.append({
            "flow_id": fid, "bytes_delivered": 1_000_000 * (fid + 1) + rep,
            "goodput_bps": 8e6 * (fid + 1) + rep * 1e6, "sent_segs": 1000, "retrans_segs": 10 * (fid + 1),
            "rtt_min_us": 20000.0, "rtt_mean_us": 25000.0 + fid, "rtt_p99_us": 31000.0,
            "active_start_us": 0, "active_stop_us": 1_000_000,
        })
    nf = len(runspec.flow_meta)
    n = n_samples * nf
    samples = {
        "flow_id": [i % nf for i in range(n)],
        "time_us": [(i // nf) * 1000 for i in range(n)],
        "cwnd_bytes": [14480 + i for i in range(n)],
        "srtt_us": [20000.0 + i for i in range(n)],
        "delivered_bytes": list(range(n)),
        "retrans_segs": [0] * n,
        "inflight_bytes": [1448] * n,
        "pacing_rate_bps": [1e8] * n,
        "delivery_rate_bps": [9e7] * n,
        "cca_state": ["STARTUP" if i % 2 else "open" for i in range(n)],
        "bw_est_bps": [None if i % nf == 0 else 9.5e7 for i in range(n)],
    }
    queue = {
        "link": ["bottleneck"] * 5 + ["reverse"] * 5, "time_us": list(range(0, 10000, 1000)),
        "backlog_bytes": [1500 * i for i in range(10)], "backlog_pkts": list(range(10)),
        "drops": [0, 0, 1, 1, 2, 0, 0, 0, 0, 0], "ecn_marks": [0] * 10, "lateness_us": [None] * 10,
    }
    rpcs = {"flow_id": [1, 1, 1], "request_bytes": [10000] * 3, "response_bytes": [100] * 3,
            "start_us": [0, 50000, 100000], "latency_us": [40000, 41000, 42000]}
    return {"flows": flows, "samples": samples, "queue": queue, "rpcs": rpcs,
            "stats": {"events": 12345, "bottleneck_pkts": 999, "sim_time_us": 1_000_000}}


class FakeBackend:
    """Returns fake results. Runs listed in ``fail`` raise RuntimeError, the
    run at index ``interrupt_at`` (0-based, over calls of this process) or with
    run_id ``interrupt_run`` raises KeyboardInterrupt; the worker dies in
    ``crash_run``, and half-way through sending a result in
    ``half_result_run``. Runs in ``suspect`` come back suspect (a testbed
    note); runs in ``degenerate`` deliver no byte (the executor marks them
    suspect as degenerate). Every call appends the run_id to ``log`` (a file, so
    calls in worker processes are seen too)."""

    name = "fake"

    def __init__(self, log: str | Path | None = None, fail=(), interrupt_run: str | None = None,
                 crash_run: str | None = None, suspect=(), half_result_run: str | None = None, degenerate=()):
        self.log = None if log is None else str(log)
        self.fail = set(fail)
        self.interrupt_run = interrupt_run
        self.crash_run = crash_run
        self.half_result_run = half_result_run
        self.suspect = set(suspect)
        self.degenerate = set(degenerate)

    def check(self) -> None:
        pass

    def run(self, runspec: Any) -> RunResult:
        if self.log:
            with open(self.log, "a") as f:
                f.write(runspec.run_id + "\n")
        if runspec.run_id == self.interrupt_run:
            raise KeyboardInterrupt
        if runspec.run_id == self.crash_run:
            os._exit(3)  # the worker process dies
        if runspec.run_id == self.half_result_run:
            die_mid_result()  # the worker dies sending its result
        if runspec.run_id in self.fail:
            raise RuntimeError(f"boom in {runspec.run_id}")
        d = fake_result_dict(runspec)
        if runspec.run_id in self.suspect:
            d["status"] = "suspect"
            d["note"] = "goodput above the bottleneck rate"
        if runspec.run_id in self.degenerate:
            for f in d["flows"]:
                f["bytes_delivered"] = 0
        return RunResult.from_dict(d)


def calls(log: str | Path) -> list[str]:
    log = Path(log)
    return log.read_text().split() if log.exists() else []


def die_mid_result() -> None:
    """In a process-pool worker: write the start of a result message (a
    header promising a megabyte, then ten bytes) to the pool's result pipe
    and die, as a worker killed while sending its result does."""
    import gc
    import multiprocessing.queues
    import struct

    results = next(o for o in gc.get_objects() if type(o) is multiprocessing.queues.SimpleQueue)
    os.write(results._writer.fileno(), struct.pack("!i", 1 << 20) + b"x" * 10)
    os._exit(1)
