"""The [sweep] table: dotted paths into the study, each with a list of values.

Runs are the cartesian product of all sweep lists in file order (the last
key varies fastest), times the repetitions.  Paths are checked against the
schema here; the values are checked later, exactly as if written in the file.
"""

from __future__ import annotations

import difflib
import typing
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from pydantic import BaseModel

from .model import TABLE_OR_ARRAY, StudyFile
from .tree import as_written, copy_tree

# study.* fields that may vary between runs of one study (the others define the study).
SWEEPABLE_STUDY_FIELDS = ("duration", "sample_interval")


class FieldError(Exception):
    """A problem with one field; turned into a one-line StudyError by the loader.

    ``loc`` is the path of the field in the study document (as in the TOML),
    ``related`` lists dotted paths of other fields the problem depends on.
    """

    NO_VALUE = object()

    def __init__(
        self,
        loc: tuple,
        problem: str,
        got: Any = NO_VALUE,
        allowed: Optional[str] = None,
        related: tuple[str, ...] = (),
        field: Optional[str] = None,
        detail: Optional[str] = None,
    ):
        super().__init__(problem)
        self.detail = detail  # another tool's lines (errors.DetailedError)
        self.loc = tuple(loc)
        self.problem = problem
        self.got = got
        self.allowed = allowed
        self.related = related
        self.field = field  # overrides the dotted loc in the message


def dotted(loc: tuple) -> str:
    return ".".join(str(p) for p in loc)


@dataclass(frozen=True)
class Axis:
    """One swept path: ``key`` as written, ``path`` with list indices as ints."""

    key: str
    path: tuple
    values: tuple
    labels: tuple  # each value as written, as a string

    @property
    def field(self) -> str:
        return f'sweep."{self.key}"'


def _flatten(table: dict, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for k, v in table.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict):
            yield from _flatten(v, key)
        else:
            yield key, v


def unwrap(ann: Any) -> Any:
    """Optional[X] -> X (and Annotated is already stripped by pydantic)."""
    while typing.get_origin(ann) is typing.Union:
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        ann = args[0]
    if typing.get_origin(ann) is typing.Annotated:
        ann = typing.get_args(ann)[0]
    return ann


def is_model(ann: Any) -> bool:
    return isinstance(ann, type) and issubclass(ann, BaseModel)


def is_list(ann: Any) -> bool:
    return typing.get_origin(ann) in (list, typing.List)


def field_names(model: type[BaseModel], sweepable: bool = False) -> list[str]:
    """Field names of a model; with ``sweepable``, without [sweep] itself."""
    return [n for n in model.model_fields if not (sweepable and model is StudyFile and n == "sweep")]


def check_path(key: str, doc: dict) -> tuple:
    """Check a sweep key against the schema and the document; return its path."""
    field = f'sweep."{key}"'
    parts = key.split(".")
    if any(p == "" for p in parts):
        raise FieldError((), "not a dotted path", key, "paths like 'topology.bottleneck.loss' or 'flows.0.cca'",
                         field=field)
    ann: Any = StudyFile
    node: Any = doc
    path: list = []
    for part in parts:
        where = dotted(tuple(path)) or "the study"
        if is_list(ann) and path and path[-1] in TABLE_OR_ARRAY and not part.isdigit():
            ann = unwrap(typing.get_args(ann)[0])  # one table, where an array of them may be
        if is_model(ann):
            if isinstance(node, str) and path:
                raise FieldError((), f"{where} is written as a name ('{node}'); to sweep one of its parameters, "
                                 "write it as a table", key, f"[{where}] with kind = '{node}' and the parameter",
                                 field=field)
            names = field_names(ann, sweepable=True)
            if part not in names:
                hint = _suggest(key, path, part, names, doc)
                raise FieldError((), f"unknown path: {where} has no field '{part}'{hint}", key, ", ".join(names),
                                 field=field)
            if path == ["study"] and part not in SWEEPABLE_STUDY_FIELDS:
                raise FieldError((), f"study.{part} cannot be swept", key,
                                 ", ".join(f"study.{f}" for f in SWEEPABLE_STUDY_FIELDS)
                                 + ", and any topology, tcp or flows field", field=field)
            ann = unwrap(ann.model_fields[part].annotation)
            node = node.get(part) if isinstance(node, dict) else None
            path.append(part)
        elif is_list(ann):
            if path == ["topology", "senders"] and not isinstance(node, list):
                raise FieldError((), "topology.senders is a count here; to sweep one sender's link, write "
                                 "senders as an array of tables", key, "topology.senders as a whole",
                                 field=field)
            n = len(node) if isinstance(node, list) else 0
            item = unwrap(typing.get_args(ann)[0])
            named = is_model(item) and hasattr(item, "entry_name")
            if not part.isdigit() and named:
                # an entry by its name: topology.links.primary.rate
                names = [item.entry_name(e) for e in node] if isinstance(node, list) else []
                if part not in names:
                    raise FieldError((), f"{where} has no entry named '{part}'", key,
                                     ", ".join(f"{where}.{x}" for x in names if x) or _indices(where, n),
                                     field=field)
                part = str(names.index(part))
            if not part.isdigit():
                raise FieldError((), f"{where} is an array: expected an index", key, _indices(where, n),
                                 field=field)
            idx = int(part)
            if idx >= n:
                raise FieldError((), f"index {idx} is out of range: {where} has {n} entr"
                                 + ("y" if n == 1 else "ies"), key, _indices(where, n), field=field)
            ann = unwrap(typing.get_args(ann)[0])
            node = node[idx]
            path.append(idx)
        else:
            raise FieldError((), f"{where} is a value, not a table: it has no field '{part}'", key,
                             f"'{where}' itself", field=field)
    return tuple(path)


