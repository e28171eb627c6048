"""The inventory: which machine plays which role of the topology.

Given as the ``[hosts]`` table of the study or of a separate file
(``ccbench run STUDY --inventory FILE``, so a study stays portable; the
file's values win). Example (docs/hosts-backend.md has the whole story)::

    [hosts]
    bottleneck = "emu"                 # "path" | "emu" | "tc"
    user = "root"                      # defaults for every host below
    identity = "~/.ssh/ccbench_ed25519"
    known_hosts = "~/.ssh/known_hosts"

    [[hosts.senders]]                  # one per sender of the study, in order
    ssh = "192.0.2.11"                 # SSH destination (name or address)
    address = "10.1.1.11"              # the address the test traffic uses
    interface = "enp1s0f1"             # ... and its interface

    [hosts.receiver]
    ssh = "192.0.2.20"
    address = "10.1.2.20"
    interface = "enp1s0f1"

    [hosts.forwarder]                  # bottleneck = "emu" or "tc"
    ssh = "192.0.2.30"
    to_senders = ["enp1s0f0"]          # where the senders' packets come in
    to_receiver = "enp1s0f1"           # where the receiver's packets come in

Every value is checked here (one line naming the field); nothing is ever
put into a shell string (ssh.py passes argument lists).
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

from ccbench.errors import StudyError

BOTTLENECKS = ("path", "emu", "tc")
HOST_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._:-]{0,252}$")  # never starts with '-': not an ssh option
USER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")
IFACE_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._@-]{0,14}$")
WORKDIR_RE = re.compile(r"^/[A-Za-z0-9._/-]+$")
DEFAULT_WORKDIR = "/var/tmp/ccbench"

_COMMON = ("user", "port", "identity", "known_hosts", "ssh_config", "workdir")
_TOP = {"bottleneck", "accept_new_host_keys", "connect_timeout", "senders", "receiver", "forwarder", *_COMMON}
_HOST = {"ssh", "address", "interface", "cpus", *_COMMON}
_FWD = {"ssh", "to_senders", "to_receiver", "emu_cpu", "cpus", *_COMMON}


@dataclass(frozen=True)
class Host:
    role: str  # "s0", "s1", ..., "d" (receiver), "f" (forwarder)
    ssh_host: str
    user: Optional[str]
    port: int
    identity: Optional[str]
    known_hosts: str
    ssh_config: Optional[str]
    workdir: str
    address: Optional[str] = None  # the test traffic's address (senders, receiver)
    interface: Optional[str] = None
    cpus: tuple[int, ...] = ()
    to_senders: tuple[str, ...] = ()  # forwarder
    to_receiver: Optional[str] = None
    emu_cpu: Any = "auto"

    @property
    def destination(self) -> str:
        """user@host:port, for messages."""
        return f"{self.user + '@' if self.user else ''}{self.ssh_host}:{self.port}"

    @property
    def label(self) -> str:
        names = {"d": "receiver", "f": "forwarder"}
        return f"{names.get(self.role, 'sender ' + self.role[1:])} ({self.destination})"


@dataclass(frozen=True)
class Inventory:
    bottleneck: str
    senders: tuple[Host, ...]
    receiver: Host
    forwarder: Optional[Host]
    accept_new_host_keys: bool = False
    connect_timeout_s: int = 10
    source: str = "[hosts]"

    @property
    def hosts(self) -> list[Host]:
        return [*self.senders, self.receiver, *([self.forwarder] if self.forwarder else [])]

    def with_options(self, **kw: Any) -> "Inventory":
        return replace(self, **kw)


def merge(study_table: Optional[dict], file_table: Optional[dict]) -> dict:
    """The study's [hosts] updated by the inventory file's (file wins, key by key at the top)."""
    out = dict(study_table or {})
    out.update(file_table or {})
    return out


def read_file(path: str | os.PathLike) -> dict:
    """The [hosts] table of an inventory file (or the whole file when it has none)."""
    import tomllib

    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise StudyError(f"--inventory: no such file (got {str(p)!r})") from None
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise StudyError(f"{p}: not a readable TOML file: {e}") from None
    t = doc.get("hosts", doc)
    if not isinstance(t, dict):
        raise StudyError(f"{p}: hosts: expected a table (got {type(t).__name__})")
    return t


def parse(table: dict, *, source: str = "[hosts]", n_senders: Optional[int] = None,
          base_dir: Optional[Path] = None) -> Inventory:
    """Check and convert a [hosts] table. ``n_senders``: the study's senders (must match)."""

    def err(where: str, problem: str, got: Any, allowed: str) -> StudyError:
        return StudyError(f"{source}: hosts.{where}: {problem} (got {got!r}; allowed: {allowed})")

    if not isinstance(table, dict) or not table:
        raise StudyError(f"{source}: hosts: the hosts backend needs an inventory: a [hosts] table in the study "
                         "or --inventory FILE (docs/hosts-backend.md)")
    for k in table:
        if k not in _TOP:
            raise err(k, "unknown key", k, ", ".join(sorted(_TOP)))
    bottleneck = table.get("bottleneck", "emu")
    if bottleneck not in BOTTLENECKS:
        raise err("bottleneck", "unknown bottleneck", bottleneck,
                  "'path' (the real network, only measured), 'emu' (ccbench's emulator on the forwarder), "
                  "'tc' (tbf on the forwarder)")
    accept = table.get("accept_new_host_keys", False)
    if not isinstance(accept, bool):
        raise err("accept_new_host_keys", "not a boolean", accept, "true or false")
    timeout = table.get("connect_timeout", 10)
    if not isinstance(timeout, int) or isinstance(timeout, bool) or not 1 <= timeout <= 300:
        raise err("connect_timeout", "not a number of seconds", timeout, "a whole number from 1 to 300")

    def path(where: str, v: Any) -> str:
        if not isinstance(v, str) or not v or "\n" in v or '"' in v:
            raise err(where, "not a file path", v, "a path such as '~/.ssh/id_ed25519', without double quotes")
        p = Path(os.path.expanduser(v))
        if not p.is_absolute() and base_dir is not None:
            p = base_dir / p
        return str(p)

    def common(where: str, t: dict, defaults: dict) -> dict:
        d = {k: t.get(k, defaults.get(k)) for k in _COMMON}

        def at(k: str) -> str:  # the key as written: the host's own, or the default for every host
            return f"{where}.{k}" if k in t else k

        if d["user"] is not None and (not isinstance(d["user"], str) or not USER_RE.match(d["user"])):
            raise err(at("user"), "not a user name", d["user"], "a login name such as 'root' or 'ccbench'")
        port = 22 if d["port"] is None else d["port"]
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            raise err(at("port"), "not a port", port, "a whole number from 1 to 65535")
        d["port"] = port
        for k in ("identity", "ssh_config"):
            if d[k] is not None:
                d[k] = path(at(k), d[k])
        d["known_hosts"] = path(at("known_hosts"), d["known_hosts"] or "~/.ssh/known_hosts")
        wd = d["workdir"] or DEFAULT_WORKDIR
        if not isinstance(wd, str) or not WORKDIR_RE.match(wd) or ".." in wd.split("/") or wd.rstrip("/") == "":
            raise err(at("workdir"), "not an absolute directory path", wd,
                      "an absolute path of letters, digits, '.', '_', '-', '/' such as '/var/tmp/ccbench'")
        d["workdir"] = wd.rstrip("/")
        return d

    defaults = {k: table.get(k) for k in _COMMON}

    def ssh_host(where: str, t: dict) -> str:
        h = t.get("ssh")
        if not isinstance(h, str) or not HOST_RE.match(h):
            raise err(f"{where}.ssh", "not a host name or address", h,
                      "an SSH destination host such as 'node1.lab' or '192.0.2.10' (user and port are separate keys)")
        if h.count(":") == 1:  # an IPv6 address has two or more
            raise err(f"{where}.ssh", "a host and a port in one value", h,
                      f"the host alone, with the port as its own key: ssh = '{h.split(':')[0]}', "
                      f"port = {h.split(':')[1] or 22}")
        return h

    def iface(where: str, v: Any) -> str:
        if not isinstance(v, str) or not IFACE_RE.match(v):
            raise err(where, "not an interface name", v, "a Linux interface name such as 'eth1' (at most 15 characters)")
        return v

    def cpus(where: str, v: Any) -> tuple[int, ...]:
        if v is None:
            return ()
        if not isinstance(v, list) or not all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c < 4096
                                               for c in v):
            raise err(where, "not a list of CPU numbers", v, "an array such as [0, 1]")
        return tuple(v)

    def end_host(where: str, role: str, t: Any) -> Host:
        if not isinstance(t, dict):
            raise err(where, "not a table", t, "a table {ssh, address, interface, ...}")
        for k in t:
            if k not in _HOST:
                raise err(f"{where}.{k}", "unknown key", k, ", ".join(sorted(_HOST)))
        addr = t.get("address")
        try:
            addr = str(ipaddress.IPv4Address(addr))
        except (ValueError, TypeError):
            raise err(f"{where}.address", "not an IPv4 address", addr,
                      "the IPv4 address the test traffic uses on this host, e.g. '10.1.1.11'") from None
        return Host(role=role, ssh_host=ssh_host(where, t), address=addr,
                    interface=iface(f"{where}.interface", t.get("interface")),
                    cpus=cpus(f"{where}.cpus", t.get("cpus")), **common(where, t, defaults))

    senders_t = table.get("senders")
    if not isinstance(senders_t, list) or not senders_t:
        raise err("senders", "missing or empty", senders_t, "an array of tables [[hosts.senders]], one per sender")
    senders = tuple(end_host(f"senders[{i}]", f"s{i}", t) for i, t in enumerate(senders_t))
    if n_senders is not None:  # a study with fewer senders uses the first ones
        if len(senders) < n_senders:
            raise err("senders", f"the study has {n_senders} sender{'s' if n_senders != 1 else ''}", len(senders),
                      f"at least {n_senders} [[hosts.senders]] tables (the first {n_senders} are used)")
        senders = senders[:n_senders]
    receiver = end_host("receiver", "d", table.get("receiver"))
    fwd_t = table.get("forwarder")
    forwarder = None
    if fwd_t is not None:
        if not isinstance(fwd_t, dict):
            raise err("forwarder", "not a table", fwd_t, "a table {ssh, to_senders, to_receiver}")
        for k in fwd_t:
            if k not in _FWD:
                raise err(f"forwarder.{k}", "unknown key", k, ", ".join(sorted(_FWD)))
        ts = fwd_t.get("to_senders")
        if isinstance(ts, str):
            ts = [ts]
        if not isinstance(ts, list) or not ts:
            raise err("forwarder.to_senders", "missing", ts, "the interface(s) the senders' packets arrive on, e.g. ['eth1']")
        emu_cpu = fwd_t.get("emu_cpu", "auto")
        if emu_cpu not in ("auto", "off") and not (isinstance(emu_cpu, int) and not isinstance(emu_cpu, bool)
                                                   and emu_cpu >= 0):
            raise err("forwarder.emu_cpu", "not a placement", emu_cpu, "'auto', 'off' or a CPU number")
        forwarder = Host(role="f", ssh_host=ssh_host("forwarder", fwd_t),
                         to_senders=tuple(iface(f"forwarder.to_senders[{i}]", x) for i, x in enumerate(ts)),
                         to_receiver=iface("forwarder.to_receiver", fwd_t.get("to_receiver")),
                         emu_cpu=emu_cpu, cpus=cpus("forwarder.cpus", fwd_t.get("cpus")),
                         **common("forwarder", fwd_t, defaults))
    if bottleneck in ("emu", "tc") and forwarder is None:
        raise err("forwarder", f"bottleneck = '{bottleneck}' needs a forwarding host", None,
                  "a table [hosts.forwarder] with ssh, to_senders and to_receiver (or bottleneck = 'path')")
    addrs = [h.address for h in (*senders, receiver)]
    if len(set(addrs)) != len(addrs):
        raise err("senders", "test addresses are not unique", addrs, "one address per sender and receiver")
    return Inventory(bottleneck=bottleneck, senders=senders, receiver=receiver, forwarder=forwarder,
                     accept_new_host_keys=accept, connect_timeout_s=timeout, source=source)


__all__ = ["Host", "Inventory", "parse", "read_file", "merge", "BOTTLENECKS"]
