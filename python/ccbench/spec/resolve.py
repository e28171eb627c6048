"""From a validated study document to resolved run configs (docs/interfaces.md §1).

Decisions written down here:

* BDP buffers: ``bytes = round(multiple × rate_bps × rtt_ns / 8e9)`` (half up),
  counted in wire bytes like every byte buffer, and at least one full-size
  packet (mss + header bytes).  The RTT is ``bdp_rtt`` or, by default, the
  largest base RTT over the senders (2 × access delay + bottleneck delay +
  return-path delay).  The reverse path's BDP uses the reverse rate and the
  same RTT.  A BDP buffer with a zero RTT is an error.  A buffer written in
  bytes below one full-size packet is an error, not raised: only a computed
  BDP is (Linux's qdisc limits count packets, so one packet is its floor).
* Seeds: ``sha256("ccbench-seed|<study seed>|<config_id>|<repetition>")``,
  first 8 bytes, top bit cleared (fits a signed 64-bit column).
* config_id: 12 hex chars of sha256 over the canonical JSON of the resolved
  config without the seed and *before* start jitter is applied (with each
  flow's jitter range instead), so it does not depend on the seed.  It does
  not include the study name or backend: equal configs in different studies or
  on different backends share a config_id, which is what comparisons match on.
* run_id: 12 hex chars of sha256 over the canonical JSON of (study name,
  backend, study seed, swept params as written, config_id basis, repetition).
  A sweep's JSON is composed from parts written once (Resolver.basis_json,
  the loader's params), byte for byte the same text: results directories
  are resumed by run id (tests/test_run_ids.py pins them).
* Start jitter: flow ``i``'s start is delayed by ``floor(u × jitter_ns)`` ns,
  ``u`` uniform in [0, 1) from ``sha256("ccbench-jitter|<run seed>|<flow id>")``.
* flow_meta start_us / stop_us are whole microseconds (rounded down).
"""

from __future__ import annotations

import functools
import hashlib
import json
import operator
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Optional, Union

from . import qdisc, units
from . import network
from .limits import MAX_COUNT, MAX_DURATION_NS, MIN_SAMPLE_INTERVAL_NS
from .model import CCAS, DELACK_NS, HEADER_BYTES, HOST_JITTER_ALLOWED, HOST_JITTER_MAX_NS, LATENCY_P90_ALLOWED, SELF_PACED, Access, AccessDefault, StudyFile, ccas_for, stall_fields
from .sweep import FieldError, dotted
from .tree import copy_tree


# json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True), without
# building an encoder per call (json.dumps does for any non-default option).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def canonical(obj: Any) -> str:
    return _CANONICAL.encode(obj)


def short_hash(obj: Any) -> str:
    return hash_text(canonical(obj))


@functools.lru_cache(maxsize=64)
def _key_json(key: str) -> str:
    return canonical(key)


