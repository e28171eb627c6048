#!/usr/bin/env python3
"""Has the simulator got slower? Builds the simulator of an earlier commit in
a temporary git worktree and times it against the current tree on the same
scenarios, alternating the two binaries in one run so machine noise hits both.

    python bench/sim_regression.py [--base REV] [--reps N]

REV defaults to 1896302, the foundation issue's simulator (before the
algorithms-and-queues issue). Prints median wall times, the ratio now/base
(above 1.10 is a >10% regression) and both runs' aggregate goodput.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
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


def run(binary: Path, config: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run([str(binary), str(config)], capture_output=True, text=True, check=True).stdout
    total = next(line for line in out.splitlines() if line.startswith("total")).split("wall")[0].strip()
    return time.perf_counter() - t0, total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="1896302")
    ap.add_argument("--reps", type=int, default=9)
    a = ap.parse_args()
    ss = load_sim_speed()
    with tempfile.TemporaryDirectory(prefix="ccbench-regress-") as tmp:
        tmp = Path(tmp)
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(tmp / "base"), a.base], cwd=ROOT, check=True)
        try:
            base_bin = build(tmp / "base", tmp / "target-base")
            now_bin = build(ROOT, ROOT / "target")
            print(f"base {a.base} vs working tree, {a.reps} alternating runs each, median wall time")
            for sc in [ss.scenario("headline", 10, "cubic", None, 1e9, 20, 30),
                       ss.scenario("single", 1, "cubic", None, 1e8, 20, 30),
                       ss.scenario("paced", 10, "bbr", None, 1e9, 20, 30)]:
                new = ss.sim_config(sc)
                old = json.loads(json.dumps(new))
                old["tcp"].pop("hz", None)  # the base predates this field
                (tmp / "new.json").write_text(json.dumps(new))
                (tmp / "old.json").write_text(json.dumps(old))
                t = {"base": [], "now": []}
                out = {}
                for _ in range(a.reps):
                    for k, b, c in [("base", base_bin, tmp / "old.json"), ("now", now_bin, tmp / "new.json")]:
                        w, out[k] = run(b, c)
                        t[k].append(w)
                mb, mn = statistics.median(t["base"]), statistics.median(t["now"])
                print(f"{ss.title(sc):<66} base {mb:6.3f} s  now {mn:6.3f} s  now/base {mn / mb:5.3f}"
                      f"   ({out['base']} | {out['now']})")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tmp / "base")], cwd=ROOT, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
