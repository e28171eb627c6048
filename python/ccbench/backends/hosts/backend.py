"""The hosts backend: one run on real machines over SSH.

Before any run (:meth:`HostsBackend.prepare`, called by ``ccbench run``):
the inventory is read and checked, every host gets its pre-flight
(preflight.py) — any problem stops the study before anything is created,
one line per problem naming the host — and the binaries are found (deploy.py).

One run:

1. a token; on every host the run directory ``WORKDIR/ccb<token>-<role>``
   with ``owner.json`` and ``manifest.json`` (remote.py), the binaries
   copied in and checked (SHA-256, version);
2. the study's TCP settings on the senders and the receiver (sysctls,
   old values recorded first); on the forwarder, ``emu``: a TUN device and
   policy rules that send the test traffic arriving on its test interfaces
   into it, ``tc``: tbf (+ netem) on its egress interfaces;
3. each host's clock offset to the controller (``ccbench-load clock``: the
   sample with the shortest round trip of 16; CLOCK_MONOTONIC and
   CLOCK_REALTIME), at the start and at the end of the run;
4. the processes — emulator (forwarder), load server (receiver), one load
   client per sender, iperf3 pairs — started over SSH, each saying
   ``ready``; then t0 is chosen on the controller's clock and every host
   gets it on its own (t0 + that host's monotonic offset), with its config
   on stdin. Their stdin stays open: when the controller goes away (even
   SIGKILL: the ssh clients die with it), they stop;
5. results, samples and the emulator's stats are read back (``cat``) and
   become one RunResult (the same schema as sim and linux);
6. always — errors, Ctrl-C, SIGTERM — every host's processes are stopped,
   the manifest undone and the run directory deleted. A host lost during a
   run fails that run with its name; the others are cleaned, and the lost
   host is cleaned at the start of the next run (or by ``ccbench doctor
   --cleanup --inventory FILE``).
"""

from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Optional

from ccbench.backends import SAMPLE_COLUMNS, RunResult, steal
from ccbench.errors import StudyError, UsageError
from ccbench.spec import units

from . import deploy, preflight
from .cleanup import log_dir_prefix
from .inventory import Host, Inventory, merge, parse, read_file
from .remote import HostRun
from .ssh import Connection, SshError, open_all


def parallel(fn, items: list) -> list:
    """fn over items, one thread each (each call is SSH round trips; no process outlives its call)."""
    from concurrent.futures import ThreadPoolExecutor

    if len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=len(items)) as ex:
        return list(ex.map(fn, items))

SERVER_PORT = 5201
START_MARGIN_NS = 1_500_000_000  # from the configs to t0: over SSH on a busy machine
END_GRACE_NS = 300_000_000
EXIT_TIMEOUT_S = 15.0
READY_TIMEOUT_S = 30.0
CLOCK_PROBES = 16
LATE_TOLERANCE_NS = 1_000_000
LATE_FRACTION_MAX = 0.01
STALL_MAX_NS = 10_000_000


class HostError(RuntimeError):
    """A run failed because of one host (the message names it)."""


# ---------------------------------------------------------------- checks of the study


def tc_qdiscs_needed(cfg: dict) -> set[str]:
    need = {"tbf"}
    for link in (cfg.get("bottleneck") or {}, cfg.get("reverse") or {}):
        if int(link.get("delay_ns") or 0) > 0 or float(link.get("loss") or 0) > 0:
            need.add("netem")
    return need


def check_config(cfg: dict, inv: Inventory) -> None:
    """What the hosts backend cannot run, as a UsageError (before anything starts)."""
    if cfg.get("network") is not None:
        raise UsageError("topology: the hosts backend runs the dumbbell (senders, one bottleneck, a receiver); "
                         "a general [topology] with links and routers runs on sim and linux")
    if cfg["tcp"].get("delayed_ack") == "off":
        raise UsageError("tcp.delayed_ack = 'off': the hosts backend does not change the hosts' routes "
                         "(quickack); leave it at 'linux'")
    if int(cfg["tcp"].get("init_cwnd", 10)) != 10 or int(cfg["tcp"].get("min_rto_ns", 200_000_000)) != 200_000_000:
        raise UsageError("tcp.init_cwnd / tcp.min_rto: the hosts backend does not change the hosts' routes, where "
                         "Linux keeps them: leave them at Linux's defaults (10, '200ms')")
    if inv.bottleneck == "tc":
        for name, link in (("bottleneck", cfg["bottleneck"]), ("reverse", cfg.get("reverse"))):
            if link and (link.get("qdisc") or {"kind": "fifo"}).get("kind", "fifo") != "fifo":
                raise UsageError(f"topology.{name}.qdisc: bottleneck = 'tc' sets a FIFO (tbf) only; use "
                                 "bottleneck = 'emu' for the other queue disciplines")
            if link and link.get("jitter_ns"):
                # netem's jitter reorders packets; ccbench's keeps their order (docs/topology.md).
                raise UsageError(f"topology.{name}.jitter = '{units.format_time(link['jitter_ns'])}': bottleneck = "
                                 "'tc' has no order-keeping jitter; use bottleneck = 'emu', or leave jitter at 0")
            if link and link.get("stall_ns"):
                raise UsageError(f"topology.{name}.stalls: bottleneck = 'tc' (netem) cannot pause a link; use "
                                 "bottleneck = 'emu', or leave stalls out")


