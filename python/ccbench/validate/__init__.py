"""``ccbench validate``: the simulator against the real Linux kernel on a grid
of scenarios, as a client of the analysis pipeline.

    grid.py        the scenarios as one study text (Grid, GRIDS, plan)
    running.py     running both halves into one store, retrying suspect runs
    comparison.py  per scenario and metric: sim against linux (analyse)
    output.py      table, CSV, JSON, Markdown; write_outputs
    page.py        the HTML page (built with ccbench.report.page)
    command.py     the command line

The method and the measured result are in docs/validation/README.md.
"""

from ccbench.validate.comparison import (
    JUDGED, METRIC, METRICS, Metric, MetricRow, Scenario, Validation, analyse, compare_spreads,
)
from ccbench.validate.grid import GRIDS, STUDY_NAME, Grid, Plan, plan, study_text, warmup_us
from ccbench.validate.output import csv_text, json_text, markdown_summary, markdown_table, table, write_outputs
from ccbench.validate.running import RunLog, execute_plan, set_aside

__all__ = [
    "GRIDS", "Grid", "Plan", "plan", "study_text", "warmup_us", "STUDY_NAME", "RunLog", "execute_plan", "set_aside",
    "METRICS", "METRIC", "JUDGED", "Metric", "MetricRow", "Scenario", "Validation", "analyse", "compare_spreads",
    "csv_text", "json_text", "markdown_summary", "markdown_table", "table", "write_outputs",
]