def hash_text(text: str) -> str:
    """short_hash of an object whose canonical JSON is ``text``."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def derive_seed(study_seed: int, config_id: str, repetition: int) -> int:
    h = hashlib.sha256(f"ccbench-seed|{study_seed}|{config_id}|{repetition}".encode()).digest()
    return int.from_bytes(h[:8], "big") & (2**63 - 1)


def jitter_ns(seed: int, flow_id: int, jitter: int) -> int:
    """A deterministic draw, uniform over the whole ns in [0, jitter)."""
    if jitter <= 0:
        return 0
    h = hashlib.sha256(f"ccbench-jitter|{seed}|{flow_id}".encode()).digest()
    return (int.from_bytes(h[:8], "big") * jitter) >> 64


def _bdp_bytes(multiple: Union[int, Fraction], rate_bps: int, rtt_ns: int, mss: int) -> int:
    """round(multiple × rate × RTT / 8 s), halves up, exactly: in integers
    (n/d × r × t / 8e9 + 1/2 = (2·n·r·t + d·8e9) / (2·d·8e9)), which is far
    cheaper than Fractions for a sweep of thousands of rates and delays."""
    n, d = multiple.numerator, multiple.denominator
    return max((2 * n * rate_bps * rtt_ns + d * 8_000_000_000) // (2 * d * 8_000_000_000), mss + HEADER_BYTES)


def _buffer(buf: units.Buffer, rate_bps: int, rtt_ns: int, mss: int, loc: tuple, related: tuple,
            rtt_fields: str = "topology.bottleneck.delay, topology.access.delay or topology.bottleneck.bdp_rtt"
            ) -> dict:
    if buf.kind == "pkts":
        return {"buffer_bytes": None, "buffer_pkts": int(buf.amount)}
    if buf.kind == "bytes":
        # A queue that cannot hold one full-size packet drops every data packet (a "0pkt"
        # buffer is refused by units.parse_buffer alike; BDP buffers are rounded up to one).
        if buf.amount < mss + HEADER_BYTES:
            raise FieldError(loc, "a buffer must hold at least one full-size packet", str(buf),
                             f"at least {mss + HEADER_BYTES}B (mss {mss} + {HEADER_BYTES} header bytes), "
                             "or packets such as '100pkt'", related=("tcp.mss",))
        return {"buffer_bytes": int(buf.amount), "buffer_pkts": None}
    if rtt_ns <= 0:
        raise FieldError(
            loc, "a buffer in BDP needs a non-zero RTT", str(buf),
            f"set {rtt_fields}, or give the buffer in bytes or packets",
            related=related,
        )
    return {"buffer_bytes": _bdp_bytes(buf.amount, rate_bps, rtt_ns, mss), "buffer_pkts": None}


def _dumbbell_only(m: StudyFile) -> None:
    """A dumbbell study uses none of the general topology's fields."""
    topo = m.topology
    if topo.bottleneck is None:
        raise FieldError(("topology", "bottleneck"), "required field is missing", FieldError.NO_VALUE,
                         "a table with at least rate = '...'")
    if topo.routers:
        raise FieldError(("topology", "routers"), "only with a general topology (hosts and [[topology.links]])",
                         FieldError.NO_VALUE, "leave it out of a dumbbell", related=("topology.bottleneck",))
    for i, f in enumerate(m.flows):
        for name in ("src", "dst", "path", "return_path"):
            if getattr(f, name) is not None:
                raise FieldError(("flows", i, name), "only with a general topology (hosts and "
                                 "[[topology.links]]); a dumbbell flow has a sender", FieldError.NO_VALUE,
                                 "sender = N", related=("topology.bottleneck",))
    if m.events:
        raise FieldError(("events",), "route changes need a general topology (hosts and [[topology.links]])",
                         FieldError.NO_VALUE, "leave [[events]] out of a dumbbell", related=("topology.bottleneck",))
    if m.controller is not None:
        raise FieldError(("controller",), "a path controller needs a general topology (hosts and "
                         "[[topology.links]])", FieldError.NO_VALUE, "leave [controller] out of a dumbbell",
                         related=("topology.bottleneck",))


_ACCESS_DEFAULT = AccessDefault()
_ONE_SENDER = (Access(),)


def _senders(access: Any, senders: Any) -> list[dict]:
    """The run config's senders from topology.access and topology.senders."""
    access = access if access is not None else _ACCESS_DEFAULT
    return [{
        "rate_bps": s.rate if s.rate is not None else access.rate,
        "delay_ns": s.delay if s.delay is not None else access.delay,
    } for s in (senders if senders is not None else _ONE_SENDER)]


