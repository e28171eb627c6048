"""One-flow BBR against the kernel, with and without simulated host jitter.

    python3 bench/bbr_host_jitter.py RESULTS [--jitter-us 0 100 150 200]

RESULTS is a validation results directory (`ccbench validate --grid full
...`) holding both halves. For each one-flow BBR scenario it prints the
kernel's mean sampled srtt after the warm-up and the median of BBR's
bandwidth estimate over the payload capacity (median over the linux runs),
then the same for the store's simulator configs run again with
`tcp.host_jitter_ns` set to each value (median over the repetitions' configs,
each with its own seed). Nothing is written. docs/sim-model.md, "Host jitter
and BBR's mean RTT", has the table and what it shows.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys

import numpy as np

import ccbench
from ccbench import _core
from ccbench.validate import warmup_us


def srtt_and_estimate(config, time_us, srtt_us, bw_bps):
    """Mean srtt (ms) after the validation's warm-up, and the median bandwidth
    estimate over the payload capacity, of one run's samples."""
    tcp = config["tcp"]
    capacity = config["bottleneck"]["rate_bps"] * tcp["mss"] / (tcp["mss"] + tcp["header_bytes"])
    keep = np.asarray(time_us) >= warmup_us(config["duration_ns"] // 1000)
    return (float(np.mean(np.asarray(srtt_us, dtype=float)[keep])) / 1e3,
            float(np.median(np.asarray(bw_bps, dtype=float)[keep])) / capacity)


def scenarios(results):
    """{(rate, rtt, buffer, loss): {"linux": [(run_id, config)], "sim": [...]}} for one BBR flow."""
    out = {}
    for _, row in results.runs.iterrows():
        config = row.config if isinstance(row.config, dict) else json.loads(row.config)
        if len(config["flows"]) != 1 or config["flows"][0]["cca"] != "bbr":
            continue
        p = row.params if isinstance(row.params, dict) else json.loads(row.params)
        axes = ("topology.bottleneck.rate", "cases.rtt", "topology.bottleneck.buffer", "topology.bottleneck.loss")
        if not all(a in p for a in axes):
            continue  # not a validation grid's run
        key = tuple(p[a] for a in axes)
        out.setdefault(key, {"linux": [], "sim": []})[row.backend].append((row.run_id, config))
    return out


def sim_with_jitter(config, jitter_us):
    config = copy.deepcopy(config)
    if jitter_us:
        config["tcp"]["host_jitter_ns"] = int(jitter_us * 1000)
    s = json.loads(_core.simulate(json.dumps(config)))["samples"]
    return srtt_and_estimate(config, s["time_us"], s["srtt_us"], s["bw_est_bps"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--jitter-us", type=float, nargs="+", default=[0, 100, 150, 200])
    args = ap.parse_args()
    results = ccbench.open(args.results)
    samples = results.samples
    groups = scenarios(results)
    if not groups:
        print(f"{args.results}: no one-flow BBR runs of a validation grid", file=sys.stderr)
        return 2
    print("scenario | kernel srtt ms, estimate/capacity | " + " | ".join(f"sim {j:g} us" for j in args.jitter_us))
    order = sorted(groups, key=lambda k: (k[0], k[1], float(k[2].removesuffix("bdp")), k[3]))
    for key in order:
        cells = []
        kernel = []
        for run_id, config in groups[key]["linux"]:
            s = samples[samples.run_id == run_id].sort_values("time_us")
            kernel.append(srtt_and_estimate(config, s.time_us, s.srtt_us, s.bw_est_bps))
        cells.append(f"{statistics.median(k[0] for k in kernel):.2f}, {statistics.median(k[1] for k in kernel):.4f}"
                     if kernel else "-")
        for j in args.jitter_us:
            sim = [sim_with_jitter(c, j) for _, c in groups[key]["sim"]]
            cells.append(f"{statistics.median(x[0] for x in sim):.2f}, {statistics.median(x[1] for x in sim):.4f}")
        print(" ".join(key), "|", " | ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