# ---------------------------------------------------------------- processes over SSH


@dataclass
class RemoteProc:
    name: str
    conn: Connection
    popen: subprocess.Popen
    result_path: Optional[str]  # remote
    log_path: str  # local stderr of the ssh process (the remote process's stderr)
    ready: bool = False
    stdout_text: str = ""

    @property
    def host(self) -> Host:
        return self.conn.host

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self) -> str:
        try:
            lines = open(self.log_path, errors="replace").read().strip().splitlines()
        except OSError:
            return ""
        return " | ".join(x.strip() for x in lines[-5:] if x.strip())

    def send(self, line: str) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(line.encode() + b"\n")
        self.popen.stdin.flush()

    def stop(self) -> None:
        if self.popen.stdin is not None and not self.popen.stdin.closed:
            try:
                self.popen.stdin.close()  # the remote process sees the end of stdin and stops
            except OSError:
                pass
            self.popen.stdin = None  # communicate() must not flush it again


def _read_line(p: subprocess.Popen, deadline: float) -> Optional[str]:
    assert p.stdout is not None
    fd = p.stdout.fileno()
    buf = b""
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            ch = os.read(fd, 1)
            if not ch:
                return None
            if ch == b"\n":
                return buf.decode(errors="replace")
            buf += ch
        elif p.poll() is not None:
            return None
    return None


# ---------------------------------------------------------------- the backend


class HostsBackend:
    """Runs a RunSpec on the machines of an inventory (see the module docstring)."""

    name = "hosts"

    def __init__(self, inventory: Optional[Inventory] = None, facts: Optional[dict] = None,
                 binaries: Optional[dict] = None):
        self.inventory = inventory
        self.facts = facts or {}
        self.binaries = binaries
        self.pending: list[tuple[Host, str]] = []  # (host, run dir) whose cleanup failed: retried

    def check(self) -> None:
        if shutil.which("ssh") is None:
            raise UsageError("backend 'hosts' is not available: there is no ssh client (apt-get install "
                             "openssh-client)")

    # -- before the study

    def prepare(self, study: Any, inventory: Optional[str] = None, *, preflight_only: bool = False) -> "HostsBackend":
        """Read the inventory, check the study against it and pre-flight every host."""
        model_hosts = (getattr(study, "document", None) or {}).get("hosts")
        table = merge(model_hosts, read_file(inventory) if inventory else None)
        source = inventory or str(study.path)
        runs = study.runs()
        n_senders = len(runs[0].config.get("senders") or []) if runs else None
        base = os.path.dirname(os.path.abspath(inventory or study.path))
        inv = parse(table, source=source, n_senders=n_senders, base_dir=__import__("pathlib").Path(base))
        ccas: dict[str, set[str]] = {}
        iperf_roles: set[str] = set()
        tc_q: set[str] = set()
        mss = 0
        for r in runs:
            cfg = r.config
            try:
                check_config(cfg, inv)
            except UsageError as e:
                raise UsageError(f"{study.path}: {e.message}" + (f" (with {inventory})" if inventory else ""),
                                 e.detail) from None
            mss = max(mss, int(cfg["tcp"]["mss"]))
            for f in cfg["flows"]:
                ccas.setdefault(f"s{f['sender']}", set()).add(f["cca"])
                ccas.setdefault("d", set()).add(f["cca"])
                if f.get("tool") == "iperf3":
                    iperf_roles |= {f"s{f['sender']}", "d"}
            if inv.bottleneck == "tc":
                tc_q |= tc_qdiscs_needed(cfg)
        conns = _connections(inv)
        try:
            facts, problems = preflight.check_all(conns, inv, ccas_by_role=ccas, mtu_needed=mss + 52,
                                                  iperf3_roles=iperf_roles, tc_qdiscs=tc_q)
        finally:
            for c in conns.values():
                c.close()
        if problems:
            n = len(problems)
            raise UsageError(f"{source}: pre-flight found {n} problem{'s' if n != 1 else ''} on the hosts; nothing "
                             "was started", "\n".join(problems))
        binaries = None if preflight_only else deploy.local_binaries()
        return HostsBackend(inv, facts, binaries)

    # -- one run

    def run(self, runspec: Any) -> RunResult:
        self.check()
        if self.inventory is None:
            raise UsageError("the hosts backend needs an inventory: a [hosts] table in the study or "
                             "`ccbench run STUDY --inventory FILE`")
        from ccbench.backends.linux.backend import terminate_raises

        cfg = runspec.config
        check_config(cfg, self.inventory)
        self._retry_pending()
        with terminate_raises():
            r = _Run(self, cfg)
            try:
                r.open()
                result = r.execute()
            except BaseException:
                r.close(quiet=True)
                raise
            r.close()
        # The hosts as they were: in the run's parameters (interfaces, MTU, offloads, kernel).
        try:
            cfg["hosts"] = r.parameters()
        except TypeError:
            pass
        return result

    def _retry_pending(self) -> list[str]:
        """Clean up again where a run's cleanup failed; returns a line per
        host where it failed again."""
        from .remote import remove_dir

        left, why = [], []
        for host, d in self.pending:
            c = _connection(self.inventory, host)
            try:
                c.open()
                c.sudo = ["sudo", "-n", "--"] if (self.facts.get(host.role) or {}).get("privileges") == "sudo" else []
                problems = remove_dir(c, d, None)
                if problems:
                    left.append((host, d))
                    why.append(f"{'; '.join(problems)} (run directory {d})")
            except SshError as e:
                left.append((host, d))
                why.append(f"{' '.join(str(e).split())} (run directory {d})")
            finally:
                c.close()
        self.pending = left
        return why

    def finish(self) -> list[str]:
        """After the study (also an interrupted one): what runs left on
        hosts whose cleanup failed and fails again now (a host that died or
        is unreachable), one line each; [] when nothing is left."""
        return self._retry_pending() if self.pending else []