def _dumbbell(topo: Any, tcp: Any, senders: list[dict]) -> tuple[dict, Optional[dict]]:
    """bottleneck and reverse of the run config."""
    bn = topo.bottleneck
    rev = topo.reverse
    rev_delay = bn.delay if rev is None or rev.delay is None else rev.delay
    rev_rate = bn.rate if rev is None or rev.rate is None else rev.rate
    if bn.bdp_rtt is not None:
        if bn.bdp_rtt <= 0:
            raise FieldError(("topology", "bottleneck", "bdp_rtt"), "must be positive", "0s",
                             "a positive time such as '40ms'")
        rtt = bn.bdp_rtt
    else:
        rtt = max(2 * s["delay_ns"] for s in senders) + bn.delay + rev_delay
    rtt_related = ("topology.bottleneck.delay", "topology.bottleneck.bdp_rtt", "topology.access",
                   "topology.senders", "topology.reverse")
    bn_buffer = bn.buffer if bn.buffer is not None else qdisc.default_buffer(bn.qdisc.kind)
    bn_related = rtt_related + ("topology.bottleneck.rate",)
    bottleneck = {
        "rate_bps": bn.rate,
        "delay_ns": bn.delay,
        "loss": bn.loss,
        **_jitter(bn.jitter),
        **stall_fields(bn.stalls),
        **_buffer(bn_buffer, bn.rate, rtt, tcp.mss, ("topology", "bottleneck", "buffer"),
                  bn_related + ("topology.bottleneck.qdisc",)),
    }
    bottleneck["qdisc"] = qdisc.resolve(bn.qdisc, qdisc.Ctx(
        ("topology", "bottleneck", "qdisc"), bn.rate, rtt, tcp.mss,
        {k: bottleneck[k] for k in ("buffer_bytes", "buffer_pkts")},
        lambda b, loc: _buffer(b, bn.rate, rtt, tcp.mss, loc, bn_related), FieldError))
    reverse: Optional[dict] = None
    if rev is not None:
        if rev.buffer is not None:
            rbuf = _buffer(rev.buffer, rev_rate, rtt, tcp.mss, ("topology", "reverse", "buffer"),
                           rtt_related + ("topology.reverse.rate",))
        else:
            rbuf = {k: bottleneck[k] for k in ("buffer_bytes", "buffer_pkts")}
            if bn_buffer.kind == "bdp":  # mirror the *setting*: the same multiple of the reverse BDP
                rbuf = _buffer(bn_buffer, rev_rate, rtt, tcp.mss, ("topology", "bottleneck", "buffer"), rtt_related)
        reverse = {"rate_bps": rev_rate, "delay_ns": rev_delay, "loss": rev.loss, **_jitter(rev.jitter),
                   **stall_fields(rev.stalls), **rbuf}
    return bottleneck, reverse


def _jitter(jitter_ns: int) -> dict:
    """A link's ``jitter_ns``, left out when 0 so that the run ids of studies
    without jitter stay as they were."""
    return {"jitter_ns": jitter_ns} if jitter_ns else {}


class Resolver:
    """Cross-field checks, then the resolved config without seed and jitter, of
    each configuration of one study (``resolve``), in the sweep's order.

    From one configuration to the next a sweep changes a few fields, and
    spec/leaves.py builds each configuration's model from the previous one's,
    sharing every sub-model the change does not touch. The models are frozen,
    so a part of the config computed only from sub-models identical (``is``) to
    those the previous configuration's part came from is that part: each part
    is checked and resolved once per distinct value, not per configuration
    (issue 12). A part that fails is not kept, so the errors are those of
    resolving each configuration alone, in the same order. Configurations
    share these parts: read a config, do not change it.
    """

    def __init__(self, backend: str, base: Optional[Path] = None, local: bool = True):
        self.backend = backend
        self.base = base  # the study's directory (bpf: paths)
        # check what depends on this machine (the linux kernel's algorithms and CONFIG_HZ, BPF
        # programs): False for a profile that is checked but not run here
        self.local = local
        self._last: dict[str, tuple[tuple, Any]] = {}  # part -> (its inputs, its result)
        self._texts: dict[Optional[str], tuple[Any, str]] = {}  # config key -> (value, "key":JSON); None: jitters

    def _once(self, part: str, inputs: tuple, fn: Callable[..., Any], *args: Any) -> Any:
        last = self._last.get(part)
        if last is not None and all(map(operator.is_, last[0], inputs)):
            return last[1]
        out = fn(*args)
        self._last[part] = (inputs, out)  # keeps the inputs alive: their ids are not reused
        return out

    def basis_json(self, config: dict, jitters: list[int]) -> str:
        """canonical({"config": config, "start_jitter_ns": jitters}) of what ``resolve`` returned
        (the basis of config_id and run_id), with the JSON of each of the config's parts that
        is the previous call's (the same object) written once."""
        last, texts, parts = self._texts, {}, []
        for k in sorted(config):
            v = config[k]
            t = last.get(k)
            texts[k] = t = t if t is not None and t[0] is v else (v, f"{_key_json(k)}:{canonical(v)}")
            parts.append(t[1])
        t = last.get(None)
        texts[None] = t = t if t is not None and t[0] is jitters else (jitters, canonical(jitters))
        self._texts = texts
        return f'{{"config":{{{",".join(parts)}}},"start_jitter_ns":{t[1]}}}'

    def resolve(self, m: StudyFile) -> tuple[dict, list[int], list[dict]]:
        """(config, per-flow jitter range in ns, per-flow meta without start/stop). Raises FieldError."""
        st, topo, tcp, backend = m.study, m.topology, m.tcp, self.backend
        config = dict(self._once("run", (st, tcp), _run, st, tcp, backend, self.local))
        self._once("analysis", (st, m.analysis), _analysis, st, m.analysis)
        if tcp.sender_pauses is not None and any(f.kind == "rpc" for f in m.flows):
            sp = tcp.sender_pauses
            raise FieldError(("tcp", "sender_pauses"), "not modelled with kind = 'rpc' flows (their ACKs ride on "
                             "their data)", f"every {units.format_time(sp.every)}, length "
                             f"{units.format_time(sp.length)}", "leave it out, or use bulk and transfer flows")
        if backend in ("linux", "hosts") and tcp.pacing == "off":
            self._once("pacing", (tcp, m.flows), _pacing, tcp, m.flows)
        if topo.links is not None or topo.hosts is not None:
            net = network.build(m)
            flows, jitters, meta, routes = _flows(m.flows, st, backend, self.base, net, 0, self.local)
            net_config, events, controller = network.resolve(m, net, routes, meta, tcp.mss, _buffer)
            config["network"] = net_config
            config["flows"] = flows
            if events:
                config["events"] = events
            if controller is not None:
                config["controller"] = controller
            return config, jitters, meta
        self._once("dumbbell_only", (topo.bottleneck is None, topo.routers, m.flows, m.events, m.controller),
                   _dumbbell_only, m)
        senders = self._once("senders", (topo.access, topo.senders), _senders, topo.access, topo.senders)
        bottleneck, reverse = self._once("dumbbell", (topo, tcp, senders), _dumbbell, topo, tcp, senders)
        # the number of senders comes from topo.senders (None: one)
        flows, jitters, meta, _ = self._once("flows", (m.flows, st, topo.senders), _flows, m.flows, st, backend,
                                             self.base, None, len(senders), self.local)
        config.update(senders=senders, bottleneck=bottleneck, reverse=reverse, flows=flows)
        return config, jitters, meta


