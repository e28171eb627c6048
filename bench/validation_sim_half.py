"""The full validation grid's simulator half alone, with as many runs per
scenario as a committed table's simulator column has (its re-checks), for
a machine without that table's kernel runs:

    python3 bench/validation_sim_half.py docs/validation/validation.csv OUT [-j 2]
    python3 bench/merge_validation.py docs/validation/validation.csv OUT/validation-sim.csv NEW.csv
    python3 bench/compare_validation.py docs/validation/validation.csv NEW.csv

The runs are the grid's own (same run ids and seeds as `ccbench validate
--grid full`, this kernel's CONFIG_HZ given to the simulator as validate
gives it), stored in OUT and analysed by `ccbench.validate.comparison`;
OUT/validation-sim.csv is the table's layout with the linux columns empty.
A core that left the simulator unchanged reproduces the table's
simulator medians exactly (session 49 checked it on session 48's core).

With `--path-jitter TIME` and `--return-stalls EVERY,LENGTH` (as
`ccbench validate --sim-path-jitter` and `--sim-return-stalls`: a seeded
uniform delay on the bottleneck and the return link; exponential pauses
of the return link, the ACK path, as `bench/pcap_bursts.py analyse`
measures them) the simulator half runs with that timing noise, outside
the run ids (docs/validation/README.md, session 53).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import pandas as pd

from ccbench import backends
from ccbench.errors import UsageError
from ccbench.executor import execute
from ccbench.validate.comparison import analyse
from ccbench.validate.grid import plan
from ccbench.validate.output import csv_text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", help="a full-grid validation table (its simulator counts per scenario are used)")
    ap.add_argument("out", help="results directory for the simulator runs")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--path-jitter", metavar="TIME", help="seeded jitter on the bottleneck and the return link")
    ap.add_argument("--return-stalls", metavar="EVERY,LENGTH", help="seeded pauses of the return link (the ACK path)")
    args = ap.parse_args()
    table = pd.read_csv(args.table)
    counts = table.drop_duplicates("config_id").set_index("config_id")["sim_n"].astype(int)
    try:
        p = plan("full", sim_path_jitter=args.path_jitter, sim_return_stalls=args.return_stalls)
    except UsageError as e:
        sys.exit(str(e).replace("--sim-path-jitter", "--path-jitter").replace("--sim-return-stalls", "--return-stalls"))
    unknown = set(counts.index) - {r.config_id for r in p.runs("sim")}
    if unknown:
        sys.exit(f"{args.table}: {len(unknown)} scenarios are not the full grid's (config ids such as "
                 f"{sorted(unknown)[0]}); give a table written by `ccbench validate --grid full`")
    more = {cid: n for cid, n in counts.items() if n > p.reps}
    if more:
        # The studies parsed at the largest count; each scenario keeps its own.
        p = dataclasses.replace(p.rechecked(list(more), max(more.values()) - p.reps), recheck=more)
    runs = p.runs("sim")
    out = Path(args.out)
    print(f"{len(runs)} simulator runs -> {out}", file=sys.stderr)
    execute(p.studies["sim"], runs, backends.get("sim"), out, jobs=args.jobs, progress=None, versions_apart=False)
    (out / "validation-sim.csv").write_text(csv_text(analyse(p, out)))
    print(f"written: {out / 'validation-sim.csv'}", file=sys.stderr)


if __name__ == "__main__":
    main()
