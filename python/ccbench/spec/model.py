"""The study file schema (pydantic v2).

The models hold *converted* values (ints in bits/s, ns, bytes; loss as a
probability; buffers as :class:`~ccbench.spec.units.Buffer`).  Every field
carries a one-line ``description`` that doubles as the "allowed" part of an
error message.  Checks that involve more than one field (CCA known to the
backend, sender index in range, stop after start...) live in
:mod:`ccbench.spec.resolve`, so they can name the right field.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Callable, List, Literal, Optional, Sequence, Union

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PlainValidator, StrictBool,
                      StrictInt, StrictStr)
from pydantic_core import PydanticCustomError
from typing_extensions import Annotated

from . import units
from .expect import Expect
from .limits import (LINK_JITTER_MAX_NS, MAX_COUNT, MAX_CWND_SEGMENTS, MAX_REPETITIONS, MAX_SENDERS,
                     MAX_STALL_PROCESSES, HOST_LATENCY_MAX_NS, STALL_EVERY_MAX_NS, STALL_EVERY_MIN_NS,
                     STALL_LENGTH_MAX_NS)
from .qdisc import QDISC_ALLOWED, QDISCS, Qdisc, shorthand

# The congestion control algorithms each backend knows.  This is the one place
# to extend: the linux backend may add what the kernel offers.
CCAS: dict[str, tuple[str, ...]] = {
    "sim": ("reno", "newreno", "cubic", "bbr", "bbr3", "vegas", "bic", "highspeed", "htcp", "illinois", "westwood", "dctcp", "nv"),
    "linux": ("reno", "cubic", "bbr", "vegas", "bic", "highspeed", "htcp", "illinois", "westwood", "dctcp", "nv"),
    # real machines: what their kernels have is checked by the pre-flight (backends/hosts/preflight.py)
    "hosts": ("reno", "cubic", "bbr", "bbr3", "vegas", "bic", "highspeed", "htcp", "illinois", "westwood", "dctcp",
              "nv", "hybla", "scalable", "lp", "veno", "yeah", "cdg"),
}
BACKENDS: tuple[str, ...] = tuple(CCAS)
# Algorithms that pace their sockets themselves, also without fq (Linux's bbr
# sets the socket's pacing status in its init).
SELF_PACED: tuple[str, ...] = ("bbr", "bbr3")


def ccas_for(backend: str) -> tuple[str, ...]:
    """The algorithms ``backend`` can run here: for linux, what this kernel
    offers (see :mod:`ccbench.spec.kernel`; ``CCAS["linux"]`` off Linux)."""
    if backend == "linux":
        from . import kernel

        return kernel.available() or CCAS["linux"]
    return CCAS[backend]



# Fixed TCP constants of the resolved config (not settable in a study file).
HEADER_BYTES = 52  # IPv4 20 + TCP 20 + timestamp option 12
DELACK_NS = 40_000_000  # Linux TCP_DELACK_MIN


def _unit(parse: Callable[[Any], Any]) -> PlainValidator:
    cached = functools.lru_cache(maxsize=4096)(parse)  # a sweep validates the same strings many times

    def validate(value: Any) -> Any:
        try:
            return cached(value) if type(value) is str else parse(value)
        except units.UnitError as e:
            raise PydanticCustomError("ccbench_unit", "{problem}", {"problem": e.problem, "allowed": e.allowed})

    return PlainValidator(validate)


def _mss(value: Any) -> int:
    """mss: a bare integer (bytes) or a size string."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    else:
        try:
            n = units.parse_size(value)
        except units.UnitError as e:
            raise PydanticCustomError(
                "ccbench_unit", "{problem}", {"problem": e.problem, "allowed": MSS_ALLOWED}
            )
    if not 88 <= n <= 65495:
        raise PydanticCustomError(
            "ccbench_unit", "{problem}", {"problem": "out of range", "allowed": MSS_ALLOWED}
        )
    return n


MSS_ALLOWED = "payload bytes per segment from 88 to 65495, e.g. 1448 or '8948B'"
HZ_ALLOWED = "'exact' or a timer frequency in Hz from 1 to 100000, such as 100, 250 or 1000"
KERNEL_HZ_ALLOWED = "the kernel's CONFIG_HZ: 100, 250, 300 or 1000"


