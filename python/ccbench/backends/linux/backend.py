"""The linux backend: real kernel TCP in network namespaces.

One run:

1. a run token, the run directory /run/ccbench/ccb<token>/ (owner.json:
   who runs it), the namespaces, veths and TUN device (netns.py);
2. the emulator in the router namespace, the load server in the receiver's
   and one load client per sender host with flows (procs.py), all started
   and ready before t0 is chosen;
3. t0 = now + START_MARGIN; everything stops at t0 + duration (emulator and
   server a little later so the last packets get through);
4. the outputs become one RunResult (interfaces.md §2), with honesty checks:
   status "suspect" and a note when the emulator could not keep up or a
   sender was limited by something other than the network;
5. always — also on errors, Ctrl-C (KeyboardInterrupt), SIGTERM/SIGHUP
   (raised as :class:`Terminated`) and interpreter exit (atexit) — every
   process, namespace and file of the run is removed. Signals that arrive
   during the teardown are held until it is done.

A runner killed with SIGKILL leaves things behind: ``ccbench doctor
--cleanup`` (cleanup.py) removes them.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Optional

from ccbench.backends import SAMPLE_COLUMNS, RunResult, steal
from ccbench.errors import UsageError

from . import bpf_cca, cgroups, cleanup, iperf3, netns, procs, tcp_watch

SERVER_PORT = 5201
# With a network the emulator knows each flow's packets by the port its load
# client binds: CLIENT_PORT_BASE + flow id (docs/linux-backend.md, "Networks").
CLIENT_PORT_BASE = 10000
READY_TIMEOUT_S = 30.0
START_MARGIN_NS = 750_000_000  # from "go" to t0: the processes read their config and open sockets/TUN
END_GRACE_NS = 300_000_000  # emulator and server outlive the clients by this much
EXIT_TIMEOUT_S = 10.0  # after the end, how long the processes get to exit by themselves

# Honesty checks (see docs/linux-backend.md).
LATE_TOLERANCE_NS = 1_000_000  # a packet delivered later than this after its due time is "late"
LATE_FRACTION_MAX = 0.01  # more late packets than this fraction of all delivered → suspect (p99s would move)
STALL_MAX_NS = 10_000_000  # one packet this late means the emulator stalled → suspect
# An emulator sample this busy, not counting its voluntary busy-polling, is
# "at 100% CPU": at the share of a CPU the kernel lets a real-time thread
# have (sched_rt_runtime_us / sched_rt_period_us, 0.95 by default), less a
# margin for sampling; there it is about to be throttled (stopped for the
# rest of the period). Below it the emulator is busy but keeping up, which
# lateness and drops (checked separately) show.
CPU_BUSY_MARGIN = 0.02
# Run stats shared with the simulator → the kernel's TcpExt counters that sum
# to them: every retransmission timeout that fired with data outstanding,
# every tail loss probe sent, and a connection's first timeout (its backoff
# not started) once more by the state it ended: Recovery, Loss, Disorder or
# with segments SACKed (the SACK and the non-SACK counter of each); every
# entry into fast recovery; and every retransmission found lost again.
TCP_EXT_COUNTERS = {
    "rto_count": ("TCPTimeouts",),
    "tlp_count": ("TCPLossProbes",),
    "rto_in_recovery": ("TCPSackRecoveryFail", "TCPRenoRecoveryFail"),
    "rto_in_loss": ("TCPLossFailures",),
    "rto_in_disorder": ("TCPSackFailures", "TCPRenoFailures"),
    "recoveries": ("TCPSackRecovery", "TCPRenoRecovery"),
    "lost_retransmits": ("TCPLostRetransmit",),
}


def cpu_busy_level(runtime_us: Optional[int], period_us: Optional[int]) -> float:
    """The busy level for an RT runtime/period (-1 or unknown: no cap)."""
    if runtime_us is None or period_us is None or runtime_us < 0 or period_us <= 0:
        cap = 1.0
    else:
        cap = min(1.0, runtime_us / period_us)
    return cap - CPU_BUSY_MARGIN


def _rt_sysctl(name: str) -> Optional[int]:
    try:
        return int(Path(f"/proc/sys/kernel/{name}").read_text())
    except (OSError, ValueError):
        return None
CPU_BUSY_SAMPLES_MAX = 0.10  # ... more such samples than this fraction → suspect
# A sender's window grows only while it is full (tcp_is_cwnd_limited: in slow
# start, below twice what is in flight), and what is in flight fits in the
# send buffer, so a sampled congestion window beyond this many send buffers
# cannot come from the congestion control: the kernel's state is corrupt
# (docs/linux-backend.md, "A corrupt window").
CWND_WMEM_MAX = 4
LIMITED_FRACTION_MAX = 0.10  # rwnd + sndbuf limited time / busy time of a bulk flow
APP_BUSY_MIN = 0.80  # a bulk flow busy (data outstanding) less than this of its active time

_REQUIRED = ("emu_run", "load_server", "load_client")


class Terminated(SystemExit):
    """SIGTERM or SIGHUP arrived during a run (after its teardown)."""

    def __init__(self, signum: int):
        super().__init__(128 + signum)
        self.signum = signum


# ---------------------------------------------------------------- environment


def environment_problems() -> list[str]:
    """What this machine lacks for the linux backend, each with what to do."""
    problems = []
    if not Path("/proc/sys/net").is_dir():
        return ["this is not Linux (no /proc/sys/net): the linux backend runs only on Linux"]
    if os.geteuid() != 0:
        problems.append("it needs root (network namespaces, veth and TUN devices): "
                        "run ccbench as root, e.g. `sudo ccbench ...`")
    if shutil.which("ip") is None:
        problems.append("the `ip` command is missing: install iproute2 (apt-get install iproute2)")
    if not Path("/proc/self/ns/net").exists():
        problems.append("the kernel has no network namespaces (CONFIG_NET_NS): use a kernel with them")
    if not Path("/dev/net/tun").exists():
        problems.append("there is no /dev/net/tun: load the tun module (modprobe tun) or create the "
                        "device node (mkdir -p /dev/net && mknod /dev/net/tun c 10 200)")
    return problems


def core_problem() -> Optional[str]:
    """Why the emulator / load generator cannot be used, or None."""
    from ccbench import core

    name = core.EXTENSION
    try:
        mod = core.load("the linux backend")
    except UsageError as e:
        return str(e)
    missing = [f for f in _REQUIRED if not hasattr(mod, f)]
    if missing:
        return (f"{name} has no {', '.join(missing)} (the emulator and load generator are not built in); "
                "rebuild it: make install")
    return None


# ---------------------------------------------------------------- signals and atexit

_ACTIVE: set["_Run"] = set()
_ATEXIT = False


def _close_all() -> None:
    for r in list(_ACTIVE):
        try:
            r.close()
        except BaseException:  # noqa: BLE001 - exiting anyway
            pass


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def terminate_raises() -> Iterator[None]:
    """Inside the block SIGTERM and SIGHUP raise Terminated (so finally blocks run)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, _raise_terminated) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def signals_held() -> Iterator[list[int]]:
    """Hold SIGINT/SIGTERM/SIGHUP during the block; act on the first one
    afterwards. Yields the list of the signals held so far."""
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    got: list[int] = []
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.signal(s, lambda signum, frame: got.append(signum)) for s in sigs}
    try:
        yield got
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if got:
            s = got[0]
            h = old[s]
            if callable(h):
                h(s, None)
            elif h == signal.SIG_DFL:
                if s == signal.SIGINT:
                    raise KeyboardInterrupt
                raise Terminated(s)


