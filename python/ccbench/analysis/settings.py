"""The knobs of the analysis, and where they come from.

A study may carry an optional ``[analysis]`` table (validated with the rest of
the study file, see ccbench.spec.model.Analysis)::

    [analysis]
    steady_after = "10s"       # start of the steady-state window
    collapse_fraction = 0.1    # a flow below this fraction of its fair share ...
    collapse_min = "2s"        # ... for at least this long (link busy) has collapsed
    converge_jfi = 0.9         # Jain's index that counts as "converged to fairness"

``ccbench report/plot/compare/show`` read it from the study text kept in the
results store; command-line flags (``--steady-after``, ``--collapse-fraction``,
``--collapse-min``, ``--converge-jfi``) override it. Values not given anywhere
take the defaults below. The other thresholds are fixed here (documented in
the modules that use them) so results stay comparable between studies.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

from ccbench.errors import UsageError


@dataclass(frozen=True)
class AnalysisSettings:
    #: start of the steady-state window (µs from the run's start); None = the
    #: default rule: a quarter of the way from the last bulk flow's start to
    #: the end of the run (a quarter of the run when all start at 0).
    steady_after_us: Optional[int] = None
    #: a bulk flow collapses when its goodput stays below this fraction of its
    #: fair share ...
    collapse_fraction: float = 0.1
    #: ... for at least this long while the link is busy.
    collapse_min_us: int = 2_000_000
    #: "busy" = the aggregate goodput of all flows in the interval is at least
    #: this fraction of the bottleneck rate.
    busy_fraction: float = 0.8
    #: a flow starves when its goodput over its active time is below this
    #: fraction of its mean fair share (bulk), or completes no RPC (rpc).
    starve_fraction: float = 0.01
    #: width of the bins of JFI over time and of the convergence measurement.
    jfi_bin_us: int = 1_000_000
    #: JFI from which flows count as converged to fairness.
    converge_jfi: float = 0.9
    #: a run has not reached steady state when a bulk flow's goodput over the
    #: two halves of the steady-state window differs by more than this
    #: fraction of the larger half.
    steady_tolerance: float = 0.25

    def with_overrides(self, **kw: Any) -> "AnalysisSettings":
        return replace(self, **{k: v for k, v in kw.items() if v is not None})


def read_toml(text: str) -> dict:
    """A study text kept in a results store, as a document ({} if it is not TOML)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def from_study_text(source_text: Optional[str], name: str = "study") -> AnalysisSettings:
    """Settings from a study file's ``[analysis]`` table (defaults if absent)."""
    if not source_text:
        return AnalysisSettings()
    doc = read_toml(source_text)
    raw = doc.get("analysis")
    if not raw:
        return AnalysisSettings()
    from pydantic import ValidationError

    from ccbench.spec.model import Analysis

    try:
        a = Analysis.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise UsageError(f"{name}: analysis.{where}: {err['msg']}") from None
    return AnalysisSettings(
        steady_after_us=None if a.steady_after is None else a.steady_after // 1000,
        collapse_fraction=a.collapse_fraction,
        collapse_min_us=a.collapse_min // 1000,
        converge_jfi=a.converge_jfi,
    )