def _hz(value: Any) -> Any:
    """tcp.hz: 'exact' (high-resolution timers) or a whole number of Hz."""
    if value == "exact":
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 100_000:
        return value
    raise PydanticCustomError("ccbench_unit", "{problem}", {"problem": "not a timer frequency", "allowed": HZ_ALLOWED})

Rate = Annotated[int, _unit(units.parse_rate)]
Time = Annotated[int, _unit(units.parse_time)]
# A time on the run's clock (a duration, a start, a moment): a bare number is guessed to be seconds.
Seconds = Annotated[int, _unit(functools.partial(units.parse_time, example_unit="s"))]
Size = Annotated[int, _unit(units.parse_size)]
Percent = Annotated[float, _unit(units.parse_percent)]
Utilisation = Annotated[float, _unit(units.parse_utilisation)]
BufferT = Annotated[units.Buffer, _unit(units.parse_buffer)]
Mss = Annotated[int, PlainValidator(_mss)]


def F(default: Any = ..., allowed: str = "", **kw: Any) -> Any:
    """A field whose default is written like a user value (e.g. "30s") and validated."""
    if default is ... or default is None:
        return Field(default, description=allowed, **kw)
    return Field(default, description=allowed, validate_default=True, **kw)


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


NAME_ALLOWED = "a name of printable characters, not blank, such as 'cubic-vs-bbr-loss'"
# How the store names a new version of a study (executor/versions.py: "NAME v2", read
# back with the same \d+): a study may not be named so itself.
_VERSION_SUFFIX = re.compile(r" v\d+\Z")


def _not_versioned(name: str) -> str:
    if _VERSION_SUFFIX.search(name):
        raise PydanticCustomError("ccbench_unit", "{problem}", {
            "problem": "ends in ' v' and a number, which is how ccbench names a new version of a study "
                       "(ccbench run --new-version)", "allowed": NAME_ALLOWED + ", not ending in ' v2' and the like"})
    return name


class StudyInfo(Model):
    name: Annotated[StrictStr, AfterValidator(_not_versioned)] = F(
        ..., NAME_ALLOWED, min_length=1,
        pattern=r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$",
    )
    description: StrictStr = F("", "free text")
    backend: Literal["sim", "linux", "hosts"] = F("sim", "one of " + ", ".join(repr(b) for b in BACKENDS))
    repetitions: StrictInt = F(1, f"a whole number from 1 to {MAX_REPETITIONS}", ge=1, le=MAX_REPETITIONS)
    duration: Seconds = F("30s", "a positive time such as '30s' or '1min'")
    seed: StrictInt = F(1, "a whole number from 0 to 2^63-1", ge=0, le=2**63 - 1)
    sample_interval: Time = F("100ms", "a positive time such as '100ms', at most the duration")


class AccessDefault(Model):
    rate: Rate = F("10Gbit", units.RATE_ALLOWED)
    delay: Time = F("0ms", units.TIME_ALLOWED + " (one-way)")


class Access(Model):
    """One sender's access link; a field left out is taken from [topology.access]."""

    rate: Optional[Rate] = F(None, units.RATE_ALLOWED)
    delay: Optional[Time] = F(None, units.TIME_ALLOWED + " (one-way)")


