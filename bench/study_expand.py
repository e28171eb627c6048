#!/usr/bin/env python3
"""CPU time to expand a large study into its runs (parse, validate, resolve,
run ids): the time before a study's first run starts (issue 12: "a 10,000-run
study starts in under a second").

    PYTHONPATH=python python3 bench/study_expand.py [--baseline REV] [--repeat N]

Two studies: 10,000 distinct configurations × 1 repetition (rate × delay,
100 × 100) and 1,000 configurations × 10 repetitions. Each is parsed
``--repeat`` times (default 3) and the best CPU time (time.process_time)
kept. With ``--baseline REV`` the same studies are also expanded by the
ccbench of git revision REV (its python/ccbench exported to a temporary
directory, in a child process), in the same run: the ratio baseline / now
and whether the run ids are identical (a digest of all of them) are printed.
Target: the 10,000-configuration study under 1 s.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def study_text(n_rates: int, n_delays: int, reps: int) -> str:
    rates = ", ".join(f'"{10 + i}Mbit"' for i in range(n_rates))
    delays = ", ".join(f'"{1 + i}ms"' for i in range(n_delays))
    return f"""
[study]
name = "expand"
duration = "10s"
repetitions = {reps}
[topology]
bottleneck = {{ rate = "100Mbit", delay = "10ms", buffer = "1bdp" }}
[[flows]]
cca = "cubic"
[[flows]]
cca = "bbr"
start = "1s"
[sweep]
"topology.bottleneck.rate" = [{rates}]
"topology.bottleneck.delay" = [{delays}]
"""


CASES = {"10000 configs x 1 rep": (100, 100, 1), "1000 configs x 10 reps": (10, 100, 10)}


def measure(repeat: int) -> dict:
    """{case: [best CPU seconds, number of runs, digest of the run ids]} with the ccbench on sys.path."""
    from ccbench.spec import parse_study

    out = {}
    for name, (a, b, reps) in CASES.items():
        text = study_text(a, b, reps)
        best = None
        for _ in range(repeat):
            t = time.process_time()
            ids = parse_study(text, filename="expand.toml", backend="sim").run_ids()
            dt = time.process_time() - t
            best = dt if best is None else min(best, dt)
        out[name] = [best, len(ids), hashlib.sha256(" ".join(ids).encode()).hexdigest()[:16]]
    return out


def baseline(rev: str, repeat: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="ccbench-expand-") as tmp:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "python/ccbench"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        # The Rust extension is not in git: the current one (expansion does not use it).
        so = REPO / "python" / "ccbench" / "_core.abi3.so"
        if so.exists():
            os.symlink(so, Path(tmp) / "python" / "ccbench" / so.name)
        env = {**os.environ, "PYTHONPATH": str(Path(tmp) / "python")}
        p = subprocess.run([sys.executable, __file__, "--child", "--repeat", str(repeat)], env=env,
                           check=True, capture_output=True, text=True)
        return json.loads(p.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", metavar="REV", help="also measure git revision REV in the same run")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.repeat)))
        return
    base = baseline(args.baseline, args.repeat) if args.baseline else None
    now = measure(args.repeat)
    print(f"load average {os.getloadavg()[0]:.1f}; best of {args.repeat} CPU times")
    for name, (cpu, n, digest) in now.items():
        line = f"{name}: {n} runs, {cpu:.3f} s CPU"
        if base is not None:
            bcpu, bn, bdigest = base[name]
            same = "identical" if (bn, bdigest) == (n, digest) else "DIFFERENT"
            line += f"; {args.baseline}: {bcpu:.3f} s (x{bcpu / cpu:.2f} faster now); run ids {same}"
        print(line)


if __name__ == "__main__":
    main()
