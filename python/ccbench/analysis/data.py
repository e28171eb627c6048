"""Runs as the analysis sees them: one :class:`RunData` per finished run.

:func:`load_runs` reads a results store (each query read completely before the
next); everything else in ccbench.analysis is pure functions over RunData, so
tests can build RunData by hand (see :func:`make_series`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

import numpy as np

SERIES_COLUMNS = ("time_us", "delivered_bytes", "cwnd_bytes", "srtt_us", "retrans_segs", "inflight_bytes")
QUEUE_SERIES = ("time_us", "backlog_bytes", "backlog_pkts", "drops", "ecn_marks")
# Added in store schemas 2 and 3 (absent from an older store read as it is).
QUEUE_SERIES_ADDED = ("tx_bytes", "utilisation", "random_losses")
EVENT_COLUMNS = ("time_us", "kind", "flow_id", "state", "link", "detail")


@dataclass
class FlowSeries:
    """One flow's sampled time series (numpy float64 arrays, NaN = no value)."""

    time_us: np.ndarray
    delivered_bytes: np.ndarray  # cumulative, 0 at the flow's start
    cwnd_bytes: Optional[np.ndarray] = None
    srtt_us: Optional[np.ndarray] = None
    retrans_segs: Optional[np.ndarray] = None  # cumulative
    inflight_bytes: Optional[np.ndarray] = None


def make_series(time_us: Iterable[float], delivered_bytes: Iterable[float], **other: Iterable[float]) -> FlowSeries:
    return FlowSeries(
        np.asarray(list(time_us), dtype=float),
        np.asarray(list(delivered_bytes), dtype=float),
        **{k: np.asarray(list(v), dtype=float) for k, v in other.items()},
    )


@dataclass
class RunData:
    """One finished run: its identity, its flows (rows of the flows table) and
    its time series. Times are µs from the run's start."""

    run_id: str
    config_id: str
    params: dict
    duration_us: int
    bottleneck_bps: Optional[float]
    flows: list[dict]  # flow_id, group_name, cca, kind, start_us, stop_us, bytes_delivered, goodput_bps, ...
    series: dict[int, FlowSeries] = field(default_factory=dict)
    queue: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # link -> QUEUE_SERIES columns
    rpcs: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)  # flow_id -> start_us, latency_us
    events: list[dict] = field(default_factory=list)  # rows of the events table (EVENT_COLUMNS), in time order
    sample_interval_us: Optional[int] = None
    study: str = ""
    backend: Optional[str] = None
    repetition: Optional[int] = None
    seed: Optional[int] = None
    status: str = "ok"
    error: Optional[str] = None
    config: Optional[dict] = None
    wall_time_s: Optional[float] = None
    tool_version: Optional[str] = None
    #: the run's retransmission timeouts, tail loss probes and entries into
    #: fast recovery over all its connections (stats rto_count, tlp_count,
    #: recoveries; None where the backend has none)
    timeouts: Optional[int] = None
    loss_probes: Optional[int] = None
    recoveries: Optional[int] = None

    @property
    def label(self) -> str:
        parts = [f"{k}={v}" for k, v in self.params.items()]
        return " ".join(parts + [f"rep {self.repetition}"])


def _split(col: np.ndarray) -> list[tuple[Any, int, int]]:
    """(value, begin, end) of each run of equal values in a sorted column."""
    n = len(col)
    if n == 0:
        return []
    change = np.flatnonzero(col[1:] != col[:-1]) + 1
    starts = np.concatenate(([0], change))
    ends = np.concatenate((change, [n]))
    return [(col[b], int(b), int(e)) for b, e in zip(starts, ends)]


def _numpy(con, query: str, args: list) -> dict[str, np.ndarray]:
    table = con.sql(query, params=args).to_arrow_table()  # read completely
    out = {}
    for name in table.column_names:
        col = table.column(name)
        out[name] = col.to_numpy(zero_copy_only=False)
    return out