def _senders(value: Any) -> Any:
    """`senders = N` is shorthand for N senders on the default access link."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not 1 <= value <= MAX_SENDERS:
            problem = "must be at least 1" if value < 1 else f"must be at most {MAX_SENDERS}"
            raise PydanticCustomError("ccbench_unit", "{problem}", {"problem": problem, "allowed": SENDERS_ALLOWED})
        return [{} for _ in range(value)]
    if isinstance(value, list) and not 1 <= len(value) <= MAX_SENDERS:
        raise PydanticCustomError("ccbench_unit", "{problem}", {
            "problem": "must not be empty" if not value else f"must have at most {MAX_SENDERS} senders",
            "allowed": SENDERS_ALLOWED})
    return value


SENDERS_ALLOWED = (f"a number of senders (1 to {MAX_SENDERS}) or an array of tables like "
                   "[{rate = '1Gbit', delay = '5ms'}]")


JITTER_ALLOWED = ("a time from '0ms' to '10s', such as '2ms' (each packet's one-way delay gains a uniform "
                  "draw in [0, jitter], order kept; default 0)")
JITTER_BACK_ALLOWED = JITTER_ALLOWED.replace("default 0", "default: the A → B direction's")


def _time_within(lo: int, hi: int, allowed: str) -> PlainValidator:
    """A time in [lo, hi], errors naming ``allowed``."""
    def parse(value: Any) -> int:
        try:
            ns = units.parse_time(value)
        except units.UnitError as e:
            raise units.UnitError(e.problem, allowed) from None
        if not lo <= ns <= hi:
            raise units.UnitError("out of range", allowed)
        return ns

    return _unit(parse)


# A link's jitter: a time up to LINK_JITTER_MAX_NS.
Jitter = Annotated[int, _time_within(0, LINK_JITTER_MAX_NS, JITTER_ALLOWED)]
JitterBack = Annotated[int, _time_within(0, LINK_JITTER_MAX_NS, JITTER_BACK_ALLOWED)]


STALL_EVERY_ALLOWED = ("a time from '100us' to '86400s', such as '50ms' (the mean time from the end of one pause "
                       "to the start of the next)")
STALL_LENGTH_ALLOWED = "a time from '1ns' to '10s', such as '2ms' (the mean length of a pause)"
STALLS_ALLOWED = ("a table {every = '50ms', length = '2ms'}: the link's far end pauses for exponentially "
                  "distributed times of mean `length`, separated by exponentially distributed times of mean "
                  "`every`, and what arrives meanwhile is delivered when the pause ends; or an array of up to "
                  f"{MAX_STALL_PROCESSES} such tables, independent pauses overlaid (default: none)")


class Stalls(Model):
    """Pauses of a link's far end (netcore::link::Stalls): a host or a machine not scheduled for a while."""

    every: Annotated[int, _time_within(STALL_EVERY_MIN_NS, STALL_EVERY_MAX_NS, STALL_EVERY_ALLOWED)] = F(
        ..., STALL_EVERY_ALLOWED)
    length: Annotated[int, _time_within(1, STALL_LENGTH_MAX_NS, STALL_LENGTH_ALLOWED)] = F(
        ..., STALL_LENGTH_ALLOWED)


def _stall_list(value: Any) -> Any:
    """`stalls` is one table (one pause process) or an array of them (overlaid)."""
    if not isinstance(value, (dict, list)):
        raise PydanticCustomError("ccbench_unit", "{problem}", {
            "problem": "must be a table or an array of tables", "allowed": STALLS_ALLOWED})
    if isinstance(value, list) and not 1 <= len(value) <= MAX_STALL_PROCESSES:
        raise PydanticCustomError("ccbench_unit", "{problem}", {
            "problem": "must not be empty" if not value else f"must have at most {MAX_STALL_PROCESSES} tables",
            "allowed": STALLS_ALLOWED})
    return [value] if isinstance(value, dict) else value


# One pause process or several, overlaid; always a list once parsed.
StallsT = Annotated[List[Stalls], BeforeValidator(_stall_list)]
# Fields that take one table or an array of tables (the sweep's paths into
# one table name its fields directly: "topology.bottleneck.stalls.length").
TABLE_OR_ARRAY = ("stalls",)


def stall_fields(stalls: Optional[Sequence[Stalls]]) -> dict:
    """A link's ``stall_every_ns`` and ``stall_ns`` (its first pause
    process) and ``stall_more_ns`` (any others) in the run config, left out
    when absent so that the run ids of studies without them stay as they
    were (as ``jitter_ns`` is)."""
    if not stalls:
        return {}
    first, *more = stalls
    out = {"stall_every_ns": first.every, "stall_ns": first.length}
    if more:
        out["stall_more_ns"] = [[s.every, s.length] for s in more]
    return out


