"""Dotted-path overrides: the building block of profiles and sweep cases.

An override is ``"path" = value`` where the path is written as in [sweep]
(``topology.bottleneck.rate``, ``flows.0.cca``) and the value exactly as it
would be written in the file; it is validated later with the rest of the
study.  ``*`` stands for every entry of an array that is in the file:
``flows.*.cca`` sets the algorithm of every [[flows]] table. Of the
[[topology.links]], ``*`` reaches those that can take the setting:
``topology.links.*.loss`` leaves out the pipes (a host's link without a
buffer or a qdisc, ccbench.spec.network), which cannot lose packets.

Values are never tables (a table in an override table is read as more
dotted keys, as in [sweep]): set a table's fields one by one, e.g.
``"topology.reverse.rate"``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from . import network
from .model import StudyInfo
from .sweep import FieldError, check_path, dotted


@dataclass(frozen=True)
class Override:
    """One expanded assignment: ``path`` (list indices as ints) := ``value``.

    ``field`` names it in error messages, e.g. ``profiles.quick."flows.*.cca"``.
    """

    path: tuple
    value: Any
    field: str


def flatten(table: dict, prefix: str = "") -> list[tuple[str, Any]]:
    """``{"a": {"b": 1}, "c.d": 2}`` -> ``[("a.b", 1), ("c.d", 2)]`` (file order)."""
    out: list[tuple[str, Any]] = []
    for k, v in table.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict):
            out.extend(flatten(v, key))
        else:
            out.append((key, v))
    return out


def _node(doc: Any, parts: Iterable[str]) -> Any:
    node = doc
    for p in parts:
        if isinstance(node, dict):
            node = node.get(p)
        elif isinstance(node, list) and p.isdigit() and int(p) < len(node):
            node = node[int(p)]
        else:
            return None
    return node


def expand(key: str, doc: dict, field: str, study_fields: tuple[str, ...]) -> list[tuple]:
    """The schema paths a (possibly ``*``) key stands for in ``doc``.

    ``study_fields``: the [study] fields this kind of override may set.
    Raises FieldError naming ``field``.
    """
    parts = key.split(".")
    if any(p == "" for p in parts):
        raise FieldError((), "not a dotted path", key, "paths like 'topology.bottleneck.rate' or 'flows.*.cca'",
                         field=field)
    if parts[0] == "analysis":
        raise FieldError((), "[analysis] cannot be changed here: the report reads it from the study file",
                         key, "study, topology, tcp and flows fields", field=field)
    if parts[0] == "study":
        if len(parts) != 2 or parts[1] not in StudyInfo.model_fields or parts[1] not in study_fields:
            raise FieldError((), "not a [study] field that can be set here", key,
                             ", ".join(f"study.{f}" for f in study_fields), field=field)
        return [("study", parts[1])]
    keys: list[list[str]] = [[]]
    for i, part in enumerate(parts):
        if part != "*":
            for k in keys:
                k.append(part)
            continue
        grown = []
        for k in keys:
            node = _node(doc, k)
            where = ".".join(k)
            if not isinstance(node, list):
                raise FieldError((), f"'*' stands for every entry of an array, and {where} is not an array "
                                 "in the file", key, "'*' after flows or an array of senders", field=field)
            grown += [k + [str(j)] for j in range(len(node))]
        keys = grown
    if parts[:3] == ["topology", "links", "*"]:
        # '*' reaches the links that can take the setting: loss leaves out pipes (network.pipe_only)
        rest = tuple(parts[3:])
        reached = [k for k in keys if not (k[2].isdigit() and network.pipe_only(doc, int(k[2]), rest))]
        if keys and not reached:
            raise FieldError((), "every link is a pipe (a host's link without a buffer or a qdisc), which cannot "
                             "lose packets", allowed="a buffer or a qdisc on the links that should lose packets",
                             field=field)
        keys = reached
    paths = []
    for k in keys:
        try:
            paths.append(check_path(".".join(k), doc))
        except FieldError as e:
            e.field = field
            e.got = key
            raise
    return paths


def expand_all(entries: list[tuple[str, Any, str]], doc: dict, study_fields: tuple[str, ...]) -> list[Override]:
    """The Overrides of ``(key, value, field)`` entries that are applied together (one case, one
    profile), in their order. ``topology.links.*.loss`` is expanded against ``doc`` with the others
    applied, so that a buffer the same case gives a host's link lets it take the loss."""
    def late(key: str) -> bool:
        return key.startswith("topology.links.*.") and key.endswith("loss")

    early = {i: [Override(p, v, f) for p in expand(k, doc, f, study_fields)]
             for i, (k, v, f) in enumerate(entries) if not late(k)}
    if len(early) < len(entries):
        seen = apply(doc, [o for ovs in early.values() for o in ovs])
        for i, (k, v, f) in enumerate(entries):
            if late(k):
                early[i] = [Override(p, v, f) for p in expand(k, seen, f, study_fields)]
    return [o for i in range(len(entries)) for o in early[i]]


def overlapping(a: tuple, b: tuple) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def check_disjoint(overrides: list[Override]) -> None:
    """No two overrides may set the same field (or one a part of the other)."""
    for i, o in enumerate(overrides):
        for prev in overrides[:i]:
            if overlapping(o.path, prev.path):
                raise FieldError((), f"sets {dotted(o.path)}, which {prev.field} sets too", FieldError.NO_VALUE,
                                 "each field set once", field=o.field)


def apply(doc: dict, overrides: Iterable[Override]) -> dict:
    """A copy of ``doc`` with every override applied (tables made as needed)."""
    out = copy.deepcopy(doc)
    for o in overrides:
        node: Any = out
        for p, nxt in zip(o.path[:-1], o.path[1:]):
            if isinstance(node, list):
                node = node[p]
                continue
            if p not in node or not isinstance(node[p], (dict, list)):
                node[p] = [] if isinstance(nxt, int) else {}
            node = node[p]
        node[o.path[-1]] = copy.deepcopy(o.value)
    return out


def owner_field(loc: tuple, owners: Iterable[tuple[tuple, str]]) -> Optional[str]:
    """The field name for an error at ``loc`` when an override set it (or a table above it)."""
    for path, field in owners:
        if loc[: len(path)] == path:
            rest = dotted(loc[len(path):])
            return field + (f".{rest}" if rest else "")
    return None
