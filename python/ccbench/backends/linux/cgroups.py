"""cgroup (v2) directories of a run: the load client of each sender runs in
``<cgroup2 root>/ccb<token>-<role>``, where its TCP-BPF program (RTT
samples, cwnd clamp) is attached (crates/load/src/sockops.rs). Removing the
directory detaches the program; it must be empty, so the run's processes
are stopped first."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

from . import netns


def mount_point(mountinfo: str) -> Optional[str]:
    """The first cgroup v2 mount point in a /proc/self/mountinfo text, or None."""
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields = left.split()
        if right.split(" ", 1)[0] == "cgroup2" and len(fields) > 4:
            return fields[4]
    return None


def root() -> Optional[Path]:
    """Where the cgroup v2 hierarchy is mounted (the first such mount), or None."""
    try:
        found = mount_point(Path("/proc/self/mountinfo").read_text())
    except OSError:
        return None
    return Path(found) if found is not None else None


def create(token: str, role: str) -> Path:
    base = root()
    if base is None:
        raise netns.SetupError("the linux backend needs a cgroup v2 hierarchy (for its TCP-BPF program) and none is "
                               "mounted: mount one, e.g. `mount -t cgroup2 none /sys/fs/cgroup`")
    d = base / netns.name(token, role)
    try:
        d.mkdir()
    except OSError as e:
        raise netns.SetupError(f"cannot create cgroup {d}: {e.strerror or e}") from None
    return d


def existing() -> list[Path]:
    """cgroup directories named like a run's object."""
    base = root()
    if base is None:
        return []
    try:
        return sorted(p for p in base.iterdir() if netns.NAME_RE.match(p.name) and p.is_dir())
    except OSError:
        return []


def pids(d: Path) -> list[int]:
    try:
        return [int(x) for x in (d / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def remove(d: Path, timeout_s: float = 2.0) -> Optional[str]:
    """rmdir the cgroup (retrying while exiting processes leave it); a problem or None."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            os.rmdir(d)
            return None
        except FileNotFoundError:
            return None
        except OSError as e:
            if time.monotonic() >= deadline:
                return f"cannot remove cgroup {d}: {e.strerror or e} (processes: {pids(d) or 'none'})"
            time.sleep(0.05)
