"""The simulator with and without SACK compression over N seeds, paired
(same seed): the mean goodput ratio on/off of one validation-grid
scenario (grid `full`, 10 s), e.g.

    PYTHONPATH=python python3 bench/sack_compression_ab.py 20 flows.0.cca=reno flows.0.count=1 \
        topology.bottleneck.rate=100Mbit cases.rtt=10ms topology.bottleneck.buffer=1bdp topology.bottleneck.loss=1%
"""

import json
import statistics
import sys

from ccbench import _core
from ccbench.validate import grid
plan = grid.plan("full", "10s", 1)
want = dict(x.split("=") for x in sys.argv[2:])
n = int(sys.argv[1])
r = next(r for r in plan.runs("sim") if all(r.params[k] == v for k, v in want.items()))
ratios, on_l, off_l = [], [], []
for seed in range(n):
    g = {}
    for comp in (True, False):
        cfg = json.loads(json.dumps(r.config)); cfg["tcp"]["sack_compression"] = comp; cfg["seed"] = 1000 + seed
        res = json.loads(_core.simulate(json.dumps(cfg)))
        g[comp] = sum(f["goodput_bps"] for f in res["flows"])
    ratios.append(g[True] / g[False]); on_l.append(g[True]); off_l.append(g[False])
m = statistics.mean(ratios); sd = statistics.stdev(ratios)
print(" ".join(f"{k.split('.')[-1]}={v}" for k, v in want.items()), f"n={n} on/off mean {m:.4f} (sd {sd:.4f}, se {sd/n**0.5:.4f}); on {statistics.mean(on_l)/1e6:.3f} off {statistics.mean(off_l)/1e6:.3f} Mbit/s")
