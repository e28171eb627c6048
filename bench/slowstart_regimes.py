#!/usr/bin/env python3
"""How each run's flows left slow start, beside the run's mean RTT.

    python3 bench/slowstart_regimes.py RESULTS [--at 1.5s] [--steady-after 2s]

For every run of a results directory (either backend), prints its
configuration, the steady mean sampled srtt that the validation judges,
and each flow's congestion window (segments) at `--at` (after slow
start's losses) and at the run's last sample, runs sorted by that mean.
Built for the Reno drop-tail rows of the validation grid
(bench/reno-regimes.toml; docs/validation/README.md, "Session 24"): there
a flow leaves slow start's overshoot with its window halved once or
twice, no loss follows within the run, and the mean RTT takes one level
per combination of those outcomes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ccbench.api import open_results

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cli import METRIC_COLUMNS, judged_group, run, time_us  # noqa: E402  (the bench's shared option and exit handling)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--at", default="1.5s", type=time_us, help="when to read the windows after slow start (default 1.5s)")
    ap.add_argument("--steady-after", default="2s", type=time_us, help="the warm-up the steady mean skips (default 2s)")
    args = ap.parse_args()
    at_us = args.at
    with open_results(args.results, steady_after_us=args.steady_after) as r:
        m = r.metrics()
        samples = r.samples
        configs = dict(zip(r.runs.run_id, r.runs.config))
    m = m[(m.metric == "srtt_steady") & (m.status == "ok")]
    params = [c for c in m.columns if c not in METRIC_COLUMNS]
    rows = []
    for run_id, g in m.groupby("run_id"):
        g = judged_group(g)
        if g.empty:
            continue
        first = g.iloc[0]
        label = " ".join(f"{c}={first[c]}" for c in params if first[c] is not None)
        config = configs[run_id]
        mss = (json.loads(config) if isinstance(config, str) else config)["tcp"]["mss"]
        s = samples[samples.run_id == run_id]

        def segs(frame):
            return " ".join(str(round(b / mss)) for b in frame.cwnd_bytes)

        rows.append((label, first.value / 1000, run_id, segs(s[s.time_us >= at_us].groupby("flow_id").first()),
                     segs(s.groupby("flow_id").last())))
    if not rows:
        print(f"slowstart_regimes: no ok runs with samples in {args.results}", file=sys.stderr)
        return 1
    print(f"{'mean srtt ms':>12}  {f'cwnd at {at_us / 1e6:g} s':<24} {'cwnd at the end':<24} run          configuration")
    for label, srtt, run_id, at, end in sorted(rows):
        print(f"{srtt:12.1f}  {at:<24} {end:<24} {run_id}  {label}")
    return 0


if __name__ == "__main__":
    run(main, "slowstart_regimes")
