"""The validated study model of each configuration of a sweep, without
validating every configuration's whole document (issue 12: a 10,000-run
study must start at once; pydantic's validation of the whole document was
the largest cost).

The study models are frozen and have no validator that looks at more than
one field, so a configuration's model is the first configuration's with the
swept fields replaced by their validated values. Each value of each axis is
validated once, as the whole document with only that axis moved, and the
replacement is checked to give exactly that model (fields and which fields
were set); if any check fails, or an axis is not a plain path of model
fields (a case axis, a path into an untyped table), ``model`` returns None
and the caller validates the document itself, so results and errors are
those of plain validation.

A configuration's model shares with the previous configuration's every
sub-model its changed values do not lie in (a copy is made only along the
changed paths): resolve.Resolver relies on that to resolve each part of a
config once per distinct sub-model.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from pydantic import BaseModel

from . import cases
from .model import StudyFile
from .sweep import Axis


class _NotPlain(Exception):
    """A path that does not lead through model fields."""


def _get(obj: Any, path: tuple) -> Any:
    for p in path:
        if isinstance(p, int) and isinstance(obj, list):
            obj = obj[p]
        elif isinstance(obj, BaseModel) and isinstance(p, str) and p in type(obj).model_fields:
            obj = getattr(obj, p)
        else:
            raise _NotPlain(p)
    return obj


def _replace(obj: Any, path: tuple, leaf: Any) -> Any:
    if not path:
        return leaf
    p = path[0]
    if isinstance(p, int):
        out = list(obj)
        out[p] = _replace(out[p], path[1:], leaf)
        return out
    return _with(obj, p, _replace(getattr(obj, p), path[1:], leaf))


def _with(obj: BaseModel, name: str, value: Any, _new: Any = object.__new__, _set: Any = object.__setattr__
          ) -> BaseModel:
    """``obj.model_copy(update={name: value})``, built directly (pydantic's copy costs
    twice as much, and a sweep of 10,000 configurations makes three per configuration):
    the same four attributes pydantic's copy sets, the field dict shallow-copied, the
    set of set fields shared when ``name`` is in it already (frozen models never change
    it). The study models have no extra fields and no private attributes; a model with
    either is copied by pydantic."""
    if obj.__pydantic_extra__ is not None or obj.__pydantic_private__ is not None:
        return obj.model_copy(update={name: value})
    new = _new(type(obj))
    fields = obj.__dict__.copy()
    fields[name] = value
    _set(new, "__dict__", fields)
    fields_set = obj.__pydantic_fields_set__
    _set(new, "__pydantic_fields_set__", fields_set if name in fields_set else fields_set | {name})
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new


def _fields_set(obj: Any) -> Any:
    """Every model's set fields, nested: what model equality does not compare."""
    if isinstance(obj, BaseModel):
        return (frozenset(obj.model_fields_set), tuple(_fields_set(getattr(obj, k)) for k in type(obj).model_fields))
    if isinstance(obj, list):
        return tuple(_fields_set(x) for x in obj)
    return None


def _same(a: StudyFile, b: StudyFile) -> bool:
    return a == b and _fields_set(a) == _fields_set(b)


class LeafModels:
    def __init__(self, base: dict, axes: Sequence[Any]):
        self.axes = list(axes)
        self.first: Optional[StudyFile] = None
        self.leaves: list[list[Any]] = []
        self._stack: list[tuple[int, StudyFile]] = []  # (value index, model) per axis of the last call
        if not self.axes or not all(isinstance(a, Axis) for a in self.axes):
            return
        n = len(self.axes)
        try:
            first = StudyFile.model_validate(cases.apply_all(base, self.axes, (0,) * n))
            for ai, a in enumerate(self.axes):
                vals = []
                for i in range(len(a.values)):
                    combo = tuple(i if j == ai else 0 for j in range(n))
                    full = StudyFile.model_validate(cases.apply_all(base, self.axes, combo))
                    leaf = _get(full, a.path)
                    if not _same(_replace(first, a.path, leaf), full):
                        return
                    vals.append(leaf)
                self.leaves.append(vals)
        except Exception:  # noqa: BLE001 - anything unusual: the caller validates each document itself
            self.leaves = []
            return
        self.first = first

    def model(self, combo: Sequence[int]) -> Optional[StudyFile]:
        """The model of configuration ``combo``, or None: validate its document.
        The models after the first axes are kept for the next call: in the
        sweep's order (itertools.product) the last axis moves fastest, so
        most calls replace one field."""
        if self.first is None:
            return None
        stack = self._stack
        k = 0
        while k < len(stack) and stack[k][0] == combo[k]:
            k += 1
        del stack[k:]
        m = stack[-1][1] if stack else self.first
        for d in range(k, len(self.axes)):
            i = combo[d]
            if i:
                m = _replace(m, self.axes[d].path, self.leaves[d][i])
            stack.append((i, m))
        return m
