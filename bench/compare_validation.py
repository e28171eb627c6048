"""Judge one validation table's simulator medians against another table's
linux medians (same scenarios, the grid's tolerances: steady goodput ±5 %,
mean RTT ±10 %), e.g. a new simulator against an earlier, idle linux half:

    python3 bench/compare_validation.py docs/validation/validation.csv NEW/validation.csv [OLD/validation.csv]

prints the agreement per algorithm (and with OLD's sim medians beside it)
and every scenario whose verdict or ratios moved.
"""

from __future__ import annotations

import sys

import pandas as pd

TOL = {"goodput_steady": 0.05, "rtt_mean_steady": 0.10}


def medians(path: str, col: str) -> pd.Series:
    d = pd.read_csv(path)
    return d[d.metric.isin(list(TOL))].set_index(["scenario", "metric"])[col]


def main(argv: list[str]) -> None:
    linux = medians(argv[0], "linux_median")
    sims = {name: medians(p, "sim_median") for name, p in zip(("new", "old"), argv[1:3])}
    rows = []
    for sc in sorted({s for s, _ in linux.index}):
        r = {"scenario": sc, "cca": sc.split()[0]}
        for name, sim in sims.items():
            ok = True
            for m, tol in TOL.items():
                ratio = sim[(sc, m)] / linux[(sc, m)]
                r[f"{m.split('_')[0]}_{name}"] = ratio
                ok &= abs(ratio - 1) <= tol
            r[name] = ok
        rows.append(r)
    df = pd.DataFrame(rows)
    print(df.groupby("cca")[list(sims)].sum().to_string())
    print("total", {n: int(df[n].sum()) for n in sims}, "of", len(df))
    if "old" in sims:
        moved = df[(df.new != df.old) | ((df.rtt_new - df.rtt_old).abs() > 0.03) | ((df.goodput_new - df.goodput_old).abs() > 0.02)]
        pd.set_option("display.width", 200)
        print(moved.round(3).to_string(index=False))


if __name__ == "__main__":
    main(sys.argv[1:])
