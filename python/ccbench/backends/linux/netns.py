"""Network namespaces, veth pairs and the TUN device of one linux-backend run.

Every object of a run carries the run's name prefix ``ccb<token>-`` (token:
8 hex digits), so concurrent runs and leftovers can be told apart:

* namespaces ``ccb<token>-s<i>`` (sender host i), ``ccb<token>-d`` (the
  receiver) and ``ccb<token>-r`` (the router); with a general network
  (:func:`plan_network`) ``ccb<token>-h<i>`` for its i-th host node instead
  of senders and receiver (its routers are inside the emulator);
* one veth pair per host, created directly inside the two namespaces (it never
  exists in the root namespace): ``ccb<token>-s<i>`` / ``ccb<token>-d`` /
  ``ccb<token>-h<i>`` on the host side, ``ccb<token>-r<i>`` /
  ``ccb<token>-rd`` / ``ccb<token>-q<i>`` on the router side;
* the TUN device ``ccb<token>-tun`` in the router namespace.

Addresses: the run takes one /24 of 10.77.0.0/16 (chosen from the token);
link k (k = 0 the receiver, k = i + 1 sender i) is the /30 at 4k: the router
has .4k+1, the host .4k+2. Namespaces isolate addresses anyway; distinct
subnets only make traces of concurrent runs easier to tell apart.

Routing in the router: the main table sends every host address (/32) into
the TUN device, where the emulator reads it; a policy rule
``iif <tun> lookup 100`` makes what the emulator writes back into the TUN
use table 100, which holds only the connected routes of the veths.

Everything here is done with argument lists (``ip`` from iproute2) or by
writing /proc/sys from a thread that joined the namespace (setns), never with
a shell string. Deleting a namespace deletes every interface in it, so
:func:`teardown` only has to delete namespaces; processes must be stopped
first (a namespace lives on while a process is inside it).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import ipaddress
import os
import re
import secrets
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

PREFIX = "ccb"
TOKEN_LEN = 8
#: a name of an object of some run: ccb<token>-<role>
NAME_RE = re.compile(r"^ccb([0-9a-f]{8})-([a-z0-9]{1,4})$")
NETNS_DIR = Path("/run/netns")
ADDR_POOL = ipaddress.IPv4Network("10.77.0.0/16")
ROUTE_TABLE = 100
RULE_PREF = 100
TUN_TXQUEUELEN = 4096
MAX_SENDERS = 63  # /30 links in one /24, one of them the receiver's
MAX_HOSTS = 64  # a general network: one /30 per host
IP_TIMEOUT_S = 30.0

CLONE_NEWNET = 0x40000000


class SetupError(RuntimeError):
    """Building the topology failed (the message says which command and why)."""


# ---------------------------------------------------------------- helpers


def ip(*args: str, ns: Optional[str] = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``ip [-n NS] ARGS...`` (an argument list, no shell)."""
    cmd = ["ip"] + (["-n", ns] if ns else []) + [str(a) for a in args]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=IP_TIMEOUT_S,
                           stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise SetupError("the `ip` command (iproute2) is not installed; install it: apt-get install iproute2") from None
    except subprocess.TimeoutExpired:
        raise SetupError(f"`{' '.join(cmd)}` did not finish within {IP_TIMEOUT_S:.0f} s") from None
    if check and p.returncode != 0:
        err = " ".join((p.stderr or p.stdout or "").split()) or f"exit status {p.returncode}"
        raise SetupError(f"`{' '.join(cmd)}` failed: {err}")
    return p


_libc: Any = None


def _setns(fd: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"setns: {os.strerror(e)}")


