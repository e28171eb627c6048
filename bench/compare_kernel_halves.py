"""Two validation tables' kernel halves, scenario by scenario: how far the
kernel's medians moved between two batches of runs (another kernel build, VM
or day), and how the first table's simulator medians sit against its kernel's.

    python3 bench/compare_kernel_halves.py NEW/validation.csv OLD/validation.csv [--cca cubic]

Prints, per CCA and metric, the ratio of NEW's kernel median to OLD's over the
scenarios (min, p10, median, p90, max) and the same for the simulator medians
('identical' when the simulator half is the same); then, per table, the judged
metrics' simulator/kernel ratios, Jain's index within 0.05 in the multi-flow
scenarios, timeouts summed over the scenarios' medians, and the verdicts.
"""

from __future__ import annotations

import argparse
import math

import pandas as pd


def spread(values: pd.Series) -> str:
    v = values[values.map(math.isfinite)]
    if v.empty:
        return "–"
    if (v == 1).all():
        return "identical"
    q = v.quantile([0, 0.1, 0.5, 0.9, 1]).tolist()
    return f"{q[0]:.3f} (p10 {q[1]:.3f}, median {q[2]:.3f}, p90 {q[3]:.3f}) {q[4]:.3f}"


def judged(d: pd.DataFrame, label: str) -> None:
    for m in ("goodput_steady", "rtt_mean_steady"):
        x = d[d.metric == m]
        print(f"  {label} {m}: sim/kernel {x.ratio.min():.3f}–{x.ratio.max():.3f}, "
              f"outside the tolerance {int((x.within == 0).sum())}")
    j = d[(d.metric == "jfi_steady") & (d.flows > 1)]
    near = int((j.within == 1).sum())  # the table's own tolerance for the index (±0.05)
    t = d[d.metric == "timeouts"]
    r = d[d.metric == "retrans_pct"]
    diff = r.sim_median - r.linux_median
    verdicts = d[d.metric == "goodput_steady"].verdict.value_counts().to_dict()
    print(f"  {label} Jain's index within 0.05: {near} of {len(j)}; timeouts summed: kernel "
          f"{t.linux_median.sum():g}, sim {t.sim_median.sum():g}; retransmissions sim − kernel "
          f"{diff.min():+.2f} to {diff.max():+.2f} points; verdicts {verdicts}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("new")
    ap.add_argument("old")
    ap.add_argument("--cca", action="append", help="only these algorithms (default: every one in NEW)")
    args = ap.parse_args()
    new, old = pd.read_csv(args.new), pd.read_csv(args.old)
    for cca in args.cca or sorted(new.cca.unique()):
        a = new[new.cca == cca].set_index(["scenario", "metric"])
        b = old[old.cca == cca].set_index(["scenario", "metric"])
        if a.empty or b.empty:
            print(f"{cca}: not in both tables")
            continue
        j = a.merge(b, left_index=True, right_index=True, suffixes=("_new", "_old"))
        print(f"{cca}: {len(set(j.index.get_level_values(0)))} scenarios in both")
        for m in sorted(set(j.index.get_level_values(1))):
            x = j.xs(m, level=1)
            print(f"  {m:24s} kernel new/old {spread(x.linux_median_new / x.linux_median_old)}; "
                  f"sim new/old {spread(x.sim_median_new / x.sim_median_old)}")
        judged(a.reset_index(), "new")
        judged(b.reset_index(), "old")
        moved = j.xs("goodput_steady", level=1)
        moved = moved[moved.verdict_new != moved.verdict_old]
        for sc, row in moved.iterrows():
            print(f"  verdict moved: {sc}: {row.verdict_old} → {row.verdict_new}")


if __name__ == "__main__":
    main()
