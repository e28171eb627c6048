"""Judge a new simulator half against an earlier table's linux half, by the
grid's own rules, and write the merged table (the layout of `validation.csv`):

    python3 bench/merge_validation.py LINUX.csv SIM.csv OUT.csv

LINUX.csv gives the linux columns (e.g. docs/validation/validation-full-s31-wq.csv),
SIM.csv the simulator columns (a grid's simulator half, run without its
kernel half). Each scenario and metric is judged again with
`ccbench.validate.comparison` (`compare_spreads`, `Scenario.verdict`) and the
table written with `ccbench.validate.output.csv_text`, as `ccbench validate`
does; bench/compare_validation.py prints the counts.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd

from ccbench.analysis.stats import Spread
from ccbench.validate.comparison import METRIC, Scenario, Validation, compare_spreads
from ccbench.validate.output import csv_text

PARAMS = ("cca", "flows", "rate", "rtt", "buffer", "loss")


def spread(row: pd.Series, side: str) -> Spread:
    """A side's median, min, max and count as written in the table (the
    runs' values themselves are not in it)."""
    n = row[f"{side}_n"]
    if not n or math.isnan(n):
        return Spread(0, None, None, None, None, [])
    return Spread(int(n), float(row[f"{side}_median"]), None, float(row[f"{side}_min"]), float(row[f"{side}_max"]), [])


def merge(linux: pd.DataFrame, sim: pd.DataFrame) -> list[Scenario]:
    sims = sim.set_index(["scenario", "metric"])
    scenarios = []
    for label, rows in linux.groupby("scenario", sort=False):
        first = rows.iloc[0]
        judged = {}
        for _, r in rows.iterrows():
            s = sims.loc[(label, r.metric)] if (label, r.metric) in sims.index else None
            sim_spread = spread(s, "sim") if s is not None else Spread(0, None, None, None, None, [])
            judged[r.metric] = compare_spreads(METRIC[r.metric], sim_spread, spread(r, "linux"))
        runs = {"linux": {"suspect": int(first.linux_suspect), "failed": int(first.linux_failed)}}
        scenarios.append(Scenario(first.config_id, {p: first[p] for p in PARAMS}, judged, runs, {},
                                  rechecked=bool(first.rechecked)))
    return scenarios


def main(argv: list[str]) -> None:
    if len(argv) != 3:
        sys.exit(__doc__)
    scenarios = merge(pd.read_csv(argv[0], dtype={"flows": str}), pd.read_csv(argv[1], dtype={"flows": str}))
    # csv_text reads only the scenarios of a Validation.
    v = Validation(grid=None, duration_us=0, warmup_us=0, reps=0, scenarios=scenarios, out=Path(argv[2]))
    Path(argv[2]).write_text(csv_text(v))
    print(v.counts())


if __name__ == "__main__":
    main(sys.argv[1:])
