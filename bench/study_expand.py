#!/usr/bin/env python3
"""Time before a large study's first run starts (issue 12: "a 10,000-run
study starts in under a second"), in CPU time (time.process_time: the
machine is shared) beside wall time.

    PYTHONPATH=python python3 bench/study_expand.py [--baseline REV] [--repeat N]

Two studies: 10,000 distinct configurations × 1 repetition (rate × delay,
100 × 100) and 1,000 configurations × 10 repetitions. Two measurements:

* expansion: ``parse_study`` (parse, validate, resolve, run ids, the cost
  estimate and limits) and ``Study.runs()``, in this process, best of
  ``--repeat`` (default 3);
* command: ``ccbench run STUDY --out TMP`` in a fresh process until the
  backend is asked for the first run (the run itself is not made): the
  process's CPU time then, which includes the interpreter's start, the
  imports (from cached bytecode, as an installed ccbench has it), the
  expansion and the executor's look at the results directory; best of
  ``--repeat`` (at least 2: the first writes the bytecode), the revisions
  taking turns.

With ``--baseline REV`` the same is measured with the ccbench of git
revision REV (its python/ccbench exported to a temporary directory, in a
child process), in the same run: the ratio baseline / now and whether the
run ids are identical (a digest of all of them) are printed. The last two
lines say PASS or FAIL against the target, under 1 s of CPU for the
10,000-configuration study: its expansion, and its whole command (whose
start-up, the same for any study, the 1,000-configuration study shows).
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


TARGET_S = 1.0
TARGET_CASE = "10000 configs x 1 rep"


def measure(repeat: int) -> dict:
    """{case: [best CPU s, best wall s, runs, digest of the run ids]} of the expansion, with the
    ccbench on sys.path."""
    from ccbench.spec import parse_study

    out = {}
    for name, (a, b, reps) in CASES.items():
        text = study_text(a, b, reps)
        cpu = wall = None
        for _ in range(repeat):
            t, w = time.process_time(), time.perf_counter()
            runs = parse_study(text, filename="expand.toml", backend="sim").runs()
            dt, dw = time.process_time() - t, time.perf_counter() - w
            cpu = dt if cpu is None else min(cpu, dt)
            wall = dw if wall is None else min(wall, dw)
        ids = [r.run_id for r in runs]
        out[name] = [cpu, wall, len(ids), hashlib.sha256(" ".join(ids).encode()).hexdigest()[:16]]
    return out


def first_run(study: str, out_dir: str) -> None:
    """``ccbench run STUDY --out OUT_DIR`` until the first run: print the process's CPU time then."""
    from ccbench.backends.sim import SimBackend

    def first(self, runspec):  # noqa: ANN001
        print(json.dumps(time.process_time()), file=sys.__stdout__, flush=True)
        os._exit(0)

    SimBackend.run = first
    from ccbench.cli import main as cli

    sys.stdout = open(os.devnull, "w")  # the command's own output, not ours
    cli(["run", study, "--out", out_dir])
    sys.exit("the command ended before its first run")


def measure_command(pythonpaths: dict, repeat: int) -> dict:
    """{label: {case: [best CPU s, best wall s]}} of the command until its first run, with each
    ccbench of ``pythonpaths`` (label -> PYTHONPATH), taking turns so that a change in the
    machine's load touches all of them alike."""
    out: dict = {label: {} for label in pythonpaths}
    with tempfile.TemporaryDirectory(prefix="ccbench-expand-") as tmp:
        for name, (a, b, reps) in CASES.items():
            study = Path(tmp) / "expand.toml"
            study.write_text(study_text(a, b, reps))
            for i in range(repeat):
                for j, (label, path) in enumerate(pythonpaths.items()):
                    # Compiled modules cached (as an installed ccbench has them), outside the
                    # repository; the first repetition writes them.
                    env = {**os.environ, "PYTHONPATH": path, "PYTHONPYCACHEPREFIX": f"{tmp}/pycache{j}"}
                    env.pop("PYTHONDONTWRITEBYTECODE", None)
                    w = time.perf_counter()
                    p = subprocess.run([sys.executable, __file__, "--first-run", str(study), f"{tmp}/out{i}-{j}"],
                                       env=env, cwd=tmp, check=True, capture_output=True, text=True)
                    dw = time.perf_counter() - w
                    dt = json.loads(p.stdout)
                    best = out[label].setdefault(name, [dt, dw])
                    best[0], best[1] = min(best[0], dt), min(best[1], dw)
    return out


def export(rev: str, tmp: str) -> str:
    """REV's python/ccbench under ``tmp``; its PYTHONPATH."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "python/ccbench"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
    # The Rust extension is not in git: the current one (expansion does not use it).
    so = REPO / "python" / "ccbench" / "_core.abi3.so"
    if so.exists():
        os.symlink(so, Path(tmp) / "python" / "ccbench" / so.name)
    return str(Path(tmp) / "python")


def expansion_of(pythonpath: str, repeat: int) -> dict:
    """measure() with the ccbench at ``pythonpath``, in a child process."""
    env = {**os.environ, "PYTHONPATH": pythonpath}
    p = subprocess.run([sys.executable, __file__, "--child", "--repeat", str(repeat)], env=env,
                       check=True, capture_output=True, text=True)
    return json.loads(p.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--baseline", metavar="REV", help="also measure git revision REV in the same run")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--first-run", nargs=2, metavar=("STUDY", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.repeat = max(args.repeat, 2) if not args.child else args.repeat
    if args.first_run:
        first_run(*args.first_run)
    if args.child:
        print(json.dumps(measure(args.repeat)))
        return
    with tempfile.TemporaryDirectory(prefix="ccbench-expand-") as tmp:
        paths = {"now": str(REPO / "python")}
        base = None
        if args.baseline:
            paths["base"] = export(args.baseline, tmp)
            base = expansion_of(paths["base"], args.repeat)
        now = measure(args.repeat)
        cmds = measure_command(paths, args.repeat)
    now_cmd, base_cmd = cmds["now"], cmds.get("base")
    print(f"load average {os.getloadavg()[0]:.1f}; best of {args.repeat}; CPU time (wall time)")
    for name, (cpu, wall, n, digest) in now.items():
        line = f"{name}: {n} runs; expansion {cpu:.3f} s CPU ({wall:.3f} s)"
        if base is not None:
            bcpu, bwall, bn, bdigest = base[name]
            same = "identical" if (bn, bdigest) == (n, digest) else "DIFFERENT"
            line += f", {args.baseline}: {bcpu:.3f} s ({bwall:.3f} s), x{bcpu / cpu:.2f} faster now; run ids {same}"
        print(line)
        cpu, wall = now_cmd[name]
        line = f"{name}: command to first run {cpu:.3f} s CPU ({wall:.3f} s)"
        if base_cmd is not None:
            bcpu, bwall = base_cmd[name]
            line += f", {args.baseline}: {bcpu:.3f} s ({bwall:.3f} s), x{bcpu / cpu:.2f} faster now"
        print(line)
    for what, cpu in (("expansion", now[TARGET_CASE][0]), ("command to first run", now_cmd[TARGET_CASE][0])):
        verdict = "PASS" if cpu < TARGET_S else "FAIL"
        print(f"{verdict}: {TARGET_CASE}: {what} {cpu:.3f} s of CPU (target < {TARGET_S:g} s)")


if __name__ == "__main__":
    main()
