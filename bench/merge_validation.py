"""Judge a new simulator half against an earlier table's linux half, by the
grid's rules, and write the merged table (the layout of `validation.csv`):

    python3 bench/merge_validation.py LINUX.csv SIM.csv OUT.csv

LINUX.csv gives the linux columns (e.g. docs/validation/validation-full-s31-wq.csv),
SIM.csv the simulator columns (a grid's simulator half, run without its
kernel half); per scenario and metric the ratio (relative metrics) or the
difference (absolute ones), whether it is within tolerance, whether it
exceeds the two backends' spreads (and 1 %), and per scenario the verdict
from the judged metrics. It reproduces validation-full-s35-sim-vs-s31-linux.csv
from its two halves; bench/compare_validation.py prints the counts.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

SIM_COLUMNS = ["sim_median", "sim_min", "sim_max", "sim_n"]


def merge(linux: pd.DataFrame, sim: pd.DataFrame) -> pd.DataFrame:
    key = ["scenario", "metric"]
    m = linux.drop(columns=SIM_COLUMNS).merge(sim[key + SIM_COLUMNS], on=key, how="left")[linux.columns]
    rel = m.tolerance_kind == "relative"
    m["ratio"] = np.where(rel, m.sim_median / m.linux_median, np.nan)
    m["diff"] = m.sim_median - m.linux_median
    within = np.where(rel, (m.ratio - 1).abs() <= m.tolerance, m["diff"].abs() <= m.tolerance)
    m["within"] = np.where(m.tolerance.isna(), np.nan, within.astype(float))
    spread = (m.sim_max - m.sim_min) + (m.linux_max - m.linux_min)
    beyond_one_percent = np.where(rel, (m.ratio - 1).abs() > 0.01, m["diff"].abs() > 0.01)
    m["exceeds_spread"] = ((m["diff"].abs() > spread) & beyond_one_percent).astype(int)
    judged = m[m.judged == 1].groupby("scenario").within.apply(lambda s: bool((s == 1).all()))
    m["verdict"] = m.scenario.map(lambda s: "agree" if judged[s] else "disagree")
    return m


def main(argv: list[str]) -> None:
    if len(argv) != 3:
        sys.exit(__doc__)
    m = merge(pd.read_csv(argv[0]), pd.read_csv(argv[1]))
    m.to_csv(argv[2], index=False)
    print(m.drop_duplicates("scenario").verdict.value_counts().to_dict())


if __name__ == "__main__":
    main(sys.argv[1:])
