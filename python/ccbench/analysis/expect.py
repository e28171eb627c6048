"""Evaluating a study's expectations (``[[expect]]``, schema in
ccbench.spec.expect) on its analysed results: a view of the pipeline.

For each configuration an expectation selects, the measured value is the
chosen statistic (median by default) over the repetitions of the metric's
ConfigResult.stats entry; its interval is the 95 % CI of the mean (Student's
t; study.py / stats.py). For a ratio the value is stat(of) / stat(to) and the
interval [ci_low(of) / ci_high(to), ci_high(of) / ci_low(to)] (both sides'
intervals at their extremes). The expectation holds when ``value op
threshold``; the margin is value − threshold (negative on the failing side
of ``>=``/``>``, positive on the failing side of ``<=``/``<``).

A ``where`` (or ``of``/``to``) that names no swept parameter, values none of
which the study has, or that selects no configuration, is an error
(ExpectationError, a StudyError): an expectation never passes by matching
nothing. Of a list of values, those the results lack are ignored; an
expectation whose values are in the study but all left out of the results
by a profile (e.g. ``--quick``) is *skipped*, shown as such and not counted
as passed.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ccbench import console
from ccbench.analysis.metrics import ALL_FLOWS, METRICS, payload_ceiling
from ccbench.analysis.study import Analysis, ConfigResult
from ccbench.analysis.sweeps import resolve_param
from ccbench.errors import StudyError, UsageError
from ccbench.spec.expect import REFS, Expect

OPS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}


class ExpectationError(StudyError):
    """An expectation that cannot be evaluated (names nothing, matches nothing)."""


@dataclass
class Outcome:
    """One expectation in one configuration (or pair, for a ratio)."""

    expect: Expect
    index: int  # position in the study's [[expect]] array
    study: str
    label: str  # the configuration (its swept values)
    value: Optional[float]
    ci_low: Optional[float]
    ci_high: Optional[float]
    threshold: Optional[float]  # None when skipped
    n: int  # repetitions behind the value (the smaller side of a ratio)
    unit: str  # of value and threshold: the metric's ('bps', 'us', '%', ''), or 'ratio'
    skipped: Optional[str] = None  # why it could not be evaluated on these results (neither passed nor failed)

    @property
    def passed(self) -> bool:
        return self.value is not None and self.threshold is not None and OPS[self.expect.op](self.value,
                                                                                               self.threshold)

    @property
    def failed(self) -> bool:
        return self.skipped is None and not self.passed

    @property
    def margin(self) -> Optional[float]:
        return None if self.value is None or self.threshold is None else self.value - self.threshold

    @property
    def name(self) -> str:
        return self.expect.name or self.expect.describe()

    def as_dict(self) -> dict[str, Any]:
        return {"expect": self.index, "name": self.name, "study": self.study, "config": self.label,
                "value": self.value, "ci_low": self.ci_low, "ci_high": self.ci_high, "op": self.expect.op,
                "threshold": self.threshold, "margin": self.margin, "n": self.n, "unit": self.unit,
                "passed": self.passed, "skipped": self.skipped}


def resolve_key(name: str, keys: Sequence[str], where: str = "") -> Optional[str]:
    """A swept key by full path, unique dotted suffix or case axis name, as
    ``plot --x`` takes it (sweeps.resolve_param); None if it names none."""
    try:
        return resolve_param(name, keys, where)
    except UsageError as e:  # ambiguous
        raise ExpectationError(str(e)) from None


def check_selectors(e: Expect, where: str, sweep: dict[str, Sequence[str]],
                    full: Optional[dict[str, Sequence[str]]] = None) -> Optional[str]:
    """The metric is known, every key of e.where / e.ratio names a swept
    parameter and, of each, one of the values is in ``sweep`` (key → values as
    written; values it lacks are ignored, so that a list may name values a
    profile leaves out). ``where`` names the expectation in messages.

    A selection whose values are all missing from ``sweep`` but are in
    ``full`` (the study's sweep without a profile) cannot be evaluated on
    these results: the reason is returned (the expectation is *skipped*, and
    says so); missing from both, it is an ExpectationError."""
    if e.metric not in METRICS:
        raise ExpectationError(f"{where}.metric: unknown metric (got {e.metric!r}; allowed: {', '.join(METRICS)})")
    level = METRICS[e.metric].level
    if (level == "link") != (e.link is not None):
        raise ExpectationError(f"{where}.link: " + ("the link_* metrics need the link they are about, e.g. "
                                                    "link = \"l1\"" if level == "link" else
                                                    f"only for the link_* metrics, not {e.metric}"))
    if level == "link" and e.group is not None:
        raise ExpectationError(f"{where}.group: {e.metric} is about a link, not a class of flows")
    _value(e, where)
    tables = [("where", e.where)]
    if e.ratio is not None:
        tables += [("ratio.of", e.ratio.of), ("ratio.to", e.ratio.to)]
    keys = list(sweep)
    for field, table in tables:
        for name, values in table.items():
            key = resolve_key(name, keys, f"{where}.{field}:")
            if key is None:
                raise ExpectationError(f"{where}.{field}: '{name}' is not a swept parameter of the study "
                                       f"(swept: {', '.join(keys) or 'nothing'})")
            known = [str(v) for v in sweep[key]]
            if any(v in known for v in values):
                continue
            wanted = " or ".join(repr(v) for v in values)
            if full is not None and any(v in [str(x) for x in full.get(key, ())] for v in values):
                return f"{key} = {wanted} is in the study but not in these results (a profile left it out)"
            raise ExpectationError(f"{where}.{field}.{name}: the study has no configuration with "
                                   f"{key} = {wanted} (allowed: {', '.join(known)})")
    return None


def _matches(c: ConfigResult, table: dict, keys: Sequence[str]) -> bool:
    return all(str(c.params.get(resolve_key(n, keys))) in vs for n, vs in table.items())


def _stat_key(e: Expect, c: ConfigResult, where: str) -> str:
    m = METRICS[e.metric]
    if m.level == "run":
        return m.key()
    if m.level == "link":
        if e.link not in c.links:
            raise ExpectationError(f"{where}.link: no queueing link {e.link!r} in {c.label()} "
                                   f"(links: {', '.join(c.links) or 'none: the dumbbell has the run-level keys'})")
        return m.key(e.link)
    classes = c.classes
    if e.group is not None:
        if e.group not in classes:
            raise ExpectationError(f"{where}.group: no flows of class {e.group!r} in {c.label()} "
                                   f"(classes: {', '.join(classes)})")
        return m.key(e.group)
    return m.key(classes[0] if len(classes) == 1 else ALL_FLOWS)


_WANT = {"bps": "a rate such as '50Mbit'", "us": "a time such as '20ms'", "%": "a percentage such as '1%'"}


def _value(e: Expect, where: str) -> tuple[float, Optional[str]]:
    """``e.value`` as (a number in the metric's unit, None), or (a factor, "rate" or "ceiling")
    for '<number> * rate': the one place its unit is checked (ExpectationError otherwise)."""
    if isinstance(e.value, float):
        return e.value, None
    from ccbench.spec import units

    text = e.value
    unit = METRICS[e.metric].unit
    allowed = "a number" + (f" or {_WANT[unit]}" if unit in _WANT and e.ratio is None else "")
    if unit == "bps" and e.ratio is None:
        allowed += ", or '<number> * rate' or '<number> * ceiling'"
    ref = text.replace(" ", "").split("*")
    if len(ref) == 2 and ref[1] in REFS:
        if e.ratio is not None:
            raise ExpectationError(f"{where}.value: a ratio compares with a plain number (got {text!r})")
        if unit != "bps":  # a rate: only a rate metric compares with it
            raise ExpectationError(f"{where}.value: {text!r} is a rate (the bottleneck's {ref[1]}), not in the "
                                   f"unit of {e.metric} (allowed: {allowed})")
        return float(ref[0]), ref[1]
    parse = {"bps": lambda s: float(units.parse_rate(s)), "us": lambda s: units.parse_time(s) / 1000.0,
             "%": lambda s: 100.0 * float(units.parse_percent(s))}.get("" if e.ratio is not None else unit)
    try:
        if parse is None:
            raise units.UnitError("", "")
        return parse(text), None
    except units.UnitError:
        raise ExpectationError(f"{where}.value: {text!r} is not in the unit of {e.metric} (allowed: {allowed})"
                               ) from None


def _threshold(e: Expect, c: ConfigResult, where: str) -> float:
    x, ref = _value(e, where)
    if ref is None:
        return x
    run = c.runs[0].run if c.runs else None
    if run is None or not run.bottleneck_bps:
        raise ExpectationError(f"{where}.value: {c.label()} has no run with a bottleneck rate for {e.value!r}")
    return x * run.bottleneck_bps * (payload_ceiling(run) if ref == "ceiling" else 1.0)


def _stat(c: ConfigResult, key: str, stat: str) -> tuple[Optional[float], Optional[float], Optional[float], int]:
    s = c.stats.get(key)
    if s is None or not s.n:
        return None, None, None, 0
    return getattr(s, stat), s.ci_low, s.ci_high, s.n


def _div(a: Optional[float], b: Optional[float]) -> Optional[float]:
    if a is None or b is None or (a == 0 and b == 0):
        return None
    return a / b if b else float("inf")  # e.g. retransmissions against none


def evaluate(e: Expect, index: int, a: Analysis, study: str, filename: str = "study",
             full: Optional[dict[str, Sequence[str]]] = None) -> list[Outcome]:
    """The outcomes of one expectation on the configurations of ``study``
    (``full``: the study's sweep without a profile; see check_selectors)."""
    where = f"{filename}: expect.{index}"
    configs = [c for c in a.configs if c.study == study]
    keys = list(dict.fromkeys(k for c in configs for k in c.params))
    sweep = {k: list(dict.fromkeys(str(c.params.get(k)) for c in configs)) for k in keys}
    skipped = check_selectors(e, where, sweep, full)
    if skipped is not None:
        return [Outcome(e, index, study, console.NONE, None, None, None, None, 0, "", skipped)]
    short = console.short_names(keys)

    def label(c: ConfigResult, only: Optional[set] = None, skip: set = frozenset()) -> str:
        parts = [f"{short[k]}={c.params[k]}" for k in keys if k in c.params and k not in skip
                 and (only is None or k in only)]
        return (f"[{c.backend}] " if c.backend not in (None, "sim") and only is None else "") + (" ".join(parts) or "–")

    chosen = [c for c in configs if _matches(c, e.where, keys)]
    unit = METRICS[e.metric].unit
    out = []
    if e.ratio is None:
        if not chosen:
            raise ExpectationError(f"{where}.where: matches no configuration of {study}")
        for c in chosen:
            v, lo, hi, n = _stat(c, _stat_key(e, c, where), e.stat)
            out.append(Outcome(e, index, study, label(c), v, lo, hi, _threshold(e, c, where), n, unit))
        return out
    fixed = {resolve_key(n, keys) for n in list(e.ratio.of) + list(e.ratio.to)}
    tops = [c for c in chosen if _matches(c, e.ratio.of, keys)]
    if not tops:
        raise ExpectationError(f"{where}.ratio.of: matches no configuration of {study}"
                               + (" (with the where table)" if e.where else ""))
    for top in tops:
        same = {k: top.params.get(k) for k in keys if k not in fixed}
        bottoms = [c for c in chosen if _matches(c, e.ratio.to, keys) and c.backend == top.backend
                   and all(c.params.get(k) == v for k, v in same.items())]
        if len(bottoms) != 1:
            raise ExpectationError(f"{where}.ratio.to: {'no' if not bottoms else 'more than one'} configuration "
                                   f"to divide {label(top)} by (the same as it but for "
                                   f"{', '.join(sorted(fixed))})")
        bot = bottoms[0]
        v1, lo1, hi1, n1 = _stat(top, _stat_key(e, top, where), e.stat)
        v2, lo2, hi2, n2 = _stat(bot, _stat_key(e, bot, where), e.stat)
        name = f"{label(top, skip=fixed)}: {label(top, only=fixed)} / {label(bot, only=fixed)}"
        out.append(Outcome(e, index, study, name, _div(v1, v2), _div(lo1, hi2), _div(hi1, lo2),
                           _threshold(e, top, where), min(n1, n2), "ratio"))
    return out


def evaluate_all(expects: Sequence[Expect], a: Analysis, study: str, filename: str = "study",
                 full: Optional[dict[str, Sequence[str]]] = None) -> list[Outcome]:
    return [o for i, e in enumerate(expects) for o in evaluate(e, i, a, study, filename, full)]


def full_sweep(source_text: str, filename: str) -> Optional[dict[str, list[str]]]:
    """The sweep of a study text without a profile (key → values as written),
    None if it does not parse (e.g. written by another version)."""
    from ccbench.spec import parse_study

    try:
        return parse_study(source_text, filename=filename, backend="sim").sweep
    except StudyError:
        return None