def _suggest(key: str, path: list, part: str, names: list[str], doc: dict) -> str:
    """'; did you mean ...?' for an unknown field of a sweep key: a misspelt
    name, or (at the top) a path that needs its table in front of it, such as
    'bottleneck.loss' for 'topology.bottleneck.loss'."""
    if not path:
        fits = []
        for top in names:
            try:
                check_path(f"{top}.{key}", doc)
            except FieldError:
                continue
            fits.append(f"{top}.{key}")
        if len(fits) == 1:
            return f"; did you mean '{fits[0]}'?"
    close = difflib.get_close_matches(part, names, n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def _indices(where: str, n: int) -> str:
    if n == 0:
        return f"{where} as a whole"
    if n == 1:
        return f"{where}.0"
    return f"{where}.0 .. {where}.{n - 1}"


def parse_sweep(raw: Any, doc: dict) -> list[Axis]:
    """Validate the structure of [sweep] (not the values) and return its axes in file order."""
    if raw is None:
        return []
    if not isinstance(raw, dict):
        raise FieldError(("sweep",), "must be a table", raw, 'a table like [sweep] "flows.0.cca" = ["reno", "cubic"]')
    axes: list[Axis] = []
    seen: dict[tuple, str] = {}
    for key, values in _flatten(raw):
        path = check_path(key, doc)
        field = f'sweep."{key}"'
        for other, other_key in seen.items():
            if path[: len(other)] == other or other[: len(path)] == path:
                raise FieldError((), f"overlaps the swept path '{other_key}'", key,
                                 "each field swept by one key", field=field)
        seen[path] = key
        if not isinstance(values, list):
            raise FieldError((), "must be a list of values", values,
                             "a list of values as they would be written in the file, e.g. ['1%', '2%']", field=field)
        if not values:
            raise FieldError((), "must not be empty", values, "a list with at least one value", field=field)
        labels = [as_written(v) for v in values]
        for i, lab in enumerate(labels):
            if lab in labels[:i]:
                raise FieldError((), "duplicate value", values[i], "each value once", field=field)
        axes.append(Axis(key, path, tuple(values), tuple(labels)))
    return axes


def apply(doc: dict, axes: list[Axis], combo: tuple[int, ...]) -> dict:
    """``doc`` with each axis set to its value number ``combo[i]``.

    Only the tables and arrays on the swept paths are copied; the rest is
    shared with ``doc`` (fast for a sweep of thousands of combinations):
    read the result, do not change it in place.
    """
    out = dict(doc)
    fresh = {id(out)}  # containers of `out` that are copies, safe to change
    for axis, i in zip(axes, combo):
        node: Any = out
        for p, nxt in zip(axis.path[:-1], axis.path[1:]):
            child = node[p] if isinstance(node, list) else node.get(p)
            if not isinstance(child, (dict, list)):
                if isinstance(node, list):  # e.g. flows = [1]: validation names that entry
                    node = None
                    break
                child = [] if isinstance(nxt, int) else {}
            elif id(child) not in fresh:
                child = dict(child) if isinstance(child, dict) else list(child)
            fresh.add(id(child))
            node[p] = child
            node = child
        if node is not None:
            node[axis.path[-1]] = copy_tree(axis.values[i])
    return out


def owner(loc: tuple, axes: list[Axis]) -> Optional[Axis]:
    """The axis whose path is ``loc`` or a prefix of it."""
    for axis in axes:
        if loc[: len(axis.path)] == axis.path:
            return axis
    return None
