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
from typing import Any, Iterable, Sequence

from ccbench.errors import UsageError


def versioned(name: str, version: int) -> str:
    return name if version == 1 else f"{name} v{version}"


def _leaves(doc: Any, prefix: str = "") -> Iterable[tuple[str, str]]:
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _leaves(v, f"{prefix}.{i}")
    else:
        yield prefix, repr(doc)


def changed_fields(old: Sequence[dict], new: Sequence[dict]) -> list[str]:
    """The resolved-config fields whose values over the ``old`` runs are not
    those over the ``new`` runs: what an edit changed, e.g. ``duration_ns``
    or, for a BPF source edited since, ``flows.0.cca (a BPF source changed)``."""
    def values(configs: Sequence[dict]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for c in configs:
            for k, v in _leaves(c):
                if not k.startswith("hosts."):  # what the hosts backend found on the hosts: not the study's
                    out.setdefault(k, set()).add(v)
        return out

    a, b = values(old), values(new)
    changed, derived = [], []
    for k in sorted(set(a) | set(b), key=lambda k: (k.count("."), k)):
        if a.get(k) != b.get(k):
            # what differs is BPF objects only (a sweep may hold other values beside them)
            bpf = all(v.startswith("'bpf:") for v in a.get(k, set()) ^ b.get(k, set()))
            (derived if _DERIVED.fullmatch(k) else changed).append(f"{k} (a BPF source changed)" if bpf else k)
    return changed or derived


# Drawn from each run's configuration (spec.resolve.finish): they change with
# any edit, so they are named only when nothing else changed (the study's seed).
_DERIVED = re.compile(r"seed|flows\.\d+\.start_ns")


def choose(store, name: str, backend: str, run_ids: Iterable[str], new_version: bool, out_dir: Path,
           configs: dict[str, dict] | None = None) -> str:
    """The study name to store this study's runs under (see the module's text).
    Only runs from ``backend`` count: sim and linux runs of a study share a directory.
    ``configs``: run id → resolved config, to say what an edit changed."""
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
        # the stored runs this study no longer makes against its runs not stored
        old = [r.config for r in store.runs(versions[v], stored[v] - wanted, with_config=True) if r.config]
        new = [c for rid, c in (configs or {}).items() if rid not in stored[v]]
        changed = changed_fields(old, new) if old and new else []
        what = (f"it or a file it names changed since they ran: {', '.join(changed[:4])}"
                + (f" and {len(changed) - 4} more" if len(changed) > 4 else "") if changed
                else "it or a file it names changed since they ran")
        raise UsageError(
            f"{out_dir} holds {stale[v]} run{'s' if stale[v] != 1 else ''} of study '{versions[v]}' that this "
            f"study file no longer makes ({what}); give another directory with --out, or keep both with "
            f"--new-version (the new runs become study '{versioned(name, max(versions) + 1)}')"
        )
    return versioned(name, max(versions) + 1)
