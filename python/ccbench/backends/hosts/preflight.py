"""Pre-flight: every host checked before any run starts, nothing created.

Per host, one SSH command (a fixed script: the interface names are its
arguments, never part of it) gathers: the account's privileges (root, or
passwordless sudo), kernel release and CPU, the congestion control
algorithms (available, or loadable as modules / built in per the kernel
config), the test interface's MTU, addresses and offloads (TSO/GSO/GRO with
ethtool when the host has it, else the kernel's GSO/GRO limits from
``ip -d link``), iperf3, tc and the qdiscs, /dev/net/tun and IPv4
forwarding. Then each role's needs are checked: a sender needs its flows'
algorithms, the receiver every algorithm (the load server sets it on its
socket too), the test address on the interface, an MTU that fits the
study's mss; the forwarder forwarding, and the TUN device (``emu``) or tc
and its qdiscs (``tc``). MTU, offloads and kernel go into the run's
parameters.

Each problem is one line naming the host and what to do.
"""

from __future__ import annotations

import json
import socket
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .inventory import Inventory
from .ssh import Connection, SshError

# A fixed script; its arguments ("$@") are interface names (checked by inventory.py).
FACTS = r"""
echo "uid=$(id -u)"
if [ "$(id -u)" != 0 ] && sudo -n true 2>/dev/null; then echo sudo=1; fi
r=$(uname -r)
echo "release=$r"
echo "machine=$(uname -m)"
command -v sha256sum >/dev/null 2>&1 && echo sha256sum=1
command -v tar >/dev/null 2>&1 && echo tar=1
command -v tc >/dev/null 2>&1 && echo tc=1
command -v iperf3 >/dev/null 2>&1 && echo "iperf3=$(iperf3 --version 2>/dev/null | head -n 1)"
[ -c /dev/net/tun ] && echo tun=1
echo "ip_forward=$(cat /proc/sys/net/ipv4/ip_forward 2>/dev/null)"
echo "cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status 2>/dev/null)"
echo "ccas=$(cat /proc/sys/net/ipv4/tcp_available_congestion_control 2>/dev/null)"
echo "modules=$(ls /lib/modules/$r/kernel/net/ipv4 /lib/modules/$r/kernel/net/sched 2>/dev/null | tr '\n' ' ')"
echo "builtin=$(sed 's#.*/##' /lib/modules/$r/modules.builtin 2>/dev/null | grep -E '^(tcp|sch)_' | tr '\n' ' ')"
echo "loaded=$(cut -d ' ' -f 1 /proc/modules 2>/dev/null | grep -E '^(tcp|sch)_' | tr '\n' ' ')"
if [ -r /proc/config.gz ]; then cfg=$(gzip -dc /proc/config.gz 2>/dev/null); else cfg=$(cat /boot/config-$r 2>/dev/null); fi
echo "config=$(printf '%s\n' "$cfg" | grep -E '^CONFIG_(TCP_CONG|NET_SCH)_[A-Z0-9_]+=[ym]' | tr '\n' ' ')"
for i in "$@"; do
  echo "if.$i.mtu=$(cat /sys/class/net/$i/mtu 2>/dev/null)"
  echo "if.$i.addrs=$(ip -4 -o addr show dev "$i" 2>/dev/null | awk '{print $4}' | tr '\n' ' ')"
  echo "if.$i.link=$(ip -d -j link show dev "$i" 2>/dev/null)"
  if command -v ethtool >/dev/null 2>&1; then
    echo "if.$i.ethtool=$(ethtool -k "$i" 2>/dev/null | grep -E '^(tcp-segmentation|generic-segmentation|generic-receive|large-receive)-offload' | tr '\n' ';')"
  fi
done
"""

# Another fixed script; its arguments are IPv4 addresses (checked by inventory.py): the interface
# the forwarder reaches each by.
ROUTES = r"""for a in "$@"; do echo "route.$a=$(ip -4 -o route get "$a" 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p')"; done"""

# Kernel config options → names (a module "m" can be loaded when a socket or tc asks for it).
CONFIG_CCAS = {"BIC": "bic", "CUBIC": "cubic", "WESTWOOD": "westwood", "HTCP": "htcp", "HSTCP": "highspeed",
               "HYBLA": "hybla", "VEGAS": "vegas", "NV": "nv", "SCALABLE": "scalable", "LP": "lp", "VENO": "veno",
               "YEAH": "yeah", "ILLINOIS": "illinois", "DCTCP": "dctcp", "CDG": "cdg", "BBR": "bbr"}


def gather(conn: Connection, ifaces: list[str]) -> dict[str, str]:
    out = conn.run(["sh", "-c", FACTS, "sh", *ifaces], sudo=False, timeout=60).stdout
    facts = {}
    for line in out.splitlines():
        k, eq, v = line.partition("=")
        if eq:
            facts[k] = v.strip()
    return facts


def cpu_list(text: str) -> set[int]:
    """A kernel CPU list such as ``0-3,6`` as numbers (empty when unreadable)."""
    out: set[int] = set()
    try:
        for part in text.split(","):
            a, _, b = part.strip().partition("-")
            out.update(range(int(a), int(b or a) + 1))
    except ValueError:
        return set()
    return out