# ---------------------------------------------------------------- one run


def remove_dead_runs() -> tuple[list[str], list[str]]:
    """Remove what linux runs whose process died left on this machine
    (cleanup.py), their BPF CCAs included; runs in progress are left alone.
    Returns (one line per thing removed, problems)."""
    removed, problems = cleanup.cleanup()
    lines = [f"removed run ccb{r.token}: {r.describe()}" for r in removed]
    if bpf_cca.available() is None:
        names, bpf_problems = bpf_cca.cleanup_leftovers()
        lines += [f"unregistered BPF congestion control {n}" for n in names]
        problems += bpf_problems
    return lines, problems


def bpf_ccas(cfg: dict) -> list[str]:
    """The run's distinct ``bpf:`` CCAs, in the order they are registered (``_b0``, ``_b1``...)."""
    return sorted({f["cca"] for f in cfg["flows"] if f["cca"].startswith("bpf:")})


class _Run:
    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.token = netns.new_token()
        self.dir = cleanup.run_dir(self.token)
        mtu = int(cfg["tcp"]["mss"]) + int(cfg["tcp"].get("header_bytes", 52))
        self.network = cfg.get("network")
        if self.network is not None:
            hosts = [n["name"] for n in self.network["nodes"] if n["kind"] == "host"]
            self.topo = netns.plan_network(self.token, hosts, mtu)
        else:
            self.topo = netns.plan(self.token, len(cfg["senders"]), mtu)
        self.procs = procs.ProcSet(self.dir)
        self.closed = False
        self.iface: dict[str, dict] = {}
        self.tun_qdisc_drops = 0
        # The hosts' TcpExt counters summed at the end of the run (netns.tcp_ext_counters), or why not.
        self.tcp_ext: dict[str, int] = {}
        self.tcp_ext_problem: Optional[str] = None
        self.cgroups: dict[str, Path] = {}  # client name → its cgroup, for cwnd-clamped flows
        self.servers: list[str] = ["server"]  # the load servers' process names
        self.bpf: list[bpf_cca.Registration] = []  # BPF CCAs registered for this run (bpf_cca.py)
        self.cca_name: dict[str, str] = {}  # a flow's cca → the name its sockets use
        self.watch: Optional[tcp_watch.Watch] = None  # with BPF CCAs: every ACK's window (tcp_watch.py)
        self.watch_problem: Optional[str] = None
        self.cpu_times: list[dict] = []  # /proc/stat per CPU as the run starts and ends (steal.py)

    # -- lifecycle

    def open(self) -> None:
        global _ATEXIT
        if not _ATEXIT:
            atexit.register(_close_all)
            _ATEXIT = True
        _ACTIVE.add(self)
        cleanup.RUN_ROOT.mkdir(mode=0o755, parents=True, exist_ok=True)
        self.dir.mkdir(mode=0o700)
        cleanup.write_owner(self.dir)
        netns.build(self.topo, self.cfg["tcp"])
        for i, cca in enumerate(bpf_ccas(self.cfg)):
            try:
                reg = bpf_cca.register(cca, self.token, i, self.dir)
            except bpf_cca.BpfLoadError as e:
                raise UsageError(e.message, e.detail) from None
            self.bpf.append(reg)
            self.cca_name[cca] = reg.name
        if self.bpf:
            # Where the connections are accepted: the dumbbell's receiver, or each destination host.
            receivers = ([self.topo.receiver] if self.topo.receiver is not None else
                         [self.topo.nodes[d] for d in sorted({f["dst"] for f in self.cfg["flows"]})])
            for host in receivers:
                bpf_cca.accept_ecn(host.ns, self.bpf)
            self.watch = tcp_watch.Watch(self.token)
            try:
                self.watch.start(window_limit_segs(self.cfg))
            except tcp_watch.WatchError as e:
                self.watch, self.watch_problem = None, str(e)

    def close(self) -> None:
        """Stop every process, delete every namespace and the run directory (idempotent)."""
        if self.closed:
            return
        problems = []
        with signals_held() as held:
            try:
                self.procs.stop()
                # Safety net: anything else inside our namespaces or naming our run directory
                # (e.g. started just as an interrupt arrived, before it was tracked).
                strays = [p for r in cleanup.find(include_live=True) if r.token == self.token for p in r.pids
                          if p != os.getpid()]
                if strays:
                    cleanup.kill(strays)
            except Exception as e:  # noqa: BLE001
                problems.append(f"stopping the processes: {e}")
            for reg in self.bpf:
                problem = bpf_cca.unregister(reg)
                if problem:
                    problems.append(problem)
            n_bpf = len(bpf_ccas(self.cfg))
            if n_bpf:  # one registered as an interruption arrived, before it was recorded
                problems += bpf_cca.unregister_names(bpf_cca.run_names(self.token, n_bpf))
            if self.watch is not None:
                problem = self.watch.stop()
                if problem:
                    problems.append(problem)
            for d in self.cgroups.values():
                problem = cgroups.remove(d)
                if problem:
                    problems.append(problem)
            try:
                netns.teardown(self.topo)
            except Exception as e:  # noqa: BLE001
                problems.append(str(e))
            shutil.rmtree(self.dir, ignore_errors=True)
            self.closed = True
            _ACTIVE.discard(self)
            if problems and held:  # the interruption is raised as the block ends: say it here
                print("ccbench: cleaning up the run failed (run `ccbench doctor --cleanup`): " + "; ".join(problems),
                      file=sys.stderr)
        if problems:
            raise netns.SetupError("cleaning up the run failed (run `ccbench doctor --cleanup`): "
                                   + "; ".join(problems))

    # -- the run

    def execute(self) -> RunResult:
        if self.network is not None:
            return self._execute_network()
        cfg, topo = self.cfg, self.topo
        emu_cpu, host_cpus = cpu_plan()
        self.procs.start("emu", "emu", topo.router_ns)
        self.procs.start("server", "server", topo.receiver.ns, cpus=host_cpus)
        clients = {}
        for i, h in enumerate(topo.senders):
            flows = [f for f in cfg["flows"] if f["sender"] == i and f.get("tool") != "iperf3"]
            if flows:
                clients[f"client-s{i}"] = (h, flows)
                # Before the process starts: close() removes it whatever happens next.
                self.cgroups[f"client-s{i}"] = cgroups.create(self.token, f"c{i}")
                self.procs.start(f"client-s{i}", "client", h.ns, cpus=host_cpus)
        # tool = "iperf3": a server and a client of its own per flow (iperf3.py).
        iperf = {f"iperf3-{f['id']}": f for f in cfg["flows"] if f.get("tool") == "iperf3"}
        for name, f in iperf.items():
            self.procs.start(name + "-server", "iperf3", topo.receiver.ns, cpus=host_cpus)
            self.procs.start(name, "iperf3", topo.senders[f["sender"]].ns, cpus=host_cpus)
        self.procs.wait_ready(READY_TIMEOUT_S)

        t0 = time.monotonic_ns() + START_MARGIN_NS
        end = t0 + int(cfg["duration_ns"])
        interval = int(cfg["sample_interval_ns"])
        server = f"{topo.receiver.ip}:{SERVER_PORT}"
        configs: dict[str, dict] = {
            "emu": {
                "tun": topo.tun,
                "receiver_ip": topo.receiver.ip,
                "senders": [{"ip": h.ip, "rate_bps": s["rate_bps"], "delay_ns": s["delay_ns"]}
                            for h, s in zip(topo.senders, cfg["senders"])],
                "bottleneck": cfg["bottleneck"],
                "reverse": cfg["reverse"],
                **self._emu_clock(t0, end, interval, emu_cpu),
            },
            "server": {"listen": server, "stop_at_monotonic_ns": end + END_GRACE_NS, "t0_monotonic_ns": t0},
        }
        # TCP_MAXSEG is the MSS option value: payload + the timestamp option
        # (header_bytes - 40). The MTU (mss + header_bytes) gives the same.
        mss_opt = int(cfg["tcp"]["mss"]) + int(cfg["tcp"].get("header_bytes", 52)) - 40
        for name, (h, flows) in clients.items():
            configs[name] = {
                "server": server,
                "t0_monotonic_ns": t0,
                "stop_at_monotonic_ns": end,
                "sample_interval_ns": interval,
                "flows": [{
                    "id": f["id"], "cca": self.cca_name.get(f["cca"], f["cca"]), "kind": f["kind"], "start_ns": f["start_ns"],
                    "stop_ns": f["stop_ns"], "request_bytes": f.get("request_bytes"),
                    "response_bytes": f.get("response_bytes"), "think_ns": f.get("think_ns"), "mss": mss_opt,
                    "size_bytes": f.get("size_bytes"),
                    **socket_options(f, cfg["tcp"]),
                } for f in flows],
                "samples_path": str(self.dir / f"{name}.samples.jsonl"),
            }
            # Through our /proc root: `ip netns exec` gives the client a /sys without cgroup mounts.
            configs[name]["cgroup"] = f"/proc/{os.getpid()}/root{self.cgroups[name]}"
        for name, f in iperf.items():
            port = iperf3.BASE_PORT + int(f["id"])
            configs[name + "-server"] = {"role": "server", "port": port, "sample_interval_ns": interval,
                                         "stop_at_monotonic_ns": end + END_GRACE_NS}
            configs[name] = {
                "role": "client", "server_ip": topo.receiver.ip, "port": port, "t0_monotonic_ns": t0,
                "seconds": iperf3.config_seconds(f, int(cfg["duration_ns"])), "sample_interval_ns": interval,
                "mss": mss_opt, "flow": {**f, "cca": self.cca_name.get(f["cca"], f["cca"]), **socket_options(f, cfg["tcp"])},
                "json_path": str(self.dir / f"{name}.iperf3.json"),
                "samples_path": str(self.dir / f"{name}.samples.jsonl"),
            }
            clients[name] = (topo.senders[f["sender"]], [f])
        return self._finish(configs, t0, end, clients, ["server"])

    def _emu_clock(self, t0: int, end: int, interval: int, emu_cpu: Optional[int]) -> dict:
        """The emulator config's fields shared by the dumbbell and a network: seed, clock, stats, CPU."""
        return {"seed": self.cfg["seed"], "t0_monotonic_ns": t0, "stop_at_monotonic_ns": end + END_GRACE_NS,
                "sample_interval_ns": interval, "stats_path": str(self.dir / "emu.stats.jsonl"),
                "late_tolerance_ns": LATE_TOLERANCE_NS, "cpu": "off" if emu_cpu is None else emu_cpu}

    def _finish(self, configs: dict[str, dict], t0: int, end: int, clients: dict, servers: list[str]) -> RunResult:
        self.cpu_times = [steal.read()]
        self.procs.go(configs)
        deadline = (end + END_GRACE_NS) / 1e9 + EXIT_TIMEOUT_S
        # The hosts' TCP counters as the run's time ends: after it the clients
        # close their sockets with data unsent, the emulator stops, and what
        # those sockets then time out or probe is not the run's.
        cut = threading.Event()
        reader = threading.Thread(target=self._read_tcp_ext_at, args=(end, cut), name="tcp-ext", daemon=True)
        reader.start()
        late_exit = [p.name for p in self.procs.wait(deadline)]
        cut.set()  # a run that ended early is read when it ended
        reader.join()
        self.cpu_times.append(steal.read())
        if late_exit:
            self.procs.stop()
        self._read_kernel_counters()
        self.servers = servers
        return self._assemble(t0, clients, late_exit)

    def _execute_network(self) -> RunResult:
        """A general network: a load server on every host that is some flow's
        dst, a load client on every host that is some flow's src (each flow's
        socket bound to CLIENT_PORT_BASE + id), and the emulator carrying
        every packet over the links of its flow's path."""
        cfg, topo = self.cfg, self.topo
        emu_cpu, host_cpus = cpu_plan()
        flows = cfg["flows"]
        self.procs.start("emu", "emu", topo.router_ns)
        servers = {}
        for f in flows:
            h = topo.nodes[f["dst"]]
            name = f"server-{h.role}"
            if name not in servers:
                servers[name] = h
                self.procs.start(name, "server", h.ns, cpus=host_cpus)
        clients: dict[str, tuple] = {}
        for f in flows:
            h = topo.nodes[f["src"]]
            clients.setdefault(f"client-{h.role}", (h, []))[1].append(f)
        for name, (h, fl) in clients.items():
            self.cgroups[name] = cgroups.create(self.token, "c" + h.role[1:])
            self.procs.start(name, "client", h.ns, cpus=host_cpus)
        self.procs.wait_ready(READY_TIMEOUT_S)

        t0 = time.monotonic_ns() + START_MARGIN_NS
        end = t0 + int(cfg["duration_ns"])
        interval = int(cfg["sample_interval_ns"])
        emu_flows = [{
            "id": f["id"], "src": f["src"], "dst": f["dst"],
            "client_port": CLIENT_PORT_BASE + int(f["id"]), "server_port": SERVER_PORT,
            "path": f.get("path"), "return_path": f.get("return_path"), "kind": f["kind"],
            "size_bytes": f.get("size_bytes"), "start_ns": f["start_ns"], "stop_ns": f.get("stop_ns"),
        } for f in flows]
        configs: dict[str, dict] = {
            "emu": {
                "tun": topo.tun,
                "network": self.network,
                "hosts": [{"name": n, "ip": h.ip} for n, h in topo.nodes.items()],
                "flows": emu_flows,
                "events": cfg.get("events") or [],
                "controller": cfg.get("controller"),
                **self._emu_clock(t0, end, interval, emu_cpu),
            },
        }
        for name, h in servers.items():
            configs[name] = {"listen": f"{h.ip}:{SERVER_PORT}", "stop_at_monotonic_ns": end + END_GRACE_NS,
                             "t0_monotonic_ns": t0}
        mss_opt = int(cfg["tcp"]["mss"]) + int(cfg["tcp"].get("header_bytes", 52)) - 40
        for name, (h, fl) in clients.items():
            configs[name] = {
                "server": f"{topo.nodes[fl[0]['dst']].ip}:{SERVER_PORT}",
                "t0_monotonic_ns": t0,
                "stop_at_monotonic_ns": end,
                "sample_interval_ns": interval,
                "flows": [{
                    "id": f["id"], "cca": self.cca_name.get(f["cca"], f["cca"]), "kind": f["kind"], "start_ns": f["start_ns"],
                    "stop_ns": f.get("stop_ns"), "request_bytes": f.get("request_bytes"),
                    "response_bytes": f.get("response_bytes"), "think_ns": f.get("think_ns"), "mss": mss_opt,
                    "size_bytes": f.get("size_bytes"), "bind_port": CLIENT_PORT_BASE + int(f["id"]),
                    "server": f"{topo.nodes[f['dst']].ip}:{SERVER_PORT}",
                    **socket_options(f, cfg["tcp"]),
                } for f in fl],
                "samples_path": str(self.dir / f"{name}.samples.jsonl"),
            }
            configs[name]["cgroup"] = f"/proc/{os.getpid()}/root{self.cgroups[name]}"
        return self._finish(configs, t0, end, clients, list(servers))

    def _read_tcp_ext_at(self, end_ns: int, cut: threading.Event) -> None:
        """Retransmission timeouts and tail loss probes at the run's end (or
        when ``cut`` is set): every namespace is this run's own, so its
        counters started at zero."""
        cut.wait(max(0.0, (end_ns - time.monotonic_ns()) / 1e9))
        try:
            per_host = [netns.tcp_ext_counters(h.ns) for h in self.topo.hosts]
        except (OSError, ValueError) as e:
            self.tcp_ext_problem = f"the hosts' TCP counters could not be read: {e}"
        else:
            self.tcp_ext = {key: sum(c.get(name, 0) for c in per_host for name in names)
                            for key, names in TCP_EXT_COUNTERS.items()}

    def _read_kernel_counters(self) -> None:
        for ns in self.topo.namespaces:
            for ifname, st in netns.link_stats(ns).items():
                self.iface[f"{ns}/{ifname}"] = st
        p = netns.ip("netns", "exec", self.topo.router_ns, "tc", "-s", "-j", "qdisc", "show", "dev",
                     self.topo.tun, check=False) if shutil.which("tc") else None
        if p is not None and p.returncode == 0:
            try:
                self.tun_qdisc_drops = sum(int(q.get("drops", 0)) for q in json.loads(p.stdout or "[]"))
            except (ValueError, TypeError):
                pass

    # -- results

    def _assemble(self, t0: int, clients: dict, late_exit: list[str]) -> RunResult:
        cfg = self.cfg
        by_name = {p.name: p for p in self.procs.procs}
        client_out = {name: by_name[name].result() for name in clients}
        emu_out = by_name["emu"].result()
        # One server (the dumbbell's receiver) or one per destination host: merged.
        server_out: dict[str, Any] = {"flows": [], "errors": []}
        for name in self.servers:
            out = by_name[name].result()
            server_out["flows"] += out.get("flows") or []
            server_out["errors"] += out.get("errors") or []
        received = {int(f["flow_id"]): f for f in server_out["flows"]}
        duration_us = int(cfg["duration_ns"]) // 1000

        cflows: dict[int, dict] = {}
        rpc_rows: list[dict] = []
        samples_rows: list[dict] = []
        iperf3_summary: dict[str, Any] = {}
        for name, out in client_out.items():
            for f in out.get("flows", []):
                cflows[int(f["flow_id"])] = f
            iperf3_summary.update(out.get("iperf3") or {})
            rpc_rows += result_rows(out.get("rpcs"))
            samples_rows += procs.read_jsonl(self.dir / f"{name}.samples.jsonl")

        flows = []
        for f in cfg["flows"]:
            c = cflows.get(int(f["id"]))
            if c is None:
                raise procs.ProcError(f"the load client reported nothing for flow {f['id']}")
            flows.append(flow_row(f, c, cfg, received.get(int(f["id"]))))

        # samples: the clients' rows, in (time, flow) order like the simulator's
        samples_rows = [r for r in samples_rows if r.get("time_us") is not None and r["time_us"] <= duration_us]
        samples_rows.sort(key=lambda r: (r["time_us"], r["flow_id"]))
        samples = {c: [r.get(c) for r in samples_rows] for c, _ in SAMPLE_COLUMNS}

        # queue: the emulator's stats lines
        # The emulator's stats lines (the last one, "final", is its summary again).
        stats_lines = [x for x in procs.read_jsonl(self.dir / "emu.stats.jsonl") if not x.get("final")]
        queue: dict[str, list] = {c: [] for c in ("link", "time_us", "backlog_bytes", "backlog_pkts", "drops",
                                                  "ecn_marks", "lateness_us", "random_losses", "tx_bytes",
                                                  "utilisation")}
        for line in stats_lines:
            if line.get("time_us") is None or line["time_us"] > duration_us:
                continue
            late_all = (line.get("lateness_us") or {}).get("p99")
            # Every link that queues, by its directed name (the dumbbell's: bottleneck, reverse).
            for link, q in sorted((line.get("links") or {}).items()):
                # p99 lateness of the packets that crossed this link and were delivered in the interval
                late = (q["lateness_us"] or {}).get("p99") if "lateness_us" in q else late_all
                queue["link"].append(link)
                queue["time_us"].append(line["time_us"])
                for k in ("backlog_bytes", "backlog_pkts", "drops", "ecn_marks", "random_losses", "tx_bytes"):
                    queue[k].append(q.get(k, 0))
                queue["utilisation"].append(q.get("utilisation"))
                queue["lateness_us"].append(late)
        # events: route changes and the controller's states and moves, as the emulator applied them
        ev_rows = emu_out.get("events")
        if ev_rows is None:
            ev_rows = [e for x in stats_lines for e in x.get("events") or []]
        events = {c: [e.get(c) for e in ev_rows if e.get("time_us", 0) <= duration_us]
                  for c in ("time_us", "kind", "flow_id", "state", "link", "detail")}

        rpc_rows = [r for r in rpc_rows if r.get("start_us") is not None]
        rpc_rows.sort(key=lambda r: (r["start_us"], r["flow_id"]))
        rpcs = {c: [r.get(c) for r in rpc_rows]
                for c in ("flow_id", "request_bytes", "response_bytes", "start_us", "latency_us")}

        peaks = window_peaks(cflows, samples_rows, int(cfg["tcp"]["mss"]))
        status, note, checks = self._honesty(emu_out, server_out, stats_lines, cflows, flows, late_exit, peaks)
        stats = {
            "backend": "linux",
            "kernel": os.uname().release,
            "topology": self.topo.describe(),
            "t0_monotonic_ns": t0,
            "emulator": emu_out,
            **checks,
            # Where the load generator's processes ran, as they reported it.
            "host_cpus": sorted({c for out in (server_out, *client_out.values()) for c in out.get("cpus") or []}),
            # How many RTT samples rtt_mean_us / rtt_p99_us are over, per flow (docs/analysis.md).
            "rtt_samples": {str(i): c.get("rtt_samples") for i, c in sorted(cflows.items())},
        }
        if iperf3_summary:
            stats["iperf3"] = iperf3_summary
        result = {"flows": flows, "samples": samples, "queue": queue, "rpcs": rpcs, "stats": stats,
                  "status": status, "note": note}
        if self.network is not None or ev_rows:
            result["events"] = events
        return RunResult.from_dict(result)

    def _honesty(self, emu_out: dict, server_out: dict, lines: list[dict], cflows: dict, flows: list[dict],
                 late_exit: list[str], peaks: dict[int, dict[str, int]]) -> tuple[str, Optional[str], dict]:
        cfg, topo = self.cfg, self.topo
        reasons: list[str] = []
        # emulator (could not keep up) | processes | sender (not network-limited) | kernel (corrupt TCP state)
        kinds: set[str] = set()
        info: list[str] = []

        def flag(kind: str, text: str) -> None:
            kinds.add(kind)
            reasons.append(text)

        last = lines[-1] if lines else {}

        def counter(key: str) -> int:  # a run total: from the summary, else the last stats line
            v = emu_out.get(key, last.get(key))
            return int(v or 0)

        def link_counter(link: str, key: str) -> int:
            src = (emu_out.get("links") or {}).get(link) or (last.get("links") or {}).get(link) or {}
            return int(src.get(key) or 0)

        tun = self.iface.get(f"{topo.router_ns}/{topo.tun}", {})
        tun_in = int(tun.get("tx_packets", 0))  # the kernel transmits into the TUN: the emulator reads it
        late_pkts = counter("late_pkts")
        delivered = counter("pkts") or tun_in
        if delivered and late_pkts > LATE_FRACTION_MAX * delivered:
            flag("emulator", f"the emulator delivered {late_pkts} of {delivered} packets more than "
                           f"{LATE_TOLERANCE_NS / 1e6:g} ms late")
        max_late_us = max((float((x.get("lateness_us") or {}).get("max") or 0) for x in lines), default=0.0)
        max_late_us = max(max_late_us, float((emu_out.get("lateness_us") or {}).get("max") or 0))
        if max_late_us * 1000 > STALL_MAX_NS:
            flag("emulator", f"the emulator stalled: a packet was delivered {max_late_us / 1000:.1f} ms late")
        # The TUN's drop counter as the emulator read it when it stopped (afterwards, with no
        # reader, the kernel drops whatever the hosts still send, e.g. a lingering close).
        if "tun_tx_dropped" in emu_out:
            tun_drops = int(emu_out.get("tun_tx_dropped") or 0)
        else:
            tun_drops = int(tun.get("tx_dropped", 0)) + self.tun_qdisc_drops
        if tun_drops:
            flag("emulator", f"the TUN queue dropped {tun_drops} packets (the emulator did not read fast enough)")
        tun_rx_drops = int(emu_out.get("tun_rx_dropped") or 0)
        if tun_rx_drops:
            flag("emulator", f"the kernel dropped {tun_rx_drops} packets the emulator wrote into the TUN")
        tun_errors = counter("tun_read_errors") + counter("tun_write_errors")
        if tun_errors:
            flag("emulator", f"{tun_errors} TUN read/write errors in the emulator")
        cpu = [float(x["cpu_busy_fraction"]) - float(x.get("spin_fraction") or 0.0)
               for x in lines if x.get("cpu_busy_fraction") is not None]
        level = cpu_busy_level(_rt_sysctl("sched_rt_runtime_us"), _rt_sysctl("sched_rt_period_us"))
        busy = sum(1 for x in cpu if x >= level)
        if cpu and busy > CPU_BUSY_SAMPLES_MAX * len(cpu):
            flag("emulator", f"the emulator was at 100% CPU in {busy} of {len(cpu)} samples")
        other_drops = {k: v["rx_dropped"] + v["tx_dropped"] for k, v in self.iface.items()
                       if not k.endswith("/" + topo.tun) and v["rx_dropped"] + v["tx_dropped"] > 0}
        if other_drops:
            flag("emulator", "packets dropped outside the emulator: "
                           + ", ".join(f"{k.split('/')[-1]} {v}" for k, v in sorted(other_drops.items())))
        errors = server_out.get("errors") or []
        if errors:
            flag("processes", f"the load server reported {len(errors)} error{'s' if len(errors) != 1 else ''}: "
                           + "; ".join(str(e) for e in errors[:3]))
        never = [str(f["flow_id"]) for f in cflows.values() if f.get("connected") is False]
        if never:
            flag("processes", f"flow{'s' if len(never) != 1 else ''} {', '.join(never)} never connected")
        if late_exit:
            flag("processes", f"{', '.join(late_exit)} did not stop in time and was killed")

        # Was a sender limited by something other than the network?
        for f, row in zip(cfg["flows"], flows):
            c = cflows[int(f["id"])]
            busy_us = float(c.get("busy_us") or 0)
            if f["kind"] != "bulk" or c.get("tool") == "iperf3":  # iperf3 reports no limited/busy times
                continue
            lim_r = float(c.get("rwnd_limited_us") or 0)
            lim_s = float(c.get("sndbuf_limited_us") or 0)
            if busy_us > 0 and (lim_r + lim_s) > LIMITED_FRACTION_MAX * busy_us:
                what = []
                if lim_r:
                    what.append(f"the receive window {100 * lim_r / busy_us:.0f}%")
                if lim_s:
                    what.append(f"the send buffer {100 * lim_s / busy_us:.0f}%")
                flag("sender", f"flow {f['id']} was limited by {' and '.join(what)} of its busy time "
                               "(tcp.rmem / tcp.wmem)")
            active_us = row["active_stop_us"] - row["active_start_us"]
            if active_us > 0 and busy_us < APP_BUSY_MIN * active_us:
                flag("sender", f"flow {f['id']} had data outstanding only {100 * busy_us / active_us:.0f}% of "
                               "its active time (application-limited: the load generator did not keep up)")

        for text in corrupt_windows(cfg, peaks) + unapplied_sockops(cfg, cflows, peaks):
            flag("kernel", text)
        if self.watch is not None:
            ours = {h.ip for h in topo.hosts}
            caught = [c for c in self.watch.caught() if c.src.rsplit(":", 1)[0] in ours]
            text = caught_windows(cfg, caught)
            if text:
                flag("kernel", text)
        elif self.watch_problem:
            info.append(f"windows were only checked at the sample interval: {self.watch_problem}")

        stolen = steal.fractions(*self.cpu_times) if len(self.cpu_times) == 2 else {}
        if "emulator" in kinds:
            text = steal.note(stolen, emu_out.get("cpu"))
            if text:
                info.append(text)
        if self.tcp_ext_problem:
            info.append(self.tcp_ext_problem)
        if emu_out.get("placement_error"):
            info.append(f"the emulator ran unpinned: {emu_out['placement_error']}")

        # Every kernel retransmission is accounted for by an emulator drop, or spurious.
        retrans = sum(int(c.get("retrans_segs") or 0) for c in cflows.values())
        links = (emu_out.get("links") or last.get("links") or {}) if self.network is not None else {"bottleneck": 0}
        fwd_drops = sum(link_counter(k, "drops") + link_counter(k, "random_losses") for k in links)
        where = "on the bottleneck" if self.network is None else "on its links"
        spurious = max(0, retrans - fwd_drops)
        if spurious:
            info.append(f"{spurious} spurious retransmission{'s' if spurious != 1 else ''} (the senders "
                        f"retransmitted {retrans} segments, the emulator dropped {fwd_drops} packets {where})")
        checks = {
            "kernel_retrans_segs": retrans,
            "emu_bottleneck_drops": link_counter("bottleneck", "drops"),
            "emu_bottleneck_random_losses": link_counter("bottleneck", "random_losses"),
            "emu_reverse_drops": link_counter("reverse", "drops") + link_counter("reverse", "random_losses"),
            "emu_link_drops": {k: link_counter(k, "drops") + link_counter(k, "random_losses")
                               for k in (emu_out.get("links") or last.get("links") or {})},
            "spurious_retrans_segs": spurious,
            # As the simulator's stats count them, over all hosts' TCP (the kernel's TcpExt counters).
            **{key: self.tcp_ext.get(key) for key in TCP_EXT_COUNTERS},
            "tun_packets_in": tun_in,
            "tun_drops": tun_drops,
            "late_pkts": late_pkts,
            "late_tolerance_us": LATE_TOLERANCE_NS / 1000,
            "lateness_max_us": max_late_us,
            "cpu_busy_max": max(cpu, default=None),
            "cpu_busy_mean": sum(cpu) / len(cpu) if cpu else None,
            "interface_drops": other_drops,
            # Where the emulator ran and where the hosts' kernel work was steered (RPS).
            "emu_cpu": emu_out.get("cpu"),
            "emu_rps_cpus": emu_out.get("rps_cpus"),
            # Each CPU's share of the run stolen by the virtual machine's host (steal.py).
            "steal": stolen,
            "suspect_reasons": reasons,
            "suspect_kinds": sorted(kinds),
        }
        status = "suspect" if reasons else "ok"
        note = "; ".join(reasons + info) or None
        return status, note, checks


