"""Transfer completion times, both paths' utilisation and the controller's
actions of a noted results directory.

    python3 studies/noted/completion.py results/noted-quick

Per configuration (median over repetitions): each transfer's completion time
(from its start to its last byte), the last transfer's end (its start plus
its completion time: when the site's data set is through), the mean
utilisation of the watched link and of the alternative's first link from
the first transfer's start to the last one's end, and when the controller
acted and released (from the events table).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict

from ccbench.store import Store

ALTERNATIVE = "alt-in"


def summary(results: str, watched: str = "primary", alternative: str = ALTERNATIVE) -> list[dict]:
    with Store.open_existing(results) as store:
        runs = [r for r in store.runs() if r.status in ("ok", "suspect")]
        ids = [r.run_id for r in runs]
        flows = [f for f in store.flows(ids) if f["kind"] == "transfer"]
        util = store.con.execute(
            "SELECT run_id, link, time_us, utilisation FROM queue WHERE list_contains(?, run_id) "
            "AND list_contains(?, link) ORDER BY run_id, link, time_us", [ids, [watched, alternative]]).fetchall()
        events = store.con.execute(
            "SELECT run_id, time_us, state FROM events WHERE list_contains(?, run_id) AND kind = 'controller' "
            "AND flow_id IS NULL ORDER BY run_id, time_us", [ids]).fetchall()
    per_run: dict[str, dict] = {r.run_id: {"transfers": {}, "util": defaultdict(list), "events": []} for r in runs}
    for f in flows:
        per_run[f["run_id"]]["transfers"][f["flow_id"]] = (f["start_us"], f["completion_us"])
    for run_id, link, t, u in util:
        per_run[run_id]["util"][link].append((t, u))
    for run_id, t, state in events:
        per_run[run_id]["events"].append((t, state))
    configs: dict[str, list] = defaultdict(list)
    for r in runs:
        configs[r.config_id].append(r)
    out = []
    for reps in configs.values():
        rows = []
        without = 0  # runs with no transfer at all: nothing finished, nothing unfinished
        for r in reps:
            d = per_run[r.run_id]
            done = [c for _, c in d["transfers"].values()]
            if not done:
                without += 1
                continue
            if None in done:
                rows.append(None)  # a transfer did not finish in this run
                continue
            start = min(s for s, _ in d["transfers"].values())
            end = max(s + c for s, c in d["transfers"].values())
            mean = {link: statistics.fmean(u for t, u in d["util"][link] if start < t <= end) if d["util"][link]
                    else None for link in (watched, alternative)}
            acted = next((t for t, s in d["events"] if s == "action"), None)
            released = next((t for t, s in d["events"] if s == "released" and acted is not None and t > acted), None)
            rows.append({"completion_s": sorted(c / 1e6 for c in done), "end_s": end / 1e6,
                         "watched": mean[watched], "alternative": mean[alternative],
                         "action_s": None if acted is None else acted / 1e6,
                         "released_s": None if released is None else released / 1e6})
        finished = [x for x in rows if x is not None]
        label = " ".join(f"{k}={v}" for k, v in reps[0].params.items())
        counts = {"config": label, "runs": len(reps), "unfinished": len(rows) - len(finished),
                  "without_transfers": without}
        if not finished:
            out.append(counts)
            continue

        def med(key):
            vals = [x[key] for x in finished if x[key] is not None]
            return statistics.median(vals) if vals else None

        out.append({**counts,
                    "completion_s": [statistics.median(c) for c in zip(*(x["completion_s"] for x in finished))],
                    "end_s": med("end_s"), "watched": med("watched"), "alternative": med("alternative"),
                    "action_s": med("action_s"), "released_s": med("released_s")})
    return out


def _s(v, fmt="{:.1f} s") -> str:
    return "-" if v is None else fmt.format(v)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="a results directory, e.g. results/noted")
    args = ap.parse_args(argv)
    for row in summary(args.results):
        print(f"{row['config']}  ({row['runs']} run{'s' if row['runs'] != 1 else ''}"
              + (f", {row['unfinished']} with an unfinished transfer" if row["unfinished"] else "")
              + (f", {row['without_transfers']} without transfers" if row["without_transfers"] else "") + ")")
        if "completion_s" not in row:
            continue
        print("  transfer completion times: " + ", ".join(f"{c:.1f} s" for c in row["completion_s"])
              + f"; all done at {_s(row['end_s'])}")
        print(f"  utilisation while they ran: primary {_s(row['watched'], '{:.0%}')}, "
              f"alternative {_s(row['alternative'], '{:.0%}')}")
        print(f"  controller: action at {_s(row['action_s'])}, released at {_s(row['released_s'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