def in_netns(ns: str, fn: Callable[[], Any]) -> Any:
    """Call ``fn()`` in a short-lived thread that has joined namespace ``ns``.

    Only that thread changes namespace (setns acts on the calling thread), so
    the rest of the process is untouched. /proc/sys/net and sockets opened in
    ``fn`` belong to ``ns``; /sys does not (it is bound to the mount).
    """
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            fd = os.open(NETNS_DIR / ns, os.O_RDONLY | os.O_CLOEXEC)
            try:
                _setns(fd)
            finally:
                os.close(fd)
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    t = threading.Thread(target=body, name=f"netns-{ns}", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def parse_netstat(text: str) -> dict[str, dict[str, int]]:
    """/proc/net/netstat (or /proc/net/snmp) as {group: {counter: value}}:
    each group is a line of names followed by a line of values."""
    out: dict[str, dict[str, int]] = {}
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    for names, values in zip(lines[::2], lines[1::2]):
        if not names or names[0] != values[0] or not names[0].endswith(":"):
            raise ValueError(f"not a netstat table: {' '.join(names[:3])} / {' '.join(values[:3])}")
        out[names[0][:-1]] = {k: int(v) for k, v in zip(names[1:], values[1:])}
    return out


def tcp_ext_counters(ns: str) -> dict[str, int]:
    """The kernel's TcpExt counters of namespace ``ns`` (each network
    namespace counts its own sockets' events: retransmission timeouts,
    loss probes, ...)."""
    text = in_netns(ns, lambda: Path("/proc/thread-self/net/netstat").read_text())
    return parse_netstat(text).get("TcpExt", {})


def set_sysctls(ns: str, values: dict[str, Any]) -> None:
    """Write sysctls (dotted names) inside namespace ``ns``."""

    def write() -> None:
        for key, value in values.items():
            path = Path("/proc/sys") / key.replace(".", "/")
            try:
                path.write_text(f"{value}\n")
            except OSError as e:
                raise SetupError(f"cannot set {key} = {value} in namespace {ns}: {e.strerror or e}") from None

    in_netns(ns, write)


def read_sysctl(ns: Optional[str], key: str) -> str:
    path = Path("/proc/sys") / key.replace(".", "/")
    if ns is None:
        return path.read_text().strip()
    return in_netns(ns, lambda: path.read_text().strip())


def existing_namespaces() -> list[str]:
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir())
    except FileNotFoundError:
        return []


