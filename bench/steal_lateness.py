"""Linux runs in a row, each with its steal time and its emulator's lateness:
does the hypervisor explain the late packets? (as root, machine otherwise idle)

    python3 bench/steal_lateness.py [STUDY] [-n 8]

STUDY defaults to one CUBIC flow, 100 Mbit/s, 20 ms, 1 BDP, 10 s. One line
per run: status, late packets (> 1 ms) of all, lateness p99 and max, the
emulator's CPU load and the steal time of each CPU over the run (the
stats' ``steal``, python/ccbench/backends/steal.py); then the rank
correlation of late packets with the steal on the emulator's CPU.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

DEFAULT = """
[study]
name = "steal-lateness"
duration = "10s"
[topology.bottleneck]
rate = "100Mbit"
delay = "10ms"
buffer = "1bdp"
[[flows]]
cca = "cubic"
"""


def ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    for r, i in enumerate(order):
        out[i] = float(r)
    return out


def spearman(xs: list[float], ys: list[float]) -> float:
    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    mx, my = sum(rx) / n, sum(ry) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx) ** 0.5
    vy = sum((b - my) ** 2 for b in ry) ** 0.5
    return cov / (vx * vy) if vx and vy else float("nan")


def main() -> int:
    from ccbench.backends.linux.backend import LinuxBackend
    from ccbench.spec import load_study

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study", nargs="?", help="a study file (its first run is repeated)")
    ap.add_argument("-n", type=int, default=8, help="runs (default 8)")
    args = ap.parse_args()
    if args.study:
        path = Path(args.study)
    else:
        path = Path(tempfile.mkdtemp()) / "steal-lateness.toml"
        path.write_text(textwrap.dedent(DEFAULT))
    run = load_study(path, backend="linux").runs()[0]
    late, stolen = [], []
    print("run status   late/pkts        p99 us   max ms  emu-busy  steal per CPU (emulator's *)")
    for i in range(args.n):
        res = LinuxBackend().run(run)
        st = res.stats
        emu = st.get("emulator") or {}
        lat = emu.get("lateness_us") or {}
        cpu = st.get("emu_cpu")
        steal = st.get("steal") or {}
        per_cpu = " ".join(f"{c}{'*' if str(cpu) == c else ''}:{100 * v:.1f}%" for c, v in sorted(steal.items()))
        print(f"{i:3d} {res.status:8s} {emu.get('late_pkts', 0):6d}/{emu.get('pkts', 0):<7d} "
              f"{lat.get('p99', 0):8.0f} {lat.get('max', 0) / 1000:8.1f} {emu.get('cpu_busy_fraction', 0):9.2f}  "
              f"{per_cpu}", flush=True)
        if cpu is not None and str(cpu) in steal and emu.get("pkts"):
            late.append(emu["late_pkts"] / emu["pkts"])
            stolen.append(steal[str(cpu)])
    if len(late) >= 3:
        print(f"rank correlation of late packets with steal on the emulator's CPU: {spearman(stolen, late):.2f} "
              f"({len(late)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
