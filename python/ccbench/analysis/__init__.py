"""Analysis of stored results: metrics and statistics over repetitions.

Pure functions over rows read from the store (lists of dicts); no I/O here.
"""

from ccbench.analysis.summary import ClassSummary, ConfigSummary, jain_index, summarize

__all__ = ["jain_index", "summarize", "ConfigSummary", "ClassSummary"]
