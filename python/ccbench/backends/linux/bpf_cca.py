"""BPF congestion controls on the linux backend: register for a run, unregister after.

A study's ``cca = "bpf:PATH"`` reaches the backend as ``bpf:<cached object>``
(:mod:`ccbench.bpf`). For each distinct object a run

1. copies the object into its run directory with the struct_ops map's
   ``name`` (the CCA name sockets ask for) rewritten to ``ccb<token>_b<i>``:
   the run's own name, so two concurrent runs of the same source never clash,
   and the same pattern as every other object a run creates (cleanup.py);
2. registers it with ``bpftool struct_ops register`` (argument lists, no
   shell), which loads the programs through libbpf, runs the verifier and
   registers the map; the verifier's log is kept when it refuses;
3. pins the map under ``/sys/fs/bpf/ccbench/<name>`` so a killed run's
   registration can be found by its path as well as by its name;
4. after the run (also on errors and Ctrl-C: the backend's close()),
   unregisters it and removes the pin.

``ccbench doctor --cleanup`` calls :func:`cleanup_leftovers`: every
registered tcp_congestion_ops named ``ccb<token>_b<i>`` whose run's owner is
dead is unregistered, and stale pins are removed.

Why bpftool: it is Debian's packaged libbpf front end (the same loader as
libbpf-rs or aya would be, without a new Rust dependency or a vendored libbpf
build), it speaks struct_ops register/unregister/dump, and it runs as a
short-lived process, so a crashed run leaves nothing but the registration,
which the kernel keeps by itself and this module removes.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ccbench.errors import DetailedError

PIN_ROOT = Path("/sys/fs/bpf/ccbench")
NAME_RE = re.compile(r"^ccb([0-9a-f]{8})_b\d+$")
_REGISTERED_RE = re.compile(r"Registered \S+ (\S+) id (\d+)")


class BpfLoadError(DetailedError):
    """The kernel refused the program (verifier) or bpftool failed
    (``detail``: the end of the verifier's log; ``cca``: the resolved
    ``bpf:<object>`` refused, when known)."""

    cca: Optional[str] = None


@dataclass
class Registration:
    cca: str  # the resolved config's bpf:<object>
    name: str  # the name sockets use: ccb<token>_b<i>
    map_id: int
    pin: Optional[Path]
    needs_ecn: bool = False  # tcp_congestion_ops.flags has TCP_CONG_NEEDS_ECN


def _bpftool() -> str:
    t = shutil.which("bpftool")
    if t is None:
        raise BpfLoadError("bpftool is not installed (Debian: apt-get install bpftool)")
    return t


def _run(*args: str) -> subprocess.CompletedProcess:
    # In a session of its own: a terminal's Ctrl-C or a signal to ccbench's
    # process group must not kill bpftool half-way through a register or an
    # unregister (ccbench acts on the signal when bpftool is done).
    return subprocess.run([_bpftool(), *args], capture_output=True, text=True, start_new_session=True)


def available() -> Optional[str]:
    """Why BPF CCAs cannot run on this machine, or None."""
    if shutil.which("bpftool") is None:
        return "bpftool is not installed (Debian: apt-get install bpftool)"
    if not Path("/sys/kernel/btf/vmlinux").exists():
        return "the kernel has no BTF (/sys/kernel/btf/vmlinux)"
    return None


def tools_check() -> tuple[Optional[bool], str]:
    """For ``ccbench doctor``: (ok or None when optional and missing, detail)."""
    missing = [t for t in ("clang", "bpftool") if shutil.which(t) is None]
    if not Path("/usr/include/bpf/bpf_helpers.h").exists():
        missing.append("libbpf-dev")
    if not Path("/sys/kernel/btf/vmlinux").exists():
        return None, "the kernel has no BTF (/sys/kernel/btf/vmlinux): cca = 'bpf:FILE' cannot be compiled here"
    if missing:
        return None, f"not installed: {', '.join(missing)} (apt-get install clang libbpf-dev bpftool) for cca = 'bpf:FILE'"
    left = leftover_names()
    if left:
        return False, f"left registered by runs that ended: {', '.join(left)}: run `ccbench doctor --cleanup`"
    return True, "clang, libbpf-dev, bpftool and kernel BTF present: cca = 'bpf:FILE' works on sim and linux"


_LOAD_FAILED_RE = re.compile(r"prog '(\w+)': BPF program load failed: (.*)")


def verifier_excerpt(stderr: str, keep: int = 12) -> str:
    """The relevant lines of libbpf's output: the end of the verifier log
    (where the rejection is explained), else its last lines."""
    lines = stderr.splitlines()
    out: list[str] = []
    log: list[str] = []
    inside = False
    for ln in lines:
        if "-- BEGIN PROG LOAD LOG --" in ln:
            inside, log = True, []
            continue
        if "-- END PROG LOAD LOG --" in ln:
            inside = False
            continue
        if inside:
            log.append(ln)
    log = [ln for ln in log if ln.strip() and not ln.startswith("processed ") and "verification time" not in ln]
    if log:
        out.append("verifier log (last lines):")
        out += ["  " + ln for ln in log[-keep:]]
    if not out:
        out = [ln for ln in lines if ln.strip()][-keep:]
    return "\n".join(out)


def _ensure_bpffs() -> bool:
    root = Path("/sys/fs/bpf")
    try:
        mounted = any(line.split()[1] == str(root) and line.split()[2] == "bpf"
                      for line in Path("/proc/mounts").read_text().splitlines())
        if not mounted:
            subprocess.run(["mount", "-t", "bpf", "bpf", str(root)], capture_output=True, check=True)
        PIN_ROOT.mkdir(mode=0o700, exist_ok=True)
        return True
    except (OSError, subprocess.CalledProcessError, IndexError):
        return False


def _rename(obj: str, name: str, dest: Path) -> None:
    from ccbench import core

    off, _, flags_off = core.load("BPF CCAs").bpf_ops_name(obj)
    data = bytearray(Path(obj).read_bytes())
    raw = name.encode()
    assert len(raw) < 16
    data[off:off + 16] = raw + b"\0" * (16 - len(raw))
    # TCP_CONG_NON_RESTRICTED: the run's copy may be chosen in any namespace
    # (and be a namespace's default, which a receiver of DCTCP needs), the
    # per-CCA form of tcp_allowed_congestion_control (a global sysctl).
    flags = int.from_bytes(data[flags_off:flags_off + 4], "little") | 1
    data[flags_off:flags_off + 4] = flags.to_bytes(4, "little")
    dest.write_bytes(bytes(data))


def register(obj_cca: str, token: str, index: int, run_dir: Path) -> Registration:
    """Register ``bpf:<object>`` for one run under its own name. Raises
    BpfLoadError (nothing left registered) when the kernel refuses it."""
    from ccbench.bpf import object_path, source_of

    obj = str(object_path(obj_cca))
    name = f"ccb{token}_b{index}"  # the kernel allows [A-Za-z0-9_.] only
    copy = run_dir / f"{name}.bpf.o"
    _rename(obj, name, copy)
    try:
        return _register(obj_cca, obj, name, copy, source_of(obj_cca))
    except BaseException:
        # Ctrl-C while bpftool ran (Python then kills it) or before this
        # returned: whatever it registered under the name goes too.
        unregister_names({name})
        raise


def _register(obj_cca: str, obj: str, name: str, copy: Path, source: str) -> Registration:
    p = _run("struct_ops", "register", str(copy))
    m = _REGISTERED_RE.search(p.stdout + p.stderr)
    if p.returncode != 0 or m is None:  # anything it registered is undone by register()
        out = p.stderr or p.stdout
        failed = _LOAD_FAILED_RE.search(out)
        why = f": program {failed.group(1)}: {failed.group(2).strip()}" if failed else ""
        e = BpfLoadError(f"the kernel refused the BPF congestion control {source}{why}", verifier_excerpt(out))
        e.cca = obj_cca
        raise e
    reg = Registration(obj_cca, name, int(m.group(2)), None)
    reg.needs_ecn = bool(_registered().get(name, {}).get("flags", 0) & 2)
    if _ensure_bpffs():
        pin = PIN_ROOT / name
        if _run("map", "pin", "id", str(reg.map_id), str(pin)).returncode == 0:
            reg.pin = pin
    return reg


def unregister(reg: Registration) -> Optional[str]:
    """Unregister and unpin; returns a problem or None."""
    problem = None
    if _registered_ids().get(reg.name) == reg.map_id:
        p = _run("struct_ops", "unregister", "id", str(reg.map_id))
        if p.returncode != 0:
            problem = f"cannot unregister BPF CCA {reg.name}: {p.stderr.strip()}"
    if reg.pin is not None:
        try:
            reg.pin.unlink()
        except FileNotFoundError:
            pass
        except OSError as e:
            problem = problem or f"cannot remove {reg.pin}: {e.strerror}"
    return problem


def _registered_ids() -> dict[str, int]:
    return {n: v["id"] for n, v in _registered().items()}


def _registered() -> dict[str, dict]:
    """Registered tcp_congestion_ops struct_ops by CCA name → map id. A map
    unregistered while sockets still used it stays listed by bpftool in the
    state TOBEFREE until the last of them closes: it is no longer a
    congestion control anyone can choose, and is not counted."""
    p = _run("-j", "struct_ops", "dump")
    if p.returncode != 0 or not p.stdout.strip():
        return {}
    try:
        items = json.loads(p.stdout)
    except ValueError:
        return {}
    out: dict[str, dict] = {}
    map_id = None
    for it in items:
        if "bpf_map_info" in it:
            map_id = it["bpf_map_info"].get("id")
            continue
        for k, v in it.items():
            if k.endswith("tcp_congestion_ops") and isinstance(v, dict) and map_id is not None:
                if v.get("common", {}).get("state", "").endswith("TOBEFREE"):
                    continue
                name = v.get("data", {}).get("name")
                if isinstance(name, str):
                    flags = v.get("data", {}).get("flags", 0)
                    out[name] = {"id": int(map_id), "flags": flags if isinstance(flags, int) else 0}
    return out


def unregister_names(names: set[str]) -> list[str]:
    """Unregister every BPF CCA registered under one of ``names``; returns problems."""
    problems = []
    for name, map_id in _registered_ids().items():
        if name in names:
            p = _run("struct_ops", "unregister", "id", str(map_id))
            if p.returncode != 0:
                problems.append(f"cannot unregister BPF CCA {name}: {p.stderr.strip()}")
    return problems


def run_names(token: str, n: int) -> set[str]:
    """The names a run (``token``) registers its ``n`` BPF CCAs under."""
    return {f"ccb{token}_b{i}" for i in range(n)}


def leftover_names() -> list[str]:
    """ccbench-named BPF CCAs registered now whose run has ended."""
    from .cleanup import owner_pid

    return [n for n in registered_names() if owner_pid(NAME_RE.match(n).group(1)) is None]


def registered_names() -> list[str]:
    """ccbench-named BPF CCAs registered now (any run)."""
    return sorted(n for n in _registered_ids() if NAME_RE.match(n))


def cleanup_leftovers(include_live: bool = False) -> tuple[list[str], list[str]]:
    """Unregister ccbench-named BPF CCAs of runs whose owner is dead, and
    remove stale pins. Returns (removed names, problems)."""
    from .cleanup import owner_pid

    removed, problems = [], []
    for name, map_id in _registered_ids().items():
        m = NAME_RE.match(name)
        if not m or (not include_live and owner_pid(m.group(1)) is not None):
            continue
        p = _run("struct_ops", "unregister", "id", str(map_id))
        if p.returncode == 0:
            removed.append(name)
        else:
            problems.append(f"cannot unregister BPF CCA {name}: {p.stderr.strip()}")
    if PIN_ROOT.is_dir():
        for pin in PIN_ROOT.iterdir():
            m = NAME_RE.match(pin.name)
            if m and (include_live or owner_pid(m.group(1)) is None):
                try:
                    pin.unlink()
                    if pin.name not in removed:
                        removed.append(pin.name + " (pin)")
                except OSError as e:
                    problems.append(f"cannot remove {pin}: {e.strerror}")
    return removed, problems


def accept_ecn(receiver_ns: str, regs: list[Registration]) -> None:
    """A CCA with TCP_CONG_NEEDS_ECN (DCTCP) sends even its SYN as ECT, and
    Linux's listener accepts ECN from an ECT SYN only when the listener's
    own CCA needs ECN (tcp_ecn_create_request), as the kernel's dctcp
    documentation asks of receivers. The receiver's listening socket takes
    the namespace's default CCA: make that the run's (first) ECN CCA, and
    let the receiver accept ECN (``tcp_ecn = 2``)."""
    from . import netns

    ecn = [r for r in regs if r.needs_ecn]
    if not ecn:
        return
    values: dict[str, object] = {"net.ipv4.tcp_congestion_control": ecn[0].name}
    if netns.read_sysctl(receiver_ns, "net.ipv4.tcp_ecn") == "0":
        values["net.ipv4.tcp_ecn"] = 2
    netns.set_sysctls(receiver_ns, values)


def verify(objs: list[str]) -> None:
    """Load and register each object once under a throw-away name and
    unregister it at once: the verifier's verdict before any run starts.
    Raises BpfLoadError; leaves nothing registered."""
    import secrets
    import tempfile

    token = secrets.token_hex(4)
    with tempfile.TemporaryDirectory(prefix="ccbench-bpf-") as d:
        try:
            for i, obj in enumerate(objs):
                reg = register(obj, token, i, Path(d))
                if reg.pin is not None:
                    try:
                        reg.pin.unlink()
                    except OSError:
                        pass
                    reg.pin = None
                problem = unregister(reg)
                if problem:
                    raise BpfLoadError(problem)
        except BaseException:
            unregister_names(run_names(token, len(objs)))  # an interruption between the steps
            raise
