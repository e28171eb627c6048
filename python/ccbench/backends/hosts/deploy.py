"""The programs a run needs on its hosts: ``ccbench-load`` on every host
(flows, the clock probe, and stopping a run's processes) and ``ccbench-emu``
on the forwarder with ``bottleneck = "emu"``.

They are the standalone binaries of crates/load and crates/emu
(``src/bin/``), linked statically (``-C target-feature=+crt-static``), so a
host needs neither Python, nor ccbench, nor a matching C library: only a
Linux kernel and an x86-64 CPU. That is why the hosts backend does not run
``python -m ccbench`` remotely: testbed hosts (perfSONAR nodes, lab
machines, cloud VMs) rarely have ccbench installed, and keeping it in step
with the controller's version would be the user's problem on every host.

Found in ``$CCBENCH_HOSTS_BIN_DIR``, else in this source tree's
``target/hosts/x86_64-unknown-linux-gnu/release/`` (built there with cargo
when missing and cargo is available: :func:`build`). Each run copies them
into its run directory on the host, then checks the copy's SHA-256 (with
the host's ``sha256sum``) and its ``--version`` against the controller's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

from ccbench.errors import UsageError

from .ssh import Connection, SshError

BINARIES = ("ccbench-load", "ccbench-emu")
PACKAGES = {"ccbench-load": "load", "ccbench-emu": "emu"}
TARGET = "x86_64-unknown-linux-gnu"
BIN_DIR_ENV = "CCBENCH_HOSTS_BIN_DIR"
# A fixed script; the path is its positional argument ($1), never part of the script.
_WRITE = 'umask 077 && cat > "$1" && chmod 700 "$1"'


def source_root() -> Optional[Path]:
    root = Path(__file__).resolve().parents[4]
    return root if (root / "Cargo.toml").is_file() and (root / "crates" / "load").is_dir() else None


def bin_dir() -> Optional[Path]:
    env = os.environ.get(BIN_DIR_ENV)
    if env:
        return Path(env)
    root = source_root()
    return None if root is None else root / "target" / "hosts" / TARGET / "release"


def build() -> None:
    """Build the static binaries in the source tree (cargo)."""
    root = source_root()
    if root is None or shutil.which("cargo") is None:
        raise UsageError(f"the hosts backend needs the static binaries {', '.join(BINARIES)}: set {BIN_DIR_ENV} to "
                         "a directory with them (cargo build --release --target x86_64-unknown-linux-gnu -p load "
                         "--bin ccbench-load -p emu --bin ccbench-emu with RUSTFLAGS='-C target-feature=+crt-static')")
    env = dict(os.environ, RUSTFLAGS="-C target-feature=+crt-static")
    argv = ["cargo", "build", "--release", "--target", TARGET, "--target-dir", str(root / "target" / "hosts")]
    for b in BINARIES:
        argv += ["-p", PACKAGES[b], "--bin", b]
    p = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise UsageError("building the hosts backend's binaries failed: " + " ".join(p.stderr.split()[-40:]))


def local_binaries() -> dict[str, dict]:
    """name → {path, sha256, version} of the binaries to deploy (built first if missing)."""
    d = bin_dir()
    if d is None or not all((d / b).is_file() for b in BINARIES):
        if os.environ.get(BIN_DIR_ENV):
            raise UsageError(f"{BIN_DIR_ENV}={d}: it lacks {', '.join(b for b in BINARIES if not (d / b).is_file())}")
        build()
        d = bin_dir()
    assert d is not None
    out = {}
    for b in BINARIES:
        p = d / b
        data = p.read_bytes()
        v = subprocess.run([str(p), "--version"], capture_output=True, text=True).stdout.strip()
        out[b] = {"path": str(p), "sha256": hashlib.sha256(data).hexdigest(), "version": v, "size": len(data)}
    return out


def upload(conn: Connection, local: dict, remote_path: str) -> None:
    """Copy one binary to ``remote_path``, then check its hash and version there."""
    data = Path(local["path"]).read_bytes()
    conn.run(["sh", "-c", _WRITE, "sh", remote_path], input=data, timeout=120)
    got = conn.run(["sha256sum", remote_path]).stdout.split()
    if not got or got[0] != local["sha256"]:
        raise SshError(conn.host, f"the copy of {Path(local['path']).name} at {remote_path} has SHA-256 "
                                  f"{got[0] if got else '?'}, expected {local['sha256']} (disk full? a broken copy?)")
    v = conn.run([remote_path, "--version"]).stdout.strip()
    if v != local["version"]:
        raise SshError(conn.host, f"{remote_path} reports version {v!r}, expected {local['version']!r}")


__all__ = ["BINARIES", "local_binaries", "upload", "build", "bin_dir"]
