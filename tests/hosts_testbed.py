"""A testbed of "real hosts" on this machine for the hosts backend's tests.

Each host is a network namespace running Debian's OpenSSH server
(``/usr/sbin/sshd -D -f CONFIG`` with generated host keys and an authorized
generated client key, everything in a temporary directory). Two networks,
as in a lab:

* management: a veth from the root namespace (the controller) to each host,
  10.99.<k>.0/30 — SSH runs here;
* test: senders ``s<i>`` — forwarder ``f`` — receiver ``d`` on veths,
  10.98.<i+1>.0/24 and 10.98.100.0/24, the forwarder routing between them.

All hosts share this machine's kernel and file system, so per-host TCP
settings are per namespace (ccbench's sysctls are all per-namespace ones)
and the hosts' work directories are distinct paths. Each host's /sys has
cgroup v2 mounted at /sys/fs/cgroup, as on a real machine (one cgroup tree,
the machine's).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Optional

SSHD = "/usr/sbin/sshd"
MOUNT_CGROUP2_THEN = 'mount -t cgroup2 cgroup2 /sys/fs/cgroup && exec "$@"'  # fixed; the command is "$@"


def sh(*argv: str, check: bool = True, ns: Optional[str] = None) -> subprocess.CompletedProcess:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + [str(a) for a in argv]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    return p


class Testbed:
    def __init__(self, tmp: Path, senders: int = 2):
        self.tag = secrets.token_hex(2)
        self.tmp = Path(tmp)
        self.roles = [f"s{i}" for i in range(senders)] + ["d", "f"]
        self.ns = {r: f"cht{self.tag}{r}" for r in self.roles}
        self.mgmt = {r: f"10.99.{k + 1}.2" for k, r in enumerate(self.roles)}
        self.test_ip = {**{f"s{i}": f"10.98.{i + 1}.2" for i in range(senders)}, "d": "10.98.100.2"}
        self.test_if = {r: "t0" for r in self.test_ip}
        self.workdir = f"/var/tmp/ccbench-test-{self.tag}"
        self.sshd: dict[str, subprocess.Popen] = {}
        self.key = self.tmp / "client_key"
        self.known_hosts = self.tmp / "known_hosts"
        # The senders' cgroups live in this machine's one cgroup tree: those
        # there before the testbed (another testbed's, killed) are not its.
        self.cgroups_before = set(self._cgroups())
        if self.cgroups_before:
            print(f"testbed: cgroups of an earlier testbed, not counted as this one's leftovers: "
                  f"{sorted(self.cgroups_before)}")

    # -- building

    def build(self) -> "Testbed":
        if not Path(SSHD).exists():
            raise RuntimeError("openssh-server is not installed (make install-dev installs it)")
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ccbench-test", "-f", str(self.key))
        (self.tmp / "authorized_keys").write_text(Path(str(self.key) + ".pub").read_text())
        kh = []
        for k, r in enumerate(self.roles):
            ns = self.ns[r]
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            for key in ("all", "default"):
                sh("sysctl", "-q", "-w", f"net.ipv6.conf.{key}.disable_ipv6=1", ns=ns)
            root_if = f"chm{self.tag}{r}"
            sh("ip", "link", "add", root_if, "type", "veth", "peer", "name", "mgmt0", "netns", ns)
            sh("ip", "addr", "add", f"10.99.{k + 1}.1/30", "dev", root_if)
            sh("ip", "link", "set", root_if, "up")
            sh("ip", "-n", ns, "addr", "add", f"{self.mgmt[r]}/30", "dev", "mgmt0")
            sh("ip", "-n", ns, "link", "set", "mgmt0", "up")
            d = self.tmp / r
            d.mkdir()
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", r, "-f", str(d / "hostkey"))
            kh.append(f"{self.mgmt[r]} {(d / 'hostkey.pub').read_text().split(' ')[0]} "
                      f"{(d / 'hostkey.pub').read_text().split(' ')[1]}")
            (d / "sshd_config").write_text("\n".join([
                f"ListenAddress {self.mgmt[r]}", "Port 22", f"HostKey {d / 'hostkey'}", f"PidFile {d / 'sshd.pid'}",
                f"AuthorizedKeysFile {self.tmp / 'authorized_keys'}", "PermitRootLogin prohibit-password",
                "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
                "PrintMotd no", "MaxSessions 50", "MaxStartups 50", ""]))
        self.known_hosts.write_text("\n".join(kh) + "\n")
        # the test network: s<i> - f - d
        f = self.ns["f"]
        for r, ip in self.test_ip.items():
            fif = f"t{r}"
            sh("ip", "-n", self.ns[r], "link", "add", "t0", "type", "veth", "peer", "name", fif, "netns", f)
            sh("ip", "-n", self.ns[r], "addr", "add", f"{ip}/24", "dev", "t0")
            sh("ip", "-n", self.ns[r], "link", "set", "t0", "up")
            sh("ip", "-n", f, "addr", "add", ip.rsplit(".", 1)[0] + ".1/24", "dev", fif)
            sh("ip", "-n", f, "link", "set", fif, "up")
            sh("ip", "-n", self.ns[r], "route", "add", "10.98.0.0/16", "via", ip.rsplit(".", 1)[0] + ".1")
        sh("sysctl", "-q", "-w", "net.ipv4.ip_forward=1", ns=f)
        for key in ("all", "default"):
            sh("sysctl", "-q", "-w", f"net.ipv4.conf.{key}.rp_filter=0", ns=f)
            sh("sysctl", "-q", "-w", f"net.ipv4.conf.{key}.send_redirects=0", ns=f)
        for r in self.roles:
            self.start_sshd(r)
        return self

    def start_sshd(self, role: str) -> None:
        d = self.tmp / role
        # `ip netns exec` gives the host a /sys of its own without the cgroup v2 mount a real
        # machine has (the senders' TCP-BPF program attaches there): mount it, then become sshd.
        self.sshd[role] = subprocess.Popen(["ip", "netns", "exec", self.ns[role], "sh", "-c", MOUNT_CGROUP2_THEN,
                                            "sh", SSHD, "-D", "-f", str(d / "sshd_config"), "-E",
                                            str(d / "sshd.log")],
                                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection((self.mgmt[role], 22), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"sshd of {role} did not start: {(d / 'sshd.log').read_text()[-500:]}")
                time.sleep(0.05)

    def kill_host(self, role: str) -> None:
        """The host 'dies': every process in its namespace (sshd, its sessions, ccbench's) is killed."""
        for pid in sh("ip", "netns", "pids", self.ns[role], check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        p = self.sshd.pop(role, None)
        if p is not None:
            p.wait(timeout=10)

    # -- what a study sees

    def inventory(self, bottleneck: str = "emu", **extra: object) -> str:
        lines = ["[hosts]", f'bottleneck = "{bottleneck}"', 'user = "root"', f'identity = "{self.key}"',
                 f'known_hosts = "{self.known_hosts}"', f'workdir = "{self.workdir}"']
        lines += [f"{k} = {_toml(v)}" for k, v in extra.items()]
        for r in self.roles:
            if r == "f":
                lines += ["[hosts.forwarder]", f'ssh = "{self.mgmt[r]}"',
                          "to_senders = [" + ", ".join(f'"t{s}"' for s in self.test_ip if s != "d") + "]",
                          'to_receiver = "td"']
                continue
            lines += ["[[hosts.senders]]" if r.startswith("s") else "[hosts.receiver]", f'ssh = "{self.mgmt[r]}"',
                      f'address = "{self.test_ip[r]}"', 'interface = "t0"', "cpus = [0]"]
        return "\n".join(lines) + "\n"

    def write_inventory(self, name: str = "inventory.toml", **kw) -> Path:
        p = self.tmp / name
        p.write_text(self.inventory(**kw))
        return p

    # -- what must not be left

    @staticmethod
    def _cgroups() -> list[Path]:
        from ccbench.backends.linux import cgroups

        base = cgroups.root()  # the senders' cgroups (remote.py): one cgroup tree on this machine
        return [] if base is None else [p for p in base.iterdir() if p.name.startswith("ccbh") and p.is_dir()]

    def leftovers(self) -> list[str]:
        out = []
        wd = Path(self.workdir)
        if wd.exists():
            out += [f"file {p}" for p in wd.iterdir()]
        for r in self.roles:
            pids = sh("ip", "netns", "pids", self.ns[r], check=False).stdout.split()
            sshd = {p.pid for p in self.sshd.values()}
            for pid in pids:
                try:
                    exe = os.readlink(f"/proc/{pid}/exe")
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                if "sshd" in exe or int(pid) in sshd:
                    continue
                out.append(f"process in {r}: {pid} {cmd}")
        out += [f"cgroup {p}" for p in self._cgroups() if p not in self.cgroups_before]
        links = sh("ip", "-n", self.ns["f"], "-o", "link", "show", check=False).stdout
        out += [f"link in f: {x.split(':')[1].strip()}" for x in links.splitlines() if "ccb" in x]
        rules = sh("ip", "-n", self.ns["f"], "rule", "show", check=False).stdout
        out += [f"rule in f: {x}" for x in rules.splitlines() if "lookup" in x and not any(
            t in x for t in ("lookup local", "lookup main", "lookup default"))]
        for r in self.test_ip:
            v = sh("sysctl", "-n", "net.ipv4.tcp_no_metrics_save", ns=self.ns[r]).stdout.strip()
            if v != "0":
                out.append(f"sysctl in {r}: tcp_no_metrics_save = {v}")
        qd = sh("tc", "-n", self.ns["f"], "qdisc", "show", check=False).stdout
        out += [f"qdisc in f: {x}" for x in qd.splitlines() if " tbf " in x or " netem " in x]
        return out

    def teardown(self) -> None:
        for r in list(self.sshd):
            self.kill_host(r)
        for r in self.roles:
            self.kill_host_quiet(r)
            sh("ip", "netns", "delete", self.ns[r], check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def kill_host_quiet(self, role: str) -> None:
        try:
            self.kill_host(role)
        except Exception:  # noqa: BLE001 - best effort at the end
            pass


def _toml(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    return f'"{v}"'
