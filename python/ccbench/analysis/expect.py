"""Evaluating a study's expectations (``[[expect]]``, schema in
ccbench.spec.expect) on its analysed results: a view of the pipeline.

For each configuration an expectation selects, the measured value is the
chosen statistic (median by default) over the repetitions of the metric's
ConfigResult.stats entry; its interval is the 95 % CI of the mean (Student's
t; study.py / stats.py). For a ratio the value is stat(of) / stat(to) and the
interval [ci_low(of) / ci_high(to), ci_high(of) / ci_low(to)] (both sides'
intervals at their extremes). x / 0 with x > 0 is +inf (it fails ``<=``/``<``
and passes ``>=``/``>``); 0 / 0 is undefined and fails, the row saying so
(both sides measured nothing: the expectation is not shown to hold). The
expectation holds when ``value op threshold``; the margin is value − threshold
(negative on the failing side of ``>=``/``>``, positive on the failing side of
``<=``/``<``).

What an expectation selects is judged against the study as its file makes
it (a Plan: the sweep, and per configuration its flow classes and queueing
links), not against the configurations that happen to have results: before
any run (ccbench run), and on stored results (ccbench check) from the stored
study text, so a study still running is not mistaken for a smaller one. A
``where`` (or ``of``/``to``) that names no swept parameter, values none of
which the study has, or that selects no configuration, a ``group`` that is
not a class of flows of a selected configuration, or a ratio whose ``to``
configuration is missing, is an error (ExpectationError, a StudyError): an
expectation never passes by matching nothing. Of a list of values, those
the runs lack are ignored; an expectation whose values are in the study but
all left out by a profile (e.g. ``--quick``) is *skipped*, as is a
configuration with no finished run yet; neither is counted as passed.

A configuration some of whose runs failed is evaluated on the others, and
its outcome carries how many failed (``failed_runs``): ``ccbench check`` then
exits 1 when nothing fails outright (as ``ccbench run`` does when runs fail).
So does one evaluated while some of its runs are still to come
(``pending_runs``: the study is running or was interrupted).
One whose runs all failed has no value and fails.
"""

from __future__ import annotations

import json
import math
import operator
from dataclasses import dataclass, field
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
    failed_runs: int = 0  # runs of the configuration(s) that failed (not in n)
    pending_runs: int = 0  # runs of the configuration(s) the study has not finished yet (still running)
    note: Optional[str] = None  # why the value is missing or infinite (0 / 0, x / 0, no finished run)
    error: Optional[str] = None  # the expectation could not be evaluated (ExpectationError): failed

    @property
    def passed(self) -> bool:
        return self.value is not None and self.threshold is not None and OPS[self.expect.op](self.value,
                                                                                               self.threshold)

    @property
    def failed(self) -> bool:
        return self.skipped is None and not self.passed

    @property
    def status(self) -> str:
        """pass, fail, skipped or error (an error fails too)."""
        return ("skipped" if self.skipped is not None else "error" if self.error is not None
                else "pass" if self.passed else "fail")

    @property
    def margin(self) -> Optional[float]:
        return None if self.value is None or self.threshold is None else self.value - self.threshold

    @property
    def name(self) -> str:
        return self.expect.name or self.expect.describe()

    def as_dict(self) -> dict[str, Any]:
        """JSON-able: an infinite number (a ratio to 0) is null, and ``note`` says what it was."""
        nums = {"value": self.value, "ci_low": self.ci_low, "ci_high": self.ci_high, "margin": self.margin}
        odd = [f"{k} is {v:+}" for k, v in nums.items() if v is not None and not math.isfinite(v)]
        if self.unit == "ratio" and self.value is not None:  # a bound of 0 / 0 (both sides' bounds 0)
            odd += [f"{k} is undefined (0 / 0)" for k in ("ci_low", "ci_high") if nums[k] is None]
        note = "; ".join(x for x in [self.note, *odd] if x) or None
        fin = {k: (v if v is None or math.isfinite(v) else None) for k, v in nums.items()}
        return {"expect": self.index, "name": self.name, "study": self.study, "config": self.label,
                "value": fin["value"], "ci_low": fin["ci_low"], "ci_high": fin["ci_high"], "op": self.expect.op,
                "threshold": self.threshold, "margin": fin["margin"], "n": self.n, "failed_runs": self.failed_runs,
                "pending_runs": self.pending_runs,
                "unit": self.unit, "status": self.status, "passed": self.passed, "skipped": self.skipped,
                "error": self.error, "note": note}