def load_runs(store: Any, study: Optional[str] = None, run_ids: Optional[Iterable[str]] = None,
              *, series: bool = True) -> list[RunData]:
    """Every finished (ok or suspect) run of the store, in run order.

    ``series=False`` skips the samples, queue and rpcs tables (faster when
    only per-flow numbers are needed).
    """
    recs = [r for r in store.runs(study=study, run_ids=run_ids, with_config=True) if r.status in ("ok", "suspect")]
    if not recs:
        return []
    ids = [r.run_id for r in recs]
    flows_by_run: dict[str, list[dict]] = {}
    for f in store.flows(ids):
        flows_by_run.setdefault(f["run_id"], []).append(f)
    runs: dict[str, RunData] = {}
    for r in recs:
        cfg = r.config or {}
        bn = cfg.get("bottleneck") or {}
        runs[r.run_id] = RunData(
            run_id=r.run_id, config_id=r.config_id, params=r.params,
            duration_us=int(cfg.get("duration_ns", 0)) // 1000,
            bottleneck_bps=float(bn["rate_bps"]) if bn.get("rate_bps") else None,
            flows=flows_by_run.get(r.run_id, []),
            sample_interval_us=int(cfg["sample_interval_ns"]) // 1000 if cfg.get("sample_interval_ns") else None,
            study=r.study, backend=r.backend, repetition=r.repetition, seed=r.seed, status=r.status,
            error=r.error, config=r.config, wall_time_s=r.wall_time_s, tool_version=r.tool_version,
            timeouts=(r.stats or {}).get("rto_count"), loss_probes=(r.stats or {}).get("tlp_count"),
            recoveries=(r.stats or {}).get("recoveries"),
        )
        if not runs[r.run_id].duration_us:
            stops = [f["stop_us"] for f in runs[r.run_id].flows if f.get("stop_us") is not None]
            runs[r.run_id].duration_us = max(stops, default=0)
    if series:
        con = store.con
        cols = ", ".join(f"CAST({c} AS DOUBLE) AS {c}" for c in SERIES_COLUMNS)
        d = _numpy(con, f"SELECT run_id, flow_id, {cols} FROM samples WHERE list_contains(?, run_id) "
                        "ORDER BY run_id, flow_id, time_us", [ids])
        for rid, b, e in _split(d["run_id"]):
            run = runs[str(rid)]
            for fid, fb, fe in _split(d["flow_id"][b:e]):
                sl = slice(b + fb, b + fe)
                run.series[int(fid)] = FlowSeries(**{c: d[c][sl].astype(float) for c in SERIES_COLUMNS})
        have = {str(r[0]) for r in con.execute("SELECT column_name FROM information_schema.columns "
                                                 "WHERE table_name = 'queue'").fetchall()}
        qcols = QUEUE_SERIES + tuple(c for c in QUEUE_SERIES_ADDED if c in have)
        cols = ", ".join(f"CAST({c} AS DOUBLE) AS {c}" for c in qcols)
        d = _numpy(con, f"SELECT run_id, link, {cols} FROM queue WHERE list_contains(?, run_id) "
                        "ORDER BY run_id, link, time_us", [ids])
        for rid, b, e in _split(d["run_id"]):
            for link, lb, le in _split(d["link"][b:e]):
                sl = slice(b + lb, b + le)
                runs[str(rid)].queue[str(link)] = {c: d[c][sl].astype(float) for c in qcols}
        from ccbench.store import EVENTS_ORDER

        ev = con.execute(f"SELECT run_id, {', '.join(EVENT_COLUMNS)} FROM events WHERE list_contains(?, run_id) "
                         f"ORDER BY {EVENTS_ORDER}", [ids]).fetchall()
        for row in ev:
            runs[str(row[0])].events.append(dict(zip(EVENT_COLUMNS, row[1:])))
        d = _numpy(con, "SELECT run_id, flow_id, CAST(start_us AS DOUBLE) AS start_us, "
                        "CAST(latency_us AS DOUBLE) AS latency_us FROM rpcs WHERE list_contains(?, run_id) "
                        "ORDER BY run_id, flow_id, start_us", [ids])
        for rid, b, e in _split(d["run_id"]):
            for fid, fb, fe in _split(d["flow_id"][b:e]):
                sl = slice(b + fb, b + fe)
                runs[str(rid)].rpcs[int(fid)] = {"start_us": d["start_us"][sl].astype(float),
                                                 "latency_us": d["latency_us"][sl].astype(float)}
    return [runs[i] for i in ids]
