"""The study file schema (pydantic v2).

The models hold *converted* values (ints in bits/s, ns, bytes; loss as a
probability; buffers as :class:`~ccbench.spec.units.Buffer`).  Every field
carries a one-line ``description`` that doubles as the "allowed" part of an
error message.  Checks that involve more than one field (CCA known to the
backend, sender index in range, stop after start...) live in
:mod:`ccbench.spec.resolve`, so they can name the right field.
"""

from __future__ import annotations

from typing import Any, Callable, List, Literal, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainValidator, StrictBool, StrictInt, StrictStr
from pydantic_core import PydanticCustomError
from typing_extensions import Annotated

from . import units
from .qdisc import QDISC_ALLOWED, QDISCS, Qdisc, shorthand

# The congestion control algorithms each backend knows.  This is the one place
# to extend: the linux backend may add what the kernel offers.
CCAS: dict[str, tuple[str, ...]] = {
    "sim": ("reno", "newreno", "cubic", "bbr", "bbr3", "vegas", "bic", "highspeed", "htcp", "illinois", "westwood", "dctcp", "nv"),
    "linux": ("reno", "cubic", "bbr", "vegas", "bic", "highspeed", "htcp", "illinois", "westwood", "dctcp", "nv"),
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
    def validate(value: Any) -> Any:
        try:
            return parse(value)
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
Size = Annotated[int, _unit(units.parse_size)]
Percent = Annotated[float, _unit(units.parse_percent)]
BufferT = Annotated[units.Buffer, _unit(units.parse_buffer)]
Mss = Annotated[int, PlainValidator(_mss)]


def F(default: Any = ..., allowed: str = "", **kw: Any) -> Any:
    """A field whose default is written like a user value (e.g. "30s") and validated."""
    if default is ... or default is None:
        return Field(default, description=allowed, **kw)
    return Field(default, description=allowed, validate_default=True, **kw)


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StudyInfo(Model):
    name: StrictStr = F(..., "a non-empty name such as 'cubic-vs-bbr-loss'", min_length=1)
    description: StrictStr = F("", "free text")
    backend: Literal["sim", "linux"] = F("sim", "one of " + ", ".join(repr(b) for b in BACKENDS))
    repetitions: StrictInt = F(1, "a whole number >= 1", ge=1)
    duration: Time = F("30s", "a positive time such as '30s' or '1min'")
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
        if value < 1:
            raise PydanticCustomError(
                "ccbench_unit", "{problem}", {"problem": "must be at least 1", "allowed": SENDERS_ALLOWED}
            )
        return [{} for _ in range(value)]
    if isinstance(value, list) and not value:
        raise PydanticCustomError(
            "ccbench_unit", "{problem}", {"problem": "must not be empty", "allowed": SENDERS_ALLOWED}
        )
    return value


SENDERS_ALLOWED = "a number of senders (>= 1) or an array of tables like [{rate = '1Gbit', delay = '5ms'}]"


class Bottleneck(Model):
    rate: Rate = F(..., units.RATE_ALLOWED)
    delay: Time = F("0ms", units.TIME_ALLOWED + " (one-way)")
    loss: Percent = F("0%", units.PERCENT_ALLOWED)
    buffer: Optional[BufferT] = F(None, units.BUFFER_ALLOWED + " (default 1bdp; with codel, fq_codel, fq: "
                                  "Linux's limit, 1000pkt, 10240pkt, 10000pkt)")
    qdisc: Annotated[Qdisc, BeforeValidator(shorthand)] = F("fifo", QDISC_ALLOWED)
    bdp_rtt: Optional[Time] = F(None, "a positive time such as '40ms' (default: the largest base RTT)")


class Reverse(Model):
    """The return path; a field left out mirrors the bottleneck (loss defaults to 0%)."""

    rate: Optional[Rate] = F(None, units.RATE_ALLOWED)
    delay: Optional[Time] = F(None, units.TIME_ALLOWED + " (one-way)")
    loss: Percent = F("0%", units.PERCENT_ALLOWED)
    buffer: Optional[BufferT] = F(None, units.BUFFER_ALLOWED)


class Topology(Model):
    senders: Annotated[List[Access], BeforeValidator(_senders)] = F(
        1, SENDERS_ALLOWED
    )
    access: AccessDefault = F({}, "a table {rate, delay}")
    bottleneck: Bottleneck = F(..., "a table with at least rate = '...'")
    reverse: Optional[Reverse] = F(None, "a table {rate, delay, loss, buffer}")


class Tcp(Model):
    mss: Mss = F(1448, MSS_ALLOWED)
    init_cwnd: StrictInt = F(10, "a whole number of segments >= 1", ge=1)
    min_rto: Time = F("200ms", "a positive time such as '200ms'")
    delayed_ack: Literal["linux", "off"] = F("linux", "'linux' or 'off'")
    sack: StrictBool = F(True, "true or false")
    rmem: Size = F("6MiB", "a positive size such as '6MiB' (Linux default)")
    wmem: Size = F("4MiB", "a positive size such as '4MiB' (Linux default)")
    ecn: StrictBool = F(False, "true or false")
    pacing: Literal["auto", "on", "off"] = F("auto", "'auto', 'on' or 'off'")
    hz: Annotated[Any, PlainValidator(_hz)] = F("exact", HZ_ALLOWED)
    # The simulated kernel's CONFIG_HZ (CUBIC's jiffies clock); absent = 1000.
    kernel_hz: Optional[Literal[100, 250, 300, 1000]] = F(None, KERNEL_HZ_ALLOWED)


class Flow(Model):
    cca: StrictStr = F(..., "a congestion control algorithm name")
    kind: Literal["bulk", "rpc"] = F("bulk", "'bulk' or 'rpc'")
    count: StrictInt = F(1, "a whole number >= 1", ge=1)
    sender: StrictInt = F(0, "an index into topology.senders, from 0", ge=0)
    start: Time = F("0s", units.TIME_ALLOWED)
    stop: Optional[Time] = F(None, units.TIME_ALLOWED + ", after start and at most study.duration")
    start_jitter: Time = F("0s", units.TIME_ALLOWED)
    group: Optional[StrictStr] = F(None, "a label for this class of flows, e.g. 'cubic bulk'", min_length=1)
    request: Optional[Size] = F(None, "a positive size such as '10KB' (rpc flows only)")
    response: Optional[Size] = F(None, "a positive size such as '100B' (rpc flows only)")
    think: Optional[Time] = F(None, units.TIME_ALLOWED + " (rpc flows only)")
    queue_class: StrictInt = F(0, "0 or 1: the queue these flows use at a twoclass bottleneck", ge=0, le=1)
    cwnd_clamp: Optional[StrictInt] = F(None, "a whole number of segments >= 1 (a TCP-BPF style clamp)", ge=1)
    max_rate: Optional[Rate] = F(None, units.RATE_ALLOWED + " (caps the pacing rate, like SO_MAX_PACING_RATE)")
    tool: Literal["ccbench", "iperf3"] = F(
        "ccbench", "'ccbench' or 'iperf3' (linux backend, bulk flows: driven by iperf3, its JSON imported)")


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
    topology: Topology = F(..., "a table with at least [topology.bottleneck] rate = '...'")
    tcp: Tcp = F({}, "a table of TCP settings")
    flows: List[Flow] = F(..., "an array of tables [[flows]] with at least cca = '...'", min_length=1)
    sweep: Any = F(None, "a table of dotted paths to lists of values")
    analysis: Analysis = F({}, "a table {steady_after, collapse_fraction, collapse_min, converge_jfi}")
    cluster: Any = F(None, "a table of cluster settings for `ccbench run --cluster` (checked there)")
