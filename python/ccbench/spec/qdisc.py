"""Queue disciplines of the bottleneck: ``[topology.bottleneck] qdisc``.

A name gives the discipline with every parameter at its default; a table
gives ``kind`` and any parameters, each with its unit::

    [topology.bottleneck]
    rate = "100Mbit"
    qdisc = "fq_codel"

    [topology.bottleneck.qdisc]      # instead of the line above
    kind = "codel"
    target = "5ms"
    interval = "100ms"
    ecn = true

A parameter that does not belong to the kind is an error that lists the
kind's parameters.  Sizes (``min``, ``max``, ``threshold``, a class's
``buffer`` / ``ecn_threshold``) take bytes, packets (``"20pkt"``, counted as
mss + 52 bytes on the wire) or a multiple of the BDP (``"0.1bdp"``, the BDP of
the bottleneck's buffer).  :func:`resolve` fills every default and converts
to the run config's ``{"kind": ..., "<name>_<unit>": ...}`` (docs/interfaces.md
§1); the Rust side (crates/netcore/src/qdisc/) documents each parameter's
source.

Defaults that differ by kind:

* the bottleneck ``buffer`` (the discipline's hard limit): Linux's packet
  limits for ``codel`` (1000pkt), ``fq_codel`` (10240pkt) and ``fq``
  (10000pkt), else ``1bdp``;
* ``red``: tc-red(8): ``max`` = buffer/4, ``min`` = max/3, ``max_p`` = 2%,
  ``avpkt`` = 1000B, ``burst`` = (2·min + max)/(3·avpkt) packets (raised to
  min/avpkt when that is more, so the EWMA weight exists);
* ``step_ecn``: ``threshold`` = BDP/7 (the DCTCP paper's K > C·RTT/7);
* ``codel``: target 5ms, interval 100ms, ecn off; ``fq_codel`` the same with
  ecn **on**, 1024 flows, quantum = mss + 52, drop_batch 64 (Linux);
* ``fq``: flow_limit 100 packets, quantum 2 × (mss + 52), initial_quantum
  10 × (mss + 52), refill_delay 40ms (Linux sch_fq);
* ``twoclass``: two classes of weight 1, each with the bottleneck's buffer
  and no marking; quantum mss + 52;
* ``cebinae``: tau, delta_port, delta_flow 1%, rounds_per_update 1,
  flow_slots 4096, round = the next power of two of nanoseconds at or above
  the base RTT (bdp_rtt or the largest), at least 2^25 ns = 33.554432ms (the
  paper's evaluation configurations).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from fractions import Fraction
from math import ceil
from typing import Any, Callable, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, StrictBool, StrictInt
from pydantic_core import PydanticCustomError
from typing_extensions import Annotated

from . import units

# The disciplines, as the simulator and the emulator name them (netcore::qdisc::QDISCS).
QDISCS: tuple[str, ...] = ("fifo", "red", "step_ecn", "codel", "fq_codel", "fq", "twoclass", "cebinae")

# Which parameters each kind takes.
PARAMS: dict[str, tuple[str, ...]] = {
    "fifo": (),
    "red": ("min", "max", "max_p", "burst", "avpkt", "ecn", "harddrop", "gentle"),
    "step_ecn": ("threshold",),
    "codel": ("target", "interval", "ecn"),
    "fq_codel": ("target", "interval", "ecn", "flows", "quantum", "drop_batch"),
    "fq": ("flow_limit", "quantum", "initial_quantum", "refill_delay"),
    "twoclass": ("quantum", "classes"),
    "cebinae": ("round", "tau", "delta_port", "delta_flow", "rounds_per_update", "flow_slots"),
}

# The bottleneck buffer when the study gives none: Linux's limits where the
# discipline has one of its own, else one BDP.
DEFAULT_BUFFER: dict[str, units.Buffer] = {
    "codel": units.Buffer("pkts", 1000),
    "fq_codel": units.Buffer("pkts", 10240),
    "fq": units.Buffer("pkts", 10000),
}
BDP_BUFFER = units.Buffer("bdp", Fraction(1))

QDISC_ALLOWED = ("a name (" + ", ".join(repr(q) for q in QDISCS) + ") or a table "
                 "[topology.bottleneck.qdisc] with kind = '...' and its parameters")
MAX_P_ALLOWED = "a percentage above 0% and at most 100%, such as '2%'"

HEADER_BYTES = 52  # as model.HEADER_BYTES (IPv4 + TCP + timestamps)


def _unit(parse: Callable[[Any], Any]) -> PlainValidator:
    def validate(value: Any) -> Any:
        try:
            return parse(value)
        except units.UnitError as e:
            raise PydanticCustomError("ccbench_unit", "{problem}", {"problem": e.problem, "allowed": e.allowed})

    return PlainValidator(validate)


def _max_p(value: Any) -> float:
    """A probability written as a percentage in (0%, 100%]."""
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            if Decimal(value.strip()[:-1].strip()) == 100:
                return 1.0
        except InvalidOperation:
            pass
    try:
        p = units.parse_percent(value)
    except units.UnitError as e:
        problem = "must be at most 100%" if "below 100%" in e.problem else e.problem
        raise units.UnitError(problem, MAX_P_ALLOWED) from None
    if p <= 0:
        raise units.UnitError("must be above 0%", MAX_P_ALLOWED)
    return p


Time = Annotated[int, _unit(units.parse_time)]
Size = Annotated[int, _unit(units.parse_size)]
Percent = Annotated[float, _unit(units.parse_percent)]
Probability = Annotated[float, _unit(_max_p)]
BufferT = Annotated[units.Buffer, _unit(units.parse_buffer)]


def _f(allowed: str, **kw: Any) -> Any:
    return Field(None, description=allowed, **kw)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


SIZE_PKT_BDP = "bytes ('30KB'), packets ('20pkt') or a multiple of the BDP ('0.1bdp')"


class QueueClass(_Model):
    """One queue of a twoclass port."""

    weight: StrictInt = Field(1, description="a whole number >= 1: the share under contention relative "
                              "to the other class (default 1)", ge=1)
    buffer: Optional[BufferT] = _f(units.BUFFER_ALLOWED + " (default: the bottleneck's buffer)")
    ecn_threshold: Optional[BufferT] = _f(SIZE_PKT_BDP + ": CE-mark ECT packets arriving to at least "
                                          "this backlog, drop others (DCTCP's K; default: no marking)")


class Qdisc(_Model):
    """The discipline and its parameters; which apply depends on ``kind`` (PARAMS)."""

    kind: Literal[QDISCS] = Field(..., description="one of " + ", ".join(repr(q) for q in QDISCS))  # type: ignore[valid-type]
    ecn: Optional[StrictBool] = _f("true or false: CE-mark ECN-capable packets instead of dropping "
                                   "(red, codel: default false; fq_codel: default true)")
    # red
    min: Optional[BufferT] = _f(SIZE_PKT_BDP + ": average queue where RED starts marking (default max/3)")
    max: Optional[BufferT] = _f(SIZE_PKT_BDP + ": average queue where RED marks every packet (default buffer/4)")
    max_p: Optional[Probability] = _f(MAX_P_ALLOWED + ": RED's probability at max (default '2%')")
    burst: Optional[StrictInt] = _f("a whole number of packets >= 1 (RED's EWMA; default (2 min + max)/(3 avpkt))",
                                    ge=1)
    avpkt: Optional[Size] = _f("a positive size such as '1000B' (RED's average packet; default 1000B)")
    harddrop: Optional[StrictBool] = _f("true or false: RED drops ECT packets above max instead of marking "
                                        "(default false)")
    gentle: Optional[StrictBool] = _f("true or false: RED's probability rises from max_p to 1 between max "
                                      "and 2 max (default false)")
    # step_ecn
    threshold: Optional[BufferT] = _f(SIZE_PKT_BDP + ": mark when a packet arrives to at least this backlog "
                                      "(step_ecn; default BDP/7)")
    # codel, fq_codel
    target: Optional[Time] = _f("a positive time such as '5ms' (CoDel's target sojourn; default 5ms)")
    interval: Optional[Time] = _f("a positive time such as '100ms' (CoDel's interval; default 100ms)")
    flows: Optional[StrictInt] = _f("a whole number from 1 to 65536 (fq_codel's queues; default 1024)",
                                    ge=1, le=65536)
    drop_batch: Optional[StrictInt] = _f("a whole number >= 1 (fq_codel's overflow drops; default 64)", ge=1)
    quantum: Optional[Size] = _f("a size such as '1500B' (bytes per round; default mss + 52, fq 2 x that)")
    # fq
    flow_limit: Optional[StrictInt] = _f("a whole number of packets >= 1 (fq's per-flow limit; default 100)",
                                         ge=1)
    initial_quantum: Optional[Size] = _f("a size such as '15000B' (fq's first burst of a flow; "
                                         "default 10 x (mss + 52))")
    refill_delay: Optional[Time] = _f("a time such as '40ms' (fq; default 40ms)")
    # twoclass
    classes: Optional[List[QueueClass]] = _f("an array of two tables [{weight = 1}, {weight = 1, ecn_threshold "
                                             "= '20pkt'}] for class 0 and class 1")
    # cebinae
    round: Optional[Time] = _f("a positive time such as '33.554432ms' (Cebinae's dT; default the next "
                               "power-of-two ns above the base RTT, at least 2^25 ns)")
    tau: Optional[Percent] = _f("a percentage such as '1%' (Cebinae's tax; default 1%)")
    delta_port: Optional[Percent] = _f("a percentage such as '1%' (Cebinae: saturated above 1 - delta_port "
                                       "of capacity; default 1%)")
    delta_flow: Optional[Percent] = _f("a percentage such as '1%' (Cebinae: flows within delta_flow of the "
                                       "largest are taxed; default 1%)")
    rounds_per_update: Optional[StrictInt] = _f("a whole number >= 1 (Cebinae's P; default 1)", ge=1)
    flow_slots: Optional[StrictInt] = _f("a whole number from 1 to 16777216 (Cebinae's flow table; "
                                         "default 4096)", ge=1, le=1 << 24)


def shorthand(value: Any) -> Any:
    """``qdisc = "codel"`` means ``{kind = "codel"}``."""
    if isinstance(value, str):
        if value not in QDISCS:
            raise PydanticCustomError("ccbench_unit", "{problem}",
                                      {"problem": "unknown queue discipline", "allowed": QDISC_ALLOWED})
        return {"kind": value}
    return value


def default_buffer(kind: str) -> units.Buffer:
    return DEFAULT_BUFFER.get(kind, BDP_BUFFER)


# ------------------------------------------------------------------ resolution


class Ctx:
    """What resolving a discipline needs to know about its port."""

    def __init__(self, loc: tuple, rate_bps: int, rtt_ns: int, mss: int, buffer: dict,
                 resolve_buffer: Callable[[units.Buffer, tuple], dict], error: type):
        self.loc = loc
        self.rate_bps = rate_bps
        self.rtt_ns = rtt_ns
        self.mtu = mss + HEADER_BYTES
        self.buffer = buffer  # {"buffer_bytes": ..., "buffer_pkts": ...}
        self.resolve_buffer = resolve_buffer  # (Buffer, loc) -> that dict, or raises
        self.error = error  # FieldError

    def fail(self, name: Any, problem: str, got: Any, allowed: str, related: tuple = ()) -> None:
        """Raise the FieldError for parameter ``name`` (a name or a path below the qdisc)."""
        path = self.loc + (name if isinstance(name, tuple) else (name,))
        raise self.error(path, problem, self.error.NO_VALUE if got is None else got, allowed, related=related)

    def bytes_of(self, b: units.Buffer, name: Any) -> int:
        """A size parameter in bytes (packets count mss + 52 bytes each); a threshold, not a
        buffer, so bytes are taken as they are (a buffer must hold a packet, resolve._buffer)."""
        if b.kind == "pkts":
            return int(b.amount) * self.mtu
        if b.kind == "bytes":
            return int(b.amount)
        d = self.resolve_buffer(b, self.loc + (name if isinstance(name, tuple) else (name,)))
        return d["buffer_bytes"]

    def limit_bytes(self) -> int:
        if self.buffer["buffer_bytes"] is not None:
            return self.buffer["buffer_bytes"]
        return self.buffer["buffer_pkts"] * self.mtu


def _or(v: Any, default: Any) -> Any:
    return default if v is None else v


#: Qdisc's field names, read once (pydantic's model_fields is slow to ask per run of a large sweep)
_FIELDS = tuple(Qdisc.model_fields)
#: per kind, the fields a discipline of that kind may set
_SETTABLE = {kind: frozenset(params) | {"kind"} for kind, params in PARAMS.items()}


def resolve(q: Qdisc, ctx: Ctx) -> dict:
    """The run-config form of a discipline, every default filled in (raises FieldError)."""
    kind = q.kind
    allowed = PARAMS[kind]
    # Every parameter defaults to None: only a field that was set can be one the kind lacks
    # (a set comparison, where a large sweep would otherwise read every field per run).
    if not q.model_fields_set <= _SETTABLE[kind]:
        _refuse_foreign(q, ctx, allowed)
    return _RESOLVERS[kind](q, ctx)


def _refuse_foreign(q: Qdisc, ctx: Ctx, allowed: Any) -> None:
    """The FieldError for the first field (in the model's order) that is not a parameter of q's kind."""
    kind = q.kind
    for name in _FIELDS:
        if name == "kind" or name in allowed:
            continue
        v = getattr(q, name)
        if v is not None:
            ctx.fail(name, f"not a parameter of '{kind}'", _shown(v),
                     ("its parameters: " + ", ".join(allowed)) if allowed else f"'{kind}' has no parameters",
                     related=(".".join(map(str, ctx.loc + ("kind",))),))


def _shown(v: Any) -> Any:
    return str(v) if isinstance(v, units.Buffer) else v


def _fifo(q: Qdisc, ctx: Ctx) -> dict:
    return {"kind": "fifo"}


def _red(q: Qdisc, ctx: Ctx) -> dict:
    avpkt = _or(q.avpkt, 1000)
    if avpkt <= 0:
        ctx.fail("avpkt", "must be positive", units.format_size(avpkt), "a positive size such as '1000B'")
    mx = ctx.bytes_of(q.max, "max") if q.max is not None else ctx.limit_bytes() // 4
    mn = ctx.bytes_of(q.min, "min") if q.min is not None else mx // 3
    if mx <= 0:
        ctx.fail("max", "must be positive", _shown(q.max), SIZE_PKT_BDP)
    if mn > mx:
        ctx.fail("min", f"must not be above max ({units.format_size(mx)})", _shown(q.min),
                 f"at most {units.format_size(mx)}", related=(".".join(map(str, ctx.loc + ("max",))),))
    least = ceil(mn / avpkt)  # tc: the EWMA needs burst + 1 - min/avpkt >= 1
    if q.burst is None:
        burst = max((2 * mn + mx) // (3 * avpkt), least, 1)
    else:
        burst = q.burst
        if burst < least:
            ctx.fail("burst", f"too small for min = {units.format_size(mn)} and avpkt = {units.format_size(avpkt)}",
                     burst, f"at least {least} (min / avpkt)")
    return {"kind": "red", "min_bytes": mn, "max_bytes": mx, "max_p": _or(q.max_p, 0.02), "burst_pkts": burst,
            "avpkt_bytes": avpkt, "ecn": _or(q.ecn, False), "harddrop": _or(q.harddrop, False),
            "gentle": _or(q.gentle, False)}


def _step_ecn(q: Qdisc, ctx: Ctx) -> dict:
    k = q.threshold if q.threshold is not None else units.Buffer("bdp", Fraction(1, 7))
    if q.threshold is None and ctx.rtt_ns <= 0:
        ctx.fail("threshold", "the default (BDP/7) needs a non-zero RTT", None,
                 "give the threshold in bytes or packets, e.g. '20pkt'")
    kb = ctx.bytes_of(k, "threshold")
    if kb <= 0:
        ctx.fail("threshold", "must be positive", _shown(q.threshold), SIZE_PKT_BDP)
    return {"kind": "step_ecn", "threshold_bytes": kb}


def _codel_common(q: Qdisc, ctx: Ctx) -> dict:
    target, interval = _or(q.target, 5_000_000), _or(q.interval, 100_000_000)
    for name, v in (("target", target), ("interval", interval)):
        if v <= 0:
            ctx.fail(name, "must be positive", units.format_time(v), "a positive time such as '5ms'")
    return {"target_ns": target, "interval_ns": interval, "mtu_bytes": ctx.mtu}


def _codel(q: Qdisc, ctx: Ctx) -> dict:
    return {"kind": "codel", **_codel_common(q, ctx), "ecn": _or(q.ecn, False)}


def _fq_codel(q: Qdisc, ctx: Ctx) -> dict:
    quantum = _or(q.quantum, ctx.mtu)
    if quantum < 256:
        ctx.fail("quantum", "must be at least 256B", units.format_size(quantum), "a size of at least '256B'")
    return {"kind": "fq_codel", **_codel_common(q, ctx), "ecn": _or(q.ecn, True), "flows": _or(q.flows, 1024),
            "quantum_bytes": quantum, "drop_batch": _or(q.drop_batch, 64)}


def _fq(q: Qdisc, ctx: Ctx) -> dict:
    quantum = _or(q.quantum, 2 * ctx.mtu)
    if quantum <= 0:
        ctx.fail("quantum", "must be positive", units.format_size(quantum), "a positive size such as '3000B'")
    return {"kind": "fq", "flow_limit_pkts": _or(q.flow_limit, 100), "quantum_bytes": quantum,
            "initial_quantum_bytes": _or(q.initial_quantum, 10 * ctx.mtu),
            "refill_delay_ns": _or(q.refill_delay, 40_000_000)}


def _twoclass(q: Qdisc, ctx: Ctx) -> dict:
    quantum = _or(q.quantum, ctx.mtu)
    if quantum <= 0:
        ctx.fail("quantum", "must be positive", units.format_size(quantum), "a positive size such as '1500B'")
    classes = q.classes if q.classes is not None else [QueueClass(), QueueClass()]
    if len(classes) != 2:
        ctx.fail("classes", f"must have exactly 2 entries, not {len(classes)}", f"{len(classes)} tables",
                 "an array of two tables, for class 0 and class 1")
    out = []
    for i, c in enumerate(classes):
        buf = ctx.buffer if c.buffer is None else ctx.resolve_buffer(c.buffer, ctx.loc + ("classes", i, "buffer"))
        k = None
        if c.ecn_threshold is not None:
            k = ctx.bytes_of(c.ecn_threshold, ("classes", i, "ecn_threshold"))
            if k <= 0:
                ctx.fail(("classes", i, "ecn_threshold"), "must be positive", str(c.ecn_threshold), SIZE_PKT_BDP)
        out.append({"weight": c.weight, "buffer_bytes": buf["buffer_bytes"], "buffer_pkts": buf["buffer_pkts"],
                    "ecn_threshold_bytes": k})
    return {"kind": "twoclass", "quantum_bytes": quantum, "classes": out}


def default_round(rtt_ns: int) -> int:
    """Cebinae's dT: a power of two of ns at or above the RTT, at least 2^25 ns."""
    r = 1 << 25
    while r < rtt_ns:
        r <<= 1
    return r


def _cebinae(q: Qdisc, ctx: Ctx) -> dict:
    rnd = _or(q.round, default_round(ctx.rtt_ns))
    if rnd <= 0:
        ctx.fail("round", "must be positive", units.format_time(rnd), "a positive time such as '33.554432ms'")
    return {"kind": "cebinae", "round_ns": rnd, "rounds_per_update": _or(q.rounds_per_update, 1),
            "tau": _or(q.tau, 0.01), "delta_port": _or(q.delta_port, 0.01), "delta_flow": _or(q.delta_flow, 0.01),
            "flow_slots": _or(q.flow_slots, 4096)}


_RESOLVERS: dict[str, Callable[[Qdisc, Ctx], dict]] = {
    "fifo": _fifo, "red": _red, "step_ecn": _step_ecn, "codel": _codel, "fq_codel": _fq_codel, "fq": _fq,
    "twoclass": _twoclass, "cebinae": _cebinae,
}
assert set(_RESOLVERS) == set(QDISCS) == set(PARAMS)