@dataclass
class Planned:
    """A configuration as the study file makes it, known before any run: what an
    expectation selects, and the names its keys take (flow classes, queueing links)."""

    params: dict
    classes: list[str]
    links: list[str]

    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.params.items()) or console.NONE


@dataclass
class Plan:
    """What expectations are judged against: the sweep of the runs (a profile's, if
    one was used), the study's sweep without a profile (``full``; None: unknown),
    the configurations (Planned, or ConfigResult: both have params, classes, links
    and label()), how many runs the study makes (None: unknown), where its
    configurations are not known, how many each makes (``reps``: its repetitions),
    and the profile the runs were made with, where known (None: none or unknown)."""

    sweep: dict[str, list[str]]
    full: Optional[dict[str, list[str]]]
    configs: list = field(default_factory=list)
    runs: Optional[int] = None
    reps: Optional[int] = None
    profile: Optional[str] = None


def planned(runs: Sequence[Any]) -> list[Planned]:
    """One Planned per configuration of a study's runs (spec RunSpecs)."""
    out: dict[str, Planned] = {}
    for r in runs:
        if r.config_id in out:
            continue
        # a link with neither buffer is a pipe (docs/interfaces.md §1): no queue, no samples, no link_* keys
        links = [ln["name"] for ln in (r.config.get("network") or {}).get("links", [])
                 if ln.get("buffer_bytes") is not None or ln.get("buffer_pkts") is not None]
        out[r.config_id] = Planned(dict(r.params), list(dict.fromkeys(m["group"] for m in r.flow_meta)), links)
    return list(out.values())


def study_plan(study: Any, full: Optional[dict[str, list[str]]]) -> Plan:
    """The plan of a loaded study (spec.Study), before its runs."""
    return Plan({k: list(v) for k, v in study.sweep.items()}, full, planned(study.runs()), study.n_runs,
                profile=study.profile)


def stored_plan(source_text: str, filename: str, runs: dict[str, Optional[int]], backend: Optional[str] = None,
                path: Optional[str] = None, profile: tuple[bool, Optional[str]] = (False, None)) -> Optional[Plan]:
    """The plan of a stored study text. ``profile``: (recorded, name) of the
    study's latest run (Store.study_profile); that variant when recorded. A
    store older than that record leaves a guess from ``runs`` (the stored
    runs: run id → its index in the run list it was run from): of the variants
    the file makes (no profile, then each profile), the one whose run list is
    the stored runs (a finished study), else the first that has every stored
    run at its index (a profile reorders the runs it keeps, while a study still
    running has its finished runs where the whole list has them). Where the
    text does not resolve here (a BPF file it names moved, results read on
    another machine) only its declared sweep and repetitions are known: values
    it has that the results lack are then skipped, not refused."""
    from pathlib import Path

    from ccbench.spec import parse_study

    where = Path(path) if path and Path(path).is_file() else None  # relative BPF paths resolve from its directory

    def variant(profile: Optional[str], be: Optional[str]) -> Any:
        return parse_study(source_text, filename=filename, path=where, backend=be, profile=profile, limits=None)

    # the runs' backend gives their run ids; "sim" still gives the sweep where that backend
    # cannot resolve the study (e.g. linux results read on a machine without its CCAs)
    for be in dict.fromkeys((backend, "sim")):
        try:
            base = variant(None, be)
            break
        except StudyError:
            continue
    else:
        declared = declared_sweep(source_text)
        return None if declared is None else Plan({}, declared, reps=declared_repetitions(source_text, profile),
                                                  profile=profile[1])
    full = {k: list(v) for k, v in base.sweep.items()}

    def plan_of(study: Any) -> Plan:
        return study_plan(study, full)

    recorded, chosen = profile
    if recorded and (chosen is None or chosen in base.profiles):
        try:
            return plan_of(base if chosen is None else variant(chosen, be))
        except StudyError:
            pass
    fits = []
    for name in (None, *base.profiles):
        try:
            study = base if name is None else variant(name, be)
        except StudyError:
            continue
        ids = study.run_ids()
        pos = {rid: i for i, rid in enumerate(ids)}
        if all(rid in pos and (i is None or pos[rid] == i) for rid, i in runs.items()):
            if set(ids) == set(runs):  # exactly its runs: this variant, finished
                return plan_of(study)
            fits.append(study)
    return plan_of(fits[0]) if fits else Plan({}, full)