def _run(st: Any, tcp: Any, backend: str, local: bool = True) -> dict:
    """Checks of [study] and [tcp]; the run-wide part of the config."""
    if st.duration <= 0:
        raise FieldError(("study", "duration"), "must be positive", units.format_time(st.duration),
                         "a positive time such as '30s'")
    if st.duration > MAX_DURATION_NS:
        raise FieldError(("study", "duration"), f"must be at most {units.format_time(MAX_DURATION_NS)} (one day)",
                         units.format_time(st.duration), "a positive time such as '30s', at most one day")
    if not MIN_SAMPLE_INTERVAL_NS <= st.sample_interval <= st.duration:
        raise FieldError(("study", "sample_interval"), "must be at least 1us (samples are stored in whole "
                         f"microseconds) and at most study.duration ({units.format_time(st.duration)})",
                         units.format_time(st.sample_interval), "a time such as '100ms'",
                         related=("study.duration",))
    for name in ("min_rto", "rmem", "wmem"):
        if getattr(tcp, name) <= 0:
            v = getattr(tcp, name)
            raise FieldError(("tcp", name), "must be positive",
                             units.format_time(v) if name == "min_rto" else units.format_size(v),
                             "a positive " + ("time" if name == "min_rto" else "size"))

    if tcp.rmem >= 2**31:
        # Linux's tcp_rmem is an int; the simulator sends SACK blocks as 32-bit offsets within it.
        raise FieldError(("tcp", "rmem"), "must be below 2 GiB (Linux's tcp_rmem is an int)",
                         units.format_size(tcp.rmem), "a positive size below 2GiB")

    if not 0 <= tcp.host_jitter <= HOST_JITTER_MAX_NS:
        raise FieldError(("tcp", "host_jitter"), "out of range", units.format_time(tcp.host_jitter),
                         HOST_JITTER_ALLOWED)
    if backend in ("linux", "hosts") and tcp.host_jitter:
        raise FieldError(("tcp", "host_jitter"), "a simulator model: real hosts have their own processing jitter",
                         units.format_time(tcp.host_jitter), "leave it out for backend '" + backend + "'")
    for name, why in (("read_latency", "real receivers read when their host schedules them"),
                      ("pacing_latency", "real senders' pacing timers fire when their host gets to them")):
        lat = getattr(tcp, name)
        if lat is None:
            continue
        if lat.p90 < lat.median:
            raise FieldError(("tcp", name, "p90"), f"below the median ({units.format_time(lat.median)})",
                             units.format_time(lat.p90), LATENCY_P90_ALLOWED)
        if backend in ("linux", "hosts"):
            raise FieldError(("tcp", name), "a simulator model: " + why, f"median {units.format_time(lat.median)}, "
                             f"p90 {units.format_time(lat.p90)}", "leave it out for backend '" + backend + "'")
    if tcp.sender_pauses is not None and backend in ("linux", "hosts"):
        sp = tcp.sender_pauses
        raise FieldError(("tcp", "sender_pauses"), "a simulator model: real hosts pause when their machine does",
                         f"every {units.format_time(sp.every)}, length {units.format_time(sp.length)}",
                         "leave it out for backend '" + backend + "'")
    if backend in ("linux", "hosts") and tcp.hz != "exact":
        raise FieldError(("tcp", "hz"), "not supported by the linux backend: real hosts run the kernel's own "
                         "timers (its CONFIG_HZ, and high-resolution timers for pacing)", tcp.hz,
                         "leave it out for backend 'linux'")
    if backend == "linux" and tcp.kernel_hz is not None and local:
        from . import kernel

        hz = kernel.config_hz()
        if hz is not None and hz != tcp.kernel_hz:
            raise FieldError(("tcp", "kernel_hz"), f"the linux backend runs this kernel, whose CONFIG_HZ is {hz}",
                             tcp.kernel_hz, f"{hz}, or leave it out")
    return {
        "duration_ns": st.duration,
        "sample_interval_ns": st.sample_interval,
        "tcp": {
            "mss": tcp.mss,
            "header_bytes": HEADER_BYTES,
            "init_cwnd": tcp.init_cwnd,
            "min_rto_ns": tcp.min_rto,
            "delayed_ack": tcp.delayed_ack,
            "delack_ns": DELACK_NS,
            "sack": tcp.sack,
            "rmem_bytes": tcp.rmem,
            "wmem_bytes": tcp.wmem,
            "ecn": tcp.ecn,
            "pacing": tcp.pacing,
            "hz": None if tcp.hz == "exact" else tcp.hz,
            # Only when given, so that configurations without it keep their ids.
            **({"kernel_hz": tcp.kernel_hz} if tcp.kernel_hz is not None else {}),
            **({"host_jitter_ns": tcp.host_jitter} if tcp.host_jitter else {}),
            **({"read_latency_median_ns": tcp.read_latency.median, "read_latency_p90_ns": tcp.read_latency.p90}
               if tcp.read_latency is not None else {}),
            **({"pacing_latency_median_ns": tcp.pacing_latency.median,
                "pacing_latency_p90_ns": tcp.pacing_latency.p90} if tcp.pacing_latency is not None else {}),
            **({"sender_pause_every_ns": tcp.sender_pauses.every, "sender_pause_ns": tcp.sender_pauses.length}
               if tcp.sender_pauses is not None else {}),
            **({} if tcp.sack_compression else {"sack_compression": False}),
        },
    }


