"""A hand-built dumbbell for testing and benchmarking the emulator and load
generator without the linux backend (tests/test_emu_root.py,
bench/emu_speed.py).

Namespaces ``ccbt<tok>-s<i>`` (senders), ``ccbt<tok>-d`` (receiver) and
``ccbt<tok>-r`` (router with the TUN device ``ccbt<tok>-tun``), wired as
docs/interfaces.md §4 describes. Every name starts with ``ccbt``, so nothing
here collides with the real backend's ``ccb<8 hex>-`` objects. Commands are
argument lists, never shell strings. Use as a context manager: everything
created is removed on exit, also on errors.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

PREFIX = "ccbt"


def run(*args: str, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess:
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} failed: {p.stderr.strip() or p.stdout.strip()}")
    return p


def monotonic_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def root_problem() -> Optional[str]:
    """Why root tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth, TUN)"
    if not Path("/dev/net/tun").exists():
        return "no /dev/net/tun"
    try:
        run("ip", "-V")
    except (OSError, RuntimeError) as e:
        return f"no usable `ip` command: {e}"
    return None


class Dumbbell:
    def __init__(self, n_senders: int = 1, workdir: Optional[Path] = None, threaded_napi: bool = False):
        self.tok = secrets.token_hex(2)
        self.n = n_senders
        p = f"{PREFIX}{self.tok}-"
        self.router = p + "r"
        self.receiver = p + "d"
        self.senders = [p + f"s{i}" for i in range(n_senders)]
        self.tun = p + "tun"
        self.receiver_ip = "10.202.0.2"
        self.sender_ips = [f"10.201.{i}.2" for i in range(n_senders)]
        self.created: list[str] = []
        self.procs: list[subprocess.Popen] = []
        self.workdir = workdir
        self.threaded_napi = threaded_napi

    # ------------------------------------------------------------ building

    def ns_exec(self, ns: str, *args: str) -> list[str]:
        return ["ip", "netns", "exec", ns, *map(str, args)]

    def sysctl(self, ns: str, key: str, value) -> None:
        run(*self.ns_exec(ns, "sysctl", "-q", "-w", f"{key}={value}"))

    def _add_ns(self, ns: str) -> None:
        run("ip", "netns", "add", ns)
        self.created.append(ns)
        run("ip", "-n", ns, "link", "set", "lo", "up")
        self.sysctl(ns, "net.ipv6.conf.all.disable_ipv6", 1)
        self.sysctl(ns, "net.ipv6.conf.default.disable_ipv6", 1)

    def build(self) -> "Dumbbell":
        r = self.router
        self._add_ns(r)
        for k, v in [("net.ipv4.ip_forward", 1), ("net.ipv4.conf.all.rp_filter", 0),
                     ("net.ipv4.conf.default.rp_filter", 0), ("net.ipv4.conf.all.send_redirects", 0),
                     ("net.ipv4.conf.default.send_redirects", 0), ("net.ipv4.conf.all.accept_local", 1)]:
            self.sysctl(r, k, v)
        hosts = [(self.receiver, self.receiver_ip, "10.202.0.1", "10.202.0.0/24", f"{PREFIX}{self.tok}-rd")]
        for i, ns in enumerate(self.senders):
            hosts.append((ns, self.sender_ips[i], f"10.201.{i}.1", f"10.201.{i}.0/24", f"{PREFIX}{self.tok}-r{i}"))
        for ns, hip, rip, net, rif in hosts:
            self._add_ns(ns)
            self.sysctl(ns, "net.ipv4.tcp_no_metrics_save", 1)
            # Start receive buffers at their maximum, as the simulator does:
            # with Linux's small default start (128 KiB) receive-buffer
            # autotuning can stay stuck there at tens of ms RTT (seen on
            # 6.18: ~30 Mbit/s at 20 ms), and the window never opens.
            self.sysctl(ns, "net.ipv4.tcp_rmem", "4096 6291456 6291456")
            hif = ns  # the host side of the veth carries the namespace's name
            run("ip", "link", "add", "name", hif, "netns", ns, "type", "veth", "peer", "name", rif, "netns", r)
            run("ip", "-n", ns, "addr", "add", f"{hip}/24", "dev", hif)
            run("ip", "-n", ns, "link", "set", hif, "up")
            run("ip", "-n", r, "addr", "add", f"{rip}/24", "dev", rif)
            run("ip", "-n", r, "link", "set", rif, "up")
            run("ip", "-n", ns, "route", "add", "default", "via", rip, "dev", hif)
            if self.threaded_napi:
                self.napi_threaded(ns, hif, r, rif)
        run("ip", "-n", r, "tuntap", "add", "dev", self.tun, "mode", "tun")
        run("ip", "-n", r, "link", "set", "dev", self.tun, "txqueuelen", 4096, "up")
        self.sysctl(r, f"net.ipv4.conf.{self.tun}.rp_filter", 0)
        for ns, hip, rip, net, rif in hosts:
            run("ip", "-n", r, "route", "add", f"{hip}/32", "dev", self.tun)
            run("ip", "-n", r, "route", "add", net, "dev", rif, "proto", "kernel", "scope", "link",
                "src", rip, "table", 100)
        run("ip", "-n", r, "rule", "add", "iif", self.tun, "lookup", 100, "pref", 100)
        return self

    def bypass_emulator_with_tbf(self, rate_bps: int, limit_bytes: int) -> None:
        """Forward directly between the veths (no TUN, no emulated delay) and
        shape the router's receiver-facing veth with a plain tbf instead, for
        comparing rate accuracy against the emulator on the same namespaces."""
        r = self.router
        for ip in [self.receiver_ip, *self.sender_ips]:
            run("ip", "-n", r, "route", "del", f"{ip}/32", "dev", self.tun)
        # A burst of ~1 ms at the rate (at least two packets), as tc-tbf(8) advises for accuracy.
        burst = max(rate_bps // 8 // 1000, 3000)
        run("ip", "netns", "exec", r, "tc", "qdisc", "add", "dev", f"{PREFIX}{self.tok}-rd", "root", "tbf",
            "rate", f"{rate_bps}bit", "burst", str(burst), "limit", str(max(limit_bytes, burst)))

    @staticmethod
    def _ethtool_code(cmd: int, value: int) -> str:
        return (
            "import ctypes, fcntl, socket, struct, sys\n"
            f"val = ctypes.create_string_buffer(struct.pack('II', {cmd}, {value}))\n"
            "ifr = struct.pack('16sP', sys.argv[1].encode(), ctypes.addressof(val)) + bytes(16)\n"
            "fcntl.ioctl(socket.socket(), 0x8946, ifr)  # SIOCETHTOOL\n")

    def napi_threaded(self, ns: str, dev: str, router_ns: str, router_dev: str) -> None:
        """Receive on veth ``dev`` with NAPI (GRO on) in its own kernel thread,
        so a host's TCP work runs there instead of inside the emulator's
        writes to the TUN device. (veth uses NAPI for forwarded packets only
        when the sending end has no TSO.)"""
        code = self._ethtool_code(0x2c, 1) + "open(f'/sys/class/net/{sys.argv[1]}/threaded', 'w').write('1')\n"
        run(*self.ns_exec(ns, sys.executable, "-c", code, dev))
        run(*self.ns_exec(router_ns, sys.executable, "-c", self._ethtool_code(0x1f, 0), router_dev))

    def teardown(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        errors = []
        for ns in reversed(self.created):
            p = run("ip", "netns", "delete", ns, check=False)
            if p.returncode != 0 and Path("/run/netns", ns).exists():
                errors.append(p.stderr.strip())
        self.created.clear()
        if errors:
            raise RuntimeError("; ".join(errors))

    def __enter__(self) -> "Dumbbell":
        try:
            return self.build()
        except BaseException:
            self.teardown()
            raise

    def __exit__(self, *exc) -> None:
        self.teardown()

    # ------------------------------------------------------------ processes

    def start_core(self, ns: str, function: str, config: dict) -> subprocess.Popen:
        """Run ccbench._core.<function>(config) in namespace ``ns``; the
        process prints the returned JSON."""
        code = ("import sys; from ccbench import _core; "
                f"sys.stdout.write(_core.{function}(sys.stdin.read()))")
        p = subprocess.Popen(self.ns_exec(ns, sys.executable, "-c", code), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        p.stdin.write(json.dumps(config))
        p.stdin.close()
        return p

    @staticmethod
    def result(p: subprocess.Popen, timeout: float) -> dict:
        out = p.stdout.read() if p.wait(timeout=timeout) is not None else ""
        err = p.stderr.read()
        if p.returncode != 0:
            raise RuntimeError(f"exit status {p.returncode}: {err.strip()}")
        return json.loads(out)

    def emu_config(self, *, rate_bps: int, delay_ns: int, access_delay_ns: int, buffer_pkts: int,
                   t0: int, stop_at: int, stats_path: str, access_rate_bps: int = 10_000_000_000,
                   sample_interval_ns: int = 100_000_000, late_tolerance_ns: int = 500_000,
                   loss: float = 0.0, **extra) -> dict:
        return {
            "tun": self.tun,
            "receiver_ip": self.receiver_ip,
            "senders": [{"ip": ip_, "rate_bps": access_rate_bps, "delay_ns": access_delay_ns}
                        for ip_ in self.sender_ips],
            "bottleneck": {"rate_bps": rate_bps, "delay_ns": delay_ns, "loss": loss, "buffer_bytes": None,
                           "buffer_pkts": buffer_pkts, "qdisc": "fifo"},
            "reverse": None,
            "seed": 1,
            "stop_at_monotonic_ns": stop_at,
            "sample_interval_ns": sample_interval_ns,
            "t0_monotonic_ns": t0,
            "stats_path": stats_path,
            "late_tolerance_ns": late_tolerance_ns,
            **extra,
        }

    def chain_config(self, *, hops: int, rate_bps: int, one_way_ns: int, access_delay_ns: int, buffer_pkts: int,
                     t0: int, stop_at: int, stats_path: str, flows: int = 1, access_rate_bps: int = 10_000_000_000,
                     sample_interval_ns: int = 100_000_000, late_tolerance_ns: int = 500_000, **extra) -> dict:
        """The emulator's network form (docs/interfaces.md §4): sender 0 is host
        ``a``, the receiver host ``b``, joined by a chain of ``hops`` queueing
        links ``L0`` .. (routers ``r0`` .. ``r<hops>``, and ``L<i>/back`` the
        other way) sharing ``one_way_ns`` of delay, behind access pipes.
        Flow ``i`` is known by its client port 10000 + i (the load client
        binds it: ``bind_port``) and crosses every link."""
        def link(name, a, b, rate, delay, pkts):
            return {"name": name, "from": a, "to": b, "rate_bps": rate, "delay_ns": delay, "loss": 0.0,
                    "buffer_bytes": None, "buffer_pkts": pkts, **({"qdisc": "fifo"} if pkts else {})}
        per_hop = one_way_ns // hops
        links = [link("a-r0", "a", "r0", access_rate_bps, access_delay_ns, None),
                 link("r0-a", "r0", "a", access_rate_bps, access_delay_ns, None),
                 link(f"r{hops}-b", f"r{hops}", "b", access_rate_bps, 0, None),
                 link(f"b-r{hops}", "b", f"r{hops}", access_rate_bps, 0, None)]
        for i in range(hops):
            links.append(link(f"L{i}", f"r{i}", f"r{i + 1}", rate_bps, per_hop, buffer_pkts))
            links.append(link(f"L{i}/back", f"r{i + 1}", f"r{i}", rate_bps, per_hop, buffer_pkts))
        nodes = [{"name": "a", "kind": "host"}, {"name": "b", "kind": "host"}]
        nodes += [{"name": f"r{i}", "kind": "router"} for i in range(hops + 1)]
        return {
            "tun": self.tun,
            "network": {"nodes": nodes, "links": links},
            "hosts": [{"name": "a", "ip": self.sender_ips[0]}, {"name": "b", "ip": self.receiver_ip}],
            "flows": [{"id": i, "src": "a", "dst": "b", "client_port": 10000 + i, "server_port": 5201}
                      for i in range(flows)],
            "seed": 1,
            "stop_at_monotonic_ns": stop_at,
            "sample_interval_ns": sample_interval_ns,
            "t0_monotonic_ns": t0,
            "stats_path": stats_path,
            "late_tolerance_ns": late_tolerance_ns,
            **extra,
        }

    def udp_ping(self, sender: int = 0, count: int = 10, interval_s: float = 0.1, size: int = 64) -> list[float]:
        """Round-trip times (ms) of UDP echoes from sender host ``sender``
        to the receiver (no `ping` binary needed)."""
        echo = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                f"s.bind(('{self.receiver_ip}', 7007)); s.settimeout(30)\n"
                "while True:\n"
                "    d, a = s.recvfrom(65536)\n"
                "    s.sendto(d, a)\n"
                "    if d.startswith(b'end'): break\n")
        server = subprocess.Popen(self.ns_exec(self.receiver, sys.executable, "-c", echo),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.procs.append(server)
        client = (
            "import socket, sys, time, json\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)\n"
            f"addr = ('{self.receiver_ip}', 7007); out = []\n"
            "time.sleep(0.3)\n"
            f"for i in range({count}):\n"
            f"    t = time.perf_counter(); s.sendto(b'x' * {size}, addr)\n"
            "    try:\n"
            "        s.recvfrom(65536); out.append((time.perf_counter() - t) * 1e3)\n"
            "    except socket.timeout:\n"
            "        pass\n"
            f"    time.sleep({interval_s})\n"
            "s.sendto(b'end', addr)\n"
            "print(json.dumps(out))\n")
        p = run(*self.ns_exec(self.senders[sender], sys.executable, "-c", client), timeout=60)
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
        return json.loads(p.stdout)

    def wait_listening(self, port: int = 5201, timeout: float = 10.0) -> None:
        """Wait until a TCP socket listens on ``port`` in the receiver's namespace."""
        deadline = time.monotonic() + timeout
        want = f":{port:04X}"
        while time.monotonic() < deadline:
            p = run(*self.ns_exec(self.receiver, "cat", "/proc/net/tcp"))
            for line in p.stdout.splitlines()[1:]:
                f = line.split()
                if len(f) > 3 and f[1].endswith(want) and f[3] == "0A":
                    return
            time.sleep(0.02)
        raise RuntimeError(f"nothing listens on port {port} in {self.receiver}")

    def wait_attached(self, timeout: float = 10.0) -> None:
        """Wait until a process has attached to the TUN device (carrier up)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            p = run("ip", "-n", self.router, "-j", "link", "show", "dev", self.tun)
            flags = json.loads(p.stdout)[0].get("flags", [])
            if "LOWER_UP" in flags:
                return
            time.sleep(0.02)
        raise RuntimeError("the emulator did not attach to the TUN device")
