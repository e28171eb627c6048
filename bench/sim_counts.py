#!/usr/bin/env python3
"""Simulator work per bottleneck packet, counted instead of timed.

    python bench/sim_counts.py [--duration S] [--top N] [--binary PATH ...]

Runs the simulator's example binary under valgrind's cachegrind on two of
`bench/sim_speed.py`'s scenarios, the headline (10 CUBIC, one-BDP FIFO)
and "many flows" (100 CUBIC on FQ-CoDel), cut to `--duration` seconds
(default 10), and prints per bottleneck packet: instructions, first-level
data-cache misses (reads + writes, a 32 KB 8-way cache of 64-byte lines
whatever the machine has), the many-flow run's ratio to the headline's,
and the `--top` functions whose counts differ most between the two.

Why: on these shared 2-core VMs one run's wall time spreads by ±15 %, so a
change of a few per cent to the 100-flow target (bench/sim_speed.py) can
not be seen by timing; the instruction counts are the same on every run
of the same binary, and the miss counts within about 0.2 % (they follow
where the allocator puts things). They are not the time: a miss costs more than an instruction, and
the ratio of instructions alone overstates the 100-flow run's speed (see
docs/sim-model.md, "Session 22").

Without `--binary`, builds the example (`cargo build --release -p sim
--example simulate`, with line tables so that functions have names).
With several `--binary`, counts each (for example two commits' builds,
copied aside) and prints them one after the other. Needs valgrind
(Debian: `apt-get install valgrind`). Nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import sim_speed  # noqa: E402  (the scenarios and their configs)

CACHE = ["--I1=32768,8,64", "--D1=32768,8,64", "--LL=1048576,16,64"]


def configs(duration_s: float) -> dict[str, dict]:
    hl = sim_speed.scenario("headline", 10, "cubic", "cubic", 1e9, 20, duration_s)
    many = sim_speed.scenario("many flows", 100, "cubic", "cubic", 1e9, 20, duration_s, qdisc="fq_codel",
                              spread_ms=100)
    return {"headline": sim_speed.sim_config(hl), "many flows": sim_speed.sim_config(many)}


def build() -> Path:
    env = dict(os.environ, CARGO_PROFILE_RELEASE_DEBUG="line-tables-only")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "sim", "--example", "simulate"], cwd=HERE.parent,
                   env=env, check=True)
    return HERE.parent / "target" / "release" / "examples" / "simulate"


def count(binary: Path, cfg: dict, work: Path, tag: str) -> dict:
    """One cachegrind run: bottleneck packets, totals and per-function counts."""
    cfg_path, out_path = work / f"{tag}.json", work / f"{tag}.cg"
    cfg_path.write_text(json.dumps(cfg))
    run = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", *CACHE,
                          f"--cachegrind-out-file={out_path}", str(binary), str(cfg_path)],
                         capture_output=True, text=True)
    m = re.search(r"bottleneck_pkts (\d+)", run.stdout)
    if run.returncode != 0 or not m:
        raise SystemExit(f"sim_counts: {binary} failed on {tag}: {run.stderr.strip()[-400:]}")
    ann = subprocess.run(["cg_annotate", "--show=Ir,D1mr,D1mw", "--show-percs=no", "--auto=no", "--threshold=0.05",
                          str(out_path)], capture_output=True, text=True, check=True).stdout
    total = None
    per_fn: dict[str, list[int]] = {}
    for line in ann.splitlines():
        parts = line.split()
        if len(parts) < 4 or not parts[0][0].isdigit():
            continue
        nums = [int(x.replace(",", "")) if x != "." else 0 for x in parts[:3]]
        name = " ".join(parts[3:])
        if name == "PROGRAM TOTALS":
            total = nums
            continue
        if ":" not in name:  # not a file:function line
            continue
        fn = name.split(":", 1)[-1]
        per_fn[fn] = [a + b for a, b in zip(per_fn.get(fn, [0, 0, 0]), nums)]
    if total is None or not per_fn:
        raise SystemExit(f"sim_counts: could not read cg_annotate's output for {tag}")
    return {"pkts": int(m.group(1)), "total": total, "fn": per_fn}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=10.0, help="simulated seconds per run (default 10)")
    ap.add_argument("--top", type=int, default=12, help="functions to list (default 12)")
    ap.add_argument("--binary", action="append", type=Path, help="an example binary to count (repeatable)")
    args = ap.parse_args()
    if not shutil.which("valgrind") or not shutil.which("cg_annotate"):
        print("sim_counts: needs valgrind and cg_annotate (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    binaries = args.binary or [build()]
    cfgs = configs(args.duration)
    with tempfile.TemporaryDirectory() as tmp:
        for b in binaries:
            # The two scenarios side by side: cachegrind's counts do not
            # depend on what else the machine runs.
            with ThreadPoolExecutor(2) as pool:
                runs = dict(zip(cfgs, pool.map(lambda kv: count(b, kv[1], Path(tmp), kv[0].replace(" ", "_")),
                                              cfgs.items())))
            report(b, runs, args.top)
    return 0


def report(binary: Path, runs: dict, top: int) -> None:
    hl, many = runs["headline"], runs["many flows"]
    print(f"{binary}: per bottleneck packet ({hl['pkts']} and {many['pkts']} packets)")
    per = {k: [x / r["pkts"] for x in r["total"]] for k, r in runs.items()}
    for k, v in per.items():
        print(f"  {k:<11} instructions {v[0]:8.1f}   D1 misses {v[1] + v[2]:6.2f} (read {v[1]:.2f}, write {v[2]:.2f})")
    print(f"  many flows / headline: instructions {per['many flows'][0] / per['headline'][0]:.3f}, "
          f"D1 misses {(per['many flows'][1] + per['many flows'][2]) / (per['headline'][1] + per['headline'][2]):.2f}")

    def pp(r, fn):
        v = r["fn"].get(fn, [0, 0, 0])
        return v[0] / r["pkts"], (v[1] + v[2]) / r["pkts"]

    fns = set(hl["fn"]) | set(many["fn"])
    diff = sorted(fns, key=lambda f: -abs(pp(many, f)[0] - pp(hl, f)[0]))[:top]
    print(f"  {'instructions':>21} {'D1 misses':>15}   function (headline, many flows)")
    for f in diff:
        (ih, mh), (im, mm) = pp(hl, f), pp(many, f)
        print(f"  {ih:9.1f} {im:9.1f}   {mh:6.2f} {mm:6.2f}   {f[:100]}")


if __name__ == "__main__":
    sys.exit(main())