def window_peaks(cflows: dict[int, dict], samples_rows: list[dict], mss: int) -> dict[int, dict[str, int]]:
    """Each flow's largest congestion window and ssthresh in segments
    (``max_cwnd_segs``, ``max_ssthresh_segs``): from its load client's
    TCP_INFOs and its sample rows (iperf3's flows have only those)."""
    peaks: dict[int, dict[str, int]] = {}
    for fid, c in cflows.items():
        peaks[fid] = {k: int(c[k]) for k in ("max_cwnd_segs", "max_ssthresh_segs") if c.get(k) is not None}
    for r in samples_rows:
        if r.get("cwnd_bytes") is not None:
            p = peaks.setdefault(int(r["flow_id"]), {})
            p["max_cwnd_segs"] = max(p.get("max_cwnd_segs", 0), int(r["cwnd_bytes"]) // mss)
    return peaks


def window_limit_segs(cfg: dict) -> int:
    """The largest window or ssthresh, in segments, a congestion control
    could set: CWND_WMEM_MAX send buffers."""
    return CWND_WMEM_MAX * int(cfg["tcp"]["wmem_bytes"]) // int(cfg["tcp"]["mss"])


def caught_windows(cfg: dict, caught: list[tcp_watch.Catch]) -> Optional[str]:
    """The reason for what the run's tcp_probe watch caught, or None."""
    if not caught:
        return None
    worst = max(caught, key=lambda c: (c.cwnd, c.ssthresh if c.ssthresh != tcp_watch.INFINITE_SSTHRESH else 0))
    conns = sorted({(c.src, c.dest) for c in caught})
    return (f"the kernel saw a congestion window of {worst.cwnd} packets (ssthresh {worst.ssthresh}) on the "
            f"connection {worst.src} -> {worst.dest}, in {len(caught)} ACK{'s' if len(caught) != 1 else ''} on "
            f"{len(conns)} connection{'s' if len(conns) != 1 else ''} past {CWND_WMEM_MAX} send buffers "
            f"({window_limit_segs(cfg)} packets): the kernel's congestion state was corrupt, so the run does not "
            "measure the congestion control")


def corrupt_windows(cfg: dict, peaks: dict[int, dict[str, int]]) -> list[str]:
    """One reason per flow whose largest congestion window or ssthresh
    (``peaks``: window_peaks) no congestion control could have set: more
    than window_limit_segs. Seen when the kernel skipped a BPF congestion
    control's ssthresh hook and took a stale value instead
    (docs/linux-backend.md, "A corrupt window")."""
    limit = window_limit_segs(cfg)
    out = []
    for f in cfg["flows"]:
        p = peaks.get(int(f["id"])) or {}
        bad = [f"{what} reached {p[key]} packets" for key, what in
               (("max_cwnd_segs", "congestion window"), ("max_ssthresh_segs", "ssthresh"))
               if p.get(key, 0) > limit]
        if bad:
            out.append(f"flow {f['id']}'s {' and its '.join(bad)}, more than {CWND_WMEM_MAX} send buffers "
                       f"({limit} packets): the kernel's congestion state was corrupt, "
                       "so the run does not measure the flow's congestion control")
    return out


def unapplied_sockops(cfg: dict, cflows: dict[int, dict], peaks: dict[int, dict[str, int]]) -> list[str]:
    """One reason per flow whose sock_ops program (crates/load/src/sockops.rs)
    evidently did not run when its connection was established: it delivered
    data but took no RTT sample (the program turns them on there), or its
    window went past twice its ``cwnd_clamp`` (set there too). The same
    sandbox kernel skips it as it skips BPF congestion controls
    (docs/linux-backend.md, "A corrupt window")."""
    out = []
    for f in cfg["flows"]:
        c = cflows.get(int(f["id"])) or {}
        if c.get("rtt_samples") == 0 and int(c.get("bytes_acked") or 0) > 0:
            out.append(f"flow {f['id']} delivered {c['bytes_acked']} bytes but took no RTT sample: the sock_ops "
                       "program did not run for its connection (nor did a cwnd_clamp)")
        clamp = f.get("cwnd_clamp")
        top = (peaks.get(int(f["id"])) or {}).get("max_cwnd_segs", 0)
        if clamp is not None and top > 2 * int(clamp) + 2:
            out.append(f"flow {f['id']}'s congestion window reached {top} packets, past its cwnd_clamp of {clamp}")
    return out


def cpu_plan() -> tuple[Optional[int], Optional[list[int]]]:
    """The emulator's CPU and the hosts' processes' CPUs: the emulator gets the
    last CPU this process may use to itself (it runs real-time there, with the
    hosts' kernel work steered away by RPS: crates/emu/src/cpu.rs), the load
    generator and iperf3 the others. (None, None) with a single CPU."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return None, None
    return allowed[-1], allowed[:-1]


# SO_MAX_PACING_RATE for pacing = "on" without a flow's max_rate: finite (so
# the kernel turns its TCP pacing on) but far above any link.
PACING_ON_BPS = 1 << 60


def socket_options(flow: dict, tcp: dict) -> dict:
    """The load client's per-socket options for a flow: the DSCP that carries
    its queue_class to the emulator, and SO_MAX_PACING_RATE for max_rate or
    pacing = "on" (any finite value turns on the kernel's TCP pacing)."""
    opts: dict[str, Any] = {}
    if flow.get("queue_class"):
        opts["dscp"] = int(flow["queue_class"])
    if flow.get("cwnd_clamp") is not None:
        opts["cwnd_clamp"] = int(flow["cwnd_clamp"])
    if flow.get("max_rate_bps") is not None:
        opts["max_pacing_rate_bps"] = int(flow["max_rate_bps"])
    elif tcp.get("pacing") == "on":
        opts["max_pacing_rate_bps"] = PACING_ON_BPS
    return opts


def flow_row(f: dict, c: dict, cfg: dict, received: Optional[dict]) -> dict:
    """The flows-table row of flow ``f`` of the resolved config from its load
    client's report ``c`` and the server's ``received`` (linux and hosts)."""
    start = int(f["start_ns"])
    stop = min(int(f["stop_ns"] if f.get("stop_ns") is not None else cfg["duration_ns"]), int(cfg["duration_ns"]))
    completion_us = transfer_completion_us(f, received)
    if completion_us is not None:  # a finished transfer was active until its last byte arrived
        stop = start + completion_us * 1000
    active_s = (stop - start) / 1e9
    b = int(c.get("bytes_acked") or 0)
    return {
        "flow_id": int(f["id"]),
        "bytes_delivered": b,
        "goodput_bps": b * 8 / active_s if active_s > 0 else 0.0,
        # iperf3 does not report segments sent: null, not 0.
        "sent_segs": None if c.get("tool") == "iperf3" else int(c.get("sent_segs") or 0),
        "retrans_segs": int(c.get("retrans_segs") or 0),
        "rtt_min_us": c.get("rtt_min_us"),
        "rtt_mean_us": c.get("rtt_mean_us"),
        "rtt_p99_us": c.get("rtt_p99_us"),
        "active_start_us": start // 1000,
        "active_stop_us": stop // 1000,
        "completion_us": completion_us,
    }


def transfer_completion_us(flow: dict, received: Optional[dict]) -> Optional[int]:
    """A transfer's time from its start to its last byte at the receiver
    (the load server's clock); None for other kinds and unfinished transfers."""
    if flow.get("kind") != "transfer" or not received or not received.get("complete"):
        return None
    last = received.get("last_byte_us")
    return None if last is None else max(0, int(last) - int(flow["start_ns"]) // 1000)


def result_rows(x: Any) -> list[dict]:
    """RPC rows given as a list of objects or as columns."""
    if not x:
        return []
    if isinstance(x, list):
        return [dict(r) for r in x]
    if isinstance(x, dict):
        cols = list(x)
        n = len(x[cols[0]]) if cols else 0
        return [{c: x[c][i] for c in cols} for i in range(n)]
    return []


# ---------------------------------------------------------------- the backend


class LinuxBackend:
    """Runs a RunSpec on real Linux TCP (see the module docstring)."""

    name = "linux"

    def check(self) -> None:
        problems = environment_problems()
        core = core_problem()
        if core:
            problems.append(core)
        if problems:
            raise UsageError("backend 'linux' is not available: " + "; ".join(problems))

    def preflight(self, runs: list) -> None:
        """Before any run: the kernel must accept every BPF CCA of the study
        (a verifier rejection is a usage error, exit 2, nothing registered)."""
        objs = sorted({f["cca"] for r in runs for f in r.config["flows"] if f["cca"].startswith("bpf:")})
        if objs:
            problem = bpf_cca.available()
            if problem:
                raise UsageError(f"BPF congestion control on linux: {problem}")
            try:
                bpf_cca.verify(objs)
            except bpf_cca.BpfLoadError as e:
                field = next((f"flows.{i}.cca: " for r in runs for i, f in enumerate(r.config["flows"])
                              if f["cca"] == e.cca), "")
                raise UsageError(field + e.message, e.detail) from None

    def run(self, runspec: Any) -> RunResult:
        self.check()
        cfg = runspec.config
        _validate(cfg)
        with terminate_raises():
            r = _Run(cfg)
            try:
                r.open()
                return r.execute()
            finally:
                r.close()


def _validate(cfg: dict) -> None:
    """What the study checks could not know: the kernel's algorithms here."""
    from ccbench.spec import kernel
    from ccbench.spec.model import SELF_PACED

    have = kernel.available() or ()
    for f in cfg["flows"]:
        if f["cca"].startswith("bpf:"):  # registered by the run (bpf_cca.py)
            continue
        if f["cca"] not in have:
            raise UsageError(f"flow {f['id']}: this kernel has no congestion control '{f['cca']}' "
                             f"(available: {', '.join(have)})")
    if any(f.get("tool") == "iperf3" for f in cfg["flows"]):
        problem = iperf3.available()
        if problem:
            raise UsageError(f"flows with tool = 'iperf3': {problem}")
    if cgroups.root() is None:
        raise UsageError("the linux backend needs a cgroup v2 hierarchy (its TCP-BPF program counts the flows' RTT "
                         "samples and clamps windows there) and none is mounted: mount one, e.g. "
                         "`mount -t cgroup2 none /sys/fs/cgroup`")
    if cfg["tcp"].get("pacing") == "off" and any(f["cca"] in SELF_PACED for f in cfg["flows"]):
        raise UsageError("tcp.pacing = 'off': the linux backend cannot stop bbr from pacing")
    if cfg.get("network") is not None:
        hosts = [n["name"] for n in cfg["network"]["nodes"] if n["kind"] == "host"]
        if len(hosts) > netns.MAX_HOSTS:
            raise UsageError(f"topology: the linux backend runs at most {netns.MAX_HOSTS} hosts "
                             f"(one namespace each; got {len(hosts)})")
        for f in cfg["flows"]:
            if f.get("tool") == "iperf3":
                raise UsageError(f"flow {f['id']}: tool = 'iperf3' is not supported with a [topology] on linux "
                                 "(the emulator knows a flow's packets by the port ccbench's load client binds)")
            if not 0 <= int(f["id"]) <= 65535 - CLIENT_PORT_BASE:
                raise UsageError(f"flow {f['id']}: at most {65535 - CLIENT_PORT_BASE + 1} flows with a [topology] "
                                 "on linux")
