"""Two results sets side by side (sim vs linux, before vs after a change).

Configurations are matched by config_id (the resolved config, the same on
every backend and in every study) when the two sets share any; otherwise by
the swept parameters as written (e.g. the same study run with a different
loss setting), and `match` forces one or the other. When either set holds
several studies (e.g. ``NAME`` and ``NAME v2``, from ``--new-version``), the
study name is part of the key: ``NAME v2`` pairs with ``NAME v2`` only, and a
configuration of a study the other set lacks is listed as only in A or B,
never dropped; labels then name the study. Each configuration pairs with at
most one of the other set; any left over is listed too.

For every metric both sides have of those in COMPARED (per class goodput,
retransmissions, RTT, RPC tails; JFI, utilisation, the bottleneck's backlog
and drops; each link's utilisation, backlog and drops), a row gives the
median over repetitions on each side, the difference B − A (of the medians,
and relative to |A|), the spread on each side (max − min over repetitions),
and whether the difference *exceeds the spread*:

    |median_B − median_A| > spread_A + spread_B
    and |median_B − median_A| > tolerance × max(|median_A|, |median_B|)

i.e. the shift is larger than the run-to-run variation seen on both sides
together, and not negligibly small (tolerance 1 % by default, for
deterministic sets with no spread). The sum of the ranges, rather than the
larger one, is deliberate: with a few repetitions and a few dozen metrics per
configuration, two sets of repetitions of the *same* configuration are
otherwise flagged now and then by chance (seen with 4 vs 4 runs of a 4 s
study); a real effect such as 3 % random loss on Reno clears it by far.
With a single repetition on both sides the spread is unknown: such rows are
marked by `few_reps`, their difference is given (``differs``: beyond the
tolerance), and they never exceed the spread (nor count in a summary of
differences); a side with one repetition shows no spread (None) and adds
none to the sum.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Optional

from ccbench.analysis.stats import Spread
from ccbench.analysis.study import Analysis, ConfigResult
from ccbench.errors import UsageError

# Queue counts and backlogs vary from run to run like the rest, so the same
# rule holds for them: a real change (a smaller buffer, another discipline)
# moves them beyond the spread, repetitions of one configuration do not.
COMPARED = ("goodput_mean_bps", "goodput_sum_bps", "retrans_pct", "rtt_mean_us", "rtt_p99_us",
            "queue_delay_mean_us", "rpc_p50_us", "rpc_p99_us", "rpc_p999_us", "jfi", "utilisation",
            "backlog_mean_bytes", "drops", "random_losses",
            "link_utilisation", "link_backlog_mean_bytes", "link_drops", "link_random_losses")


@dataclass
class CompareRow:
    metric: str
    a_median: Optional[float]
    b_median: Optional[float]
    diff: Optional[float]
    rel_diff: Optional[float]
    a_spread: Optional[float]
    b_spread: Optional[float]
    a_n: int
    b_n: int
    exceeds: bool
    few_reps: bool  # one repetition on each side: the spread is unknown, and exceeds is False
    differs: bool = False  # |diff| > tolerance × the larger |median| (the rule's second half alone)


@dataclass
class ComparedConfig:
    label: str
    a: ConfigResult
    b: ConfigResult
    rows: list[CompareRow] = field(default_factory=list)

    @property
    def flagged(self) -> list[CompareRow]:
        return [r for r in self.rows if r.exceeds]


@dataclass
class Comparison:
    match: str  # "config_id" | "params"
    pairs: list[ComparedConfig]
    only_a: list[ConfigResult]
    only_b: list[ConfigResult]
    by_study: bool = False  # the study name is part of the key (a set holds several studies)

    @property
    def matched_by(self) -> str:
        return ("study and " if self.by_study else "") + self.match

    def name(self, c: ConfigResult) -> str:
        """A configuration's label, with its study when the sets hold several."""
        return _name(c, self.by_study)

    def as_dict(self) -> dict:
        return {
            "match": self.match,
            "by_study": self.by_study,
            "configs": [{"label": p.label, "a_study": p.a.study, "b_study": p.b.study,
                         "a_config_id": p.a.config_id, "b_config_id": p.b.config_id,
                         "a_runs": p.a.reps, "b_runs": p.b.reps, "a_failed": p.a.failed, "b_failed": p.b.failed,
                         "params": p.a.params, "rows": [r.__dict__ for r in p.rows]} for p in self.pairs],
            "only_a": [self.name(c) for c in self.only_a],
            "only_b": [self.name(c) for c in self.only_b],
        }


