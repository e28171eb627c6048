"""Sweep cases: one sweep axis whose values each set several fields at once.

A plain [sweep] key varies one field.  Some comparisons vary several fields
together — a "LAN" scenario is a rate, a delay and a buffer; "CUBIC with a
clamped window" is an algorithm and a clamp — and their cartesian product
would be meaningless.  A case axis names the alternatives::

    [sweep.cases.scenario]          # an axis called "scenario"
    lan = { "topology.bottleneck.rate" = "10Gbit", "topology.bottleneck.delay" = "10us" }
    wan = { "topology.bottleneck.rate" = "10Gbit", "topology.bottleneck.delay" = "5ms" }

Each case is a table of dotted-path overrides (ccbench.spec.overrides: the
paths of [sweep], ``*`` for every entry of an array, values as written in
the file); a field a case leaves out keeps the file's value, so a case may
be empty (``baseline = {}``).  Runs are the product of every axis, plain and
case, in file order (the case axes sit where ``cases`` first appears in
[sweep]); a run's parameter is ``cases.<axis> = <case name>``.  A field may
be set by one axis only.  Besides the [study] fields a plain sweep may vary,
a case may set ``study.repetitions`` (e.g. more repetitions for the noisy
algorithm).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

from . import overrides
from .overrides import Override
from .sweep import SWEEPABLE_STUDY_FIELDS, Axis, FieldError, apply as apply_plain, dotted

NAME = re.compile(r"^[A-Za-z0-9_+-]+(\.[A-Za-z0-9_+-]+)*$")
STUDY_FIELDS = SWEEPABLE_STUDY_FIELDS + ("repetitions",)
NAME_ALLOWED = "letters, digits, '_', '+', '-' and '.' (e.g. '0.2ms')"


@dataclass(frozen=True)
class CaseAxis:
    """A case axis: ``labels[i]`` names the case whose overrides are ``sets[i]``."""

    name: str
    labels: tuple
    sets: tuple  # tuple[tuple[Override, ...], ...]

    @property
    def key(self) -> str:
        return f"cases.{self.name}"

    @property
    def values(self) -> tuple:
        return self.labels

    @property
    def field(self) -> str:
        return f"sweep.cases.{self.name}"

    def paths(self) -> list[tuple]:
        return [o.path for case in self.sets for o in case]


AnyAxis = Union[Axis, CaseAxis]


def split_sweep(raw: Any) -> tuple[list[tuple[str, Any]], Optional[Any], int]:
    """[sweep] → (plain keys with their lists in file order, the cases table, where it sits)."""
    if raw is None:
        return [], None, 0
    if not isinstance(raw, dict):
        raise FieldError(("sweep",), "must be a table", raw,
                         'a table like [sweep] "flows.0.cca" = ["reno", "cubic"]')
    items: list[tuple[str, Any]] = []
    cases, pos = None, 0
    for k, v in raw.items():
        if k == "cases":
            cases, pos = v, len(items)
            continue
        for key, values in overrides.flatten({k: v}):
            if any(key == other for other, _ in items):
                raise FieldError((), "written twice", key, "each key once", field=f'sweep."{key}"')
            items.append((key, values))
    return items, cases, pos


def case_names(raw: Any) -> dict[str, list[str]]:
    """Axis name → its case names (structure checked, contents not)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not raw:
        raise FieldError((), "must be a table of case axes", raw,
                         "[sweep.cases.NAME] tables, each with one table per case", field="sweep.cases")
    out = {}
    for axis, table in raw.items():
        field = f"sweep.cases.{axis}"
        if not NAME.match(axis):
            raise FieldError((), "not a valid axis name", axis, NAME_ALLOWED, field="sweep.cases")
        if not isinstance(table, dict) or not table:
            raise FieldError((), "must be a table with one entry per case", table,
                             'e.g. lan = { "topology.bottleneck.delay" = "10us" }', field=field)
        for case, body in table.items():
            if not NAME.match(case):
                raise FieldError((), "not a valid case name", case, NAME_ALLOWED, field=field)
            if not isinstance(body, dict):
                raise FieldError((), "must be a table of dotted paths to values", body,
                                 '{ "topology.bottleneck.rate" = "10Gbit", ... } or {} for no change',
                                 field=f"{field}.{case}")
        out[axis] = list(table)
    return out


def select(raw: Any, chosen: dict[str, list[str]]) -> Any:
    """The cases table with only the chosen cases of some axes, in the chosen order."""
    if raw is None or not chosen:
        return raw
    return {axis: ({c: table[c] for c in chosen[axis]} if axis in chosen else table) for axis, table in raw.items()}


def parse(raw: Any, doc: dict, plain: Sequence[Axis],
          extra: Optional[dict[tuple[str, str], list[tuple[str, Any, str]]]] = None) -> list[CaseAxis]:
    """The case axes of [sweep.cases] (structure from :func:`case_names` assumed checked).

    ``extra``: (axis, case) → (key, value, field) entries that replace the
    case's entry with the same key or are added to it (a profile's changes).
    """
    if raw is None:
        return []
    axes: list[CaseAxis] = []
    for axis, table in raw.items():
        labels, sets = [], []
        for case, body in table.items():
            entries = {key: (value, f'sweep.cases.{axis}.{case}."{key}"') for key, value in overrides.flatten(body)}
            for key, value, field in (extra or {}).get((axis, case), []):
                entries[key] = (value, field)
            ovs: list[Override] = overrides.expand_all([(k, v, f) for k, (v, f) in entries.items()], doc,
                                                       STUDY_FIELDS)
            overrides.check_disjoint(ovs)
            for o in ovs:
                for a in plain:
                    if overrides.overlapping(o.path, a.path):
                        raise FieldError((), f"sets {dotted(o.path)}, which {a.field} sweeps too", FieldError.NO_VALUE,
                                         "each field varied by one sweep key or case axis", field=o.field)
                for other in axes:
                    for p in other.paths():
                        if overrides.overlapping(o.path, p):
                            raise FieldError((), f"sets {dotted(o.path)}, which the cases of {other.field} set too",
                                             FieldError.NO_VALUE, "each field varied by one case axis",
                                             field=o.field)
            labels.append(case)
            sets.append(tuple(ovs))
        axes.append(CaseAxis(axis, tuple(labels), tuple(sets)))
    return axes


def apply_all(base: dict, axes: Sequence[AnyAxis], combo: Sequence[int]) -> dict:
    """``base`` with every axis at its value number ``combo[i]``."""
    plain = [(a, i) for a, i in zip(axes, combo) if not isinstance(a, CaseAxis)]
    doc = apply_plain(base, [a for a, _ in plain], tuple(i for _, i in plain))
    for a, i in zip(axes, combo):
        if isinstance(a, CaseAxis):
            doc = overrides.apply(doc, a.sets[i])
    return doc


def owners(axes: Sequence[AnyAxis], combo: Sequence[int]) -> list[tuple[tuple, str]]:
    """(path, field to name in messages) of every field the axes set in this combination."""
    out: list[tuple[tuple, str]] = []
    for a, i in zip(axes, combo):
        if isinstance(a, CaseAxis):
            out += [(o.path, o.field) for o in a.sets[i]]
        else:
            out.append((a.path, a.field))
    return out


def set_paths(axis: AnyAxis, i: int) -> list[str]:
    """Dotted paths the axis sets at its value number ``i``."""
    if isinstance(axis, CaseAxis):
        return [dotted(o.path) for o in axis.sets[i]]
    return [dotted(axis.path)]
