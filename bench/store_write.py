#!/usr/bin/env python3
"""What committing one run to the results store costs as the store grows.

    python bench/store_write.py [--sizes 0,1000000,5000000,20000000] [--runs 40]

One real simulator run (10 flows, 20 s, samples every 100 ms: 2,000 sample
rows, 200 queue rows) is committed again and again under fresh run ids
(`Store.write_run`, one transaction each, as the executor commits a finished
run) into a store that already holds SIZE rows in `samples` (copies of that
run's rows under other run ids, as a large study's store holds them). Printed
per size: the median milliseconds of a commit of a new run and of a rerun (a
run id already stored: its old rows are replaced), and each as a ratio to the
empty store's. A new run's commit should not grow with the store; a rerun's
deletes scan the data tables (they have no index), so it does.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ccbench.backends.sim import SimBackend
from ccbench.spec import RunSpec, parse_study
from ccbench.store import Store

STUDY = """
[study]
name = "store-write"
duration = "20s"
sample_interval = "100ms"
[topology]
senders = 1
bottleneck = { rate = "100Mbit", delay = "10ms", buffer = "1bdp" }
[[flows]]
cca = "cubic"
count = 10
"""


def fill(store: Store, rows: int) -> None:
    """Grow `samples` to `rows` rows: copies of the stored run's rows under run ids
    spread like real ones (hex), in one statement."""
    con = store.con
    have = con.execute("SELECT count(*) FROM samples").fetchone()[0]
    per_run = con.execute("SELECT count(*) FROM samples WHERE run_id = 'seed-run'").fetchone()[0]
    if rows <= have:
        return
    copies = (rows - have + per_run - 1) // per_run
    con.execute(
        """INSERT INTO samples SELECT substr(md5(CAST(c.i + ? AS VARCHAR)), 1, 16), s.* EXCLUDE (run_id)
           FROM range(?) c(i), (SELECT * FROM samples WHERE run_id = 'seed-run') s""",
        [have, copies])
    con.execute("CHECKPOINT")


def as_run(rs, run_id: str) -> RunSpec:
    """The run `rs` under another run id."""
    return RunSpec(run_id=run_id, config_id=rs.config_id, params=rs.params, repetition=rs.repetition, seed=rs.seed,
                   config=rs.config, flow_meta=rs.flow_meta)


def timed_writes(store: Store, rs, result, ids: list[str]) -> list[float]:
    out = []
    for rid in ids:
        spec = as_run(rs, rid)
        t0 = time.perf_counter()
        store.write_run(study="store-write", runspec=spec, backend="sim", status="ok", result=result,
                        wall_time_s=0.1, run_index=0)
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="0,1000000,5000000,20000000", help="sample rows already stored")
    ap.add_argument("--runs", type=int, default=40, help="commits timed per size and kind")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    study = parse_study(STUDY)
    rs = study.runs()[0]
    result = SimBackend().run(rs)
    print(f"one run: {len(result.flows)} flows, samples every 100 ms for 20 s")
    with tempfile.TemporaryDirectory() as tmp:
        with Store(Path(tmp) / "res") as store:
            store.record_study("store-write", STUDY, None)
            store.write_run(study="store-write", runspec=as_run(rs, "seed-run"), backend="sim",
                            status="ok", result=result, wall_time_s=0.1, run_index=0)
            base = None
            print(f"{'stored sample rows':>20} {'new run ms':>11} {'ratio':>6} {'rerun ms':>9} {'ratio':>6}")
            for n, size in enumerate(sizes):
                fill(store, size)
                # hex like real run ids, so the tables' min/max per row group cannot rule them out
                new_ids = [hashlib.sha256(f"new-{n}-{i}".encode()).hexdigest()[:16] for i in range(args.runs)]
                new = statistics.median(timed_writes(store, rs, result, new_ids))
                rerun = statistics.median(timed_writes(store, rs, result, new_ids))
                stored = store.con.execute("SELECT count(*) FROM samples").fetchone()[0]
                if base is None:
                    base = (new, rerun)
                print(f"{stored:>20,} {new * 1e3:>11.2f} {new / base[0]:>6.2f} {rerun * 1e3:>9.2f} "
                      f"{rerun / base[1]:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
