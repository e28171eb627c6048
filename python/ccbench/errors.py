"""Errors a user can fix. The CLI prints their message on one line and exits 2."""


class StudyError(Exception):
    """A study file (or a command-line value) is wrong.

    The message names the file, the field, the value given and what is
    allowed, e.g. ``study.toml: topology.bottleneck.rate: got '100Mbits';
    expected a rate such as '100Mbit', '1.5Gbit', '800kbit'``.
    """


class UsageError(Exception):
    """A command was called wrongly (missing results directory, unknown run id...)."""
