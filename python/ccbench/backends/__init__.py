"""Backends: where a run actually happens (sim, linux, later hosts).

A backend is any object with

    name: str
    def check(self) -> None          # raise UsageError if it cannot run here
    def run(self, runspec) -> RunResult

``run`` is called in a worker process when the executor runs jobs in
parallel, so backend objects must be picklable (a module-level class
instance is). The registry maps a name to a backend or to a zero-argument
factory that builds one (so importing this package never imports the Rust
core or probes the system).

Tests and plugins add their own entries with :func:`register`.

:class:`RunResult` is the one result schema of every backend (see
docs/interfaces.md §2); :meth:`RunResult.from_dict` validates a decoded core
result and raises :class:`ResultError` naming what is wrong.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol, Union

from ccbench.errors import UsageError

__all__ = [
    "Backend",
    "RunResult",
    "ResultError",
    "RunFault",
    "FLOW_FIELDS",
    "SAMPLE_COLUMNS",
    "QUEUE_COLUMNS",
    "RPC_COLUMNS",
    "EVENT_COLUMNS",
    "register",
    "registered",
    "unregister",
    "get",
    "names",
    "availability",
]


class ResultError(Exception):
    """A backend returned a result that does not follow the result schema."""


class RunFault(Exception):
    """A run stopped by a fault its message explains in full (say, a BPF
    program's fault in the simulator): stored and printed as that message,
    without the exception's class or a traceback. ``repeats``: the same
    config fails the same way when run again (the simulator is deterministic)."""

    def __init__(self, message: str, repeats: bool = False):
        super().__init__(message)
        self.repeats = repeats


# Column-form tables of interfaces.md §2: (column name, may be absent/null).
SAMPLE_COLUMNS: tuple[tuple[str, bool], ...] = (
    ("flow_id", False),
    ("time_us", False),
    ("cwnd_bytes", False),
    ("srtt_us", False),
    ("delivered_bytes", False),
    ("retrans_segs", False),
    ("inflight_bytes", False),
    ("pacing_rate_bps", False),
    ("delivery_rate_bps", False),
    ("cca_state", True),
    ("bw_est_bps", True),
)
QUEUE_COLUMNS: tuple[tuple[str, bool], ...] = (
    ("link", False),
    ("time_us", False),
    ("backlog_bytes", False),
    ("backlog_pkts", False),
    ("drops", False),
    ("ecn_marks", False),
    ("lateness_us", True),
    ("tx_bytes", True),  # cumulative bytes the link sent (null where the backend does not count them)
    ("utilisation", True),  # fraction of the link's rate used over the last sample interval
    ("random_losses", True),  # cumulative packets the link's random `loss` took (not in drops)
)
EVENT_COLUMNS: tuple[tuple[str, bool], ...] = (
    ("time_us", False),
    ("kind", False),  # "route" | "controller"
    ("flow_id", True),  # the flow moved; null for a controller state change
    ("state", True),  # controller: "idle" | "decision" | "action" | "released"; null for a route event
    ("link", True),  # the watched link (controller); null for a route event
    ("detail", True),  # one line of text: why, or the new path
)
RPC_COLUMNS: tuple[tuple[str, bool], ...] = (
    ("flow_id", False),
    ("request_bytes", False),
    ("response_bytes", False),
    ("start_us", False),
    ("latency_us", False),
)
# Per-flow summary fields of the result: (name, may be absent/null).
FLOW_FIELDS: tuple[tuple[str, bool], ...] = (
    ("flow_id", False),
    ("bytes_delivered", False),
    ("goodput_bps", False),
    ("sent_segs", True),  # null when the tool does not report it (linux, tool = "iperf3")
    ("retrans_segs", False),
    ("rtt_min_us", True),  # null when the flow never took an RTT sample
    ("rtt_mean_us", True),
    ("rtt_p99_us", True),
    ("active_start_us", True),
    ("active_stop_us", True),
    ("completion_us", True),  # a transfer's time from its start to its last byte delivered; else null
)

_TABLES = {"samples": SAMPLE_COLUMNS, "queue": QUEUE_COLUMNS, "rpcs": RPC_COLUMNS, "events": EVENT_COLUMNS}


@dataclass
class RunResult:
    """What one run produced, in the schema every backend shares.

    ``status`` is ``"ok"`` or ``"suspect"`` (the backend finished but saw
    something that makes the numbers doubtful; ``note`` says what).
    """

    flows: list[dict[str, Any]]
    samples: dict[str, list] = field(default_factory=dict)
    queue: dict[str, list] = field(default_factory=dict)
    rpcs: dict[str, list] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    status: str = "ok"
    note: str | None = None
    events: dict[str, list] = field(default_factory=dict)  # route changes and controller actions

    @classmethod
    def from_dict(cls, d: Any) -> "RunResult":
        """Validate a decoded result (interfaces.md §2) and wrap it.

        Missing nullable columns are filled with nulls; unknown extra columns
        are ignored. Raises :class:`ResultError`.
        """
        if not isinstance(d, dict):
            raise ResultError(f"result: expected a JSON object, got {type(d).__name__}")
        if "flows" not in d:
            raise ResultError("result: missing 'flows'")
        flows = d["flows"]
        if not isinstance(flows, list):
            raise ResultError("result: 'flows' must be a list")
        clean_flows = []
        seen = set()
        for i, f in enumerate(flows):
            if not isinstance(f, dict):
                raise ResultError(f"result: flows[{i}] must be an object")
            row = {}
            for name, nullable in FLOW_FIELDS:
                if f.get(name) is None and not nullable:
                    raise ResultError(f"result: flows[{i}]: missing '{name}'")
                row[name] = f.get(name)
            if row["flow_id"] in seen:
                raise ResultError(f"result: flows[{i}]: duplicate flow_id {row['flow_id']}")
            seen.add(row["flow_id"])
            clean_flows.append(row)
        tables = {}
        for tname, columns in _TABLES.items():
            t = d.get(tname)
            if t is None:
                t = {}
            if not isinstance(t, dict):
                raise ResultError(f"result: '{tname}' must be an object of columns")
            present = [name for name, _ in columns if name in t]
            lengths = {name: len(t[name]) for name in present if isinstance(t[name], list)}
            for name in present:
                if not isinstance(t[name], list):
                    raise ResultError(f"result: {tname}.{name} must be a list")
            n = max(lengths.values(), default=0)
            out = {}
            for name, nullable in columns:
                if name in t:
                    if len(t[name]) != n:
                        raise ResultError(
                            f"result: {tname}: column '{name}' has {len(t[name])} values, "
                            f"other columns have {n}"
                        )
                    out[name] = t[name]
                elif nullable or n == 0:
                    out[name] = [None] * n
                else:
                    raise ResultError(f"result: {tname}: missing column '{name}'")
            tables[tname] = out
        stats = d.get("stats") or {}
        if not isinstance(stats, dict):
            raise ResultError("result: 'stats' must be an object")
        status = d.get("status", "ok")
        if status not in ("ok", "suspect"):
            raise ResultError(f"result: status must be 'ok' or 'suspect', got {status!r}")
        return cls(
            flows=clean_flows,
            samples=tables["samples"],
            queue=tables["queue"],
            rpcs=tables["rpcs"],
            events=tables["events"],
            stats=stats,
            status=status,
            note=d.get("note"),
        )


class Backend(Protocol):
    name: str

    def check(self) -> None: ...

    def run(self, runspec: Any) -> RunResult: ...


class _Unavailable:
    """A backend that is known but cannot be used (yet); check() says why."""

    def __init__(self, name: str, reason: str):
        self.name = name
        self.reason = reason

    def check(self) -> None:
        raise UsageError(f"backend '{self.name}' is not available: {self.reason}")

    def run(self, runspec: Any) -> RunResult:
        self.check()
        raise AssertionError("unreachable")


def _sim_factory():
    from ccbench.backends.sim import SimBackend

    return SimBackend()


def _linux_factory():
    from ccbench.backends.linux.backend import LinuxBackend

    return LinuxBackend()


def _hosts_factory():
    from ccbench.backends.hosts.backend import HostsBackend

    return HostsBackend()


_Entry = Union[Callable[[], Any], Any]
_REGISTRY: dict[str, _Entry] = {"sim": _sim_factory, "linux": _linux_factory, "hosts": _hosts_factory}
_FACTORIES: set[str] = {"sim", "linux", "hosts"}


def register(name: str, backend: Any, *, factory: bool = False, replace: bool = False) -> None:
    """Add a backend under ``name`` (an object, or a factory if ``factory``)."""
    if name in _REGISTRY and not replace:
        raise ValueError(f"backend '{name}' is already registered")
    _REGISTRY[name] = backend
    if factory:
        _FACTORIES.add(name)
    else:
        _FACTORIES.discard(name)


@contextlib.contextmanager
def registered(name: str, backend: Any, *, factory: bool = False) -> Iterator[Any]:
    """Use ``backend`` under ``name`` inside the block, then restore what was there.

    Handy in tests: ``with backends.registered("sim", FakeBackend()): ...``
    """
    had = name in _REGISTRY
    prev, prev_factory = _REGISTRY.get(name), name in _FACTORIES
    register(name, backend, factory=factory, replace=True)
    try:
        yield backend
    finally:
        if had:
            register(name, prev, factory=prev_factory, replace=True)
        else:
            unregister(name)


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)
    _FACTORIES.discard(name)


def names() -> list[str]:
    return list(_REGISTRY)


def get(name: str) -> Any:
    """The backend called ``name``; UsageError if there is none by that name."""
    if name not in _REGISTRY:
        raise UsageError(
            f"unknown backend '{name}' (allowed: {', '.join(sorted(_REGISTRY))})"
        )
    entry = _REGISTRY[name]
    return entry() if name in _FACTORIES else entry


def availability() -> dict[str, str | None]:
    """name → None if usable here, else the reason it is not."""
    out: dict[str, str | None] = {}
    for name in _REGISTRY:
        try:
            get(name).check()
            out[name] = None
        except UsageError as e:
            out[name] = str(e)
    return out
