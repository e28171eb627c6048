"""Study versions in one results directory.

A study file edited after it ran (say, duration 20 s → 10 s) makes runs with
other ids. Run into the same directory, its runs would silently be summarised
beside the old ones. So a results directory whose study of that name holds
runs the study no longer makes is refused, unless ``--new-version`` asks to
keep both: the new runs are then stored under the study name ``NAME v2``
(``v3``...), a study of its own in ``ls``, ``summary``, the report and the API.
A later run of the same edited file (with or without the flag) resumes the
version whose runs it makes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from ccbench.errors import UsageError


def versioned(name: str, version: int) -> str:
    return name if version == 1 else f"{name} v{version}"


def choose(store, name: str, backend: str, run_ids: Iterable[str], new_version: bool, out_dir: Path) -> str:
    """The study name to store this study's runs under (see the module's text).
    Only runs from ``backend`` count: sim and linux runs of a study share a directory."""
    wanted = set(run_ids)
    pattern = re.compile(re.escape(name) + r"(?: v(\d+))?")
    versions: dict[int, str] = {}
    for s in store.study_names():
        m = pattern.fullmatch(s)
        if m:
            versions[int(m.group(1) or 1)] = s
    versions.setdefault(1, name)
    stored = {v: store.run_ids_of(versions[v], backend) for v in versions}
    for v in sorted(versions, reverse=True):
        if stored[v] and stored[v] <= wanted:
            return versions[v]  # the version this study file made: resume it
    for v in sorted(versions):
        if not stored[v]:
            return versions[v]  # a version with no runs yet
    stale = {v: len(stored[v] - wanted) for v in versions}
    if not new_version:
        v = max(versions)
        raise UsageError(
            f"{out_dir} holds {stale[v]} run{'s' if stale[v] != 1 else ''} of study '{versions[v]}' that this "
            f"study file no longer makes "
            f"(it was edited since they ran); give another directory with --out, or keep both with "
            f"--new-version (the new runs become study '{versioned(name, max(versions) + 1)}')"
        )
    return versioned(name, max(versions) + 1)