def _analysis(st: Any, analysis: Any) -> None:
    """[analysis] against the run (not part of the config)."""
    after = analysis.steady_after
    if after is not None and after >= st.duration:
        # the steady-state window would be empty: every steady metric without a value
        raise FieldError(("analysis", "steady_after"), "must be before the end of the run (study.duration = "
                         f"{units.format_time(st.duration)})", units.format_time(after),
                         f"a time below {units.format_time(st.duration)}", related=("study.duration",))


def _pacing(tcp: Any, flows: list) -> None:
    """tcp.pacing = 'off' on a real kernel (checked only for linux and hosts)."""
    # Linux cannot stop an algorithm that paces by itself (BBR sets the
    # socket's pacing status in its init); the others do not pace anyway.
    paced = sorted({f.cca for f in flows if f.cca in SELF_PACED})
    if paced:
        raise FieldError(("tcp", "pacing"), "the linux backend cannot turn pacing off for an algorithm that "
                         f"paces by itself ({', '.join(paced)})", tcp.pacing, "'auto' or 'on'",
                         related=tuple(f"flows.{i}.cca" for i, f in enumerate(flows) if f.cca in SELF_PACED))


def _flows(flows: list, st: Any, backend: str, base: Optional[Path], net: Optional[network.Net],
           n_senders: int, local: bool = True) -> tuple[list[dict], list[int], list[dict], list]:
    """Checks of each flow; the config's flows, each flow's start jitter range, its meta and
    (in a general network, ``net``) its route; ``n_senders``: a dumbbell's senders; ``local``:
    see Resolver."""
    general = net is not None
    if sum(f.count for f in flows) > MAX_COUNT:
        raise FieldError(("flows",), f"more than {MAX_COUNT:,} flows in one run (the sum of flows.*.count)",
                         sum(f.count for f in flows), f"at most {MAX_COUNT:,} flows")
    # None: a linux profile not run here; the kernel that runs it decides
    allowed_ccas = ccas_for(backend) if local or backend != "linux" else None
    out: list[dict] = []
    jitters: list[int] = []
    meta: list[dict] = []
    routes: list[network.Route] = []
    for i, f in enumerate(flows):
        loc = ("flows", i)
        cca = f.cca
        if f.cca.startswith("bpf:"):  # a BPF struct_ops CCA (ccbench.bpf; base: the study's directory)
            if local:  # else compiled and checked where it runs
                from ccbench import bpf

                try:
                    cca = bpf.resolve_cca(f.cca, base, backend)
                except bpf.BpfError as e:
                    raise FieldError(loc + ("cca",), e.message, detail=e.detail) from None
        elif allowed_ccas is not None and f.cca not in allowed_ccas:
            problem = f"unknown congestion control for backend '{backend}'"
            if backend == "linux":
                problem = ("this kernel has no such congestion control"
                           + (" (it is a sim-only algorithm: use backend 'sim')" if f.cca in CCAS["sim"] else ""))
            raise FieldError(loc + ("cca",), problem, f.cca, ", ".join(allowed_ccas))
        if general:
            route = network.flow_route(net, f, i)
        elif f.sender >= n_senders:
            raise FieldError(loc + ("sender",), f"no such sender: the topology has {n_senders} sender"
                             + ("" if n_senders == 1 else "s"), f.sender,
                             f"0 .. {n_senders - 1}", related=("topology.senders",))
        if f.kind == "transfer":
            if f.size is None:
                raise FieldError(loc + ("size",), "a transfer needs its size", FieldError.NO_VALUE,
                                 "a positive size such as '1GB'", related=(dotted(loc + ("kind",)),))
            if f.size <= 0:
                raise FieldError(loc + ("size",), "must be positive", units.format_size(f.size),
                                 "a positive size such as '1GB'")
            if f.stop is not None:
                raise FieldError(loc + ("stop",), "a transfer ends when its size has been delivered",
                                 units.format_time(f.stop), "leave it out, or use kind = 'bulk' with a stop",
                                 related=(dotted(loc + ("kind",)),))
        elif f.size is not None:
            raise FieldError(loc + ("size",), "only allowed for kind = 'transfer'", units.format_size(f.size),
                             "leave it out, or set kind = 'transfer'", related=(dotted(loc + ("kind",)),))
        if f.kind != "rpc":
            for name in ("request", "response", "think"):
                if getattr(f, name) is not None:
                    raise FieldError(loc + (name,), "only allowed for kind = 'rpc'", _shown(f, name),
                                     "leave it out, or set kind = 'rpc'", related=(dotted(loc + ("kind",)),))
        else:
            for name in ("request", "response"):
                v = getattr(f, name)
                if v is not None and v <= 0:
                    raise FieldError(loc + (name,), "must be positive", units.format_size(v),
                                     "a positive size such as '10KB'")
        if f.tool == "iperf3":
            if f.kind != "bulk":
                raise FieldError(loc + ("tool",), "iperf3 drives bulk flows only", f.tool, "'ccbench' for rpc flows",
                                 related=(dotted(loc + ("kind",)),))
            if backend in ("linux", "hosts"):
                active = (f.stop if f.stop is not None else st.duration) - f.start
                if f.start_jitter or active % 1_000_000_000:
                    raise FieldError(loc + ("tool",), "iperf3 runs for whole seconds: the flow's active time "
                                     f"(stop or study.duration − start = {units.format_time(active)}) must be a "
                                     "whole number of seconds, without start_jitter", f.tool, "'ccbench'",
                                     related=(dotted(loc + ("start",)), dotted(loc + ("stop",)), "study.duration"))
        latest_start = f.start + f.start_jitter
        if latest_start >= st.duration:
            # Name the field that pushes the start past the end: start itself, or its jitter.
            late = "start" if f.start >= st.duration or not f.start_jitter else "start_jitter"
            raise FieldError(loc + (late,), "start + start_jitter must be before the end of the run "
                             f"(study.duration = {units.format_time(st.duration)}; start = "
                             f"{units.format_time(f.start)}, start_jitter = {units.format_time(f.start_jitter)})",
                             units.format_time(getattr(f, late)),
                             f"a time below {units.format_time(st.duration - (0 if late == 'start' else f.start))}",
                             related=("study.duration", dotted(loc + ("start_jitter" if late == "start" else "start",))))
        if f.stop is not None:
            if f.stop <= latest_start:
                what = "start + start_jitter" if f.start_jitter else "start"
                raise FieldError(loc + ("stop",), f"must be after {what} ({units.format_time(latest_start)})",
                                 units.format_time(f.stop), f"a time after {units.format_time(latest_start)}",
                                 related=(dotted(loc + ("start",)), dotted(loc + ("start_jitter",))))
            if f.stop > st.duration:
                raise FieldError(loc + ("stop",), "must not be after the end of the run "
                                 f"(study.duration = {units.format_time(st.duration)})",
                                 units.format_time(f.stop), f"at most {units.format_time(st.duration)}",
                                 related=("study.duration",))
        request = f.request if f.request is not None else 10_000
        response = f.response if f.response is not None else 100
        think = f.think if f.think is not None else 0
        if f.group is not None:
            group = f.group
        elif f.kind == "bulk":
            group = f"{f.cca} bulk"
        elif f.kind == "transfer":
            group = f"{f.cca} transfer {units.format_size(f.size)}"
        else:
            group = f"{f.cca} rpc {units.format_size(request)}"
        for _ in range(f.count):
            fid = len(out)
            if general:
                where: dict[str, Any] = {"src": f.src, "dst": f.dst}
                sender = net.hosts.index(f.src)
                routes.append(route)
            else:
                where, sender = {"sender": f.sender}, f.sender
            flow: dict[str, Any] = {
                "id": fid, "cca": cca, **where, "kind": f.kind,
                "start_ns": f.start, "stop_ns": f.stop,
            }
            if general:
                flow["path"], flow["return_path"] = net.link_names(route.path), net.link_names(route.back)
            if f.kind == "transfer":
                flow["size_bytes"] = f.size
            if f.kind == "rpc":
                flow.update(request_bytes=request, response_bytes=response, think_ns=think)
            if f.cwnd_clamp is not None:
                flow["cwnd_clamp"] = f.cwnd_clamp
            if f.max_rate is not None:
                flow["max_rate_bps"] = f.max_rate
            if f.queue_class:
                flow["queue_class"] = f.queue_class
            if f.tool != "ccbench":
                flow["tool"] = f.tool  # the linux backend's; the simulator runs the same bulk flow
            out.append(flow)
            jitters.append(f.start_jitter)
            meta.append({"id": fid, "cca": f.cca, "sender": sender, "kind": f.kind, "group": group, **where})
    return out, jitters, meta, routes


def _shown(f: Any, name: str) -> str:
    v = getattr(f, name)
    return units.format_time(v) if name == "think" else units.format_size(v)


def finish(config: dict, jitters: list[int], meta: list[dict], seed: int) -> tuple[dict, list[dict]]:
    """Apply the seed and start jitter: the final config (seed first) and flow_meta."""
    flows = []
    out_meta = []
    for flow, jit, fm in zip(config["flows"], jitters, meta):
        flow = dict(flow)
        flow["start_ns"] += jitter_ns(seed, flow["id"], jit)
        flows.append(flow)
        out_meta.append({
            **fm,
            "start_us": flow["start_ns"] // 1000,
            "stop_us": None if flow["stop_ns"] is None else flow["stop_ns"] // 1000,
        })
    final = {"seed": seed, **copy_tree(config)}
    final["flows"] = flows
    return final, out_meta