class Bottleneck(Model):
    rate: Rate = F(..., units.RATE_ALLOWED)
    delay: Time = F("0ms", units.TIME_ALLOWED + " (one-way)")
    loss: Percent = F("0%", units.PERCENT_ALLOWED)
    buffer: Optional[BufferT] = F(None, units.BUFFER_ALLOWED + " (default 1bdp; with codel, fq_codel, fq: "
                                  "Linux's limit, 1000pkt, 10240pkt, 10000pkt)")
    qdisc: Annotated[Qdisc, BeforeValidator(shorthand)] = F("fifo", QDISC_ALLOWED)
    bdp_rtt: Optional[Time] = F(None, "a positive time such as '40ms' (default: the largest base RTT)")
    jitter: Jitter = F("0ms", JITTER_ALLOWED)
    stalls: Optional[StallsT] = F(None, STALLS_ALLOWED)


class Reverse(Model):
    """The return path; a field left out mirrors the bottleneck (loss and jitter default to 0, stalls to none)."""

    rate: Optional[Rate] = F(None, units.RATE_ALLOWED)
    delay: Optional[Time] = F(None, units.TIME_ALLOWED + " (one-way)")
    loss: Percent = F("0%", units.PERCENT_ALLOWED)
    jitter: Jitter = F("0ms", JITTER_ALLOWED)
    stalls: Optional[StallsT] = F(None, STALLS_ALLOWED)
    buffer: Optional[BufferT] = F(None, units.BUFFER_ALLOWED)


NODE_NAME_ALLOWED = "a node name of letters, digits, '_' and '-', e.g. 'r1' or 'site-a'"
NODE_PATH_ALLOWED = "an array of node names, e.g. ['a', 'r1', 'r2', 'b']"
QdiscT = Annotated[Qdisc, BeforeValidator(shorthand)]


class LinkBack(Model):
    """The B → A direction of a link; a field left out is the A → B direction's."""

    rate: Optional[Rate] = F(None, units.RATE_ALLOWED)
    delay: Optional[Time] = F(None, units.TIME_ALLOWED + " (one-way)")
    loss: Optional[Percent] = F(None, units.PERCENT_ALLOWED)
    jitter: Optional[JitterBack] = F(None, JITTER_BACK_ALLOWED)
    stalls: Optional[StallsT] = F(None, STALLS_ALLOWED.replace("default: none", "default: the A → B direction's"))
    buffer: Optional[BufferT] = F(None, units.BUFFER_ALLOWED)
    qdisc: Optional[QdiscT] = F(None, QDISC_ALLOWED)
    bdp_rtt: Optional[Time] = F(None, "a positive time such as '40ms' (default: the largest base RTT of the "
                                "flows that cross the link)")


class Link(Model):
    """A link of a general topology: both directions, A → B as given, B → A with ``back`` changes."""

    name: Optional[StrictStr] = F(None, "a link name of letters, digits, '_' and '-' (default 'A-B'), unique")
    between: List[StrictStr] = F(..., "the two nodes it joins, e.g. ['r1', 'r2']")
    rate: Rate = F(..., units.RATE_ALLOWED)
    delay: Time = F("0ms", units.TIME_ALLOWED + " (one-way)")
    loss: Percent = F("0%", units.PERCENT_ALLOWED + " (each direction)")
    jitter: Jitter = F("0ms", JITTER_ALLOWED + " (each direction)")
    stalls: Optional[StallsT] = F(None, STALLS_ALLOWED + " (each direction)")
    buffer: Optional[BufferT] = F(None, units.BUFFER_ALLOWED + " (default: a pipe at a host, else 1bdp; with "
                                  "codel, fq_codel, fq: Linux's limit)")
    qdisc: Optional[QdiscT] = F(None, QDISC_ALLOWED + " (default 'fifo'; a host's link: a pipe)")
    bdp_rtt: Optional[Time] = F(None, "a positive time such as '40ms' (default: the largest base RTT of the "
                                "flows that cross the link)")
    back: Optional[LinkBack] = F(None, "a table {rate, delay, loss, jitter, stalls, buffer, qdisc, bdp_rtt} for the B → A "
                                 "direction (a field left out is the same as A → B)")

    @staticmethod
    def entry_name(entry: Any) -> Optional[str]:
        """The name a [[topology.links]] entry of the document goes by in dotted paths."""
        if not isinstance(entry, dict):
            return None
        if isinstance(entry.get("name"), str):
            return entry["name"]
        ends = entry.get("between")
        if isinstance(ends, list) and len(ends) == 2 and all(isinstance(e, str) for e in ends):
            return f"{ends[0]}-{ends[1]}"
        return None


