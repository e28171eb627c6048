"""Jain's index on the validation grid with more runs than the grid's three:
several kernel batches pooled, the simulator with many seeds.

    python3 bench/grid_fairness.py sim OUT REPS --cca bbr [--pacing-latency 50us,200us]
    python3 bench/grid_fairness.py pool --linux DIR DIR --sim DIR [DIR ...]
    python3 bench/grid_fairness.py ranks "4 10Mbit 0.5bdp 0% 40ms" --linux DIR DIR --sim DIR

`sim` runs the full grid's simulator half for one algorithm with REPS
repetitions (the first three are the grid's own runs: same run ids, same
seeds). `pool` takes `ccbench validate` results directories (their linux
runs) and simulator directories, and prints per multi-flow scenario the
median index of each kernel batch, of all kernel runs pooled, and of each
simulator directory (its first three seeds, and all), how many scenarios
are within the grid's 0.05, and the run-level distribution over the
10 Mbit/s scenarios with half a BDP or one. `ranks` prints, for one
scenario ("FLOWS RATE BUFFER LOSS RTT"), each flow's median by rank
within its run (smallest goodput first) after 3 s: goodput, its share of
packets retransmitted, and its share of 100 ms samples in runs of one
bandwidth estimate lasting 20 round trips or more (base RTT plus a full
buffer), and at least 0.5 s: BBR's policer mode reports its long-term
rate, fixed for 48 rounds, while the max filter's plateaus last at most
its 10 rounds (at 40 ms a 0.5 s rule counts those too).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics as st
import sys
from pathlib import Path

import ccbench
from ccbench.analysis.series import jain_index

KEYS = ("flows.0.count", "topology.bottleneck.rate", "topology.bottleneck.buffer", "topology.bottleneck.loss",
        "cases.rtt")
WITHIN = 0.05  # the grid's tolerance for Jain's index
WARMUP_US = 3_000_000


def scenario_key(params: dict) -> tuple[str, ...]:
    return tuple(str(params.get(k)) for k in KEYS)


def indices(path: str, backend: str) -> dict[tuple[str, ...], list[float]]:
    """Per scenario, the index of each ok run of `backend`, in repetition order."""
    m = ccbench.open(path).metrics()
    m = m[(m.metric == "jfi_steady") & (m.backend == backend) & (m.status == "ok")].sort_values("repetition")
    out: dict[tuple[str, ...], list[float]] = {}
    for _, row in m.iterrows():
        out.setdefault(tuple(str(row[k]) for k in KEYS), []).append(float(row.value))
    return out


def run_sim(args: argparse.Namespace) -> None:
    from ccbench import backends
    from ccbench.executor import execute
    from ccbench.validate.grid import plan

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    p = plan("full", reps=args.reps, ccas=[args.cca], sim_pacing_latency=args.pacing_latency)
    sim = backends.get("sim")
    sim.check()
    s = execute(p.studies["sim"], p.runs("sim"), sim, out, jobs=2, progress=None, versions_apart=False)
    print(f"{out}: {s.executed} runs executed, {s.skipped} already there")


def distribution(v: list[float]) -> str:
    v = sorted(v)
    return (f"{len(v)} runs: median {st.median(v):.3f}, below 0.9 {100 * sum(x < 0.9 for x in v) / len(v):.1f} %, "
            f"below 0.7 {100 * sum(x < 0.7 for x in v) / len(v):.1f} %")


def pool(args: argparse.Namespace) -> None:
    kernel = [indices(d, "linux") for d in args.linux]
    sims = [(d, indices(d, "sim")) for d in args.sim]
    keys = sorted(k for k in kernel[0] if k[0] != "1")
    print("scenario | kernel batches | kernel pooled | per simulator dir: first 3 seeds, all (n)")
    rows = []
    for k in keys:
        batches = [st.median(b[k]) for b in kernel if b.get(k)]
        pooled = st.median([x for b in kernel for x in b.get(k, [])])
        sim = [(st.median(s[k][:3]), st.median(s[k]), len(s[k])) for _, s in sims]
        rows.append((k, batches, pooled, sim))
        print(" ".join(k), "|", " ".join(f"{b:.3f}" for b in batches), f"| {pooled:.3f} |",
              " | ".join(f"{a:.3f} {b:.3f} ({n})" for a, b, n in sim))
    print(f"{len(rows)} multi-flow scenarios")
    if len(kernel) > 1:
        print(f"kernel batches' medians within {WITHIN} of each other:",
              sum(max(r[1]) - min(r[1]) <= WITHIN for r in rows))
    for i, (d, _) in enumerate(sims):
        for which, label in ((0, "first 3 seeds"), (1, "all seeds")):
            dist = [abs(r[3][i][which] - r[2]) for r in rows]
            print(f"{d}, {label}: within {WITHIN} of the pooled kernel median in {sum(x <= WITHIN for x in dist)}"
                  f" (mean distance {st.mean(dist):.3f})")
        print("   outside:", ", ".join(f"{' '.join(r[0])} {r[3][i][1]:.3f} / {r[2]:.3f}" for r in rows
                                       if abs(r[3][i][1] - r[2]) > WITHIN) or "none")
    shallow = [r[0] for r in rows if r[0][1] == "10Mbit" and r[0][2] in ("0.5bdp", "1bdp")]
    print(f"run level, the {len(shallow)} scenarios at 10 Mbit/s with half a BDP or one:")
    print("  kernel:", distribution([x for b in kernel for k in shallow for x in b.get(k, [])]))
    for d, s in sims:
        print(f"  {d}:", distribution([x for k in shallow for x in s[k]]))


def flat_samples(rtt: str, buffer: str) -> int:
    """Samples (100 ms) in a run of one estimate that count as policer mode:
    20 round trips of base RTT plus a full buffer, at least 0.5 s."""
    base_ms = float(rtt.removesuffix("ms"))
    rounds_s = 20 * base_ms * (1 + float(buffer.removesuffix("bdp"))) / 1000
    return max(5, math.ceil(rounds_s / 0.1))


def flow_figures(r: "ccbench.Results", run_id: str, min_flat: int) -> list[tuple[float, float, float]]:
    """(goodput Mbit/s, retransmitted share, policer-mode share) after the warm-up, per flow, smallest first."""
    s = r.samples
    s = s[(s.run_id == run_id) & (s.time_us >= WARMUP_US)].sort_values("time_us")
    out = []
    for _, f in s.groupby("flow_id"):
        delivered = (f.delivered_bytes.iloc[-1] - f.delivered_bytes.iloc[0])
        segs = delivered / 1448
        retrans = f.retrans_segs.iloc[-1] - f.retrans_segs.iloc[0]
        seconds = (f.time_us.iloc[-1] - f.time_us.iloc[0]) / 1e6
        bw = list(f.bw_est_bps)
        flat, i = 0, 0
        while i < len(bw):
            j = i
            while j + 1 < len(bw) and bw[j + 1] == bw[i]:
                j += 1
            if j - i + 1 >= min_flat:
                flat += j - i + 1
            i = j + 1
        out.append((delivered * 8 / seconds / 1e6, retrans / max(segs + retrans, 1), flat / len(bw)))
    return sorted(out)


def ranks(args: argparse.Namespace) -> None:
    want = tuple(args.scenario.split())
    if len(want) != len(KEYS):
        sys.exit(f"ranks: scenario {args.scenario!r}: give FLOWS RATE BUFFER LOSS RTT, e.g. '4 10Mbit 0.5bdp 0% 40ms'")
    min_flat = flat_samples(want[4], want[2])
    print(f"policer mode: one estimate for {min_flat / 10:.1f} s or more")
    for label, backend, dirs in (("kernel", "linux", args.linux), ("simulator", "sim", args.sim)):
        by_rank: dict[int, list[tuple[float, float, float]]] = {}
        jain = []
        for d in dirs:
            r = ccbench.open(d)
            runs = r.runs[(r.runs.backend == backend) & (r.runs.status == "ok")]
            for _, run in runs.iterrows():
                if scenario_key(json.loads(run.params)) != want:
                    continue
                figs = flow_figures(r, run.run_id, min_flat)
                j = jain_index(x[0] for x in figs)
                if j is not None:  # no flow delivered anything
                    jain.append(j)
                for i, x in enumerate(figs):
                    by_rank.setdefault(i, []).append(x)
        if not jain:
            print(f"{label}: no ok runs of {args.scenario!r}")
            continue
        print(f"{label}: {len(jain)} runs, Jain's index after 3 s, median {st.median(jain):.3f}")
        for i, v in sorted(by_rank.items()):
            print(f"  flow ranked {i + 1} (smallest first): goodput {st.median(x[0] for x in v):.2f} Mbit/s, "
                  f"retransmitted {100 * st.median(x[1] for x in v):.1f} %, "
                  f"policer mode {st.median(x[2] for x in v):.2f} of the time")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("sim", help="the full grid's simulator half with more repetitions")
    p.add_argument("out")
    p.add_argument("reps", type=int)
    p.add_argument("--cca", required=True)
    p.add_argument("--pacing-latency", metavar="MEDIAN,P90")
    p = sub.add_parser("pool", help="Jain's index per scenario, kernel batches pooled against simulator seeds")
    p.add_argument("--linux", nargs="+", required=True)
    p.add_argument("--sim", nargs="+", required=True)
    p = sub.add_parser("ranks", help="one scenario's flows by rank")
    p.add_argument("scenario")
    p.add_argument("--linux", nargs="+", required=True)
    p.add_argument("--sim", nargs="+", required=True)
    args = ap.parse_args()
    {"sim": run_sim, "pool": pool, "ranks": ranks}[args.cmd](args)


if __name__ == "__main__":
    main()
