"""Profiles: named sets of overrides inside a study file.

    [profiles.quick]                     # ccbench run STUDY --quick  (= --profile quick)
    "study.repetitions" = 2
    "study.duration" = "10s"
    "sweep.topology.bottleneck.loss" = ["0%", "1%"]   # replace a sweep list (or add one)
    "sweep.cases.scenario" = ["lan"]                  # keep only some cases, in this order
    "sweep.cases.cca.bbr.study.repetitions" = 2       # change (or add) a field of one case

A profile is applied to the file before anything is validated, so every
value is checked exactly like the field it replaces, and an error names
the profile key (``profiles.quick."study.duration": ...``).  Paths are the
paths of [sweep] (with ``*`` for every entry of an array, see
ccbench.spec.overrides); [study] fields other than ``name`` may be set;
[analysis] may not (the report reads it from the study file).  A field
that a [sweep] key varies is changed through its sweep list, not directly;
one that every case of a case axis sets, through the cases.

Every profile of a file (and the file without one) is checked whenever the
file is loaded; only the selected one is applied and expanded in full. The
others are checked by their first configuration and each of their sweep
values and cases with the other axes at their first (ccbench.spec.load),
without what depends on this machine (resolve.Resolver's ``local``): a
``linux`` profile may run elsewhere.  A study run with a profile writes its results to
``results/<name>-<profile>/`` by default (:attr:`Study.results_name`), so a
quick run and a full run never share a results directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from . import overrides
from .cases import CaseAxis
from .sweep import Axis, FieldError, check_path, dotted
from .tree import as_written

NAME = re.compile(r"^[A-Za-z0-9_-]+$")
NAME_ALLOWED = "letters, digits, '_' and '-'"
STUDY_FIELDS = ("description", "backend", "repetitions", "duration", "seed", "sample_interval")


@dataclass
class Profile:
    name: str
    overrides: list = field(default_factory=list)  # list[Override]: plain fields
    sweep: dict = field(default_factory=dict)  # sweep key -> (values, field)
    cases: dict = field(default_factory=dict)  # case axis -> (case names, field)
    case_sets: dict = field(default_factory=dict)  # (axis, case) -> [(key, value, field)]


@dataclass(frozen=True)
class ProfileAxis(Axis):
    """A sweep axis whose list a profile replaced or added: errors name the profile key."""

    shown: str = ""

    @property
    def field(self) -> str:  # type: ignore[override]
        return self.shown


def take(doc: dict) -> tuple[dict, dict]:
    """(the document without [profiles], profile name → its table)."""
    raw = doc.get("profiles")
    rest = {k: v for k, v in doc.items() if k != "profiles"}
    if raw is None:
        return rest, {}
    if not isinstance(raw, dict):
        raise FieldError(("profiles",), "must be a table of profiles", raw,
                         '[profiles.quick] tables of "dotted.path" = value')
    for name, table in raw.items():
        if not NAME.match(name):
            raise FieldError((), "not a valid profile name", name, NAME_ALLOWED, field="profiles")
        if not isinstance(table, dict):
            raise FieldError((), "must be a table of dotted paths to values", table,
                             '"study.repetitions" = 2, "sweep.flows.0.cca" = ["cubic"], ...',
                             field=f"profiles.{name}")
    return rest, dict(raw)


def parse(name: str, table: dict, doc: dict, case_names: dict[str, list[str]]) -> Profile:
    """Check one profile against the document (without [profiles] and [sweep])."""
    prof = Profile(name)
    plain: list[tuple[str, Any, str]] = []  # the fields it sets, expanded together
    for key, value in overrides.flatten(table):
        fld = f'profiles.{name}."{key}"'
        if key == "sweep" or key == "sweep.cases":
            raise FieldError((), "not a path to one field", key,
                             "'sweep.<swept key>' or 'sweep.cases.<axis>'", field=fld)
        if key.startswith("sweep.cases."):
            axis, _, rest = key[len("sweep.cases."):].partition(".")
            if axis not in case_names:
                raise FieldError((), "no such case axis in [sweep.cases]", key,
                                 ", ".join(f"sweep.cases.{a}" for a in case_names) or "none", field=fld)
            if rest:
                # case names may contain dots ("0.2ms"): the longest one that prefixes the rest
                case = max((c for c in case_names[axis] if rest.startswith(c + ".")), key=len, default="")
                path = rest[len(case) + 1:] if case else ""
                if not path:
                    exact = rest in case_names[axis]
                    raise FieldError((), "a case's fields are set one by one, each with its path" if exact
                                     else "no such case of this axis", key,
                                     ", ".join(f"sweep.cases.{axis}.{c}.<path>" for c in case_names[axis]),
                                     field=fld)
                prof.case_sets.setdefault((axis, case), []).append((path, value, fld))
                continue
            allowed = ", ".join(case_names[axis])
            if not isinstance(value, list) or not value:
                raise FieldError((), "must be a non-empty list of case names", value, allowed, field=fld)
            for i, v in enumerate(value):
                if v not in case_names[axis]:
                    raise FieldError((), "no such case", v, allowed, field=fld)
                if v in value[:i]:
                    raise FieldError((), "duplicate case", v, "each case once", field=fld)
            prof.cases[axis] = (list(value), fld)
        elif key.startswith("sweep."):
            skey = key[len("sweep."):]
            try:
                check_path(skey, doc)
            except FieldError as e:
                e.field, e.got = fld, key
                raise
            if not isinstance(value, list) or not value:
                raise FieldError((), "must be a non-empty list of values", value,
                                 "a list of values as they would be written in the file, e.g. ['1%', '2%']",
                                 field=fld)
            labels = [as_written(v) for v in value]
            for i, lab in enumerate(labels):
                if lab in labels[:i]:
                    raise FieldError((), "duplicate value", value[i], "each value once", field=fld)
            prof.sweep[skey] = (value, fld)
        else:
            plain.append((key, value, fld))
    prof.overrides = overrides.expand_all(plain, doc, STUDY_FIELDS)
    overrides.check_disjoint(prof.overrides)
    return prof


def apply_sweep(items: list[tuple[str, Any]], prof: Profile) -> tuple[list[tuple[str, Any]], dict[str, str]]:
    """The [sweep] keys with the profile's lists; and key → profile field for the replaced ones."""
    out = [(k, prof.sweep[k][0] if k in prof.sweep else v) for k, v in items]
    out += [(k, v) for k, (v, _) in prof.sweep.items() if k not in dict(items)]
    return out, {k: f for k, (_, f) in prof.sweep.items()}


def rename_axes(axes: list, renamed: dict[str, str]) -> list:
    """Plain axes a profile set, as ProfileAxis (their errors name the profile key)."""
    return [ProfileAxis(a.key, a.path, a.values, a.labels, renamed[a.key])
            if isinstance(a, Axis) and a.key in renamed else a for a in axes]


def check_conflicts(prof: Profile, axes: Sequence[Any]) -> None:
    """A profile may not set a field directly that a sweep key varies or every case of an axis sets
    (the profile's value would never be used)."""
    for o in prof.overrides:
        for a in axes:
            if isinstance(a, CaseAxis):
                hit = all(any(overrides.overlapping(o.path, c.path) for c in case) for case in a.sets)
            else:
                hit = overrides.overlapping(o.path, a.path)
            if hit:
                how = (f"set it in the cases: 'sweep.cases.{a.name}.<case>.{dotted(o.path)}'" if isinstance(a, CaseAxis)
                       else f"override the sweep list instead: 'sweep.{a.key}'")
                by = f"every case of {a.field}" if isinstance(a, CaseAxis) else f'sweep."{a.key}"'
                raise FieldError((), f"{dotted(o.path)} is varied by {by}: a profile cannot set it directly",
                                 o.value, how, field=o.field)