class Topology(Model):
    """A dumbbell (senders, access, bottleneck, reverse) or a general network (hosts, routers, links)."""

    senders: Annotated[Optional[List[Access]], BeforeValidator(_senders)] = F(
        None, SENDERS_ALLOWED
    )
    access: Optional[AccessDefault] = F(None, "a table {rate, delay}")
    bottleneck: Optional[Bottleneck] = F(None, "a table with at least rate = '...'")
    reverse: Optional[Reverse] = F(None, "a table {rate, delay, loss, jitter, stalls, buffer}")
    hosts: Optional[List[StrictStr]] = F(None, "an array of host names (a general topology), e.g. ['a', 'b']")
    routers: List[StrictStr] = F([], "an array of router names, e.g. ['r1', 'r2']")
    links: Optional[List[Link]] = F(None, "an array of tables [[topology.links]] with at least between = "
                                    "['A', 'B'] and rate = '...'")


HOST_JITTER_MAX_NS = 10_000_000
HOST_JITTER_ALLOWED = "a time from '0us' to '10ms', such as '50us' (simulator only)"
LATENCY_MEDIAN_ALLOWED = "a time from '1ns' to '100ms', such as '12us' (the median latency)"
LATENCY_P90_ALLOWED = "a time from '1ns' to '100ms', at least the median, such as '60us' (its 90th percentile)"
READ_LATENCY_ALLOWED = ("a table {median = '12us', p90 = '60us'} (simulator only): the receiving application "
                        "reads after a log-normal latency with this median and 90th percentile, and the ACK "
                        "Linux sends from the read waits for it (default: it reads at once)")
SENDER_PAUSES_ALLOWED = ("a table {every = '11ms', length = '1ms'} (simulator only): each sending host pauses for "
                         "exponentially distributed times of mean `length`, separated by exponentially distributed "
                         "times of mean `every`; the ACKs that reach it and the timers that expire meanwhile wait "
                         "for the pause's end (default: none)")
PACING_LATENCY_ALLOWED = ("a table {median = '30us', p90 = '120us'} (simulator only): the sender's pacing timer "
                          "fires late by a log-normal latency with this median and 90th percentile, and Linux's "
                          "pacing credit catches up after it (default: on time)")


class Latency(Model):
    """A host's latency, log-normal by its median and 90th percentile
    (crates/sim/src/jitter.rs, Latency): `[tcp] read_latency` and
    `[tcp] pacing_latency`."""

    median: Annotated[int, _time_within(1, HOST_LATENCY_MAX_NS, LATENCY_MEDIAN_ALLOWED)] = F(..., LATENCY_MEDIAN_ALLOWED)
    p90: Annotated[int, _time_within(1, HOST_LATENCY_MAX_NS, LATENCY_P90_ALLOWED)] = F(..., LATENCY_P90_ALLOWED)