def declared_repetitions(source_text: str, profile: tuple[bool, Optional[str]]) -> Optional[int]:
    """A study text's repetitions as written (its recorded profile's, if that sets
    them), without resolving anything; None where the profile is unknown or the
    text does not read."""
    from ccbench.analysis.settings import read_toml
    from ccbench.spec.overrides import flatten

    recorded, name = profile
    if not recorded:
        return None
    try:
        doc = read_toml(source_text)
        reps = (doc.get("study") or {}).get("repetitions", 1)
        if name is not None:
            reps = dict(flatten((doc.get("profiles") or {}).get(name) or {})).get("study.repetitions", reps)
        return reps if isinstance(reps, int) and not isinstance(reps, bool) and reps > 0 else None
    except Exception:  # noqa: BLE001 - a text that does not read says nothing
        return None


def declared_sweep(source_text: str) -> Optional[dict[str, list[str]]]:
    """The [sweep] table of a study text as written (key → values; a case axis
    'cases.NAME' → its case names), without resolving anything; None if it
    does not read."""
    from ccbench.analysis.settings import read_toml
    from ccbench.spec.cases import case_names, split_sweep
    from ccbench.spec.tree import as_written

    try:
        items, cases, _ = split_sweep(read_toml(source_text).get("sweep"))
        out = {k: [as_written(v) for v in vs] for k, vs in items if isinstance(vs, list)}
        return {**out, **{f"cases.{axis}": names for axis, names in case_names(cases).items()}}
    except Exception:  # noqa: BLE001 - a text that does not read has no sweep to offer
        return None