def new_token() -> str:
    """A fresh run token no existing namespace uses."""
    taken = {m.group(1) for n in existing_namespaces() if (m := NAME_RE.match(n))}
    while True:
        tok = secrets.token_hex(TOKEN_LEN // 2)
        if tok not in taken and not Path(f"/run/ccbench/{PREFIX}{tok}").exists():
            return tok


# ---------------------------------------------------------------- the plan


@dataclass
class Host:
    role: str  # "s0", "s1", ... or "d"
    ns: str
    ifname: str  # host side of the veth
    router_ifname: str  # router side
    ip: str
    router_ip: str
    net: str  # the /30


@dataclass
class Topology:
    token: str
    router_ns: str
    tun: str
    receiver: Optional[Host]  # the dumbbell's (None with a general network)
    senders: list[Host]  # the dumbbell's
    mtu: int
    created: list[str] = field(default_factory=list)  # namespaces that exist because of us
    #: a general network: host node name → its namespace (empty for the dumbbell)
    nodes: dict[str, Host] = field(default_factory=dict)

    @property
    def prefix(self) -> str:
        return f"{PREFIX}{self.token}-"

    @property
    def hosts(self) -> list[Host]:
        if self.receiver is None:
            return list(self.nodes.values())
        return [self.receiver, *self.senders]

    @property
    def namespaces(self) -> list[str]:
        return [self.router_ns, *(h.ns for h in self.hosts)]

    def describe(self) -> dict:
        """JSON-able summary (kept in the run's stats)."""
        node_of = {h.role: n for n, h in self.nodes.items()}
        return {
            "token": self.token,
            "router_ns": self.router_ns,
            "tun": self.tun,
            "mtu": self.mtu,
            "hosts": [{"role": h.role, "ns": h.ns, "ip": h.ip, "router_ip": h.router_ip,
                       **({"node": node_of[h.role]} if h.role in node_of else {})} for h in self.hosts],
        }


def name(token: str, role: str) -> str:
    n = f"{PREFIX}{token}-{role}"
    assert len(n) <= 15, n  # IFNAMSIZ - 1
    return n


def _host_maker(token: str) -> Callable[[int, str, str], Host]:
    """Host k of the run's /24 (the /30 at 4k: router .4k+1, host .4k+2)."""
    if not re.fullmatch(r"[0-9a-f]{8}", token):
        raise ValueError(f"bad run token {token!r}")
    subnets = list(ADDR_POOL.subnets(new_prefix=24))
    block = subnets[int(token, 16) % len(subnets)]
    links = list(block.subnets(new_prefix=30))

    def host(k: int, role: str, router_role: str) -> Host:
        net = links[k]
        return Host(role=role, ns=name(token, role), ifname=name(token, role),
                    router_ifname=name(token, router_role), ip=str(net[2]), router_ip=str(net[1]),
                    net=str(net))

    return host


def plan_network(token: str, host_nodes: list[str], mtu: int) -> Topology:
    """A general network's topology: a namespace per host node (in the given
    order: ``h0``, ``h1``, ...), each with a veth to the router namespace,
    whose TUN the emulator reads; the network's routers and links are all
    inside the emulator (nothing is created here)."""
    host = _host_maker(token)
    if not 2 <= len(host_nodes) <= MAX_HOSTS:
        raise SetupError(f"the linux backend supports networks of 2 to {MAX_HOSTS} hosts (got {len(host_nodes)})")
    nodes = {n: host(k, f"h{k}", f"q{k}") for k, n in enumerate(host_nodes)}
    return Topology(token=token, router_ns=name(token, "r"), tun=name(token, "tun"),
                    receiver=None, senders=[], mtu=mtu, nodes=nodes)


def plan(token: str, n_senders: int, mtu: int) -> Topology:
    """Names and addresses of a run's topology (nothing is created)."""
    host = _host_maker(token)
    if not 1 <= n_senders <= MAX_SENDERS:
        raise SetupError(f"the linux backend supports 1 to {MAX_SENDERS} senders (got {n_senders})")

    receiver = host(0, "d", "rd")
    senders = [host(i + 1, f"s{i}", f"r{i}") for i in range(n_senders)]
    return Topology(token=token, router_ns=name(token, "r"), tun=name(token, "tun"),
                    receiver=receiver, senders=senders, mtu=mtu)


# ---------------------------------------------------------------- building


def host_sysctls(tcp: dict) -> dict[str, Any]:
    """Per-namespace TCP settings of a host from the run config's tcp table."""
    rmem, wmem = int(tcp["rmem_bytes"]), int(tcp["wmem_bytes"])
    return {
        "net.ipv4.tcp_sack": 1 if tcp.get("sack", True) else 0,
        "net.ipv4.tcp_ecn": 1 if tcp.get("ecn", False) else 0,
        # The receive buffer starts at its maximum, as in the simulator (which
        # has no autotuning): from Linux's 128 KiB start, windows were
        # measured stuck near 80 KB on fast paths through the emulator.
        "net.ipv4.tcp_rmem": f"{min(4096, rmem)} {rmem} {rmem}",
        "net.ipv4.tcp_wmem": f"{min(4096, wmem)} {min(16384, wmem)} {wmem}",
        # A run must not inherit ssthresh/RTT from an earlier connection.
        "net.ipv4.tcp_no_metrics_save": 1,
        # SACK compression off: no compressed ACK may be held (0 ACKs).
        **({} if tcp.get("sack_compression", True) else {"net.ipv4.tcp_comp_sack_nr": 0}),
    }


def route_options(tcp: dict) -> list[str]:
    """Options of each host's default route: initcwnd, rto_min, quickack."""
    opts = ["initcwnd", str(int(tcp["init_cwnd"]))]
    rto_ms = max(1, -(-int(tcp["min_rto_ns"]) // 1_000_000))  # whole ms, rounded up
    opts += ["rto_min", f"{rto_ms}ms"]
    if tcp.get("delayed_ack") == "off":
        opts += ["quickack", "1"]
    return opts


_NS_COMMON = {
    # No IPv6: no router solicitations, MLD or DAD packets on the veths or the TUN.
    "net.ipv6.conf.all.disable_ipv6": 1,
    "net.ipv6.conf.default.disable_ipv6": 1,
}
_ROUTER = {
    "net.ipv4.ip_forward": 1,
    "net.ipv4.conf.all.rp_filter": 0,
    "net.ipv4.conf.default.rp_filter": 0,
    "net.ipv4.conf.all.send_redirects": 0,
    "net.ipv4.conf.default.send_redirects": 0,
}


_RECEIVER = {
    # Accepted connections send with the DSCP of the client's SYN, so a
    # flow's queue_class (its DSCP) marks the return path too.
    "net.ipv4.tcp_reflect_tos": 1,
}


def _add_ns(topo: Topology, ns: str) -> None:
    ip("netns", "add", ns)
    topo.created.append(ns)
    ip("link", "set", "dev", "lo", "up", ns=ns)


def build(topo: Topology, tcp: dict) -> None:
    """Create the namespaces, links, addresses, routes and the TUN device.

    Records each namespace in ``topo.created`` as soon as it exists; on an
    error the caller runs :func:`teardown` (nothing is left half-created).
    """
    r = topo.router_ns
    _add_ns(topo, r)
    set_sysctls(r, {**_NS_COMMON, **_ROUTER})
    host_sys = {**_NS_COMMON, **host_sysctls(tcp)}
    opts = route_options(tcp)
    for h in topo.hosts:
        _add_ns(topo, h.ns)
        # Every host of a network may accept connections (a flow's dst).
        receives = h is topo.receiver or topo.receiver is None
        set_sysctls(h.ns, {**host_sys, **_RECEIVER} if receives else host_sys)
        ip("link", "add", "name", h.ifname, "netns", h.ns, "mtu", topo.mtu, "type", "veth",
           "peer", "name", h.router_ifname, "netns", r, "mtu", topo.mtu)
        plen = ipaddress.IPv4Network(h.net).prefixlen
        ip("addr", "add", f"{h.ip}/{plen}", "dev", h.ifname, ns=h.ns)
        ip("link", "set", "dev", h.ifname, "up", ns=h.ns)
        ip("addr", "add", f"{h.router_ip}/{plen}", "dev", h.router_ifname, ns=r)
        ip("link", "set", "dev", h.router_ifname, "up", ns=r)
        ip("route", "add", "default", "via", h.router_ip, "dev", h.ifname, *opts, ns=h.ns)
    # The TUN device: persistent, no packet-info header (IFF_NO_PI), the
    # emulator attaches to it by name.
    ip("tuntap", "add", "dev", topo.tun, "mode", "tun", ns=r)
    ip("link", "set", "dev", topo.tun, "mtu", topo.mtu, "txqueuelen", TUN_TXQUEUELEN, "up", ns=r)
    set_sysctls(r, {f"net.ipv4.conf.{topo.tun}.rp_filter": 0})
    for h in topo.hosts:
        ip("route", "add", f"{h.ip}/32", "dev", topo.tun, ns=r)
        ip("route", "add", h.net, "dev", h.router_ifname, "proto", "kernel", "scope", "link",
           "src", h.router_ip, "table", ROUTE_TABLE, ns=r)
    ip("rule", "add", "iif", topo.tun, "lookup", ROUTE_TABLE, "pref", RULE_PREF, ns=r)


def delete_namespace(ns: str) -> bool:
    """Delete one namespace if it exists; True if it was there."""
    if not (NETNS_DIR / ns).exists():
        return False
    p = ip("netns", "delete", ns, check=False)
    if p.returncode != 0 and (NETNS_DIR / ns).exists():
        raise SetupError(f"cannot delete namespace {ns}: {' '.join(p.stderr.split())}")
    return True


def teardown(topo: Topology) -> list[str]:
    """Delete every namespace of the run (idempotent). Returns what was deleted.

    Processes inside must have been stopped before (see procs.py); interfaces
    go with their namespace.
    """
    deleted = []
    errors = []
    for ns in reversed(topo.namespaces):
        try:
            if delete_namespace(ns):
                deleted.append(ns)
        except SetupError as e:
            errors.append(str(e))
    topo.created.clear()
    if errors:
        raise SetupError("; ".join(errors))
    return deleted


# ---------------------------------------------------------------- reading


def link_stats(ns: str) -> dict[str, dict]:
    """ifname → stats64 counters (rx/tx packets, bytes, dropped, errors) in ``ns``."""
    import json

    p = ip("-s", "-j", "link", "show", ns=ns, check=False)
    if p.returncode != 0:
        return {}
    out = {}
    for link in json.loads(p.stdout or "[]"):
        s = link.get("stats64") or {}
        out[link.get("ifname")] = {
            "rx_packets": s.get("rx", {}).get("packets", 0),
            "rx_dropped": s.get("rx", {}).get("dropped", 0),
            "rx_errors": s.get("rx", {}).get("errors", 0),
            "tx_packets": s.get("tx", {}).get("packets", 0),
            "tx_dropped": s.get("tx", {}).get("dropped", 0),
            "tx_errors": s.get("tx", {}).get("errors", 0),
        }
    return out