class Tcp(Model):
    mss: Mss = F(1448, MSS_ALLOWED)
    init_cwnd: StrictInt = F(10, f"a whole number of segments from 1 to {MAX_CWND_SEGMENTS} (Linux's range)",
                             ge=1, le=MAX_CWND_SEGMENTS)
    min_rto: Time = F("200ms", "a positive time such as '200ms'")
    delayed_ack: Literal["linux", "off"] = F("linux", "'linux' or 'off'")
    sack: StrictBool = F(True, "true or false")
    rmem: Size = F("6MiB", "a positive size such as '6MiB' (Linux default)")
    wmem: Size = F("4MiB", "a positive size such as '4MiB' (Linux default)")
    ecn: StrictBool = F(False, "true or false")
    pacing: Literal["auto", "on", "off"] = F("auto", "'auto', 'on' or 'off'")
    hz: Annotated[Any, PlainValidator(_hz)] = F("exact", HZ_ALLOWED)
    # The simulated kernel's CONFIG_HZ (the jiffies clock of CUBIC, BBR, BIC, H-TCP, NV, Westwood); absent = 1000.
    kernel_hz: Optional[Literal[100, 250, 300, 1000]] = F(None, KERNEL_HZ_ALLOWED)
    # Simulator only: hosts' per-packet processing jitter, uniform in [0, this] (docs/sim-model.md).
    host_jitter: Time = F("0s", HOST_JITTER_ALLOWED)
    # Simulator only: the receiving application's read latency and the
    # sender's pacing timer's lateness (docs/sim-model.md, "Host noise").
    read_latency: Optional[Latency] = F(None, READ_LATENCY_ALLOWED)
    pacing_latency: Optional[Latency] = F(None, PACING_LATENCY_ALLOWED)
    # Simulator only: the sending hosts now and then not running (docs/sim-model.md, "Host noise").
    sender_pauses: Optional[Stalls] = F(None, SENDER_PAUSES_ALLOWED)
    # Linux's SACK compression at the receiver (tcp_comp_sack_nr; on by default in Linux and here).
    sack_compression: StrictBool = F(True, "true or false")


class Flow(Model):
    cca: StrictStr = F(..., "a congestion control algorithm name")
    kind: Literal["bulk", "rpc", "transfer"] = F("bulk", "'bulk', 'rpc' or 'transfer' (size bytes, then done)")
    count: StrictInt = F(1, f"a whole number from 1 to {MAX_COUNT}", ge=1, le=MAX_COUNT)
    sender: StrictInt = F(0, "an index into topology.senders, from 0", ge=0)
    src: Optional[StrictStr] = F(None, "the sending host (general topology), e.g. 'a'")
    dst: Optional[StrictStr] = F(None, "the receiving host (general topology), e.g. 'b'")
    path: Optional[List[StrictStr]] = F(None, NODE_PATH_ALLOWED + " from src to dst (default: the shortest "
                                        "by delay)")
    return_path: Optional[List[StrictStr]] = F(None, NODE_PATH_ALLOWED + " from dst to src (default: path "
                                               "reversed)")
    size: Optional[Size] = F(None, "a positive size such as '1GB' (transfer flows only)")
    start: Seconds = F("0s", units.TIME_ALLOWED)
    stop: Optional[Seconds] = F(None, units.TIME_ALLOWED + ", after start and at most study.duration")
    start_jitter: Time = F("0s", units.TIME_ALLOWED)
    group: Optional[StrictStr] = F(None, "a label for this class of flows, e.g. 'cubic bulk'", min_length=1)
    request: Optional[Size] = F(None, "a positive size such as '10KB' (rpc flows only)")
    response: Optional[Size] = F(None, "a positive size such as '100B' (rpc flows only)")
    think: Optional[Time] = F(None, units.TIME_ALLOWED + " (rpc flows only)")
    queue_class: StrictInt = F(0, "0 or 1: the queue these flows use at a twoclass bottleneck", ge=0, le=1)
    cwnd_clamp: Optional[StrictInt] = F(None, f"a whole number of segments from 1 to {MAX_CWND_SEGMENTS} "
                                        "(a TCP-BPF style clamp)", ge=1, le=MAX_CWND_SEGMENTS)
    max_rate: Optional[Rate] = F(None, units.RATE_ALLOWED + " (caps the pacing rate, like SO_MAX_PACING_RATE)")
    tool: Literal["ccbench", "iperf3"] = F(
        "ccbench", "'ccbench' or 'iperf3' (linux backend, bulk flows: driven by iperf3, its JSON imported)")


FLOWS_ALLOWED = "a flow group label such as 'long', or an array of group labels and flow numbers, e.g. [0, 2]"


def _flow_selector(value: Any) -> Any:
    """A group label, or a list of labels and flow numbers (one message for
    either, not one per branch of a union)."""
    if type(value) is str:
        return value
    if isinstance(value, list) and all(type(x) in (str, int) for x in value):
        return list(value)
    raise PydanticCustomError("ccbench_unit", "{problem}", {
        "problem": "must be a group label or an array of group labels and flow numbers", "allowed": FLOWS_ALLOWED})