def _pkey(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def _with_results(plan: Optional[Plan], results: Sequence[ConfigResult]) -> Plan:
    """``plan`` plus the configurations of ``results`` it lacks (all of them without a plan)."""
    if plan is None:
        plan = Plan({}, None)
    known = {_pkey(c.params) for c in plan.configs}
    extra = list({_pkey(c.params): c for c in results if _pkey(c.params) not in known}.values())
    if not extra:
        return plan
    sweep = {k: list(v) for k, v in plan.sweep.items()}
    for c in extra:
        for k, v in c.params.items():
            vs = sweep.setdefault(k, [])
            if str(v) not in vs:
                vs.append(str(v))
    return Plan(sweep, plan.full, list(plan.configs) + extra, plan.runs, plan.reps)


def resolve_key(name: str, keys: Sequence[str], where: str = "") -> Optional[str]:
    """A swept key by full path, unique dotted suffix or case axis name, as
    ``plot --x`` takes it (sweeps.resolve_param); None if it names none."""
    try:
        return resolve_param(name, keys, where)
    except UsageError as e:  # ambiguous
        raise ExpectationError(str(e)) from None


def check_selectors(e: Expect, where: str, sweep: dict[str, Sequence[str]],
                    full: Optional[dict[str, Sequence[str]]] = None, profile: Optional[str] = None) -> Optional[str]:
    """The metric is known, every key of e.where / e.ratio names a swept
    parameter and, of each, one of the values is in ``sweep`` (key → values as
    written; values it lacks are ignored, so that a list may name values a
    profile leaves out). ``where`` names the expectation in messages.

    A selection whose values are all missing from ``sweep`` but are in
    ``full`` (the study's sweep without a profile) cannot be evaluated on
    these results (``profile``: the one that left them out, if known): the reason is returned (the expectation is *skipped*, and
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
    for field_, table in tables:
        for name, values in table.items():
            key = resolve_key(name, keys, f"{where}.{field_}:")
            if key is None:
                raise ExpectationError(f"{where}.{field_}: '{name}' is not a swept parameter of the study "
                                       f"(swept: {', '.join(keys) or 'nothing'})")
            known = [str(v) for v in sweep[key]]
            if any(v in known for v in values):
                continue
            wanted = " or ".join(repr(v) for v in values)
            if full is not None and any(v in [str(x) for x in full.get(key, ())] for v in values):
                by = f"the profile '{profile}'" if profile else "a profile"
                return f"{key} = {wanted} is in the study but not in these results ({by} left it out)"
            raise ExpectationError(f"{where}.{field_}.{name}: the study has no configuration with "
                                   f"{key} = {wanted} (allowed: {', '.join(known)})")
    return None


def _matches(c: Any, table: dict, keys: Sequence[str]) -> bool:
    return all(str(c.params.get(resolve_key(n, keys))) in vs for n, vs in table.items())


def _table(t: dict) -> str:
    """A where/of/to table as written in the study file, e.g. { loss = "1%" }."""
    return "{ " + ", ".join(f"{k} = " + (json.dumps(v[0]) if len(v) == 1 else json.dumps(v)) for k, v in t.items()) + " }"


def _stat_key(e: Expect, c: Any, where: str) -> str:
    m = METRICS[e.metric]
    if m.level == "run":
        return m.key()
    if m.level == "link":
        if e.link not in c.links:
            raise ExpectationError(f"{where}.link: {c.label()} has no queueing link of that name (got {e.link!r}; "
                                   f"allowed: {', '.join(c.links) or 'none: the dumbbell has the run-level keys'})")
        return m.key(e.link)
    classes = c.classes
    if e.group is not None:
        if e.group not in classes:
            raise ExpectationError(f"{where}.group: {c.label()} has no flows of that class (got {e.group!r}; "
                                   f"allowed: {', '.join(classes)})")
        return m.key(e.group)
    return m.key(classes[0] if len(classes) == 1 else ALL_FLOWS)


def select(e: Expect, where: str, configs: Sequence[Any], keys: Sequence[str]) -> list[tuple[Any, Any]]:
    """The configurations ``e`` is evaluated on: (config, None), or (of, to) for a
    ratio; ExpectationError when it selects none, names a class or link one of
    them lacks, or a ratio's ``to`` is missing."""
    chosen = [c for c in configs if _matches(c, e.where, keys)]
    if e.group is not None and not any(e.group in c.classes for c in configs):
        every = dict.fromkeys(g for c in configs for g in c.classes)
        raise ExpectationError(f"{where}.group: no flows of that class in the study (got {e.group!r}; "
                               f"allowed: {', '.join(every) or 'the flows group labels'})")
    if not chosen:
        raise ExpectationError(f"{where}.where: matches no configuration of the study (got {_table(e.where)})")

    def check(c: Any) -> None:
        if c.classes:  # a configuration all of whose runs failed has nothing to check
            _stat_key(e, c, where)

    if e.ratio is None:
        for c in chosen:
            check(c)
        return [(c, None) for c in chosen]
    fixed = {resolve_key(n, keys) for n in list(e.ratio.of) + list(e.ratio.to)}
    tops = [c for c in chosen if _matches(c, e.ratio.of, keys)]
    if not tops:
        if any(_matches(c, e.ratio.of, keys) for c in configs):
            raise ExpectationError(f"{where}.where: leaves out every configuration of ratio.of {_table(e.ratio.of)} "
                                   f"(got {_table(e.where)}; allowed: a where that keeps them, e.g. without "
                                   f"{', '.join(sorted(fixed))})")
        raise ExpectationError(f"{where}.ratio.of: matches no configuration of the study (got {_table(e.ratio.of)})")
    pairs = []
    for top in tops:
        same = {k: top.params.get(k) for k in keys if k not in fixed}

        def twins(pool: Sequence[Any]) -> list:
            return [c for c in pool if _matches(c, e.ratio.to, keys)
                    and all(c.params.get(k) == v for k, v in same.items())]

        bottoms = twins(chosen)
        if len(bottoms) != 1:
            if not bottoms and twins(configs):
                raise ExpectationError(f"{where}.where: leaves out {twins(configs)[0].label()}, which ratio.to "
                                       f"divides {top.label()} by (got {_table(e.where)}; allowed: a where that "
                                       f"keeps the ratio's of and to configurations, e.g. without "
                                       f"{', '.join(sorted(fixed))})")
            raise ExpectationError(f"{where}.ratio.to: {'no' if not bottoms else 'more than one'} configuration "
                                   f"to divide {top.label()} by (got {_table(e.ratio.to)}; allowed: values that "
                                   f"give one configuration the same as it but for {', '.join(sorted(fixed))})")
        check(top)
        check(bottoms[0])
        pairs.append((top, bottoms[0]))
    return pairs


def check_plan(expects: Sequence[Expect], plan: Plan, filename: str) -> None:
    """Before any run: every expectation selects what it names in the study's own
    configurations (its group and link in each, a ratio's to); ExpectationError otherwise."""
    keys = list(plan.sweep)
    for i, e in enumerate(expects):
        where = f"{filename}: expect.{i}"
        if check_selectors(e, where, plan.sweep, plan.full, plan.profile) is None:
            select(e, where, plan.configs, keys)


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


def _threshold(e: Expect, c: ConfigResult, where: str) -> Optional[float]:
    x, ref = _value(e, where)
    if ref is None:
        return x
    if not c.runs:  # every run failed: nothing to take the rate from, and nothing to compare
        return None
    run = c.runs[0].run
    if not run.bottleneck_bps:
        raise ExpectationError(f"{where}.value: {c.label()} has no run with a bottleneck rate for {e.value!r}")
    return x * run.bottleneck_bps * (payload_ceiling(run) if ref == "ceiling" else 1.0)


def _stat(e: Expect, c: ConfigResult, where: str) -> tuple[Optional[float], Optional[float], Optional[float], int,
                                                             Optional[str]]:
    """(value, ci_low, ci_high, n, why the value is missing)."""
    if not c.runs:
        return None, None, None, 0, f"no finished run ({c.failed} failed)"
    key = _stat_key(e, c, where)
    s = c.stats.get(key)
    if s is None or not s.n:
        return None, None, None, 0, f"no value of {key} in its runs"
    return getattr(s, e.stat), s.ci_low, s.ci_high, s.n, None


def _div(a: Optional[float], b: Optional[float]) -> Optional[float]:
    """a / b, +inf for x / 0 (e.g. retransmissions against none), None for 0 / 0 (undefined)."""
    if a is None or b is None or (a == 0 and b == 0):
        return None
    return a / b if b else math.copysign(math.inf, a)


def evaluate(e: Expect, index: int, a: Analysis, study: str, filename: str = "study",
             plan: Optional[Plan] = None) -> list[Outcome]:
    """The outcomes of one expectation on the configurations of ``study``: those
    ``plan`` (the study's own, see study_plan / stored_plan; without one, those
    with results) says it selects, each skipped while it has no finished run."""
    where = f"{filename}: expect.{index}"
    results = [c for c in a.configs if c.study == study]
    plan = _with_results(plan, results)
    skipped = check_selectors(e, where, plan.sweep, plan.full, plan.profile)
    if skipped is not None:
        return [Outcome(e, index, study, console.NONE, None, None, None, None, 0, "", skipped)]
    keys = list(plan.sweep)
    short = console.short_names(keys)
    pairs = select(e, where, plan.configs, keys)
    found: dict[str, list[ConfigResult]] = {}  # params → the results of each backend
    for c in results:
        found.setdefault(_pkey(c.params), []).append(c)
    done = sum(c.reps + c.failed for c in results)
    pending = ("no finished run yet: the study is still running or was interrupted ("
               + (f"{done} of its {plan.runs} runs done)" if plan.runs else f"{done} runs done)"))
    # every configuration of a study makes the same number of runs (its repetitions)
    planned_n = [c for c in plan.configs if isinstance(c, Planned)]
    each = plan.runs // len(planned_n) if plan.runs and planned_n else plan.reps

    def to_come(*cs: ConfigResult) -> int:
        return sum(max(0, each - c.reps - c.failed) for c in cs) if each else 0

    def label(c: Any, backend: Optional[str] = None, only: Optional[set] = None, skip: set = frozenset()) -> str:
        parts = [f"{short[k]}={c.params[k]}" for k in keys if k in c.params and k not in skip
                 and (only is None or k in only)]
        return (f"[{backend}] " if backend not in (None, "sim") and only is None else "") + (" ".join(parts) or "–")

    unit = METRICS[e.metric].unit
    out = []
    if e.ratio is None:
        for p, _ in pairs:
            for c in found.get(_pkey(p.params)) or [None]:
                if c is None:
                    out.append(Outcome(e, index, study, label(p), None, None, None, None, 0, unit, pending,
                                       pending_runs=each or 1))
                    continue
                v, lo, hi, n, why = _stat(e, c, where)
                out.append(Outcome(e, index, study, label(c, c.backend), v, lo, hi, _threshold(e, c, where), n,
                                   unit, failed_runs=c.failed, pending_runs=to_come(c), note=why))
        return out
    fixed = {resolve_key(n, keys) for n in list(e.ratio.of) + list(e.ratio.to)}
    for ptop, pbot in pairs:
        for top in found.get(_pkey(ptop.params)) or [None]:
            backend = top.backend if top is not None else None
            bot = next((c for c in found.get(_pkey(pbot.params), []) if c.backend == backend), None)
            name = f"{label(ptop, backend, skip=fixed)}: {label(ptop, only=fixed)} / {label(pbot, only=fixed)}"
            if top is None or bot is None:
                out.append(Outcome(e, index, study, name, None, None, None, None, 0, "ratio", pending,
                                   pending_runs=sum(to_come(c) if c is not None else each or 1 for c in (top, bot))))
                continue
            v1, lo1, hi1, n1, why1 = _stat(e, top, where)
            v2, lo2, hi2, n2, why2 = _stat(e, bot, where)
            why = (f"{label(ptop, only=fixed)}: {why1}" if why1 else f"{label(pbot, only=fixed)}: {why2}" if why2
                   else f"0 / 0: both {e.stat}s are 0, the ratio is undefined" if v1 == 0 and v2 == 0
                   else f"x / 0: the {e.stat} of {label(pbot, only=fixed)} is 0" if v2 == 0 else None)
            out.append(Outcome(e, index, study, name, _div(v1, v2), _div(lo1, hi2), _div(hi1, lo2),
                               _threshold(e, top, where), min(n1, n2), "ratio",
                               failed_runs=top.failed + bot.failed, pending_runs=to_come(top, bot), note=why))
    return out


def evaluate_all(expects: Sequence[Expect], a: Analysis, study: str, filename: str = "study",
                 plan: Optional[Plan] = None) -> list[Outcome]:
    """Every expectation's outcomes; one that cannot be evaluated (ExpectationError)
    is a row of its own with the error, and the others are still evaluated."""
    out: list[Outcome] = []
    for i, e in enumerate(expects):
        try:
            out += evaluate(e, i, a, study, filename, plan)
        except ExpectationError as err:
            out.append(Outcome(e, i, study, console.NONE, None, None, None, None, 0, "", error=str(err)))
    return out
