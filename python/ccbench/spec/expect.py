"""Expectations: what must hold in a study's results (``[[expect]]``).

An expectation turns a study into a test, e.g. of a kernel or CCA change::

    [[expect]]
    name = "BBR keeps 90 % of its goodput at 1 % loss"    # optional, shown in the table
    where = { cca = "bbr" }                   # which configurations (optional: all)
    metric = "goodput"                        # a name of ccbench.analysis.metrics.METRICS
    ratio = { of = { loss = "1%" }, to = { loss = "0%" } }   # optional: a ratio of two configurations
    stat = "median"                           # median (default), mean, min or max over repetitions
    op = ">="                                 # >=, >, <=, <
    value = 0.9                               # a number; without ratio also "0.9 * ceiling", "50Mbit", "20ms"

``where``, ``of`` and ``to`` map a swept parameter — its full dotted path
(``topology.bottleneck.loss``), a unique suffix of it (``loss``, ``cca``) or
a case axis (``mix`` for ``cases.mix``) — to a value as written in the sweep
or a list of such values (a number or boolean compares as the sweep writes
it: ``sack = true`` matches a swept ``true``). Without ``ratio`` the expectation is checked in
every configuration ``where`` selects; with it, each configuration matching
``where`` and ``of`` is divided by the one matching ``where`` and ``to`` that
has the same values of every other swept parameter. ``group`` picks a class
of flows for per-class metrics (default: the only class, or all flows
together; the study file's flows ``group`` label); ``link`` picks the link
(a directed name such as "l1" or "l1/back") of the link_* metrics, which
need one; it must queue (a pipe, a host's link without a buffer or qdisc,
is not sampled: :func:`check_links`). In ``value``, ``rate`` is the bottleneck rate and ``ceiling`` the
most payload it carries (rate × mss / (mss + header bytes)): both only for rate metrics, and
only in a dumbbell (a general topology has no bottleneck: :func:`check_refs`; a quantity must
be in the metric's unit; ccbench.analysis.expect checks it before any run). A
number must be finite. A metric only flows of one kind give (``rpc_p99``: kind = "rpc") is
an error in a study none of whose configurations has such a flow.

This module is the schema (checked with the rest of the study file, so a
malformed expectation is a study error before any run);
ccbench.analysis.expect evaluates expectations on results.
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, StrictStr
from pydantic_core import PydanticCustomError
from typing_extensions import Annotated

from ccbench.errors import StudyError

from .tree import as_written

OPS = (">=", ">", "<=", "<")
# Metrics measured on flows of one kind only (ccbench.analysis.metrics: the rpc_* class metrics);
# tests/test_expect.py checks that this names every such metric.
KIND_OF = {"rpc_p50": "rpc", "rpc_p99": "rpc", "rpc_p999": "rpc"}
STATS = ("median", "mean", "min", "max")
REFS = ("rate", "ceiling")
VALUE_ALLOWED = ("a number, '<number> * rate' or '<number> * ceiling' (the bottleneck's rate or payload "
                 "ceiling), or a quantity in the metric's unit such as '50Mbit' or '20ms'")
SELECT_ALLOWED = ("a table of swept parameters (full dotted path or a unique suffix such as 'cca' or 'loss') "
                  "to a value as written in the sweep, or a list of values")
_REF = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*\*\s*([a-z]+)\s*$")


def _error(problem: str, allowed: str) -> PydanticCustomError:
    # rendered by ccbench.spec.load like a unit error: "<problem> (got ...; allowed: ...)"
    return PydanticCustomError("ccbench_unit", "{problem}", {"problem": problem, "allowed": allowed})


def _value(value: Any) -> Union[float, str]:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _error("must be a number or a string", VALUE_ALLOWED)
    if isinstance(value, (int, float)):
        # nan fails every comparison and inf passes or fails every one: neither tests anything
        if not math.isfinite(value):
            raise _error("must be a finite number", VALUE_ALLOWED)
        return float(value)
    m = _REF.match(value)
    if m:
        if m.group(2) not in REFS:
            raise _error(f"unknown reference '{m.group(2)}'", VALUE_ALLOWED)
        if not math.isfinite(float(m.group(1))):
            raise _error("must be a finite number", VALUE_ALLOWED)
        return value
    try:  # a quoted plain number ("0.9") is that number
        x = float(value)
    except ValueError:
        x = None
    if x is not None:
        if not math.isfinite(x):
            raise _error("must be a finite number", VALUE_ALLOWED)
        return x
    from ccbench.spec import units

    for parse in (units.parse_rate, units.parse_time, units.parse_percent):
        try:
            parse(value)
            return value
        except units.UnitError:
            continue
    raise _error("not a number, a reference or a quantity", VALUE_ALLOWED)


def _select(value: Any) -> dict:
    if not isinstance(value, dict):
        raise _error("must be a table", SELECT_ALLOWED)
    out = {}
    for k, v in value.items():
        vs = v if isinstance(v, list) else [v]
        if not vs or any(isinstance(x, (dict, list)) or not isinstance(x, (str, int, float)) for x in vs):
            raise _error(f"'{k}': must be a value or a non-empty list of values", SELECT_ALLOWED)
        # as the sweep's labels write them, so that true matches a swept true ("true"), 1448 a swept 1448
        out[str(k)] = [as_written(x) for x in vs]
    return out


Select = Annotated[Dict[str, List[str]], PlainValidator(_select)]


class _Model(BaseModel):
    # Built on first use: most studies have no [[expect]], and building the schemas at import
    # would cost every command's start-up.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Ratio(_Model):
    of: Select = Field(..., description=SELECT_ALLOWED)
    to: Select = Field(..., description=SELECT_ALLOWED)


class Expect(_Model):
    name: Optional[StrictStr] = Field(None, description="free text, shown in the table of results")
    where: Select = Field({}, description=SELECT_ALLOWED)
    # the name is checked against ccbench.analysis.metrics.METRICS with the sweep
    # (ccbench.analysis.expect.check): the schema does not depend on the analysis
    metric: StrictStr = Field(..., description="a metric name such as 'goodput'")
    group: Optional[StrictStr] = Field(None, description="a class of flows (the flows' group label), for "
                                                         "per-class metrics")
    link: Optional[StrictStr] = Field(None, description="a directed link name of a general topology, for the "
                                                        "link_* metrics")
    stat: Literal["median", "mean", "min", "max"] = Field("median", description="median, mean, min or max")
    op: Literal[">=", ">", "<=", "<"] = Field(..., description="one of >=, >, <=, <")
    value: Annotated[Union[float, str], PlainValidator(_value)] = Field(..., description=VALUE_ALLOWED)
    ratio: Optional[Ratio] = Field(None, description="a table { of = {...}, to = {...} }")

    def describe(self) -> str:
        """One line, e.g. 'goodput median [loss=1%] / [loss=0%] >= 0.9 where cca=bbr'."""
        def sel(d: dict) -> str:
            return ", ".join(f"{k}={'|'.join(v)}" for k, v in d.items())

        what = f"{self.metric}" + (f"[{self.group or self.link}]" if self.group or self.link else "") + f" {self.stat}"
        if self.ratio is not None:
            what += f" [{sel(self.ratio.of)}] / [{sel(self.ratio.to)}]"
        value = f"{self.value:g}" if isinstance(self.value, float) else self.value
        return f"{what} {self.op} {value}" + (f" where {sel(self.where)}" if self.where else "")


def parse(document: dict, filename: str) -> list[Expect]:
    """The expectations of a study document (already validated with the study
    file; StudyError with file, field, value and what is allowed otherwise)."""
    from pydantic import ValidationError

    raw = document.get("expect") or []
    if not isinstance(raw, list):
        raise StudyError(f"{filename}: expect: must be an array of tables [[expect]] (got {raw!r})")
    out = []
    for i, item in enumerate(raw):
        try:
            out.append(Expect.model_validate(item))
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            ctx = err.get("ctx") or {}
            allowed = ctx.get("allowed") or ctx.get("expected") or ""
            got = err.get("input")
            raise StudyError(f"{filename}: expect.{i}.{where}: {ctx.get('problem') or err['msg']} "
                             f"(got {got!r}" + (f"; allowed: {allowed})" if allowed else ")")) from None
    return out


def check_links(expects: list, queueing: set, pipes: set, filename: str) -> None:
    """An expectation's ``link`` must name a queueing link of the study's topology
    (``queueing``: the directed names that queue in some configuration). A pipe
    (``pipes``: a host's link without a buffer or qdisc, docs/topology.md) has no
    queue and is not sampled, so it has no link_* values."""
    allowed = ("the queueing links: " + ", ".join(sorted(queueing)) if queueing else
               "none: every link is a pipe" if pipes else "none: a dumbbell has the run-level keys")
    for i, e in enumerate(expects):
        if e.link is None or e.link in queueing:
            continue
        problem = (f"{e.link} is a pipe (a host's link without a buffer or a qdisc): it has no queue and is not "
                   "sampled" if e.link in pipes else "no such link in the study's topology")
        raise StudyError(f"{filename}: expect.{i}.link: {problem} (got {e.link!r}; allowed: {allowed})")


def check_refs(expects: list, bottleneck: bool, filename: str) -> None:
    """``rate`` and ``ceiling`` in a value are the bottleneck's: a study with a configuration
    without one (a general topology, ``bottleneck`` False) has nothing to compare with."""
    if bottleneck:
        return
    for i, e in enumerate(expects):
        m = _REF.match(e.value) if isinstance(e.value, str) else None
        if m:
            what = "rate" if m.group(2) == "rate" else "payload ceiling"
            raise StudyError(f"{filename}: expect.{i}.value: '{m.group(2)}' is the bottleneck's {what}, and a "
                             f"general topology has no bottleneck (got {e.value!r}; allowed: a number, or a quantity in "
                             "the metric's unit such as '50Mbit' or '20ms')")


def check_kinds(expects: list, kinds: set, filename: str) -> None:
    """An expectation on a metric that only flows of one kind give (``KIND_OF``) in a study
    none of whose configurations has such a flow (``kinds``) could never hold: a StudyError."""
    for i, e in enumerate(expects):
        kind = KIND_OF.get(e.metric)
        if kind is not None and kind not in kinds:
            raise StudyError(f"{filename}: expect.{i}.metric: {e.metric} is measured on kind = '{kind}' flows, and "
                             f"no configuration of the study has one (got {e.metric!r}; allowed: a metric of "
                             f"{' and '.join(sorted(kinds))} flows, or a kind = '{kind}' flow in [[flows]])")