def names(raw: dict[str, str], prefix: str) -> set[str]:
    """Algorithm (tcp_) or qdisc (sch_) names the kernel has: loaded, built in, modules, config y/m."""
    out = set()
    for key in ("modules", "builtin", "loaded"):
        for w in raw.get(key, "").split():
            if w.startswith(prefix):
                out.add(w[len(prefix):].split(".ko")[0])
    for w in raw.get("config", "").split():
        k = w.split("=")[0]
        if prefix == "tcp_" and k.startswith("CONFIG_TCP_CONG_"):
            n = CONFIG_CCAS.get(k[len("CONFIG_TCP_CONG_"):])
            if n:
                out.add(n)
        if prefix == "sch_" and k.startswith("CONFIG_NET_SCH_"):
            out.add(k[len("CONFIG_NET_SCH_"):].lower())
    return out


def _iface(raw: dict[str, str], i: str) -> dict[str, Any]:
    mtu = raw.get(f"if.{i}.mtu") or ""
    d: dict[str, Any] = {"mtu": int(mtu) if mtu.isdigit() else None,
                         "addresses": [a.split("/")[0] for a in raw.get(f"if.{i}.addrs", "").split()]}
    off: dict[str, Any] = {}
    et = raw.get(f"if.{i}.ethtool")
    if et:
        for part in et.split(";"):
            k, _, v = part.partition(":")
            if k.strip():
                off[k.strip()] = v.split()[0] if v.split() else None
        off["source"] = "ethtool -k"
    try:
        link = (json.loads(raw.get(f"if.{i}.link") or "[]") or [{}])[0]
    except ValueError:
        link = {}
    for key in ("gso_max_size", "gso_max_segs", "gro_max_size", "tso_max_size"):
        if key in link:
            off[key] = link[key]
    off.setdefault("source", "ip -d link (no ethtool on the host: TSO/GSO/GRO switches unknown)")
    d["offloads"] = off
    return d


def check_host(conn: Connection, inv: Inventory, *, ccas: set[str], mtu_needed: int, iperf3: bool,
               tc_qdiscs: set[str]) -> tuple[dict, list[str]]:
    """(facts, problems) of one host."""
    h = conn.host
    facts: dict[str, Any] = {"role": h.role, "ssh": h.destination}
    problems: list[str] = []

    def bad(text: str) -> None:
        problems.append(f"host {h.label}: {text}")

    ifaces = [h.interface] if h.role != "f" else [*h.to_senders, h.to_receiver]
    try:
        raw = gather(conn, [i for i in ifaces if i])
    except SshError as e:
        return facts, [str(e)]
    if raw.get("uid") == "0":
        facts["privileges"] = "root"
    elif raw.get("sudo") == "1":
        facts["privileges"] = "sudo"
        conn.sudo = ["sudo", "-n", "--"]
    else:
        bad(f"user {h.user or '(default)'} is not root and has no passwordless sudo: ccbench sets TCP settings and "
            "congestion control (on a forwarder a TUN device or tc): log in as root or allow this user `sudo -n`")
        return facts, problems
    release = raw.get("release", "?")
    facts["kernel"] = release
    allowed = cpu_list(raw.get("cpus", ""))
    if allowed:
        wanted = [("cpus", c) for c in h.cpus] + (
            [("emu_cpu", h.emu_cpu)] if h.role == "f" and isinstance(h.emu_cpu, int) else [])
        for field, c in wanted:
            if c not in allowed:
                bad(f"has no CPU {c} that ccbench may use (its {field}; allowed: {raw['cpus']}): fix {field} "
                    "in the inventory")
    if raw.get("machine") != "x86_64":
        bad(f"its CPU is {raw.get('machine')}: ccbench's binaries are built for x86_64 only")
    for tool, why in (("sha256sum", "checks the binaries it copies"), ("tar", "copies files with it")):
        if raw.get(tool) != "1":
            bad(f"has no {tool}, which ccbench needs ({why}): install it (coreutils / tar)")
    if h.role != "f":
        have = sorted(set(raw.get("ccas", "").split()) | names(raw, "tcp_"))
        facts["ccas"] = have
        missing = sorted(c for c in ccas if c not in have)
        if missing:
            bad(f"its kernel {release} has no congestion control {', '.join(missing)} (available: {', '.join(have)}): "
                f"load or build tcp_{missing[0]}, or change the study")
        i = _iface(raw, h.interface or "")
        if i["mtu"] is None:
            bad(f"has no interface {h.interface}: fix its interface in the inventory (see `ip link` there)")
        else:
            facts["interface"] = {"name": h.interface, **i}
            if i["mtu"] < mtu_needed:
                bad(f"interface {h.interface} has MTU {i['mtu']}, the study's mss needs {mtu_needed} (mss + 52): "
                    "lower tcp.mss or raise the MTU")
            if h.address not in i["addresses"]:
                bad(f"interface {h.interface} does not have the test address {h.address} (it has "
                    f"{', '.join(i['addresses']) or 'none'}): fix address or interface in the inventory")
        if iperf3:
            if not raw.get("iperf3"):
                bad("has no iperf3, which flows with tool = 'iperf3' need: install it (apt-get install iperf3)")
            else:
                facts["iperf3"] = raw["iperf3"]
    else:
        if raw.get("ip_forward") != "1":
            bad("does not forward IPv4 (net.ipv4.ip_forward = 0): it must route between the senders and the "
                "receiver; switch it on (sysctl -w net.ipv4.ip_forward=1)")
        facts["interfaces"] = {}
        for name in ifaces:
            i = _iface(raw, name or "")
            if i["mtu"] is None:
                bad(f"has no interface {name}: fix hosts.forwarder.to_senders / to_receiver in the inventory")
            else:
                facts["interfaces"][name] = i
        if not problems:
            bad_routes(conn, inv, bad)
        if inv.bottleneck == "emu" and raw.get("tun") != "1":
            bad("has no /dev/net/tun, which ccbench's emulator needs: modprobe tun")
        if inv.bottleneck == "tc":
            if raw.get("tc") != "1":
                bad("has no tc: install iproute2")
            have_q = names(raw, "sch_")
            facts["qdiscs"] = sorted(have_q)
            for q in sorted(tc_qdiscs):
                if q not in have_q:
                    bad(f"its kernel {release} has no {q} qdisc (sch_{q}), which bottleneck = 'tc' needs for this "
                        f"study (delay or loss on the bottleneck): use bottleneck = 'emu' (ccbench's emulator) or a "
                        f"kernel with sch_{q}")
    return facts, problems


