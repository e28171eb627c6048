"""Analysis of stored results: one pipeline, every output a view of it.

    store ──load_runs──► RunData ──run_metrics──► RunMetrics ──analyze──► Analysis
    (data.py)                       (metrics.py, anomalies.py)   (study.py, stats.py)

Analysis.configs holds per configuration the statistics over repetitions of
every metric (stats.Spread: median, mean, Student-t CI of the mean, min,
max), outliers and anomalies. The summary table (summary.py), ``show``, the report, plots
(sweeps.py), ``compare``, ``validate``, expectations (expect.py) and the
public API (ccbench.api) all read it. A metric is defined once, in
metrics.py (METRICS names them); see docs/analysis.md.
"""

from ccbench.analysis.series import jain_index
from ccbench.analysis.study import IDENTICAL_NOTE, Analysis, ConfigResult, analyze, analyze_store
from ccbench.analysis.summary import ClassSummary, ConfigSummary, summarize, summary_rows

__all__ = ["jain_index", "summarize", "summary_rows", "ConfigSummary", "ClassSummary", "Analysis", "ConfigResult",
           "analyze", "analyze_store", "IDENTICAL_NOTE"]
