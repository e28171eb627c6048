"""Each configuration of a sweep makes runs of its own.

Results are grouped by config_id (the resolved run config), so two sweep
values that resolve to the same config would be summarised as one
configuration, labelled with the first value, the other's runs counted as
its repetitions. The loader (ccbench.spec.load) refuses them; this module
says why, where that can be told from the two configurations' models.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from .sweep import Axis

ALLOWED = "values that give different runs: keep one of these"

_NONE = object()


def _at(model: Any, path: tuple) -> Any:
    """The validated value at a sweep path, or _NONE (an entry or table left out)."""
    node = model
    for p in path:
        if isinstance(p, int) and isinstance(node, list) and p < len(node):
            node = node[p]
        elif isinstance(node, BaseModel) and isinstance(p, str) and p in type(node).model_fields:
            node = getattr(node, p)
        else:
            return _NONE
    return node


def why_same(axis: Any, a: Any, b: Any) -> str:
    """Why the models ``a`` and ``b``, which differ in ``axis`` only, give the same run config
    ("" when it cannot be told cheaply)."""
    if not isinstance(axis, Axis):  # a case axis: several fields at once
        return ""
    path = axis.path
    va, vb = _at(a, path), _at(b, path)
    if va is not _NONE and va == vb:
        return "they are the same value written two ways"
    name = ".".join(str(p) for p in path)
    topo = b.topology
    if path[:2] == ("topology", "access") and topo.senders is not None:
        names = [path[2]] if len(path) > 2 else ["rate", "delay"]
        if all(getattr(s, n) is not None for s in topo.senders for n in names):
            return f"{name} has no effect: every sender in topology.senders sets its own {' and '.join(names)}"
    if path[-1] == "bdp_rtt":
        return f"{name} has no effect: it sizes only buffers and queue thresholds given in BDP, and this link has none"
    if path[-1] == "group" and path[:1] == ("flows",):
        return f"{name} has no effect on the runs: a group label only names flows in the results"
    return ""  # e.g. '30000B' and '0.12bdp' at 100 Mbit/s and 20 ms: the message names the values
