"""What a study will cost, estimated before anything runs, and the limits on it.

A study that would run for days, fill the disk or exhaust memory is refused
with one line that gives the estimate, the limit and the field that drives
it; ``ccbench run --allow-large`` (``limits=None`` in the API) runs it anyway.

The estimate, per run (from its resolved config; equal for its repetitions):

* **runs**: the sweep's product × repetitions — counted before the sweep is
  expanded, so a million-run sweep is refused at once;
* **packets** (sim): ``duration × bottleneck rate / (mss + headers)`` data
  segments, the most the bottleneck can carry (ACKs come on top); with a
  general network, the sum over its queueing links;
* **wall time** (linux): ``duration + LINUX_SETUP_S`` per run (real time);
* **sample rows**: ``(flows + queueing links) × duration / sample_interval``
  (samples and queue tables);
* **disk**: ``ROW_DISK_BYTES`` per row (DuckDB compresses a sample row to
  about 14 bytes; the bound allows for noisier data) + ``RUN_DISK_BYTES``;
* **peak memory** of one run: ``RUN_BASE_MEMORY + ROW_MEMORY_BYTES`` per row
  of that run (the rows travel as JSON, then Python lists, then Arrow:
  measured about 450 bytes a row).

The default limits (:data:`DEFAULT_LIMITS`) leave room above every ready
study in ``studies/`` (the largest: 350 runs, 1.8e9 simulated packets, 6 h
on linux, 1.1e6 sample rows) and stay below what one machine holds: 20,000
runs, 5e10 simulated packets (hours of simulation), a day of real time on
linux, 3e8 sample rows, 10 GiB of results, 4 GiB of memory per run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ccbench.errors import StudyError

from . import units
from .limits import MAX_REPETITIONS

LINUX_SETUP_S = 3.0  # namespaces, emulator and hosts up and down, per run
ROW_DISK_BYTES = 32
RUN_DISK_BYTES = 8 * 1024
ROW_MEMORY_BYTES = 600
RUN_BASE_MEMORY = 200 * 2**20
QUEUE_LINKS = 2  # the bottleneck and its return path are sampled


def _queueing_links(config: dict) -> list[tuple[str, int]]:
    """(field, rate) of the links that queue: the dumbbell's bottleneck, or
    every link of a network with a buffer (pipes are never sampled and carry
    no more than the queueing links feed them)."""
    if "network" not in config:
        return [("topology.bottleneck.rate", config["bottleneck"]["rate_bps"])]
    return [(f"topology.links.{link['name']}.rate", link["rate_bps"]) for link in config["network"]["links"]
            if link.get("buffer_bytes") is not None or link.get("buffer_pkts") is not None]


@dataclass(frozen=True)
class Limits:
    runs: int = 20_000
    sim_packets: float = 5e10  # hours of simulation at a few million packets/s
    linux_wall_s: float = 24 * 3600.0
    rows: float = 3e8
    disk_bytes: float = 10 * 2**30
    run_memory_bytes: float = 4 * 2**30


DEFAULT_LIMITS = Limits()
RAISE_HINT = "to run it anyway: ccbench run --allow-large (limits: README, 'Limits')"


@dataclass
class Estimate:
    runs: int = 0
    packets: float = 0.0
    wall_s: float = 0.0
    rows: float = 0.0
    disk_bytes: float = 0.0
    run_memory_bytes: float = 0.0  # the largest run

    def describe(self, backend: str) -> str:
        time = (f"~{_count(self.packets)} simulated packets" if backend == "sim"
                else f"~{_duration(self.wall_s)} of real time")
        return (f"{self.runs:,} runs, {time}, ~{_count(self.rows)} sample rows "
                f"(~{_bytes(self.disk_bytes)} on disk), ~{_bytes(self.run_memory_bytes)} memory per run")


def _count(x: float) -> str:
    if x < 1e4:
        return f"{x:,.0f}"
    exp = int(math.floor(math.log10(x)))
    return f"{x / 10**exp:.1f}e{exp}"


def _bytes(x: float) -> str:
    for unit, div in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if x >= div:
            return f"{x / div:.1f} {unit}"
    return f"{x:.0f} B"


def _duration(s: float) -> str:
    for unit, div in (("days", 86400), ("h", 3600), ("min", 60)):
        if s >= div:
            return f"{s / div:.1f} {unit}"
    return f"{s:.0f} s"


# ----------------------------------------------------------------- run count


def count_runs(axes: Sequence[Any], base_reps: Any) -> tuple[int, list[str]]:
    """Runs of a sweep without expanding it, and its factors for a message.

    ``axes`` are ccbench.spec.sweep.Axis / cases.CaseAxis; only a case axis
    can set study.repetitions (one at most: paths are set by one axis).
    """
    reps = _reps(base_reps)
    total = 1
    factors = []
    reps_axis = None
    for a in axes:
        sets = getattr(a, "sets", None)
        if sets is not None and any(o.path == ("study", "repetitions") for case in sets for o in case):
            reps_axis = a
            continue
        total *= len(a.values)
        factors.append(f"{a.field} ({len(a.values)} values)")
    if reps_axis is None:
        total *= reps
        factors.append(f"study.repetitions = {reps}")
    else:
        per_case = []
        for case in reps_axis.sets:
            r = next((o.value for o in case if o.path == ("study", "repetitions")), reps)
            per_case.append(_reps(r))
        total *= sum(per_case)
        factors.append(f"{reps_axis.field} ({sum(per_case)} repetitions over {len(per_case)} cases)")
    return total, factors


def _reps(value: Any) -> int:
    """A repetitions value as written; one the schema refuses counts 1 (its error comes later, and
    names the field better than a count could)."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_REPETITIONS:
        return value
    return 1


