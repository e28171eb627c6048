"""Find and remove what linux-backend runs left behind.

Everything a run creates is named ``ccb<token>-...`` (netns.py) and its
files live in ``/run/ccbench/ccb<token>/`` together with ``owner.json`` (the
pid and start time of the process running it). A *leftover* is any of

* a namespace in /run/netns named ``ccb<8 hex>-<role>``,
* a link in the root namespace with such a name (normally never there: veths
  are created inside the namespaces),
* a process inside such a namespace, or whose command line names a run
  directory (``/run/ccbench/ccb<token>/``) — also one whose namespace was
  already unmounted,
* a cgroup directory with such a name in the cgroup v2 hierarchy (one per
  load client), and the processes in it,
* a tracefs instance ``ccb<token>`` (runs with BPF CCAs: tcp_watch.py),
* a run directory,

whose run's owner is no longer alive. Runs whose owner is alive are in
progress and are left alone. Nothing else is touched: names must match the
pattern exactly.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from . import cgroups, netns, tcp_watch

RUN_ROOT = Path("/run/ccbench")
RUN_DIR_RE = re.compile(r"^ccb([0-9a-f]{8})$")
STARTING_S = 60.0  # a run directory without an owner this young is a run opening
CMDLINE_RE = re.compile(re.escape(str(RUN_ROOT)) + r"/ccb([0-9a-f]{8})(/|$)")


def run_dir(token: str) -> Path:
    return RUN_ROOT / f"{netns.PREFIX}{token}"


def _starttime(pid: int) -> Optional[int]:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # comm may contain spaces and parentheses: split after the last ')'
    return int(stat.rsplit(")", 1)[1].split()[19])


def write_owner(d: Path) -> None:
    pid = os.getpid()
    (d / "owner.json").write_text(json.dumps({"pid": pid, "starttime": _starttime(pid), "created": time.time()}))


def owner_pid(token: str) -> Optional[int]:
    """The pid running this run if it is still alive, else None."""
    try:
        o = json.loads((run_dir(token) / "owner.json").read_text())
        pid, st = int(o["pid"]), o.get("starttime")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if st is not None and _starttime(pid) == st:
        return pid
    return None


@dataclass
class RunLeftovers:
    token: str
    namespaces: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    cgroups: list[Path] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    traces: list[Path] = field(default_factory=list)
    dir: Optional[Path] = None
    owner: Optional[int] = None  # alive owner: the run is in progress

    def empty(self) -> bool:
        return not (self.namespaces or self.links or self.cgroups or self.pids or self.traces or self.dir)

    def describe(self) -> str:
        parts = []
        if self.namespaces:
            parts.append(f"{len(self.namespaces)} namespace{'s' if len(self.namespaces) != 1 else ''}")
        if self.links:
            parts.append(f"{len(self.links)} link{'s' if len(self.links) != 1 else ''}")
        if self.cgroups:
            parts.append(f"{len(self.cgroups)} cgroup{'s' if len(self.cgroups) != 1 else ''}")
        if self.pids:
            parts.append(f"{len(self.pids)} process{'es' if len(self.pids) != 1 else ''}")
        if self.traces:
            parts.append(f"trace instance {', '.join(str(t) for t in self.traces)}")
        if self.dir:
            parts.append(f"directory {self.dir}")
        return ", ".join(parts)


def _ns_inodes() -> dict[tuple[int, int], str]:
    out = {}
    for n in netns.existing_namespaces():
        if netns.NAME_RE.match(n):
            try:
                st = os.stat(netns.NETNS_DIR / n)
                out[(st.st_dev, st.st_ino)] = n
            except OSError:
                pass
    return out


def _root_links() -> list[str]:
    p = netns.ip("-j", "link", "show", check=False)
    if p.returncode != 0:
        return []
    try:
        return [lk["ifname"] for lk in json.loads(p.stdout or "[]") if netns.NAME_RE.match(lk.get("ifname", ""))]
    except (ValueError, KeyError, TypeError):
        return []


def find(include_live: bool = False) -> list[RunLeftovers]:
    """Everything of every ccbench run on this machine, grouped by run token.

    Runs whose owner is alive are left out unless ``include_live``.
    """
    runs: dict[str, RunLeftovers] = {}

    def get(token: str) -> RunLeftovers:
        return runs.setdefault(token, RunLeftovers(token))

    for n in netns.existing_namespaces():
        m = netns.NAME_RE.match(n)
        if m:
            get(m.group(1)).namespaces.append(n)
    for n in _root_links():
        get(netns.NAME_RE.match(n).group(1)).links.append(n)
    for d in cgroups.existing():
        get(netns.NAME_RE.match(d.name).group(1)).cgroups.append(d)
    for d in tcp_watch.existing():
        get(d.name[len(netns.PREFIX):]).traces.append(d)
    if RUN_ROOT.is_dir():
        for d in RUN_ROOT.iterdir():
            m = RUN_DIR_RE.match(d.name)
            if m and d.is_dir():
                get(m.group(1)).dir = d
    inodes = _ns_inodes()
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        token = None
        try:
            st = os.stat(entry / "ns" / "net")
            ns = inodes.get((st.st_dev, st.st_ino))
            if ns:
                token = netns.NAME_RE.match(ns).group(1)
        except OSError:
            pass
        if token is None:
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            m = CMDLINE_RE.search(cmd)
            if m:
                token = m.group(1)
        if token is not None:
            get(token).pids.append(pid)
    for r in runs.values():  # processes in a run's cgroup are the run's too
        for d in r.cgroups:
            r.pids += [p for p in cgroups.pids(d) if p != me and p not in r.pids]
    out = []
    for token, r in sorted(runs.items()):
        r.owner = owner_pid(token)
        if r.owner is None and not include_live and _starting(r):
            continue
        if r.owner is not None:
            # The owner itself (or a worker that owns it) is not a leftover process.
            r.pids = [p for p in r.pids if p != r.owner]
            if not include_live:
                continue
        out.append(r)
    return out


def _starting(r: RunLeftovers) -> bool:
    """A run directory made a moment ago whose owner is not written yet: a
    run opening now (backend.py writes owner.json right after mkdir), not a
    leftover, now that other processes (cluster workers) clean up too."""
    if r.dir is None or (r.dir / "owner.json").exists():
        return False
    try:
        return time.time() - r.dir.stat().st_mtime < STARTING_S
    except OSError:
        return False


def kill(pids: list[int], timeout_s: float = 2.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not any(Path(f"/proc/{p}").exists() and not _zombie(p) for p in pids):
                return
            time.sleep(0.05)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def remove(r: RunLeftovers) -> list[str]:
    """Remove one run's leftovers: processes, cgroups, namespaces, links, directory. Returns problems."""
    problems = []
    if r.pids:
        kill(r.pids)
    for d in r.cgroups:
        problem = cgroups.remove(d)
        if problem:
            problems.append(problem)
    for ns in r.namespaces:
        try:
            netns.delete_namespace(ns)
        except netns.SetupError as e:
            problems.append(str(e))
    for d in r.traces:
        problem = tcp_watch.remove(d)
        if problem:
            problems.append(problem)
    for link in r.links:
        p = netns.ip("link", "delete", "dev", link, check=False)
        if p.returncode != 0 and link in _root_links():
            problems.append(f"cannot delete link {link}: {' '.join(p.stderr.split())}")
    if r.dir is not None:
        shutil.rmtree(r.dir, ignore_errors=True)
        if r.dir.exists():
            problems.append(f"cannot remove {r.dir}")
    return problems


def cleanup(include_live: bool = False) -> tuple[list[RunLeftovers], list[str]]:
    """Find and remove every leftover (of runs whose owner is dead). Returns (removed, problems)."""
    found = [r for r in find(include_live=include_live) if not r.empty()]
    problems = []
    for r in found:
        problems += remove(r)
    return found, problems
