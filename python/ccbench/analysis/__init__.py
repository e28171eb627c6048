"""Analysis of stored results: metrics and statistics over repetitions.

Pure functions over rows read from the store (summary.py: lists of dicts;
metrics, anomalies, stats, sweeps, compare: RunData); reading the store is
in data.load_runs and study.analyze_store only. See docs/analysis.md.
"""

from ccbench.analysis.summary import ClassSummary, ConfigSummary, jain_index, summarize

__all__ = ["jain_index", "summarize", "ConfigSummary", "ClassSummary"]
