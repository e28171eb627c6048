"""The Rust core (the extension module ``ccbench._core``, built by maturin):
the one place that loads it, so every caller gets the same clear error
when it is not built."""

from __future__ import annotations

import importlib
from types import ModuleType

from ccbench.errors import UsageError

#: the extension's import name (pyproject.toml [tool.maturin] module-name)
EXTENSION = "ccbench._core"


def load(needed_for: str = "ccbench") -> ModuleType:
    """The extension module; a UsageError naming what needs it when it is not built."""
    try:
        return importlib.import_module(EXTENSION)
    except ImportError as e:
        raise UsageError(
            f"{needed_for} is not available: the core {EXTENSION} is not built ({e}); "
            "build it with `maturin develop --release` or `make install`"
        ) from None