FlowSelector = Annotated[Union[StrictStr, List[Union[StrictInt, StrictStr]]], PlainValidator(_flow_selector)]


class Event(Model):
    """A route change: at ``at`` the flows move to ``path`` (their TCP connections survive)."""

    at: Seconds = F(..., "a time such as '10s', before study.duration")
    flows: FlowSelector = F(..., FLOWS_ALLOWED)
    path: List[StrictStr] = F(..., NODE_PATH_ALLOWED + ": a whole path src → dst, or a part of it between "
                              "two nodes of the flow's path")
    return_path: Optional[List[StrictStr]] = F(None, NODE_PATH_ALLOWED + " for the return direction (default: "
                                               "the new path reversed, for a flow whose return path mirrors it)")


class Controller(Model):
    """A NOTED-style path controller (docs/topology.md)."""

    kind: Literal["noted"] = F(..., "'noted'")
    enabled: StrictBool = F(True, "true or false: false describes the controller but does not run it (a "
                            "baseline: the same network, buffers included)")
    link: StrictStr = F(..., "a directed link name: a link's name (its A → B direction) or 'NAME/back'")
    threshold: Utilisation = F("90%", "a percentage such as '90%': saturated at this utilisation or more")
    hold: Time = F("2s", "a time such as '2s': saturated this long before the controller acts")
    release_threshold: Utilisation = F("70%", "a percentage such as '70%', at most threshold")
    release_hold: Time = F("2s", "a time such as '2s': below release_threshold this long before release")
    min_size: Size = F("100MB", "a size such as '100MB': transfers with at least this much still to send move")
    min_rate: Optional[Rate] = F(None, units.RATE_ALLOWED + " (default: no rate threshold)")
    # at least two nodes: checked with the flows' paths (ccbench.spec.network), as for an event's path
    alternative: List[StrictStr] = F(..., NODE_PATH_ALLOWED + ": the alternative between two nodes of the "
                                     "moved flows' path, e.g. ['r1', 'r3', 'r2']")
    flows: Optional[FlowSelector] = F(None, FLOWS_ALLOWED + " (default: every bulk and transfer flow whose "
                                      "path crosses the link)")


class Analysis(Model):
    """[analysis]: knobs of ccbench.analysis (not part of the run config; see
    python/ccbench/analysis/settings.py for what each one does)."""

    steady_after: Optional[Time] = F(
        None, "a time such as '10s' (default: a quarter of the way from the last bulk flow's start to the end)")
    collapse_fraction: float = F(0.1, "a fraction of the fair share, > 0 and <= 1, e.g. 0.1", gt=0, le=1)
    collapse_min: Time = F("2s", "a positive time such as '2s'")
    converge_jfi: float = F(0.9, "a Jain's index, > 0 and <= 1, e.g. 0.9", gt=0, le=1)


class StudyFile(Model):
    study: StudyInfo = F(..., "a table with at least name = '...'")
    topology: Topology = F(..., "a table with at least [topology.bottleneck] rate = '...', or hosts and "
                           "[[topology.links]]")
    tcp: Tcp = F({}, "a table of TCP settings")
    flows: List[Flow] = F(..., "an array of tables [[flows]] with at least cca = '...'", min_length=1)
    sweep: Any = F(None, "a table of dotted paths to lists of values")
    events: List[Event] = F([], "an array of tables [[events]] with at, flows and path (general topology)")
    controller: Optional[Controller] = F(None, "a table with kind = 'noted', link and alternative "
                                         "(general topology)")
    analysis: Analysis = F({}, "a table {steady_after, collapse_fraction, collapse_min, converge_jfi}")
    # [[expect]]: what must hold in the results (ccbench.spec.expect)
    expect: List[Expect] = F([], "an array of tables [[expect]] with metric, op and value (see spec/expect.py)")
    cluster: Any = F(None, "a table of cluster settings for `ccbench run --cluster` (checked there)")
    # backend = "hosts": the inventory (checked by backends/hosts/inventory.py, not here)
    hosts: Optional[dict] = F(None, "a table [hosts] (docs/hosts-backend.md)")
