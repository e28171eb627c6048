"""What this machine can do for the linux backend (``ccbench doctor``).

The checks that need root actually try things: a throw-away namespace named
like a run's (``ccb<token>-r``, so ``ccbench doctor --cleanup`` would find it
if the probe were killed), a veth pair and a TUN device inside it, a tbf and
a netem qdisc on the veth. Everything is deleted again before returning.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ccbench.spec import kernel

from . import cgroups, cleanup, netns, tcp_watch


@dataclass
class Check:
    name: str
    ok: Optional[bool]  # None: informational / not needed
    detail: str


def _bpf() -> Check:
    syscall = Path("/proc/sys/kernel/unprivileged_bpf_disabled").exists()
    mounted = False
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) > 2 and parts[2] == "bpf":
                mounted = True
                break
    except OSError:
        pass
    if not syscall:
        return Check("BPF", False, "the kernel has no bpf() system call (CONFIG_BPF_SYSCALL): the linux backend "
                     "needs it for its TCP-BPF program (RTT samples, cwnd_clamp)")
    cg = cgroups.root()
    detail = ("bpf() system call present; bpffs " + ("mounted" if mounted else "not mounted (not needed)")
              + "; cgroup v2 " + (f"at {cg} (the TCP-BPF program for RTT samples and cwnd_clamp attaches there)" if cg else
                                  "not mounted: linux runs need it (mount -t cgroup2 none /sys/fs/cgroup)"))
    return Check("BPF", True if cg else False, detail)


def _preemption() -> Check:
    """The kernel's preemption model: with "none" (or "voluntary") another
    process's long system call on the emulator's CPU can delay it by
    milliseconds despite its real-time priority (seen: runs flagged as
    stalled by 10-12 ms while a build ran)."""
    mode = None
    for arg in Path("/proc/cmdline").read_text().split() if Path("/proc/cmdline").exists() else []:
        if arg.startswith("preempt="):
            mode = arg.split("=", 1)[1]
    cfg = kernel.build_config() if mode is None else None
    if cfg is not None:
        for m in ("NONE", "VOLUNTARY", "LAZY", "RT"):
            if f"CONFIG_PREEMPT_{m}=y" in cfg:
                mode = m.lower()
                break
        else:
            if "CONFIG_PREEMPT=y" in cfg:
                mode = "full"
    if mode is None:
        return Check("kernel preemption", None, "unknown (no preempt= on the command line, no kernel config to read)")
    good = mode in ("full", "lazy", "rt")
    return Check("kernel preemption", True if good else None,
                 mode + ("" if good else ": other processes' system calls can delay the real-time emulator by "
                         "milliseconds (runs then come back suspect: 'stalled'); boot with preempt=full to avoid it"))


def _probe_netns() -> list[Check]:
    checks = []
    token = netns.new_token()
    ns = netns.name(token, "r")
    a, b, tun = netns.name(token, "d"), netns.name(token, "rd"), netns.name(token, "tun")
    try:
        try:
            netns.ip("netns", "add", ns)
            checks.append(Check("network namespaces", True, "created and deleted a test namespace"))
        except netns.SetupError as e:
            checks.append(Check("network namespaces", False, str(e)))
            return checks
        try:
            netns.ip("link", "add", "name", a, "type", "veth", "peer", "name", b, ns=ns)
            netns.ip("link", "set", "dev", a, "up", ns=ns)
            checks.append(Check("veth", True, "created a veth pair"))
        except netns.SetupError as e:
            checks.append(Check("veth", False, f"{e} (the kernel needs CONFIG_VETH)"))
            a = ""
        try:
            netns.ip("tuntap", "add", "dev", tun, "mode", "tun", ns=ns)
            netns.ip("link", "set", "dev", tun, "up", ns=ns)
            checks.append(Check("TUN device", True, "created a TUN device in a namespace"))
        except netns.SetupError as e:
            checks.append(Check("TUN device", False, str(e)))
        if a and shutil.which("tc"):
            for qd, args, need in (
                ("tbf", ["rate", "1mbit", "burst", "32kbit", "latency", "400ms"], "not needed by ccbench"),
                ("netem", ["delay", "1ms"], "not needed: ccbench emulates links itself"),
                ("fq", [], "not used: there is no pacing qdisc in the linux backend"),
            ):
                p = netns.ip("netns", "exec", ns, "tc", "qdisc", "add", "dev", a, "root", qd, *args, check=False)
                if p.returncode == 0:
                    netns.ip("netns", "exec", ns, "tc", "qdisc", "del", "dev", a, "root", check=False)
                checks.append(Check(f"{qd} qdisc", None, ("available" if p.returncode == 0 else "missing")
                                    + f" ({need})"))
    finally:
        try:
            netns.delete_namespace(ns)
        except netns.SetupError as e:
            checks.append(Check("cleanup", False, f"{e}: run `ccbench doctor --cleanup`"))
    return checks


def probe() -> list[Check]:
    from .backend import core_problem

    checks: list[Check] = []
    linux = Path("/proc/sys/net").is_dir()
    checks.append(Check("Linux", linux, os.uname().release if linux else "not Linux: the linux backend needs Linux"))
    if not linux:
        return checks
    root = os.geteuid() == 0
    checks.append(Check("root", root, "yes" if root else
                        "no: the linux backend needs root (run ccbench as root, e.g. sudo)"))
    has_ip = shutil.which("ip") is not None
    checks.append(Check("iproute2 (ip)", has_ip, shutil.which("ip") or "missing: apt-get install iproute2"))
    tun_dev = Path("/dev/net/tun").exists()
    checks.append(Check("/dev/net/tun", tun_dev, "present" if tun_dev else
                        "missing: modprobe tun, or mkdir -p /dev/net && mknod /dev/net/tun c 10 200"))
    if root and has_ip:
        checks += _probe_netns()
    else:
        ns_ok = Path("/proc/self/ns/net").exists()
        checks.append(Check("network namespaces", ns_ok if ns_ok else False,
                            "supported by the kernel (not tried: needs root)" if ns_ok else
                            "the kernel has no network namespaces (CONFIG_NET_NS)"))
    avail = kernel.available() or []
    checks.append(Check("congestion control", bool(avail),
                        "available: " + ", ".join(avail) + f"; default: {kernel.default() or '?'}"))
    allowed = kernel.allowed() or []
    checks.append(Check("allowed for unprivileged", None,
                        (", ".join(allowed) or "none")
                        + " (tcp_allowed_congestion_control; ccbench's load generator runs as root, "
                          "which may use every available one, so ccbench leaves it alone)"))
    checks.append(_bpf())
    from .bpf_cca import available as bpf_available, leftover_names, tools_check  # cca = "bpf:FILE" (docs/bpf.md)

    checks.append(Check("BPF congestion control (optional)", *tools_check()))
    checks.append(Check("ACK watch for BPF runs", *tcp_watch.check()))
    checks.append(_preemption())
    core = core_problem()
    checks.append(Check("emulator and load generator", core is None, core or "built into ccbench._core"))
    ip3 = shutil.which("iperf3")
    # Optional: only flows with tool = "iperf3" need it (None: not a failure).
    checks.append(Check("iperf3 (optional)", True if ip3 else None,
                        ip3 or "not installed: flows with tool = 'iperf3' need it (apt-get install iperf3)"))
    if root:
        left = [r for r in cleanup.find() if not r.empty()]
        what = []
        if left:
            what.append(f"{len(left)} killed run{'s' if len(left) != 1 else ''} left "
                        + "; ".join(r.describe() for r in left))
        bpf_left = leftover_names() if bpf_available() is None else []
        if bpf_left:
            what.append(f"BPF congestion controls still registered: {', '.join(bpf_left)}")
        checks.append(Check("leftovers", not what,
                            "; ".join(what) + ": run `ccbench doctor --cleanup`" if what else "none"))
    return checks
