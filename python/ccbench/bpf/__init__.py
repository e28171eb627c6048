"""BPF congestion control: ``cca = "bpf:PATH"`` in a study.

PATH (relative to the study file) is a ``.bpf.c`` source, compiled here with
clang for the BPF target against a ``vmlinux.h`` generated from the running
kernel's BTF by bpftool, or a compiled ``.bpf.o``.  Objects are cached by
content hash under ``$XDG_CACHE_HOME/ccbench/bpf`` (``~/.cache``); the
resolved config names the cached object, whose file name begins with the
SHA-256 of the source, so every run records the exact code it ran.

The same object runs on both backends: the linux backend registers it with
the kernel (:mod:`ccbench.backends.linux.bpf_cca`), the simulator runs it in
its eBPF interpreter (``crates/bpf``).  See docs/bpf.md.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Optional

from ccbench.errors import DetailedError

VMLINUX_BTF = Path("/sys/kernel/btf/vmlinux")
PREFIX = "bpf:"


class BpfError(DetailedError):
    """A BPF CCA that cannot be used: compile failure, bad object, refusal
    (``detail``: clang's diagnostics)."""


def cache_dir() -> Path:
    base = os.environ.get("CCBENCH_BPF_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "ccbench" / "bpf"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def vmlinux_header() -> Path:
    """A directory holding ``vmlinux.h`` for the running kernel (generated
    once per kernel BTF with ``bpftool btf dump file ... format c``)."""
    return _vmlinux_header(str(cache_dir()))


@functools.lru_cache(maxsize=None)  # the BTF is read and hashed once per process and cache
def _vmlinux_header(_cache: str) -> Path:
    try:
        btf = VMLINUX_BTF.read_bytes()
    except OSError as e:
        raise BpfError(f"cannot read the kernel's BTF ({VMLINUX_BTF}: {e.strerror or e}): "
                       "a .bpf.c source needs a kernel with CONFIG_DEBUG_INFO_BTF (or give a compiled .bpf.o)") from None
    d = cache_dir() / f"vmlinux-{_sha(btf)[:16]}"
    h = d / "vmlinux.h"
    if h.exists():
        return d
    bpftool = shutil.which("bpftool")
    if bpftool is None:
        raise BpfError("bpftool is not installed (Debian: apt-get install bpftool); it generates vmlinux.h")
    p = subprocess.run([bpftool, "btf", "dump", "file", str(VMLINUX_BTF), "format", "c"],
                       capture_output=True)
    if p.returncode != 0:
        raise BpfError(f"bpftool btf dump failed: {p.stderr.decode(errors='replace').strip()}")
    _atomic_write(h, p.stdout)
    return d


def _clang() -> str:
    c = shutil.which("clang")
    if c is None:
        raise BpfError("clang is not installed (Debian: apt-get install clang libbpf-dev)")
    return c


_INCLUDE = re.compile(rb'^\s*#\s*include\s+(?:"([^"]+)"|<([^>]+)>)', re.M)


def _local_inputs(src: Path) -> bytes:
    """The source and every local header it includes, through headers too
    (found as clang finds them: next to the including file, then in the
    source's directory, which compile_source gives with -I), for the cache
    key. System headers are left out (the compiler's version is in the key)."""
    text = src.read_bytes()
    parts = [text]
    seen: set[Path] = set()
    todo = [(src, text)]
    while todo:
        f, t = todo.pop(0)
        for quoted, angled in sorted(set(_INCLUDE.findall(t))):
            n = (quoted or angled).decode(errors="replace")
            if n == "vmlinux.h":
                continue
            dirs = (f.parent, src.parent) if quoted else (src.parent,)
            h = next((d / n for d in dirs if (d / n).is_file()), None)
            if h is None or h.resolve() in seen:
                continue
            seen.add(h.resolve())
            data = h.read_bytes()
            parts.append(n.encode() + b"\0" + data)
            todo.append((h, data))
    return b"\0\0".join(parts)


@functools.lru_cache(maxsize=None)
def _version(tool: str) -> bytes:
    try:
        return subprocess.run([tool, "--version"], capture_output=True).stdout
    except OSError:
        return b""


def _clean_clang(stderr: str, src: Path) -> str:
    """clang's diagnostics without the trailing summary line."""
    lines = [ln for ln in stderr.rstrip().splitlines() if not re.match(r"^\d+ (error|warning)s? generated", ln)]
    return "\n".join(lines).strip() or "clang failed"


def compile_source(src: Path) -> Path:
    """Compile ``src`` (cached by content hash); returns the object's path."""
    clang = _clang()
    inc = vmlinux_header()
    try:
        inputs = _local_inputs(src)
    except OSError as e:
        raise BpfError(f"cannot read {src}: {e.strerror or e}") from None
    src_sha = _sha(src.read_bytes())
    key = _sha(inputs + b"\0" + _version(clang) + inc.name.encode())[:8]
    out = cache_dir() / "obj" / f"{src_sha[:16]}-{key}.bpf.o"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    args = [clang, "-O2", "-g", "-target", "bpf", "-D__TARGET_ARCH_x86", "-Wall", "-Wno-unused-function",
            "-I", str(inc), "-I", str(src.parent), "-c", str(src.absolute()), "-o", str(tmp)]  # never an option
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise BpfError(f"clang could not compile {src}", _clean_clang(p.stderr, src))
    os.replace(tmp, out)
    return out


def object_for(spec: str, base: Optional[Path]) -> tuple[Path, Path, str]:
    """Resolve ``bpf:PATH`` (relative to ``base``): (source, cached object,
    source SHA-256)."""
    try:
        return _object_for(spec, base)
    except OSError as e:  # the source's errors are BpfErrors already: the cache's
        where = "CCBENCH_BPF_CACHE" if os.environ.get("CCBENCH_BPF_CACHE") else "the BPF object cache"
        raise BpfError(f"{where} ({cache_dir()}) cannot be used: {e.strerror or e}"
                       + (f": {e.filename}" if e.filename else "")
                       + "; give CCBENCH_BPF_CACHE a writable directory") from None


def _object_for(spec: str, base: Optional[Path]) -> tuple[Path, Path, str]:
    rel = spec[len(PREFIX):]
    if not rel:
        raise BpfError("bpf: needs a path to a .bpf.c source or a .bpf.o object")
    src = Path(rel)
    if not src.is_absolute():
        src = (base or Path.cwd()) / src
    if not src.is_file():
        raise BpfError(f"not a regular file: {src}" if src.exists() else f"no such file: {src}")
    data = src.read_bytes()
    sha = _sha(data)
    if src.suffix == ".c":
        out = compile_source(src)
    elif src.suffix == ".o":
        out = cache_dir() / "obj" / f"{sha[:16]}.bpf.o"
        if not out.exists():
            _atomic_write(out, data)
    else:
        raise BpfError(f"{src.name}: expected a .bpf.c source or a .bpf.o object")
    _SOURCES[out.name] = src
    return src, out, sha


def resolve_cca(spec: str, base: Optional[Path], backend: str) -> str:
    """The resolved config's cca for ``bpf:PATH``: ``bpf:`` and the cached
    object's file name, which begins with the source's SHA-256 (not its
    path: run ids do not depend on where the cache is; :func:`object_path`
    finds it). For the simulator the object is also checked to use only
    what the simulator provides (one line naming the field or function if
    not)."""
    _, obj, _ = object_for(spec, base)
    from ccbench import core

    _core = core.load("BPF CCAs")

    try:  # what neither backend can use (no tcp_congestion_ops, a member the kernel requires...)
        _core.bpf_ops_name(str(obj))
    except ValueError as e:
        raise BpfError(str(e)) from None
    if backend == "sim":
        why = _core.bpf_check(str(obj))
        if why:
            raise BpfError(f"the simulator cannot run this CCA: {why}")
    return PREFIX + obj.name


_SOURCES: dict[str, Path] = {}  # a cached object's name → the file it was made from, in this process


def source_of(cca: str) -> str:
    """What to call a resolved ``bpf:NAME`` in a message: the file the
    study named, when it was resolved in this process, else the object."""
    name = Path(cca[len(PREFIX):]).name
    return str(_SOURCES.get(name, name))


def object_path(cca: str) -> Path:
    """The object file of a resolved ``bpf:NAME`` (in the cache; an absolute
    path is taken as it is)."""
    p = Path(cca[len(PREFIX):])
    return p if p.is_absolute() else cache_dir() / "obj" / p


def core_cca(cca: str) -> str:
    """A flow's cca as the simulator core takes it: ``bpf:`` and the
    object's absolute path; other names unchanged."""
    return PREFIX + str(object_path(cca)) if is_bpf(cca) else cca


def is_bpf(cca: str) -> bool:
    return cca.startswith(PREFIX)


def ops_name(obj: str) -> str:
    from ccbench import core

    return core.load("BPF CCAs").bpf_ops_name(obj)[1]
