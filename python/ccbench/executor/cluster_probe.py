"""What a Dask worker runs: which ccbench, which compiled core.

This module is sent to the workers *by value* (cloudpickle), not imported
there by name, so it answers even on a worker whose ccbench is another
version, or missing: it uses only the standard library.
"""

from __future__ import annotations


def core_hash(path: str) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def identity(dask_worker=None) -> dict:
    """{version, core, package, host, pid, python}; never raises."""
    import importlib
    import importlib.util
    import os
    import socket
    import sys

    info = {"host": socket.gethostname(), "pid": os.getpid(), "python": sys.version.split()[0],
            "version": None, "core": None, "package": None, "problem": None}
    try:
        mod = importlib.import_module("ccbench")
        info["version"] = getattr(mod, "__version__", "unknown")
        info["package"] = os.path.dirname(getattr(mod, "__file__", "") or "") or None
        spec = importlib.util.find_spec("ccbench._core")
        if spec is None or not spec.origin:
            info["core"] = "missing"
        else:
            info["core"] = core_hash(spec.origin)
    except BaseException as e:  # noqa: BLE001 - report, never fail the probe
        info["problem"] = f"{type(e).__name__}: {e}"
    if dask_worker is not None:
        try:
            info["resources"] = dict(dask_worker.state.total_resources)
            info["nthreads"] = dask_worker.state.nthreads
        except AttributeError:
            info["resources"] = dict(getattr(dask_worker, "total_resources", {}) or {})
    return info
