"""Errors a user can fix, and the command line's exit statuses. The CLI prints
an error's message on one line (and its detail, if any, indented below it)
and exits 2."""

#: exit statuses of ``ccbench``: success, some runs failed, a usage or study
#: error, an expectation failed, doctor found leftovers, interrupted
EXIT_OK, EXIT_FAILED_RUNS, EXIT_USAGE, EXIT_EXPECTATION, EXIT_LEFTOVERS, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130


class DetailedError(Exception):
    """An error with, below its one-line ``message``, lines another tool
    printed that the user needs as they are (a compiler's diagnostics, the
    kernel verifier's log): ``detail``. ``str()`` gives both."""

    def __init__(self, message: str, detail: str | None = None):
        super().__init__(message)
        self.message = message
        self.detail = detail or None

    def __str__(self) -> str:
        return self.message + (f"\n{self.detail}" if self.detail else "")


class StudyError(DetailedError):
    """A study file (or a command-line value) is wrong.

    The message names the file, the field, the value given and what is
    allowed, e.g. ``study.toml: topology.bottleneck.rate: got '100Mbits';
    expected a rate such as '100Mbit', '1.5Gbit', '800kbit'``.
    """


class UsageError(DetailedError):
    """A command was called wrongly (missing results directory, unknown run id...)."""