def _connection(inv: Inventory, h: Host) -> Connection:
    return Connection(h, accept_new=inv.accept_new_host_keys, connect_timeout_s=inv.connect_timeout_s)


def _connections(inv: Inventory) -> dict[str, Connection]:
    return {h.role: _connection(inv, h) for h in inv.hosts}


class _Run:
    def __init__(self, backend: HostsBackend, cfg: dict):
        self.b = backend
        self.inv: Inventory = backend.inventory  # type: ignore[assignment]
        self.cfg = cfg
        self.token = secrets.token_hex(4)
        self.conns = _connections(self.inv)
        for role, c in self.conns.items():
            if (backend.facts.get(role) or {}).get("privileges") == "sudo":
                c.sudo = ["sudo", "-n", "--"]
        self.hr = {role: HostRun(c, self.token) for role, c in self.conns.items()}
        self.procs: list[RemoteProc] = []
        self.local = tempfile.mkdtemp(prefix=log_dir_prefix(self.token))
        self.clock: dict[str, dict] = {}
        self.cpu_times: dict[str, list[dict]] = {}  # per role: /proc/stat per CPU as the run starts and ends
        # per sender: its load client's cgroup (remote.py), where the TCP-BPF program takes RTT samples;
        # None without a cgroup v2 mount there
        self.cgroups: dict[str, Optional[str]] = {}
        self.closed = False

    # -- lifecycle

    def open(self) -> None:
        inv = self.inv
        open_all([hr.conn for hr in self.hr.values()])  # from this thread: the masters live as long as the run
        from ccbench.backends.linux.netns import host_sysctls

        sysctls = dict(host_sysctls(self.cfg["tcp"]))

        def one(hr: HostRun) -> None:
            role = hr.conn.host.role
            names = ["ccbench-load"] + (["ccbench-emu"] if role == "f" and inv.bottleneck == "emu" else [])
            hr.create({n: self.b.binaries[n] for n in names})
            if role.startswith("s"):
                self.cgroups[role] = hr.create_cgroup()
            if role != "f":
                hr.set_sysctls(sysctls)
            elif inv.bottleneck == "emu":
                self._setup_emu()
            elif inv.bottleneck == "tc":
                self._setup_tc()

        parallel(one, list(self.hr.values()))
        for f in self.cfg["flows"]:
            h = inv.senders[f["sender"]]
            if f.get("cwnd_clamp") is not None and not self.cgroups.get(h.role):
                raise HostError(f"host {h.label}: flow {f['id']} has cwnd_clamp, which the sender's TCP-BPF "
                                "program applies in a cgroup v2, and the host has none mounted")

    def _setup_emu(self) -> None:
        """The forwarder: a TUN device; what arrives on the test interfaces for a test address goes into it
        (policy rules → a table of /32 routes into the TUN); what the emulator writes back (iif = the TUN)
        follows the forwarder's own routes."""
        hr = self.hr["f"]
        f = hr.conn.host
        tun = f"ccb{self.token}-tun"
        table = 0x10000 + int(self.token[:4], 16)
        pref = 20000 + int(self.token[4:], 16) % 10000
        mtu = min(int((self.b.facts.get("f") or {}).get("interfaces", {}).get(i, {}).get("mtu") or 1500)
                  for i in (*f.to_senders, f.to_receiver))
        items: list[dict] = [{"kind": "link", "name": tun}, {"kind": "table", "table": table}]
        lines = [f"tuntap add dev {tun} mode tun", f"link set dev {tun} mtu {mtu} txqueuelen 4096 up"]
        for h in (*self.inv.senders, self.inv.receiver):
            lines.append(f"route add {h.address}/32 dev {tun} table {table}")
        for i in dict.fromkeys((*f.to_senders, f.to_receiver)):
            items.append({"kind": "rule", "pref": pref, "iif": i, "table": table})
            lines.append(f"rule add pref {pref} iif {i} lookup {table}")
        hr.apply(items, ["ip", f"sysctl=net.ipv4.conf.{tun}.rp_filter=0"], "\n".join(lines) + "\n")
        self.tun = tun

    def _setup_tc(self) -> None:
        hr = self.hr["f"]
        f = hr.conn.host
        cfg = self.cfg
        mtu = int(cfg["tcp"]["mss"]) + 52
        rev = cfg.get("reverse") or {**cfg["bottleneck"], "loss": 0.0}
        have = set((self.b.facts.get("f") or {}).get("qdiscs") or [])
        items, lines = [], []
        for dev, link in [(f.to_receiver, cfg["bottleneck"])] + [(i, rev) for i in f.to_senders]:
            rate = int(link["rate_bps"])
            limit = int(link.get("buffer_bytes") or int(link.get("buffer_pkts") or 1000) * mtu)
            burst = max(2 * mtu, rate // 8 // 250)
            tbf = f"tbf rate {rate}bit burst {burst} limit {limit}"
            items.append({"kind": "qdisc", "dev": dev})
            if int(link.get("delay_ns") or 0) > 0 or float(link.get("loss") or 0) > 0:
                if "netem" not in have:
                    raise HostError(f"host {f.label}: delay or loss on the bottleneck needs netem, which its kernel "
                                    "lacks: use bottleneck = 'emu'")
                lines.append(f"qdisc add dev {dev} root handle 1: netem delay {int(link['delay_ns']) // 1000}us "
                             f"loss {100 * float(link.get('loss') or 0):.6f}% limit 100000")
                lines.append(f"qdisc add dev {dev} parent 1: handle 2: {tbf}")
            else:
                lines.append(f"qdisc add dev {dev} root {tbf}")
        hr.apply(items, ["tc"], "\n".join(lines) + "\n")

    def close(self, quiet: bool = False) -> None:
        if self.closed:
            return
        from ccbench.backends.linux.backend import signals_held

        problems = []
        with signals_held():
            for p in self.procs:
                p.stop()
            deadline = time.monotonic() + 5
            for p in self.procs:
                try:
                    p.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.popen.kill()
                    p.popen.wait()
            def one(hr: HostRun) -> list[str]:
                c = hr.conn
                if not hr.created:  # the run never reached this host (it failed first): nothing there
                    return []
                try:
                    if not c.alive():
                        c.close()
                    got = hr.remove()  # (re)connects if needed
                    if got:
                        self.b.pending.append((c.host, hr.dir))
                    return got
                except SshError as e:
                    self.b.pending.append((c.host, hr.dir))
                    return [str(e)]

            for got in parallel(one, list(self.hr.values())):
                problems += got
            for hr in self.hr.values():
                hr.conn.close()
            shutil.rmtree(self.local, ignore_errors=True)
            self.closed = True
        if problems and not quiet:
            raise HostError("cleaning up the run failed (it is retried before the next run; or run `ccbench doctor "
                            "--cleanup --inventory FILE`): " + "; ".join(problems))

    # -- clocks

    def measure_clocks(self, when: str) -> None:
        """Each host's clock offsets: of CLOCK_PROBES round trips, the one that took least time."""
        probes = {role: hr.conn.popen([hr.load_bin, "clock"], stderr=subprocess.DEVNULL)
                  for role, hr in self.hr.items()}
        try:
            for role, p in probes.items():
                best = None
                for _ in range(CLOCK_PROBES):
                    t1, r1 = time.monotonic_ns(), time.time_ns()
                    p.stdin.write(b"x\n")
                    p.stdin.flush()
                    line = _read_line(p, time.monotonic() + 15)
                    t2, r2 = time.monotonic_ns(), time.time_ns()
                    if line is None:
                        raise HostError(f"host {self.hr[role].conn.host.label}: the clock probe got no answer "
                                        "(connection lost?)")
                    mono, real = (int(x) for x in line.split())
                    smp = (t2 - t1, mono - (t1 + t2) // 2, real - (r1 + r2) // 2)
                    if best is None or smp[0] < best[0]:
                        best = smp
                assert best is not None
                self.clock.setdefault(role, {})[when] = {
                    "monotonic_offset_ns": best[1], "realtime_offset_ns": best[2], "rtt_us": best[0] / 1000,
                    "probes": CLOCK_PROBES}
        finally:
            for p in probes.values():
                try:
                    p.stdin.close()
                    p.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    p.kill()

    def read_cpu_times(self) -> None:
        """Each host's /proc/stat per CPU (steal.py); a host that cannot say is left out."""
        def one(role: str) -> dict:
            try:
                t = self.hr[role].conn.run(["cat", "/proc/stat"], check=False, sudo=False)
            except SshError:
                return {}
            return steal.parse(t.stdout) if t.returncode == 0 else {}

        for role, times in zip(self.hr, parallel(one, list(self.hr))):
            self.cpu_times.setdefault(role, []).append(times)

    def offset(self, role: str) -> int:
        return int(self.clock[role]["start"]["monotonic_offset_ns"])

    # -- processes

    def start(self, name: str, role: str, argv: list[str], result: Optional[str]) -> RemoteProc:
        hr = self.hr[role]
        log = os.path.join(self.local, f"{name}.log")
        with open(log, "wb") as lf:
            popen = hr.conn.popen(argv, stdout=subprocess.PIPE, stderr=lf)
        p = RemoteProc(name=name, conn=hr.conn, popen=popen, result_path=result, log_path=log)
        self.procs.append(p)
        return p

    def start_load(self, name: str, role: str, kind: str) -> RemoteProc:
        hr = self.hr[role]
        h = hr.conn.host
        binary = hr.emu_bin if kind == "emu" else hr.load_bin
        sub = "run" if kind == "emu" else kind
        argv = [binary, sub, "--pidfile", f"{hr.dir}/{name}.pid", "--result", f"{hr.dir}/{name}.result.json"]
        if h.cpus:
            argv += ["--cpus", ",".join(str(c) for c in h.cpus)]
        return self.start(name, role, argv, f"{hr.dir}/{name}.result.json")

    def wait_ready(self, procs: list[RemoteProc]) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        for p in procs:
            line = _read_line(p.popen, deadline)
            if line != "ready":
                self._fail_host(p, "did not start")
            p.ready = True

    def _fail_host(self, p: RemoteProc, what: str) -> None:
        code = p.popen.poll()
        if not p.conn.alive() or code == 255:
            raise HostError(f"host {p.host.label}: connection lost during the run ({p.name} {what}): "
                            f"{p.log_tail() or 'the host or its sshd went away'}")
        detail = self._remote_error(p) or p.log_tail() or f"exit status {code}"
        raise HostError(f"host {p.host.label}: {p.name} {what}: {detail}")

    def _remote_error(self, p: RemoteProc) -> Optional[str]:
        if not p.result_path:
            return None
        try:
            t = p.conn.run(["cat", p.result_path], check=False)
            d = json.loads(t.stdout) if t.returncode == 0 else None
        except (SshError, ValueError):
            return None
        return d.get("error") if isinstance(d, dict) else None

    # -- the run

    def execute(self) -> RunResult:
        from ccbench.backends.linux.backend import socket_options
        from ccbench.backends.linux import iperf3

        cfg, inv = self.cfg, self.inv
        self.measure_clocks("start")
        load_procs: list[RemoteProc] = []
        if inv.bottleneck == "emu":
            load_procs.append(self.start_load("emu", "f", "emu"))
        load_procs.append(self.start_load("server", "d", "server"))
        clients: dict[str, tuple[str, list[dict]]] = {}
        for i, h in enumerate(inv.senders):
            flows = [f for f in cfg["flows"] if f["sender"] == i and f.get("tool") != "iperf3"]
            if flows:
                clients[f"client-s{i}"] = (h.role, flows)
                load_procs.append(self.start_load(f"client-s{i}", h.role, "client"))
        self.wait_ready(load_procs)
        self.read_cpu_times()

        t0 = time.monotonic_ns() + START_MARGIN_NS
        end = t0 + int(cfg["duration_ns"])
        interval = int(cfg["sample_interval_ns"])
        server = f"{inv.receiver.address}:{SERVER_PORT}"
        mss_opt = int(cfg["tcp"]["mss"]) + int(cfg["tcp"].get("header_bytes", 52)) - 40

        def at(role: str, t: int) -> int:  # a controller time on that host's clock
            return t + self.offset(role)

        configs: dict[str, dict] = {
            "server": {"listen": server, "stop_at_monotonic_ns": at("d", end + END_GRACE_NS),
                       "t0_monotonic_ns": at("d", t0)},
        }
        if inv.bottleneck == "emu":
            f = inv.forwarder
            assert f is not None
            configs["emu"] = {
                "tun": self.tun, "receiver_ip": inv.receiver.address,
                "senders": [{"ip": h.address, "rate_bps": s["rate_bps"], "delay_ns": s["delay_ns"]}
                            for h, s in zip(inv.senders, cfg["senders"])],
                "bottleneck": cfg["bottleneck"], "reverse": cfg["reverse"], "seed": cfg["seed"],
                "t0_monotonic_ns": at("f", t0), "stop_at_monotonic_ns": at("f", end + END_GRACE_NS),
                "sample_interval_ns": interval, "stats_path": f"{self.hr['f'].dir}/emu.stats.jsonl",
                "late_tolerance_ns": LATE_TOLERANCE_NS, "cpu": f.emu_cpu,
            }
        for name, (role, flows) in clients.items():
            configs[name] = {
                "server": server, "t0_monotonic_ns": at(role, t0), "stop_at_monotonic_ns": at(role, end),
                "sample_interval_ns": interval,
                "flows": [{
                    "id": f["id"], "cca": f["cca"], "kind": f["kind"], "start_ns": f["start_ns"],
                    "stop_ns": f["stop_ns"], "request_bytes": f.get("request_bytes"),
                    "response_bytes": f.get("response_bytes"), "think_ns": f.get("think_ns"), "mss": mss_opt,
                    "size_bytes": f.get("size_bytes"), **socket_options(f, cfg["tcp"]),
                } for f in flows],
                "samples_path": f"{self.hr[role].dir}/{name}.samples.jsonl",
            }
            if self.cgroups.get(role):
                configs[name]["cgroup"] = self.cgroups[role]
        for p in load_procs:
            try:
                p.send(json.dumps(configs[p.name]))
            except (BrokenPipeError, OSError):
                self._fail_host(p, "went away before its start")
        # iperf3: a server per flow at once, the client at the flow's start (on the sender's clock).
        iperf: dict[str, tuple[dict, RemoteProc]] = {}
        d = self.hr["d"]
        for f in (f for f in cfg["flows"] if f.get("tool") == "iperf3"):
            port = iperf3.BASE_PORT + int(f["id"])
            name = f"iperf3-{f['id']}"
            # Its JSON into a file there: through ssh into a pipe read only after
            # the run, a 30 s run's 136 KB filled the pipe and held ssh open.
            self.start(name + "-server", "d", [d.load_bin, "spawn", "--pidfile", f"{d.dir}/{name}-server.pid",
                                               "--stdout", f"{d.dir}/{name}-server.json", "--",
                                               *iperf3.server_argv(port, interval)], None)
        for f in (f for f in cfg["flows"] if f.get("tool") == "iperf3"):
            port = iperf3.BASE_PORT + int(f["id"])
            name = f"iperf3-{f['id']}"
            role = f"s{f['sender']}"
            s = self.hr[role]
            seconds = iperf3.config_seconds(f, int(cfg["duration_ns"]))
            argv = iperf3.client_argv(inv.receiver.address, port, {**f, **socket_options(f, cfg["tcp"])},
                                      seconds, interval, mss_opt)
            p = self.start(name, role, [s.load_bin, "spawn", "--pidfile", f"{s.dir}/{name}.pid",
                                        "--at", str(at(role, t0 + int(f["start_ns"]))),
                                        "--stdout", f"{s.dir}/{name}.json", "--", *argv], None)
            iperf[name] = (f, p)

        # Wait for the end; a lost host or a failed process ends the run at once.
        deadline = (end + END_GRACE_NS) / 1e9 + EXIT_TIMEOUT_S
        iperf_deadline = max([deadline] + [(t0 + int(f["start_ns"])) / 1e9 + (iperf3.config_seconds(
            f, int(cfg["duration_ns"])) or 0) + EXIT_TIMEOUT_S for f, _ in iperf.values()])
        while True:
            running = [p for p in self.procs if p.alive()]
            for c in self.conns.values():
                if c._master is not None and not c.alive():
                    raise HostError(f"host {c.host.label}: connection lost during the run (the host, its network "
                                    "or its sshd went away)")
            for p in self.procs:
                code = p.popen.poll()
                if code not in (None, 0):
                    self._fail_host(p, f"exited with status {code}")
            if not running:
                break
            now = time.monotonic()
            if now > iperf_deadline:  # (= deadline without iperf3 flows)
                break
            time.sleep(0.05)
        late_exit = [p.name for p in self.procs if p.alive()]
        for p in self.procs:
            if p.alive():
                p.stop()
        for p in self.procs:
            try:
                out, _ = p.popen.communicate(timeout=5)
                p.stdout_text = (out or b"").decode(errors="replace")
            except subprocess.TimeoutExpired:
                p.popen.kill()
        self.read_cpu_times()
        self.measure_clocks("end")

        by_name = {p.name: p for p in self.procs}
        want: dict[str, list[str]] = {role: [] for role in self.hr}
        for p in self.procs:
            if p.result_path:
                want[p.host.role].append(os.path.basename(p.result_path))
        for name, (role, _) in clients.items():
            want[role].append(f"{name}.samples.jsonl")
        for name, (f, _) in iperf.items():
            want[f"s{f['sender']}"].append(f"{name}.json")
        if inv.bottleneck == "emu":
            want["f"].append("emu.stats.jsonl")
        files: dict[str, dict[str, bytes]] = dict(zip(want, parallel(lambda r: self.hr[r].fetch(want[r]), list(want))))

        def result(name: str) -> dict:
            p = by_name[name]
            raw = files[p.host.role].get(f"{name}.result.json")
            if raw is None:
                raise HostError(f"host {p.host.label}: {name} produced no result: {p.log_tail() or 'no output'}")
            d = json.loads(raw)
            if isinstance(d, dict) and d.get("error"):
                raise HostError(f"host {p.host.label}: {name} failed: {d['error']}")
            return d

        def lines(role: str, name: str) -> list[dict]:
            out = []
            for line in files[role].get(name, b"").decode(errors="replace").splitlines():
                if line.strip():
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        break
            return out

        client_out = {name: result(name) for name in clients}
        server_out = result("server")
        emu_out = result("emu") if inv.bottleneck == "emu" else {}
        stats_lines = [x for x in lines("f", "emu.stats.jsonl") if not x.get("final")] if emu_out else []
        samples_rows: list[dict] = []
        for name, (role, _) in clients.items():
            samples_rows += lines(role, f"{name}.samples.jsonl")
        iperf3_summary: dict[str, Any] = {}
        for name, (f, p) in iperf.items():
            role = f"s{f['sender']}"
            try:
                launch = int(json.loads(p.stdout_text.strip().splitlines()[-1])["launch_monotonic_ns"])
            except (ValueError, IndexError, KeyError):
                raise HostError(f"host {p.host.label}: {name} did not run: {p.log_tail() or 'no output'}") from None
            try:
                doc = json.loads(files[role].get(f"{name}.json", b""))
            except ValueError:
                raise HostError(f"host {p.host.label}: {name}: iperf3 wrote no JSON: {p.log_tail()}") from None
            if doc.get("error"):
                raise HostError(f"host {p.host.label}: {name}: iperf3: {doc['error']}")
            row, samples, summary = iperf3.convert(doc, int(f["id"]), (launch - at(role, t0)) // 1000)
            client_out[name] = {"flows": [row]}
            samples_rows += samples
            iperf3_summary[str(f["id"])] = summary
        return self.assemble(client_out, server_out, emu_out, stats_lines, samples_rows, iperf3_summary, late_exit)

    def assemble(self, client_out: dict, server_out: dict, emu_out: dict, stats_lines: list[dict],
                 samples_rows: list[dict], iperf3_summary: dict, late_exit: list[str]) -> RunResult:
        from ccbench.backends.linux.backend import (corrupt_windows, flow_row, result_rows, unapplied_sockops,
                                                    window_peaks)

        cfg = self.cfg
        duration_us = int(cfg["duration_ns"]) // 1000
        received = {int(f["flow_id"]): f for f in server_out.get("flows") or []}
        cflows: dict[int, dict] = {}
        rpc_rows: list[dict] = []
        for out in client_out.values():
            for f in out.get("flows", []):
                cflows[int(f["flow_id"])] = f
            rpc_rows += result_rows(out.get("rpcs"))
        flows = []
        for f in cfg["flows"]:
            c = cflows.get(int(f["id"]))
            if c is None:
                raise HostError(f"host {self.inv.senders[f['sender']].label}: nothing reported for flow {f['id']}")
            flows.append(flow_row(f, c, cfg, received.get(int(f["id"]))))
        samples_rows = [r for r in samples_rows if r.get("time_us") is not None and r["time_us"] <= duration_us]
        samples_rows.sort(key=lambda r: (r["time_us"], r["flow_id"]))
        samples = {c: [r.get(c) for r in samples_rows] for c, _ in SAMPLE_COLUMNS}
        qcols = ("link", "time_us", "backlog_bytes", "backlog_pkts", "drops", "ecn_marks", "lateness_us",
                 "tx_bytes", "utilisation", "random_losses")
        queue: dict[str, list] = {c: [] for c in qcols}
        for line in stats_lines:
            if line.get("time_us") is None or line["time_us"] > duration_us:
                continue
            for link, q in sorted((line.get("links") or {}).items()):
                queue["link"].append(link)
                queue["time_us"].append(line["time_us"])
                for k in ("backlog_bytes", "backlog_pkts", "drops", "ecn_marks", "tx_bytes", "random_losses"):
                    queue[k].append(q.get(k, 0))
                queue["utilisation"].append(q.get("utilisation"))
                queue["lateness_us"].append(((q.get("lateness_us") or line.get("lateness_us")) or {}).get("p99"))
        rpc_rows = sorted((r for r in rpc_rows if r.get("start_us") is not None),
                          key=lambda r: (r["start_us"], r["flow_id"]))
        rpcs = {c: [r.get(c) for r in rpc_rows] for c in ("flow_id", "request_bytes", "response_bytes", "start_us",
                                                           "latency_us")}
        reasons: list[str] = []
        kinds: set[str] = set()  # emulator (could not keep up) | processes | kernel, as the linux backend's

        def flag(kind: str, text: str) -> None:
            kinds.add(kind)
            reasons.append(text)

        if emu_out:
            late, pkts = int(emu_out.get("late_pkts") or 0), int(emu_out.get("pkts") or 0)
            if pkts and late > LATE_FRACTION_MAX * pkts:
                flag("emulator", f"the emulator delivered {late} of {pkts} packets more than 1 ms late")
            mx = float((emu_out.get("lateness_us") or {}).get("max") or 0)
            if mx * 1000 > STALL_MAX_NS:
                flag("emulator", f"the emulator stalled: a packet was delivered {mx / 1000:.1f} ms late")
            if int(emu_out.get("tun_tx_dropped") or 0):
                flag("emulator", f"the TUN queue dropped {emu_out['tun_tx_dropped']} packets")
        errors = server_out.get("errors") or []
        if errors:
            flag("processes", f"the load server reported errors: {'; '.join(str(e) for e in errors[:3])}")
        never = [str(k) for k, c in cflows.items() if c.get("connected") is False]
        if never:
            flag("processes", f"flows {', '.join(never)} never connected")
        if late_exit:
            flag("processes", f"{', '.join(late_exit)} did not stop in time")
        # The hosts get the study's tcp_wmem too (host_sysctls), so the same bound holds.
        peaks = window_peaks(cflows, samples_rows, int(cfg["tcp"]["mss"]))
        for text in corrupt_windows(cfg, peaks) + unapplied_sockops(cfg, cflows, peaks):
            flag("kernel", text)
        info = []
        stolen = {role: steal.fractions(*times) for role, times in self.cpu_times.items() if len(times) == 2}
        if "emulator" in kinds:
            text = steal.note(stolen.get("f") or {}, emu_out.get("cpu"))
            if text:
                info.append(f"on {self.inv.forwarder.label}: {text}" if self.inv.forwarder else text)
        bare = [self.inv.senders[i].label for i in sorted({int(f["sender"]) for f in cfg["flows"]})
                if not self.cgroups.get(self.inv.senders[i].role)]
        if bare:
            info.append(f"no cgroup v2 mounted on {', '.join(bare)}: those senders' flows have no rtt_mean_us or "
                        "rtt_p99_us (the TCP-BPF program that takes every RTT sample attaches in one)")
        if self.inv.bottleneck == "path":
            info.append("bottleneck = path: the study's links were not emulated; the real path between the hosts "
                        "was the bottleneck")
        stats = {
            "backend": "hosts", "bottleneck": self.inv.bottleneck, "token": self.token,
            "hosts": self.parameters(), "clock": self.clock, "emulator": emu_out,
            # Per host, each CPU's share of the run stolen by its virtual machine's host (steal.py).
            "steal": stolen,
            # How many RTT samples rtt_mean_us / rtt_p99_us are over, per flow (docs/analysis.md).
            "rtt_samples": {str(i): c.get("rtt_samples") for i, c in sorted(cflows.items())},
            "suspect_reasons": reasons, "suspect_kinds": sorted(kinds),
        }
        if iperf3_summary:
            stats["iperf3"] = iperf3_summary
        result = {"flows": flows, "samples": samples, "queue": queue, "rpcs": rpcs, "stats": stats,
                  "status": "suspect" if reasons else "ok", "note": "; ".join(reasons + info) or None}
        return RunResult.from_dict(result)

    def parameters(self) -> dict:
        """Per role: where it ran and what its interfaces were (MTU, offloads), its kernel and clock offsets."""
        out: dict[str, Any] = {"bottleneck": self.inv.bottleneck}
        for h in self.inv.hosts:
            f = dict(self.b.facts.get(h.role) or {})
            f.pop("ccas", None)
            f.pop("qdiscs", None)
            if h.address:
                f["address"] = h.address
            if h.role in self.clock:
                f["clock"] = self.clock[h.role]
            out[h.role] = f
        return out


def load_inventory_only(study_hosts: Optional[dict], inventory: str) -> Inventory:
    try:
        return parse(merge(study_hosts, read_file(inventory)), source=inventory)
    except StudyError:
        raise


__all__ = ["HostsBackend", "HostError", "check_config"]
