"""Watch every ACK of a run for a congestion window no algorithm can set.

Runs with BPF congestion controls get a tracefs instance of their own,
``/sys/kernel/tracing/instances/ccb<token>``, with the kernel's
``tcp:tcp_probe`` event (one per segment a socket receives) filtered to
windows or ssthresholds above a limit. The backend reads what it caught
after the run and removes the instance; nothing is recorded when all is
well.

Why not the TCP_INFO samples alone: the kernel of this project's sandbox VMs
skips BPF programs for ACKs processed over its agent's threads, and a
skipped ``ssthresh`` hook leaves a stale value. The window it produces can
be gone again within 30 ms, between two samples (docs/linux-backend.md, "A
corrupt window"); the tracepoint sees every ACK. Kernel-native algorithms
need no watch (it costs a filter per received segment).

``ccbench doctor --cleanup`` removes instances of runs whose owner is dead
(cleanup.py).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from . import netns

TRACEFS = Path("/sys/kernel/tracing")
INFINITE_SSTHRESH = 0x7FFFFFFF  # the kernel's "not set yet"
_EVENT = re.compile(r"tcp_probe: .*?src=(\S+) dest=(\S+) .*?snd_cwnd=(\d+) ssthresh=(\d+)")


class WatchError(Exception):
    """tracefs or the tcp_probe event is not available."""


@dataclass
class Catch:
    src: str  # address:port of the socket that received the segment
    dest: str
    cwnd: int  # segments
    ssthresh: int


def instances_dir() -> Path:
    return TRACEFS / "instances"


def _ensure_tracefs() -> None:
    if instances_dir().is_dir():
        return
    p = subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], capture_output=True, text=True)
    if p.returncode != 0 or not instances_dir().is_dir():
        raise WatchError(f"tracefs is not mounted at {TRACEFS} and mounting it failed: {p.stderr.strip()}")


def event_filter(limit_segs: int) -> str:
    """The tcp_probe filter: a window or a set ssthresh above ``limit_segs``."""
    return (f"snd_cwnd > {limit_segs} || "
            f"(ssthresh > {limit_segs} && ssthresh != {INFINITE_SSTHRESH})")


class Watch:
    def __init__(self, token: str):
        self.dir = instances_dir() / f"{netns.PREFIX}{token}"

    def start(self, limit_segs: int) -> None:
        _ensure_tracefs()
        event = self.dir / "events" / "tcp" / "tcp_probe"
        try:
            self.dir.mkdir()
            if not event.is_dir():
                raise WatchError("this kernel has no tcp:tcp_probe trace event")
            (event / "filter").write_text(event_filter(limit_segs))
            (event / "enable").write_text("1")
        except OSError as e:
            self.stop()
            raise WatchError(f"cannot set up the trace instance {self.dir}: {e}") from None

    def caught(self) -> list[Catch]:
        try:
            text = (self.dir / "trace").read_text(errors="replace")
        except OSError:
            return []
        out = []
        for line in text.splitlines():
            m = _EVENT.search(line)
            if m:
                out.append(Catch(m.group(1), m.group(2), int(m.group(3)), int(m.group(4))))
        return out

    def stop(self) -> Optional[str]:
        """Remove the instance (idempotent); a problem or None."""
        return remove(self.dir)


def remove(d: Path) -> Optional[str]:
    if not d.exists():
        return None
    try:
        (d / "events" / "tcp" / "tcp_probe" / "enable").write_text("0")
    except OSError:
        pass
    try:
        d.rmdir()  # tracefs removes an instance with all its files
    except OSError as e:
        return f"cannot remove the trace instance {d}: {e}"
    return None


def check() -> tuple[Optional[bool], str]:
    """For ``ccbench doctor``: can runs with BPF CCAs watch every ACK?
    (None: informational; without it windows are checked per sample only.)"""
    if (TRACEFS / "events" / "tcp" / "tcp_probe").is_dir():
        return True, f"tracefs at {TRACEFS} has tcp:tcp_probe (runs with BPF CCAs check every ACK's window)"
    if not instances_dir().is_dir():
        return None, (f"tracefs is not mounted at {TRACEFS}; a run with a BPF CCA mounts it to check every ACK's "
                      "window")
    return None, "this kernel has no tcp:tcp_probe event: runs with BPF CCAs check windows per sample only"


def existing() -> list[Path]:
    """Every tracefs instance named like a run's (``ccb<8 hex>``)."""
    d = instances_dir()
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if re.fullmatch(rf"{netns.PREFIX}[0-9a-f]{{8}}", p.name))
