"""Copying TOML/JSON-shaped data (dicts, lists, scalars) fast, and writing
a value back as TOML (``as_written``).

``copy.deepcopy`` handles any object and keeps a memo of everything it has
copied; a study document or a resolved run config is a tree of dicts and
lists over immutable scalars, which this copies several times faster — it
matters when a sweep expands into thousands of runs.
"""

from __future__ import annotations

import json
import re
from typing import Any


def copy_tree(node: Any) -> Any:
    """A deep copy of nested dicts and lists; every other value is shared (it must be immutable)."""
    if isinstance(node, dict):
        return {k: copy_tree(v) if isinstance(v, (dict, list)) else v for k, v in node.items()}
    if isinstance(node, list):
        return [copy_tree(v) if isinstance(v, (dict, list)) else v for v in node]
    return node


def as_written(value: Any) -> str:
    """A TOML value as the user wrote it, as a string: '1%' -> '1%', 1448 -> '1448', true -> 'true'.

    Tables and arrays come out as TOML inline values: {rate = "10Mbit"}.
    """
    if isinstance(value, str):
        return value
    return _toml_inline(value)


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_inline(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_inline(v) for v in value) + "]"
    if isinstance(value, dict):
        items = (f"{k if _BARE_KEY.match(k) else json.dumps(k)} = {_toml_inline(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    return str(value)  # dates and times
