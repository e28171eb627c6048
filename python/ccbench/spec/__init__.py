"""Study files: schema, validation, units and sweep expansion.

    study = load_study("studies/quickstart.toml")   # raises StudyError
    for run in study.runs():                        # RunSpec: run_id, config, seed, ...
        ...

See studies/README.md for the file format and docs/interfaces.md §1 for the
resolved run config each RunSpec carries.
"""

from ccbench.errors import StudyError

from .load import RunSpec, Study, load_study, parse_study
from .model import BACKENDS, CCAS, QDISCS
from .units import (
    Buffer,
    UnitError,
    format_rate,
    format_size,
    format_time,
    parse_buffer,
    parse_percent,
    parse_rate,
    parse_size,
    parse_time,
)

__all__ = [
    "load_study",
    "parse_study",
    "Study",
    "RunSpec",
    "StudyError",
    "CCAS",
    "BACKENDS",
    "QDISCS",
    "Buffer",
    "UnitError",
    "parse_rate",
    "parse_time",
    "parse_size",
    "parse_percent",
    "parse_buffer",
    "format_rate",
    "format_time",
    "format_size",
]
