"""ccbench: controlled, repeated experiments on TCP congestion control.

``ccbench.open(results)`` opens a results directory for analysis in Python
(pandas DataFrames and the analysis pipeline's views; see ccbench.api).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ccbench.api import Results


def open(results: Any, **settings: Any) -> "Results":  # noqa: A001 - ccbench.open, like io.open
    """Open a results directory: see :class:`ccbench.api.Results`."""
    from ccbench.api import open_results

    return open_results(results, **settings)