def check_count(filename: str, axes: Sequence[Any], base_reps: Any, limits: Optional[Limits]) -> int:
    """Refuse a sweep of more than ``limits.runs`` runs before expanding it."""
    n, factors = count_runs(axes, base_reps)
    if limits is not None and n > limits.runs:
        raise StudyError(f"{filename}: too large to run: {n:,} runs (limit {limits.runs:,}) = "
                         f"{' × '.join(factors)}; {RAISE_HINT}")
    return n


# ------------------------------------------------------------------ estimate


class Estimator:
    """Adds up the cost of a study one configuration (with its repetitions) at a time."""

    def __init__(self, backend: str):
        self.backend = backend
        self.est = Estimate()
        self.top: dict[str, tuple[float, dict, dict]] = {}

    def _keep(self, what: str, amount: float, config: dict, params: dict) -> None:
        if what not in self.top or amount > self.top[what][0]:
            self.top[what] = (amount, config, params)

    def add(self, config: dict, reps: int, params: dict) -> None:
        e = self.est
        duration_s = config["duration_ns"] / 1e9
        tcp = config["tcp"]
        pkt_bits = 8 * (tcp["mss"] + tcp["header_bytes"])
        links = _queueing_links(config)
        packets = duration_s * sum(rate for _, rate in links) / pkt_bits
        samples = config["duration_ns"] / config["sample_interval_ns"]
        sampled = QUEUE_LINKS if "network" not in config else len(links)
        rows = (len(config["flows"]) + sampled) * samples
        memory = RUN_BASE_MEMORY + rows * ROW_MEMORY_BYTES
        e.runs += reps
        e.packets += reps * packets
        e.wall_s += reps * (duration_s + LINUX_SETUP_S)
        e.rows += reps * rows
        e.disk_bytes += reps * (rows * ROW_DISK_BYTES + RUN_DISK_BYTES)
        e.run_memory_bytes = max(e.run_memory_bytes, memory)
        self._keep("packets", packets, config, params)
        self._keep("rows", rows, config, params)

    def check(self, filename: str, limits: Optional[Limits]) -> Estimate:
        e = self.est
        if limits is None:
            return e
        checks = [
            ("run_memory_bytes", e.run_memory_bytes, limits.run_memory_bytes,
             f"~{_bytes(e.run_memory_bytes)} of memory for one run (limit {_bytes(limits.run_memory_bytes)})",
             "rows"),
            ("rows", e.rows, limits.rows, f"~{_count(e.rows)} sample rows (limit {_count(limits.rows)})", "rows"),
            ("disk_bytes", e.disk_bytes, limits.disk_bytes,
             f"~{_bytes(e.disk_bytes)} of results on disk (limit {_bytes(limits.disk_bytes)})", "rows"),
        ]
        if self.backend == "sim":
            checks.append(("packets", e.packets, limits.sim_packets,
                           f"~{_count(e.packets)} simulated packets (limit {_count(limits.sim_packets)})",
                           "packets"))
        else:
            checks.append(("wall_s", e.wall_s, limits.linux_wall_s,
                           f"~{_duration(e.wall_s)} of real time (limit {_duration(limits.linux_wall_s)})",
                           "wall"))
        for _, amount, limit, what, kind in checks:
            if amount > limit:
                raise StudyError(f"{filename}: too large to run: {what}, mostly from {self._driver(kind)}; "
                                 f"{RAISE_HINT}")
        return e

    def _driver(self, kind: str) -> str:
        """The field (and value) that blows the estimate up the most, relative to a typical study
        (30 s, 100 ms samples, 10 flows, 1 Gbit/s, 100 runs)."""
        _, config, params = self.top["rows" if kind == "rows" else "packets"]
        duration = config["duration_ns"]
        cands = [(duration / 30e9, f"study.duration = {units.format_time(duration)!r}")]
        if kind == "rows":
            si = config["sample_interval_ns"]
            cands.append((100e6 / si, f"study.sample_interval = {units.format_time(si)!r}"))
            cands.append((len(config["flows"]) / 10, f"{len(config['flows']):,} flows per run (flows.*.count)"))
        elif kind == "packets":
            field, rate = max(_queueing_links(config), key=lambda fr: fr[1], default=("", 0))
            if field:
                cands.append((rate / 1e9, f"{field} = {units.format_rate(rate)!r}"))
        runs = self.est.runs
        runs_name = f"{runs:,} runs (the sweep × study.repetitions)"
        cands.append((runs / 100, runs_name))
        _, name = max(cands, key=lambda c: c[0])
        field = name.split(" = ")[0]
        if field in params:  # a swept field: say which of its values
            name = f"sweep.\"{field}\" = {params[field]!r}"
        return name
