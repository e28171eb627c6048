"""What congestion control algorithms this Linux kernel offers (for the linux backend).

* ``tcp_available_congestion_control``: the algorithms loaded (or built in);
* plus ``tcp_<name>.ko`` modules under /lib/modules/<release>/: the kernel
  loads one of these by itself when a process with CAP_NET_ADMIN (the linux
  backend's load generator runs as root) asks for it with TCP_CONGESTION.

``tcp_allowed_congestion_control`` (global, not per namespace) only restricts
processes *without* CAP_NET_ADMIN, so the linux backend neither needs nor
changes it; :func:`allowed` is reported by ``ccbench doctor``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

PROC = Path("/proc/sys/net/ipv4")


def _read(name: str) -> Optional[list[str]]:
    try:
        return (PROC / name).read_text().split()
    except OSError:
        return None


def loaded() -> Optional[list[str]]:
    """tcp_available_congestion_control, or None when there is none to read (not Linux)."""
    return _read("tcp_available_congestion_control")


def allowed() -> Optional[list[str]]:
    return _read("tcp_allowed_congestion_control")


def default() -> Optional[str]:
    v = _read("tcp_congestion_control")
    return v[0] if v else None


def modules(release: Optional[str] = None) -> list[str]:
    """Names of tcp_*.ko congestion control modules the kernel could load."""
    release = release or os.uname().release
    d = Path("/lib/modules") / release / "kernel" / "net" / "ipv4"
    out = []
    try:
        for p in d.iterdir():
            n = p.name
            if n.startswith("tcp_") and ".ko" in n:
                name = n[4:n.index(".ko")]
                if name not in ("diag",):
                    out.append(name)
    except OSError:
        pass
    return sorted(out)


def available() -> Optional[tuple[str, ...]]:
    """Every algorithm the linux backend can use here (loaded first), or None off Linux."""
    got = loaded()
    if got is None:
        return None
    return tuple(dict.fromkeys(got + modules()))


def build_config() -> Optional[str]:
    """This kernel's build configuration (/proc/config.gz, else
    /boot/config-<release>), or None if neither can be read."""
    import gzip

    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            return f.read()
    except OSError:
        pass
    try:
        return Path(f"/boot/config-{os.uname().release}").read_text()
    except OSError:
        return None


def config_hz() -> Optional[int]:
    """This kernel's CONFIG_HZ (its jiffies clock, which e.g. CUBIC counts
    time in); None if unknown."""
    for line in (build_config() or "").splitlines():
        if line.startswith("CONFIG_HZ="):
            try:
                return int(line.split("=", 1)[1])
            except ValueError:
                return None
    return None
