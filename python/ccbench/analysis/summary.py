"""The summary table: per configuration, per flow class, over repetitions.

Definitions (all per configuration = runs of one study and backend sharing a
config_id; failed runs are left out, ok and suspect runs count):

- goodput of a class: in each repetition, the mean goodput of the class's
  flows; reported as the median over repetitions, with the min–max over
  repetitions as the spread.
- JFI: Jain's fairness index (Σx)² / (n·Σx²) over the goodput of *all*
  flows of a repetition; median over repetitions.
- retransmissions of a class: in each repetition 100 · Σretrans_segs /
  Σsent_segs over the class's flows; median over repetitions.
- RTT of a class: in each repetition the mean over the class's flows of their
  mean RTT (resp. their p99 RTT); median over repetitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median
from typing import Any, Iterable, Mapping, Sequence


def _get(row: Any, key: str, *default: Any) -> Any:
    if isinstance(row, Mapping):
        return row.get(key, *default) if default else row[key]
    return getattr(row, key, *default)


def jain_index(values: Iterable[float]) -> float | None:
    """Jain's fairness index (Σx)² / (n·Σx²); None for no values or all zero."""
    xs = [float(v) for v in values]
    if not xs:
        return None
    sq = sum(x * x for x in xs)
    if sq == 0.0:
        return None
    return sum(xs) ** 2 / (len(xs) * sq)


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _median(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return median(vals) if vals else None


@dataclass
class ClassSummary:
    group: str
    flows: int  # flows of this class in a run (the most seen in any repetition)
    goodput_bps: float | None  # median over reps of the class's mean per-flow goodput
    goodput_min_bps: float | None  # spread over reps
    goodput_max_bps: float | None
    retrans_pct: float | None
    rtt_mean_us: float | None
    rtt_p99_us: float | None


@dataclass
class ConfigSummary:
    study: str
    backend: str | None
    config_id: str
    params: dict
    reps: int  # runs counted (ok + suspect)
    suspect: int
    failed: int
    jfi: float | None  # median over reps of JFI over all flows
    classes: list[ClassSummary] = field(default_factory=list)


def summarize(runs: Sequence[Any], flows: Sequence[Any]) -> list[ConfigSummary]:
    """Summary rows per (study, backend, configuration), in the order runs are given.

    ``runs`` need study, run_id, config_id, params, status (backend optional:
    the same configuration on sim and linux gives two rows); ``flows`` need
    run_id, flow_id, group_name, goodput_bps, sent_segs, retrans_segs,
    rtt_mean_us, rtt_p99_us (dicts or objects).
    """
    by_run: dict[str, list[Any]] = {}
    for f in flows:
        by_run.setdefault(_get(f, "run_id"), []).append(f)

    configs: dict[tuple[str, str | None, str], dict[str, Any]] = {}
    for r in runs:
        key = (_get(r, "study"), _get(r, "backend", None), _get(r, "config_id"))
        c = configs.setdefault(key, {"params": _get(r, "params") or {}, "runs": [], "suspect": 0, "failed": 0})
        status = _get(r, "status")
        if status == "failed":
            c["failed"] += 1
            continue
        if status == "suspect":
            c["suspect"] += 1
        c["runs"].append(sorted(by_run.get(_get(r, "run_id"), []), key=lambda f: _get(f, "flow_id")))

    out = []
    for (study, backend, config_id), c in configs.items():
        reps: list[list[Any]] = c["runs"]
        groups: list[str] = []
        for rep in reps:
            for f in rep:
                g = _get(f, "group_name")
                if g not in groups:
                    groups.append(g)
        classes = []
        for g in groups:
            goodputs, retrans, rtt_mean, rtt_p99 = [], [], [], []
            nflows = 0
            for rep in reps:
                fs = [f for f in rep if _get(f, "group_name") == g]
                if not fs:
                    continue
                nflows = max(nflows, len(fs))
                goodputs.append(_mean([float(_get(f, "goodput_bps")) for f in fs]))
                sent = sum(int(_get(f, "sent_segs") or 0) for f in fs)
                rtx = sum(int(_get(f, "retrans_segs") or 0) for f in fs)
                retrans.append(100.0 * rtx / sent if sent else None)
                rtt_mean.append(_mean([_get(f, "rtt_mean_us") for f in fs if _get(f, "rtt_mean_us") is not None]))
                rtt_p99.append(_mean([_get(f, "rtt_p99_us") for f in fs if _get(f, "rtt_p99_us") is not None]))
            classes.append(
                ClassSummary(
                    group=g,
                    flows=nflows,
                    goodput_bps=_median(goodputs),
                    goodput_min_bps=min(goodputs) if goodputs else None,
                    goodput_max_bps=max(goodputs) if goodputs else None,
                    retrans_pct=_median(retrans),
                    rtt_mean_us=_median(rtt_mean),
                    rtt_p99_us=_median(rtt_p99),
                )
            )
        jfi = _median(jain_index(float(_get(f, "goodput_bps")) for f in rep) for rep in reps if rep)
        out.append(
            ConfigSummary(
                study=study,
                backend=backend,
                config_id=config_id,
                params=c["params"],
                reps=len(reps),
                suspect=c["suspect"],
                failed=c["failed"],
                jfi=jfi,
                classes=classes,
            )
        )
    return out
