"""What a run creates on a host, and how it is removed again.

Every run has, on each host, the directory ``WORKDIR/ccb<token>-<role>``
(role: ``s<i>``, ``d``, ``f``; the role is in the name because hosts may
share a file system, as the test's namespaces do). It holds ``owner.json``
(which controller process runs it), the deployed binaries, configs,
results, logs, pidfiles, and ``manifest.json``: every change the run made
outside its directory, written *before* the change is made, so cleanup —
also ``ccbench doctor --cleanup`` after the controller was killed — undoes
exactly those and nothing else:

* ``sysctl``: a TCP setting of the study (tcp_rmem, tcp_wmem, tcp_sack,
  tcp_ecn, tcp_no_metrics_save) with its value before the run, restored;
* ``link``: the forwarder's TUN device ``ccb<token>-tun``, deleted;
* ``rule`` / ``table``: the forwarder's policy rules (pref, iif, table)
  that send the test traffic into the TUN, and that table, deleted;
* ``qdisc``: a root qdisc ccbench put on an interface (``bottleneck =
  "tc"``), deleted (the interface returns to its default qdisc);
* ``cgroup``: a sender's cgroup (v2) ``<mount>/ccbh<token>-<role>``, where
  its load client attaches the TCP-BPF program that takes every RTT sample
  (as the linux backend's), removed once the processes are stopped.

Removal order: the run's processes (``ccbench-load kill DIR``: its pidfiles,
start times checked, and anything running a program inside DIR), the
manifest's changes in reverse, the directory.
"""

from __future__ import annotations

import json
import os
import re
import socket
from typing import Any, Optional

from .ssh import Connection, SshError

NAME_RE = re.compile(r"^ccb([0-9a-f]{8})-(s[0-9]{1,3}|d|f)$")
_WRITE = 'umask 077 && cat > "$1"'  # fixed; the path is $1
_KEY_RE = re.compile(r"^net\.ipv4\.[a-z_]+$")
_IF_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._@-]{0,14}$")
# "ccbh", not "ccb": the linux backend's doctor takes ccb<token>-<role> cgroups on the same machine for its own.
_CGROUP_RE = re.compile(r"^(/[A-Za-z0-9_.-]+)+/ccbh[0-9a-f]{8}-s[0-9]{1,3}$")
SYSCTL_KEYS = ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_sack", "net.ipv4.tcp_ecn",
               "net.ipv4.tcp_no_metrics_save", "net.ipv4.tcp_comp_sack_nr")


def run_dir(workdir: str, token: str, role: str) -> str:
    return f"{workdir}/ccb{token}-{role}"


