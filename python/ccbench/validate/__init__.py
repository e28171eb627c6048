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

import importlib
from typing import Any

# Names -> the module that holds them. Imported on first use, so that the CLI can register
# `ccbench validate` without the analysis stack (numpy) on every command's start-up.
_HOME = {
    **dict.fromkeys(("JUDGED", "METRIC", "METRICS", "Metric", "MetricRow", "Scenario", "Validation", "analyse",
                     "compare_spreads", "summary_line"), "comparison"),
    **dict.fromkeys(("GRIDS", "STUDY_NAME", "Grid", "Plan", "plan", "study_text", "warmup_us"), "grid"),
    **dict.fromkeys(("csv_text", "json_text", "markdown_summary", "markdown_table", "table", "write_outputs"),
                    "output"),
    **dict.fromkeys(("RunLog", "execute_plan", "set_aside", "sim_settings_changed"), "running"),
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'ccbench.validate' has no attribute {name!r}")
    return getattr(importlib.import_module(f"ccbench.validate.{home}"), name)
