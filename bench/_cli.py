"""What the bench's scripts over a results directory share: a time option
parsed as studies write times, the flows the validation judges, and a main
that reports a bad directory in one line instead of a traceback."""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from ccbench.errors import StudyError, UsageError
from ccbench.spec import parse_time
from ccbench.spec.units import UnitError


def time_us(value: str) -> int:
    """An option's time ('2s', '1500ms') in microseconds; argparse names the option on error."""
    try:
        return parse_time(value) // 1000
    except UnitError as e:
        raise argparse.ArgumentTypeError(f"{value!r}: {e.problem} (allowed: {e.allowed})") from None


# Columns of ccbench.api's metrics table that are not a swept parameter.
METRIC_COLUMNS = ("study", "backend", "config_id", "run_id", "repetition", "status", "metric", "group", "key", "value")


def judged_group(metrics):
    """Rows of one configuration's or run's metrics for the flows the validation
    judges: the one class of flows if there is one, else all flows pooled."""
    classes = set(metrics.group.dropna()) - {"all flows"}
    return metrics[metrics.group == (next(iter(classes)) if len(classes) == 1 else "all flows")]


def run(main: Callable[[], int], prog: str) -> None:
    """Exit with main()'s status; a missing or unreadable results directory exits 2 with one line."""
    try:
        sys.exit(main())
    except (StudyError, UsageError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        sys.exit(2)
