#!/usr/bin/env python3
"""Judge a study's runs on both backends by the validation's rule.

    python3 bench/recheck_verdict.py LINUX_RESULTS SIM_RESULTS [--steady-after 2s]

For two results directories of the same study (e.g. bench/validation-recheck.toml
run with --backend linux and --backend sim), pairs the configurations by
config_id and prints, per configuration, what `ccbench validate` judges:
the steady goodput of all flows (within 5 %) and their mean sampled srtt
(within 10 %), medians over the ok runs (suspect runs left out, as the
validation leaves them out), min–max, the ratios sim / linux and the verdict.
For the linux runs it adds the emulator's lateness per run (late packets,
p99 and maximum), which a run's noise follows (docs/validation/README.md,
"Session 23"). The numbers come from the analysis pipeline (ccbench.api),
with the steady state from --steady-after (default 2 s, the validation's
warm-up for 10 s runs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from ccbench.api import open_results

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cli import METRIC_COLUMNS, judged_group, run, time_us  # noqa: E402  (the bench's shared option and exit handling)

# The validation's judged metrics and tolerances (ccbench.validate.comparison).
JUDGED = {"goodput_steady_sum": 0.05, "srtt_steady": 0.10}


def per_run(path: str, steady_after_us: int) -> tuple[dict, dict, dict]:
    """(config_id -> {metric: [values of ok runs]}, config_id -> label, run_id -> emulator stats)."""
    with open_results(path, steady_after_us=steady_after_us) as r:
        m = r.metrics()
        runs = r.runs
    m = m[(m.status == "ok") & m.metric.isin(list(JUDGED))]
    # One class of flows: its group; several: all flows (as the validation pools them).
    values: dict[str, dict[str, list[float]]] = {}
    labels: dict[str, str] = {}
    param_cols = [c for c in m.columns if c not in METRIC_COLUMNS]
    for cid, g in m.groupby("config_id"):
        g = judged_group(g)
        values[cid] = {k: list(v.value) for k, v in g.groupby("metric")}
        first = g.iloc[0]
        labels[cid] = " ".join(f"{c}={first[c]}" for c in param_cols if first[c] is not None) or cid
    emu = {}
    for _, row in runs.iterrows():
        stats = json.loads(row["stats"]) if isinstance(row.get("stats"), str) else (row.get("stats") or {})
        e = (stats or {}).get("emulator") or {}
        if e:
            emu[row["run_id"]] = (row["config_id"], e.get("late_pkts"), (e.get("lateness_us") or {}).get("p99"),
                                  (e.get("lateness_us") or {}).get("max"))
    return values, labels, emu


def spread(xs: list[float], scale: float) -> str:
    return f"{statistics.median(xs) / scale:.2f} ({min(xs) / scale:.2f}–{max(xs) / scale:.2f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("linux")
    ap.add_argument("sim")
    ap.add_argument("--steady-after", default="2s", type=time_us, help="the warm-up the steady metrics skip (default 2s)")
    args = ap.parse_args()
    after_us = args.steady_after
    lin, labels, emu = per_run(args.linux, after_us)
    sim, sim_labels, _ = per_run(args.sim, after_us)
    # The swept parameters name a configuration where the linux store has them, else the sim store's.
    labels = {c: labels[c] if labels.get(c, c) != c else sim_labels.get(c, c) for c in set(lin) & set(sim)}
    agree = judged = 0
    for cid in sorted(set(lin) & set(sim), key=lambda c: labels[c]):
        l, s = lin[cid], sim[cid]
        if any(not l.get(k) or not s.get(k) for k in JUDGED):
            print(f"{labels[cid]}: no ok runs with both metrics on one side")
            continue
        ratios = {k: statistics.median(s[k]) / statistics.median(l[k]) for k in JUDGED}
        ok = all(abs(ratios[k] - 1) <= tol for k, tol in JUDGED.items())
        judged += 1
        agree += ok
        print(f"{labels[cid]}  ({len(l['srtt_steady'])} linux / {len(s['srtt_steady'])} sim ok runs)")
        print(f"  goodput steady, Mbit/s: linux {spread(l['goodput_steady_sum'], 1e6)}  "
              f"sim {spread(s['goodput_steady_sum'], 1e6)}  ratio {ratios['goodput_steady_sum']:.3f}")
        print(f"  mean srtt steady, ms:   linux {spread(l['srtt_steady'], 1e3)}  "
              f"sim {spread(s['srtt_steady'], 1e3)}  ratio {ratios['srtt_steady']:.3f}")
        late = sorted((v[1:] for v in emu.values() if v[0] == cid), key=lambda x: x[0] or 0)
        if late:
            print("  emulator per linux run (late packets, lateness p99 / max us): "
                  + ", ".join(f"{n} {p99:.0f}/{mx:.0f}" for n, p99, mx in late if p99 is not None))
        print(f"  {'agree' if ok else 'DISAGREE'}")
    print(f"{agree} of {judged} configurations agree")
    return 0


if __name__ == "__main__":
    run(main, "recheck_verdict")
