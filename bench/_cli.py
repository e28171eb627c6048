"""What the bench's scripts over a results directory share: a time option
parsed as studies write times, and a main that reports a bad directory in
one line instead of a traceback."""

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


def run(main: Callable[[], int], prog: str) -> None:
    """Exit with main()'s status; a missing or unreadable results directory exits 2 with one line."""
    try:
        sys.exit(main())
    except (StudyError, UsageError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        sys.exit(2)
