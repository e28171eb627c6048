#!/usr/bin/env python3
"""Has the simulator got slower? Builds the simulator of an earlier commit in
a temporary git worktree and times it against the current tree on the
dumbbell scenarios of bench/sim_speed.py, alternating the two binaries in one
run so machine noise hits both.

    python bench/sim_regression.py [--base REV | --base-bin PATH] [--reps N] [--quick] [--limit 1.05]
                                   [--instructions]

REV defaults to ee1f130, the commit before general topologies (issue 11:
the world on a `netcore::net::Network`, packets carrying route ids). Each
scenario runs `--reps` times on each binary, base and now back to back (in
alternating order); the
figure is the median over the pairs of now/base CPU time (user + system of
the child process: on a machine shared with other work, wall time mostly
measures the others), so a slow spell of the machine hits both sides of a
pair. Median wall times are printed beside it. A scenario fails when that median is
above `--limit` (default 1.05: at most 5% slower); the exit status is 1 when
one fails. `--instructions` counts instructions instead (one run of each
binary under valgrind's cachegrind, ~50x slower: use it with --quick): a
deterministic figure where the machine is too busy for timings to mean much.
To see how noisy the machine is, time the current binary against itself
(`--base-bin target/release/examples/simulate`): an A/A run whose ratios
should all be 1. Aggregate goodput is printed for both: the dumbbell gives the same
bits before and after, so the two must match exactly.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_sim_speed():
    spec = importlib.util.spec_from_file_location("sim_speed", ROOT / "bench" / "sim_speed.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build(tree: Path, target: Path) -> Path:
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    subprocess.run(["cargo", "build", "-q", "--release", "-p", "sim", "--example", "simulate"],
                   cwd=tree, env=env, check=True)
    return target / "release" / "examples" / "simulate"


def run(binary: Path, config: Path) -> tuple[float, float, str]:
    """CPU seconds and wall seconds of one run, and its 'total' line."""
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    out = subprocess.run([str(binary), str(config)], capture_output=True, text=True, check=True).stdout
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    total = next(line for line in out.splitlines() if line.startswith("total")).split("wall")[0].strip()
    return cpu, wall, total


def instructions(binary: Path, config: Path) -> tuple[int, str]:
    """Instructions executed by one run (cachegrind's I refs), and its 'total' line."""
    p = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                        str(binary), str(config)], capture_output=True, text=True, check=True)
    refs = next(line for line in p.stderr.splitlines() if "I   refs:" in line or "I refs:" in line)
    total = next(line for line in p.stdout.splitlines() if line.startswith("total")).split("wall")[0].strip()
    return int(refs.split(":")[1].replace(",", "").strip()), total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="ee1f130")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="3 s scenarios instead of the full ones")
    ap.add_argument("--limit", type=float, default=1.05, help="largest now/base ratio that passes")
    ap.add_argument("--base-bin", type=Path, help="an already built base `simulate` example (skips the worktree)")
    ap.add_argument("--instructions", action="store_true", help="compare instruction counts (valgrind) instead of times")
    a = ap.parse_args()
    ss = load_sim_speed()
    newreno = "newreno"
    scenarios = [
        ss.scenario("headline", 10, "cubic", None, 1e9, 20, 30),
        ss.scenario("vs NewReno", 10, newreno, None, 1e9, 20, 30),
        ss.scenario("single", 1, "cubic", None, 1e8, 20, 30),
        ss.scenario("paced", 10, "bbr", None, 1e9, 20, 30),
        ss.scenario("many flows", 100, "cubic", None, 1e9, 20, 30, qdisc="fq_codel", spread_ms=100),
        ss.scenario("cebinae", 16, newreno, None, 1e8, 50, 60, qdisc="cebinae", buffer_pkts=420,
                    extra=[("cubic", 1)], spread_ms=100),
    ]
    if a.quick:
        scenarios = [dict(sc, duration_s=3) for sc in scenarios]
    failed = []
    with tempfile.TemporaryDirectory(prefix="ccbench-regress-") as tmp:
        tmp = Path(tmp)
        if not a.base_bin:
            subprocess.run(["git", "worktree", "add", "-q", "--detach", str(tmp / "base"), a.base], cwd=ROOT, check=True)
        try:
            base_bin = a.base_bin or build(tmp / "base", tmp / "target-base")
            now_bin = build(ROOT, ROOT / "target")
            base_name = a.base_bin or a.base
            if a.instructions:
                print(f"base {base_name} vs working tree: instructions executed (valgrind cachegrind)")
            else:
                print(f"base {base_name} vs working tree, {a.reps} pairs each (base, now back to back); "
                      f"median CPU and wall times, the median of the pairs' CPU-time ratios")
            for sc in scenarios:
                cfg = tmp / "run.json"
                cfg.write_text(json.dumps(ss.sim_config(sc)))
                if a.instructions:
                    (ib, ob), (inow, onow) = instructions(base_bin, cfg), instructions(now_bin, cfg)
                    ok = inow / ib <= a.limit
                    if not ok:
                        failed.append(sc["label"])
                    same = "same goodput" if ob == onow else f"GOODPUT DIFFERS ({ob} | {onow})"
                    print(f"{ss.title(sc):<78} base {ib / 1e9:7.3f} G  now {inow / 1e9:7.3f} G  "
                          f"now/base {inow / ib:6.4f} {'ok' if ok else 'SLOWER'}  {same}")
                    continue
                t = {"base": [], "now": []}
                wall = {"base": [], "now": []}
                out = {}
                for i in range(a.reps):
                    # Alternate which goes first, so an order effect cancels.
                    pair = [("base", base_bin), ("now", now_bin)]
                    for k, b in pair if i % 2 == 0 else pair[::-1]:
                        c, w, out[k] = run(b, cfg)
                        t[k].append(c)
                        wall[k].append(w)
                mb, mn = statistics.median(t["base"]), statistics.median(t["now"])
                wb, wn = statistics.median(wall["base"]), statistics.median(wall["now"])
                ratio = statistics.median(n / b for n, b in zip(t["now"], t["base"]))
                ok = ratio <= a.limit
                if not ok:
                    failed.append(sc["label"])
                same = "same goodput" if out["base"] == out["now"] else f"GOODPUT DIFFERS ({out['base']} | {out['now']})"
                print(f"{ss.title(sc):<78} CPU base {mb:6.3f} s now {mn:6.3f} s  now/base {ratio:5.3f} "
                      f"{'ok' if ok else 'SLOWER'}  (wall {wb:6.3f} / {wn:6.3f} s)  {same}")
        finally:
            if not a.base_bin:
                subprocess.run(["git", "worktree", "remove", "--force", str(tmp / "base")], cwd=ROOT, check=False)
    if failed:
        print(f"slower than {a.limit:g}x base: {', '.join(failed)}")
        return 1
    print(f"every scenario within {a.limit:g}x base")
    return 0


if __name__ == "__main__":
    sys.exit(main())