def bad_routes(conn: Connection, inv: Inventory, bad: Any) -> None:
    """The forwarder reaches each sender by one of to_senders and the receiver
    by to_receiver: a sender reached by another interface had its packets
    bypass the emulator (its flows stored "ok" at 28 times the bottleneck's
    rate), and likewise a mis-set route."""
    ends = [(x, "to_senders", set(conn.host.to_senders)) for x in inv.hosts if x.role.startswith("s")]
    ends += [(x, "to_receiver", {conn.host.to_receiver}) for x in inv.hosts if x.role == "d"]
    ends = [e for e in ends if e[0].address]
    out = conn.run(["sh", "-c", ROUTES, "sh", *[x.address for x, _, _ in ends]], sudo=False, timeout=60).stdout
    dev = dict(line.removeprefix("route.").split("=", 1) for line in out.splitlines() if "=" in line)
    for x, field, want in ends:
        got = dev.get(x.address, "").strip()
        if got not in want:
            via = f"through {got}" if got else "by no route"
            bad(f"reaches {x.label}'s address {x.address} {via}, which is not hosts.forwarder.{field} "
                f"({', '.join(sorted(want))}): its packets would bypass the bottleneck; fix {field} in the "
                "inventory, or the route")


def other_runs(conn: Connection) -> list[str]:
    """A problem per run directory of another run on this host: one in progress
    would be set up on, and measured, by this sweep; one a killed controller
    left keeps its TUN device, policy rules and settings, which on a forwarder
    took about half of the next runs' traffic (degenerate runs, stored as
    results). ``doctor --cleanup`` removes what killed controllers left."""
    from .remote import list_runs, owner_alive, read_owner

    out = []
    for d in list_runs(conn):
        o = read_owner(conn, d)
        who = (f"controller pid {o.get('pid')} on {o.get('controller')}" if isinstance(o, dict)
               else "an unknown controller")
        state = ("in progress: let it finish, or stop it" if owner_alive(o) else
                 "left by a killed controller: `ccbench doctor --cleanup --inventory FILE` removes it"
                 + ("" if not isinstance(o, dict) or o.get("controller") == socket.gethostname()
                    else f" (run it on {o.get('controller')} if that controller may still run)"))
        out.append(f"host {conn.host.label}: holds another run's directory {d} ({who}), {state}")
    return out


def check_all(conns: dict[str, Connection], inv: Inventory, *, ccas_by_role: dict[str, set[str]],
              mtu_needed: int, iperf3_roles: set[str], tc_qdiscs: set[str]) -> tuple[dict, list[str]]:
    """Every host at once (one thread each: a command is one SSH round trip)."""
    def one(item):
        role, conn = item
        try:
            conn.open()
        except SshError as e:
            return role, {"role": role}, [str(e)]
        f, p = check_host(conn, inv, ccas=ccas_by_role.get(role, set()), mtu_needed=mtu_needed,
                          iperf3=role in iperf3_roles, tc_qdiscs=tc_qdiscs)
        if "privileges" in f:
            try:
                p += other_runs(conn)
            except SshError as e:
                p.append(str(e))
        return role, f, p

    facts: dict[str, Any] = {}
    problems: list[str] = []
    with ThreadPoolExecutor(max_workers=len(conns) or 1) as ex:
        for role, f, p in ex.map(one, list(conns.items())):
            facts[role] = f
            problems += p
    return facts, problems


__all__ = ["check_all", "check_host", "gather", "names", "other_runs"]
