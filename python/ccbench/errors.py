"""Errors a user can fix, and the command line's exit statuses. The CLI prints
an error's message on one line and exits 2."""

#: exit statuses of ``ccbench``: success, some runs failed, a usage or study
#: error, an expectation failed, doctor found leftovers, interrupted
EXIT_OK, EXIT_FAILED_RUNS, EXIT_USAGE, EXIT_EXPECTATION, EXIT_LEFTOVERS, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130


class StudyError(Exception):
    """A study file (or a command-line value) is wrong.

    The message names the file, the field, the value given and what is
    allowed, e.g. ``study.toml: topology.bottleneck.rate: got '100Mbits';
    expected a rate such as '100Mbit', '1.5Gbit', '800kbit'``.
    """


class UsageError(Exception):
    """A command was called wrongly (missing results directory, unknown run id...)."""
