"""Each flow's measured goodput beside its max-min fair share.

    python3 studies/parking-lot/fairshares.py results/parking-lot-quick

For every configuration of a results directory (a study's sweep point), one
row per flow: its group, the max-min fair share of its path computed
analytically from the run's network (ccbench.spec.fairshare), the median
goodput over the repetitions, and measured / fair. Works for any study's
results, dumbbell or general topology.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict

from ccbench.spec.fairshare import shares
from ccbench.store import Store


def rows(results: str) -> list[dict]:
    with Store.open_existing(results) as store:
        runs = [r for r in store.runs(with_config=True) if r.status in ("ok", "suspect")]
        flows = store.flows([r.run_id for r in runs])
    by_run = defaultdict(list)
    for f in flows:
        by_run[f["run_id"]].append(f)
    configs: dict[str, list] = defaultdict(list)
    for r in runs:
        configs[r.config_id].append(r)
    out = []
    for reps in configs.values():
        fair = shares(reps[0].config)
        measured = defaultdict(list)
        group = {}
        for r in reps:
            for f in by_run[r.run_id]:
                measured[f["flow_id"]].append(f["goodput_bps"])
                group[f["flow_id"]] = f["group_name"]
        label = " ".join(f"{k}={v}" for k, v in reps[0].params.items())
        for fid in sorted(measured):
            got = statistics.median(measured[fid])
            out.append({"config": label, "flow": fid, "group": group[fid], "fair_bps": fair[fid],
                        "goodput_bps": got, "ratio": got / fair[fid], "runs": len(measured[fid])})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="a results directory, e.g. results/parking-lot")
    args = ap.parse_args(argv)
    table = rows(args.results)
    w = max([len("configuration")] + [len(r["config"]) for r in table])
    g = max([len("group")] + [len(r["group"]) for r in table])
    print(f"{'configuration':<{w}} {'flow':>4}  {'group':<{g}} {'max-min':>12} {'measured':>12} {'ratio':>6}")
    last = None
    for row in table:
        config = row["config"] if row["config"] != last else ""
        last = row["config"]
        print(f"{config:<{w}} {row['flow']:>4}  {row['group']:<{g}} {row['fair_bps'] / 1e6:>7.2f} Mbit/s"
              f" {row['goodput_bps'] / 1e6:>7.2f} Mbit/s {row['ratio']:>6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