def _name(c: ConfigResult, by_study: bool) -> str:
    return f"{c.study}: {c.label()}" if by_study else c.label()


def _metric_ok(key: str) -> bool:
    return key.split("[")[0] in COMPARED


def beyond_tolerance(sa: Spread, sb: Spread, tolerance: float = 0.01) -> bool:
    """The difference of the medians is larger than ``tolerance`` × the larger |median|."""
    return abs(sb.median - sa.median) > tolerance * max(abs(sa.median), abs(sb.median))


def exceeds_spread(sa: Spread, sb: Spread, tolerance: float = 0.01) -> Optional[bool]:
    """The rule of the module docstring: the difference of the medians is larger
    than both sides' min–max ranges together and beyond the tolerance; None when
    neither side has a spread to exceed (one repetition each: unknown)."""
    if not sa.n or not sb.n:
        return False
    if sa.n < 2 and sb.n < 2:
        return None
    spread = (sa.range or 0.0) + (sb.range or 0.0)
    return abs(sb.median - sa.median) > spread and beyond_tolerance(sa, sb, tolerance)


def compare_configs(a: ConfigResult, b: ConfigResult, tolerance: float = 0.01) -> list[CompareRow]:
    rows = []
    for key in [k for k in a.stats if k in b.stats and _metric_ok(k)]:
        sa, sb = a.stats[key], b.stats[key]
        if sa.n == 0 or sb.n == 0:
            continue
        diff = sb.median - sa.median
        rel = diff / abs(sa.median) if sa.median else None
        exceeds = exceeds_spread(sa, sb, tolerance)  # None: no spread measured on either side
        rows.append(CompareRow(key, sa.median, sb.median, diff, rel, sa.range if sa.n > 1 else None,
                               sb.range if sb.n > 1 else None, sa.n, sb.n, bool(exceeds), exceeds is None,
                               beyond_tolerance(sa, sb, tolerance)))
    return rows


def _pkey(c: ConfigResult) -> str:
    return json.dumps(c.params, sort_keys=True)


def check_tolerance(tolerance: float) -> None:
    """A tolerance is a finite fraction >= 0 (nan would flag nothing, inf too)."""
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise UsageError(f"--tolerance: got {tolerance}; allowed: a finite fraction >= 0 such as 0.01")


def compare(a: Analysis, b: Analysis, match: str = "auto", tolerance: float = 0.01) -> Comparison:
    if match not in ("auto", "config_id", "params"):
        raise ValueError(match)
    check_tolerance(tolerance)
    by_study = len({c.study for c in a.configs}) > 1 or len({c.study for c in b.configs}) > 1

    def study(c: ConfigResult) -> Optional[str]:
        return c.study if by_study else None

    if match == "auto":
        shared = {(study(c), c.config_id) for c in a.configs} & {(study(c), c.config_id) for c in b.configs}
        match = "config_id" if shared else "params"

    def key(c: ConfigResult) -> tuple:
        return (study(c), c.config_id if match == "config_id" else _pkey(c))

    waiting: dict[tuple, list[ConfigResult]] = {}  # B's configurations not paired yet
    for c in b.configs:
        waiting.setdefault(key(c), []).append(c)
    pairs, only_a = [], []
    for c in a.configs:
        others = waiting.get(key(c))
        if not others:
            only_a.append(c)
            continue
        other = others.pop(0)
        pairs.append(ComparedConfig(_name(c, by_study), c, other, compare_configs(c, other, tolerance)))
    left = {id(c) for cs in waiting.values() for c in cs}
    only_b = [c for c in b.configs if id(c) in left]
    return Comparison(match, pairs, only_a, only_b, by_study)