def _proc_start(pid: int) -> Optional[int]:
    try:
        stat = open(f"/proc/{pid}/stat").read()
        return int(stat[stat.rfind(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def owner() -> dict:
    pid = os.getpid()
    return {"controller": socket.gethostname(), "pid": pid, "start": _proc_start(pid)}


def owner_alive(o: Any) -> bool:
    """Is the controller process that wrote this owner.json still running (here)?"""
    if not isinstance(o, dict) or o.get("controller") != socket.gethostname():
        return False
    try:
        pid = int(o.get("pid"))
    except (TypeError, ValueError):
        return False
    return _proc_start(pid) is not None and _proc_start(pid) == o.get("start")


def write_file(conn: Connection, path: str, text: str) -> None:
    conn.run(["sh", "-c", _WRITE, "sh", path], input=text.encode())


# Fixed scripts (never built from values): their arguments are "$@", each quoted by shlex.join.
SETUP = r"""
set -e
wd=$1; d=$2; shift 2
# a work directory ccbench makes carries a mark, so that only such a one is removed once empty
[ -d "$wd" ] || { mkdir -p -m 755 "$wd" && : > "$wd/.ccbench-made"; }
mkdir -m 700 "$d"
cd "$d"
umask 077
tar -x -o -f -
for b in "$@"; do sha256sum "$b"; ./"$b" --version; done
"""
APPLY = r"""
set -e
d=$1; m=$2; shift 2
printf '%s\n' "$m" > "$d/manifest.json.tmp"
mv "$d/manifest.json.tmp" "$d/manifest.json"
for a in "$@"; do
  case $a in
    sysctl=*) sysctl -q -w "${a#sysctl=}" ;;
    cgroup=*) mkdir "${a#cgroup=}" ;;
    ip) ip -batch - ;;
    tc) tc -batch - ;;
    *) echo "unknown step $a" >&2; exit 2 ;;
  esac
done
"""
GET_SYSCTLS = r"""for k in "$@"; do printf '%s=%s\n' "$k" "$(sysctl -n "$k" | tr -s '\t ' '  ')"; done"""
REMOVE = r"""
d=$1; wd=$2; shift 2
if [ -x "$d/ccbench-load" ]; then "$d/ccbench-load" kill "$d" >/dev/null 2>&1 || echo "stopping the processes of $d failed" >&2; fi
for a in "$@"; do
  case $a in
    sysctl=*) sysctl -q -w "${a#sysctl=}" >/dev/null 2>&1 || echo "cannot restore ${a#sysctl=}" >&2 ;;
    qdisc=*) tc qdisc del dev "${a#qdisc=}" root >/dev/null 2>&1 ;;
    cgroup=*)
      c=${a#cgroup=}; i=0
      while [ -e "$c" ] && ! rmdir "$c" 2>/dev/null && [ $i -lt 40 ]; do sleep 0.05; i=$((i+1)); done
      [ ! -e "$c" ] || echo "cannot remove cgroup $c" >&2 ;;
  esac
done
ip -force -batch - >/dev/null 2>&1
[ ! -e "$d" ] || rm -rf --one-file-system "$d" || echo "cannot remove $d" >&2
if [ -e "$wd/.ccbench-made" ] && [ "$(ls -A "$wd")" = ".ccbench-made" ]; then
  rm -f "$wd/.ccbench-made" && rmdir "$wd" >/dev/null 2>&1
fi
exit 0
"""
FETCH = r"""cd "$1" && shift && ls -1 -d "$@" 2>/dev/null | tar -c -f - -T -"""


def tar_bytes(files: dict[str, tuple[bytes, int]]) -> bytes:
    """An uncompressed tar of name → (content, mode)."""
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, (data, mode) in files.items():
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), mode
            t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


class HostRun:
    """One host's part of one run: its directory and the changes to undo."""

    def __init__(self, conn: Connection, token: str):
        self.conn = conn
        self.token = token
        self.dir = run_dir(conn.host.workdir, token, conn.host.role)
        self.manifest: list[dict] = []
        self.created = False

    @property
    def load_bin(self) -> str:
        return f"{self.dir}/ccbench-load"

    @property
    def emu_bin(self) -> str:
        return f"{self.dir}/ccbench-emu"

    def create(self, binaries: dict[str, dict]) -> None:
        """The run directory with owner.json, an empty manifest and the binaries, checked (one command)."""
        from pathlib import Path

        files = {"owner.json": (json.dumps({**owner(), "token": self.token, "role": self.conn.host.role}).encode(),
                                0o600),
                 "manifest.json": (b"[]\n", 0o600)}
        for name, b in binaries.items():
            files[name] = (Path(b["path"]).read_bytes(), 0o700)
        self.created = True  # from here on, cleanup looks for it
        out = self.conn.run(["sh", "-c", SETUP, "sh", self.conn.host.workdir, self.dir, *binaries],
                            input=tar_bytes(files), timeout=120).stdout.split("\n")
        got = {}
        for line in out:
            parts = line.split()
            if len(parts) == 2 and len(parts[0]) == 64:
                got.setdefault(parts[1].lstrip("./"), {})["sha256"] = parts[0]
            elif len(parts) == 2 and parts[0] in binaries:
                got.setdefault(parts[0], {})["version"] = line.strip()
        for name, b in binaries.items():
            g = got.get(name, {})
            if g.get("sha256") != b["sha256"]:
                raise SshError(self.conn.host, f"the copy of {name} in {self.dir} has SHA-256 {g.get('sha256')}, "
                                               f"expected {b['sha256']} (disk full? a broken copy?)")
            if g.get("version") != b["version"]:
                raise SshError(self.conn.host, f"{self.dir}/{name} reports version {g.get('version')!r}, expected "
                                               f"{b['version']!r}")

    def apply(self, items: list[dict], steps: list[str], stdin: str = "") -> None:
        """Record ``items`` in the manifest (first), then run the steps (sysctl=K=V, ip / tc batches from stdin)."""
        self.manifest += items
        self.conn.run(["sh", "-c", APPLY, "sh", self.dir, json.dumps(self.manifest), *steps], input=stdin.encode())

    def set_sysctls(self, values: dict[str, Any]) -> dict[str, str]:
        """Set TCP sysctls (recording the old values first); returns the old values."""
        out = self.conn.run(["sh", "-c", GET_SYSCTLS, "sh", *values]).stdout
        old = {}
        for line in out.splitlines():
            k, _, v = line.partition("=")
            old[k] = " ".join(v.split())
        changed = {k: str(v) for k, v in values.items() if old.get(k) != " ".join(str(v).split())}
        if changed:
            self.apply([{"kind": "sysctl", "key": k, "value": old.get(k, "")} for k in changed],
                       [f"sysctl={k}={v}" for k, v in changed.items()])
        return old

    def create_cgroup(self) -> Optional[str]:
        """A cgroup (v2) for this host's load client (recorded first); its path, or None
        when the host has no cgroup v2 mounted."""
        from ccbench.backends.linux.cgroups import mount_point

        p = self.conn.run(["cat", "/proc/self/mountinfo"], check=False, sudo=False)
        mount = mount_point(p.stdout) if p.returncode == 0 else None
        if mount is None:
            return None
        path = f"{mount.rstrip('/')}/ccbh{self.token}-{self.conn.host.role}"
        if not _CGROUP_RE.match(path):  # a mount point with characters the cleanup would not trust
            return None
        self.apply([{"kind": "cgroup", "path": path}], [f"cgroup={path}"])
        return path

    def fetch(self, names: list[str]) -> dict[str, bytes]:
        """The run directory's files of these names that exist (one command)."""
        import io
        import tarfile

        data = self.conn.run(["sh", "-c", FETCH, "sh", self.dir, *names], raw=True, check=False, timeout=120).stdout
        out = {}
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as t:
                for m in t.getmembers():
                    f = t.extractfile(m)
                    if f is not None:
                        out[m.name] = f.read()
        except tarfile.TarError:
            pass
        return out

    # -- removal

    def remove(self) -> list[str]:
        """Stop the run's processes, undo the manifest, delete the directory. Problems as text."""
        return remove_dir(self.conn, self.dir, self.manifest if self.created else [])


def read_manifest(conn: Connection, d: str) -> list[dict]:
    p = conn.run(["cat", f"{d}/manifest.json"], check=False)
    try:
        m = json.loads(p.stdout) if p.returncode == 0 else []
    except ValueError:
        m = []
    return [x for x in m if isinstance(x, dict)] if isinstance(m, list) else []


def undo_steps(items: list[dict]) -> tuple[list[str], list[str]]:
    """(arguments of REMOVE, ip batch lines) that undo manifest entries, newest first. The manifest lives on
    the host: every value is checked again before it is used."""
    args: list[str] = []
    ip_lines: list[str] = []
    for item in reversed(items):
        kind = item.get("kind")
        if kind == "sysctl":
            k, v = item.get("key"), item.get("value")
            if isinstance(k, str) and k in SYSCTL_KEYS and isinstance(v, str) and re.match(r"^[0-9 ]*$", v) and v:
                args.append(f"sysctl={k}={v}")
        elif kind == "cgroup":
            path = item.get("path")
            if isinstance(path, str) and _CGROUP_RE.match(path) and "/../" not in path + "/":
                args.append(f"cgroup={path}")
        elif kind == "qdisc":
            dev = item.get("dev")
            if isinstance(dev, str) and _IF_RE.match(dev):
                args.append(f"qdisc={dev}")
        elif kind == "link":
            name = item.get("name")
            if isinstance(name, str) and _IF_RE.match(name) and NAME_RE.match(name.replace("-tun", "-f")):
                ip_lines.append(f"link del dev {name}")
        elif kind == "rule":
            pref, iif, table = item.get("pref"), item.get("iif"), item.get("table")
            if isinstance(pref, int) and isinstance(table, int) and isinstance(iif, str) and _IF_RE.match(iif):
                ip_lines.append(f"rule del pref {pref} iif {iif} lookup {table}")
        elif kind == "table":
            table = item.get("table")
            if isinstance(table, int):
                ip_lines.append(f"route flush table {table}")
    return args, ip_lines


def remove_dir(conn: Connection, d: str, manifest: Optional[list[dict]]) -> list[str]:
    """Remove one run directory and everything its manifest lists (``None``: read it there). One command
    (two when the manifest is read)."""
    items = read_manifest(conn, d) if manifest is None else manifest
    args, ip_lines = undo_steps(items)
    p = conn.run(["sh", "-c", REMOVE, "sh", d, conn.host.workdir, *args],
                 input=("\n".join(ip_lines) + "\n").encode() if ip_lines else b"", check=False, timeout=60)
    err = " ".join(p.stderr.split())
    problems = [f"host {conn.host.label}: {err}"] if err or p.returncode != 0 else []
    return problems


def list_runs(conn: Connection) -> list[str]:
    """This host's run directories (its role only) in its work directory."""
    p = conn.run(["ls", "-1", conn.host.workdir], check=False)
    if p.returncode != 0:
        return []
    out = []
    for name in p.stdout.split():
        m = NAME_RE.match(name)
        if m and m.group(2) == conn.host.role:
            out.append(f"{conn.host.workdir}/{name}")
    return out


def read_owner(conn: Connection, d: str) -> Any:
    p = conn.run(["cat", f"{d}/owner.json"], check=False)
    try:
        return json.loads(p.stdout) if p.returncode == 0 else None
    except ValueError:
        return None


__all__ = ["HostRun", "remove_dir", "list_runs", "read_owner", "owner_alive", "run_dir", "NAME_RE"]
