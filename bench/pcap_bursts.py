#!/usr/bin/env python3
"""Are a kernel run's losses its sender's own bursts? Capture a linux run at
both hosts, then test.

    python bench/pcap_bursts.py capture STUDY.toml OUTDIR [--seconds S]
    python bench/pcap_bursts.py simulate STUDY.toml OUTDIR [--run N] [--seed N] [--flow ID]
    python bench/pcap_bursts.py analyse OUTDIR --rate 1Gbit --buffer-pkts 194
    python bench/pcap_bursts.py rates OUTDIR --capacity 96.533Mbit
    python bench/pcap_bursts.py drops OUTDIR [OUTDIR ...] --delay 5ms
    python bench/pcap_bursts.py resends OUTDIR [OUTDIR ...] --delay 5ms
    python bench/pcap_bursts.py quickacks OUTDIR [OUTDIR ...] [--silence 220ms]
    python bench/pcap_bursts.py ecnacks OUTDIR [OUTDIR ...]
    python bench/pcap_bursts.py delacks OUTDIR [OUTDIR ...] [--least 5]

`capture` runs `ccbench run STUDY.toml --backend linux --out OUTDIR/results`
(one run: give the study one configuration and one repetition) and, as soon
as the run's namespaces exist, starts tcpdump (headers only) in the first
sender's (`<token>-s0`) and the receiver's (`<token>-d`) namespace, and on
the router's TUN (`<token>-r`, the packets the kernel hands to the
emulator, data to the receiver only) for S seconds (default 6), writing
OUTDIR/sender.pcap, OUTDIR/receiver.pcap and OUTDIR/tun.pcap. tcpdump
costs CPU on the hosts' side, so a captured run is slower than one without
and has more stalls (needs root and tcpdump: `apt-get install tcpdump`).

`simulate` runs run N (default 0) of STUDY.toml on the simulator with its
`pcap` trace on its first flow or flow `--flow` (crates/sim/src/trace.rs), writing
OUTDIR/sender.pcap and OUTDIR/receiver.pcap as `capture` does (there is no
TUN in the simulator: `analyse` leaves that part out) and the run's
result as OUTDIR/result.json, so that `analyse` and `rates` read a
simulated run and a captured kernel run the same way. `--seed` replaces
the run's seed (another draw of the same configuration).

`analyse` reads the captures (through `tcpdump -r`) and prints:

- at the receiver: the share of data segments acknowledged by ACKs that
  each cover n new segments (a timely Linux receiver ACKs every second
  segment; large n means segments the receiver's TCP took in one batch);
  how long each ACK left after the segment that made it due (Linux sends
  it from the application's read), with a ready `read_latency` line for
  the simulator; and how bunched the data arrived (gaps under 20 us and
  gaps of a spacing plus 80 us or more), with the `stalls` that give
  the same two shares (docs/validation/README.md, "Session 28");
- at the sender: how regularly its bursts of new data leave, the gap to
  the next over the burst's bytes at the bottleneck's payload rate (a
  pacing timer that fires late spreads them; `[tcp] pacing_latency`,
  docs/validation/README.md, "Session 29");
- at the sender: the loss episodes a drop-tail queue of `--buffer-pkts`
  packets at `--rate`, fed by the sender's own send times, would have (each
  segment a wire packet of `--wire-bytes`), beside the sender's
  retransmission episodes, and for each overflow how long the queue took
  to fill from empty. If the episodes line up, the sender's send times
  alone explain the losses; a queue filled within a few of its drain
  times was filled by a burst, one that took round trips by the window.
- into the emulator (with tun.pcap): the drops of the FIFO above fed by
  the segments' arrival times at the emulator, beside the drops the
  emulator counted (if they agree, those times are what the bottleneck
  saw); each segment's delay from the sender's interface to the TUN (the
  hosts' forwarding), and the rate at which the hosts handed segments on
  while that path was backlogged (more than 0.1 ms above its base for 50
  segments or more): how fast a burst reaches the bottleneck on this
  machine. The simulator's access links send bursts at their `rate` (10
  Gbit/s by default); give the senders' `access` this rate to run the same
  bursts (docs/validation/README.md, "Session 27").
- at the sender: the ACK path's stalls. Each ACK's arrival is compared with
  the departure, from that FIFO, of the newest segment it covers (with
  tun.pcap, from the FIFO fed by the arrivals at the emulator instead, so
  that the hosts' forwarding, measured there, is not counted again); the
  smallest difference is the path's base, and an ACK later than that by
  more than 0.3 ms is held by a stall (of the receiver, the emulator, the
  machine), a stall's length being its latest ACK's delay. ACKs with SACK
  blocks and those within 50 ms of a resend are left out. It prints how
  many stalls a second last at least 0.5, 1, 2, 3 and 5 ms, and the
  `stalls = { every, length }` of exponential pauses with the same rates
  of stalls of at least `--fit-from` and `--fit-to` (default 2 and 5 ms:
  the lengths that matter for buffers of a few ms; shorter hiccups are
  many and harmless, and no exponential fits them as well). Give that to
  the simulator's bottleneck to run the same path with this machine's
  stalls (docs/sim-model.md, "Network").

`rates` rebuilds from the sender's capture the delivery-rate samples its
TCP took (Linux's tcp_rate.c; see `rate_samples`) and prints them against
`--capacity`, the bottleneck's payload rate: what a BBR flow's bandwidth
estimate is the maximum of, and, for the samples above 1.01 of it, how
often they start from an ACK that came after a gap in the ACK stream
(docs/validation/README.md, "Session 27").

`drops` tells, per flow, which of its data segments the bottleneck
dropped: those that entered it (tun.pcap; for a simulated run, which has
no TUN, sender.pcap: its access link adds only a constant) and never
reached the receiver. Each segment seen at the receiver is matched with
the latest transmission of its sequence that entered at least `--delay`
(the bottleneck's one-way delay) before it; the rest were dropped (on a
simulated one-flow run this gives the bottleneck's own drop count
exactly; segments of the capture's last second are not judged). It
prints each flow's drop rate after `--after` seconds (default 3), split
into the second segments of back-to-back pairs (a two-segment skb: a
segment of the same flow less than 50 us after the previous one) and the
others: in a drop-tail queue the second of a pair finds the queue fuller
than the first; and the runs of the flow's consecutive segments dropped
(a retransmission RACK cannot judge is one followed by such a run). A
kernel capture holds every flow of the first sender; a simulated one
holds the traced flow only (`simulate --flow`, one
directory per flow; docs/sim-model.md, "What keeps the smaller flow
pinned").

`resends` sorts each flow's retransmissions at the sender (sender.pcap,
GSO packets split into segments) by what sent them: an ACK (one arrived
less than 0.2 ms before) or a timer (RACK's reordering timeout, the loss
probe, the RTO: Linux runs them on the jiffies tick), and prints how many
of each the bottleneck dropped (matched at the receiver as `drops` does)
and, for the timer's, how long after the flow's last ACK they went out:
the timer wheel runs a timer of n jiffies n to n + 1 jiffies after it is
armed (docs/sim-model.md, "The timer wheel"). Give it the directories of
one kernel capture, or of one simulated run traced once per flow.

Why: a single flow through a shallow buffer loses packets whenever the ACKs
of a stretch of time S arrive at once (a stall on the ACK path, or a
receiver that takes many segments in one batch) and S's worth of data then
leaves in one burst: it overflows a buffer of B packets at rate C when
roughly S × C × (1 - C/access rate) > B, whatever the window. See
studies/mss-sweep/README.md. Nothing here is a test: it prints figures.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ccbench.spec import units

SERVER_PORT = ".5201 >"  # the load generator's and iperf3's port: its packets are the ACKs
EPISODE_GAP_S = 0.05  # events closer than this belong to one loss episode
RESEND_QUIET_S = 0.05  # ACKs this soon after a resend belong to recovery, not to a stall
STALL_MIN_S = 0.0003  # an ACK later than the base by more than this is held by a stall
STALL_JOIN_S = 0.002  # late ACKs closer than this belong to one stall
BACKLOG_S = 0.0001  # a segment this much later than the base from sender to emulator waited in the hosts
BACKLOG_MIN_PKTS = 50  # a backlogged stretch this long is a burst being forwarded


def parse_rate(text: str, option: str) -> float:
    try:
        return float(units.parse_rate(text))
    except units.UnitError as e:
        sys.exit(f"{option}: {text!r}: {e.problem} ({units.RATE_ALLOWED})")


def parse_time_s(text: str, option: str) -> float:
    try:
        return float(units.parse_time(text)) / 1e9
    except units.UnitError as e:
        sys.exit(f"{option}: {text!r}: {e.problem} ({units.TIME_ALLOWED})")


def namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def capture(study: Path, outdir: Path, seconds: float) -> None:
    if not shutil.which("tcpdump"):
        sys.exit("capture needs tcpdump (apt-get install tcpdump)")
    outdir.mkdir(parents=True, exist_ok=True)
    before = set(namespaces())
    run = subprocess.Popen(["ccbench", "run", str(study), "--backend", "linux", "--out", str(outdir / "results")])
    token = None
    deadline = time.monotonic() + 60
    while token is None and time.monotonic() < deadline and run.poll() is None:
        for ns in set(namespaces()) - before:
            if ns.endswith("-s0"):
                token = ns[: -len("-s0")]
        time.sleep(0.02)
    if token is None:
        run.wait()
        sys.exit("the run's namespaces did not appear (did it fail? see its output above)")

    def tcpdump(ns: str, iface: str, name: str, *flt: str) -> subprocess.Popen:
        return subprocess.Popen(["timeout", str(seconds), "ip", "netns", "exec", ns, "tcpdump", "-i", iface, "-s", "96",
                                 "-n", "-w", str(outdir / f"{name}.pcap"), *flt], stderr=subprocess.DEVNULL)

    dumps = [tcpdump(f"{token}-{host}", "any", name, "tcp") for host, name in [("s0", "sender"), ("d", "receiver")]]
    # The router's TUN, outgoing only: each data segment as the hosts' kernel hands it to the emulator.
    dumps.append(tcpdump(f"{token}-r", f"{token}-tun", "tun", "-Q", "out", "tcp", "dst", "port",
                         SERVER_PORT.strip(".> ")))
    for d in dumps:
        d.wait()
    sys.exit(run.wait())


def simulate(study: Path, outdir: Path, run: int, seed: int | None, flow: int | None) -> None:
    from ccbench import _core
    from ccbench.backends.sim import core_config
    from ccbench.errors import StudyError
    from ccbench.spec.load import load_study

    try:
        runs = load_study(study, backend="sim").runs()
    except StudyError as e:
        sys.exit(str(e))
    if not 0 <= run < len(runs):
        sys.exit(f"--run {run}: {study} has runs 0 to {len(runs) - 1}")
    cfg = core_config(runs[run].config)
    if seed is not None:
        cfg["seed"] = seed
    outdir.mkdir(parents=True, exist_ok=True)
    cfg["pcap"] = {"flow": cfg["flows"][0]["id"] if flow is None else flow, "dir": str(outdir.resolve())}
    try:
        out = _core.simulate(json.dumps(cfg))
    except ValueError as e:
        sys.exit(f"{study}: run {run}: {e}")
    (outdir / "result.json").write_text(out)
    f = next(f for f in json.loads(out)["flows"] if f["flow_id"] == cfg["pcap"]["flow"])
    print(f"{runs[run].label()}, seed {cfg['seed']}: flow {f['flow_id']} {f['goodput_bps'] / 1e6:.1f} Mbit/s, "
          f"{f['retrans_segs']} of {f['sent_segs']} segments resent; traced into {outdir}")


def nearest(raw: int, ref: int) -> int:
    """The number congruent to the 32-bit `raw` nearest `ref`."""
    return ref + ((raw - ref + (1 << 31)) % (1 << 32)) - (1 << 31)


def tcpdump_text(pcap: Path, options: tuple[str, ...] = ("-S",)) -> str:
    """`pcap` as tcpdump prints it (absolute times; by default absolute
    sequence numbers too)."""
    if not pcap.is_file():
        sys.exit(f"{pcap}: no such capture (write it with `capture` or `simulate` first)")
    p = subprocess.run(["tcpdump", "-r", str(pcap), "-tt", "-n", *options], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{pcap}: tcpdump cannot read it: {p.stderr.strip().splitlines()[-1:]}")
    return p.stdout


def events(pcap: Path):
    """(time, kind, value, x): kind "A" an ACK from the server (value: its
    cumulative ACK; x: its SACK blocks, (start, end) pairs, empty if none),
    "D" a data segment to it (value: its sequence; x: its length)."""
    text = tcpdump_text(pcap)
    out = []
    # Sequence and ACK numbers are absolute (-S) and wrap at 2^32 (a random
    # initial sequence wraps within the first GB): each is taken as the
    # value nearest the last one seen, so that newer stays larger.
    last = None

    def unwrap(raw: int) -> int:
        nonlocal last
        last = raw if last is None else nearest(raw, last)
        return last

    for line in text.splitlines():
        if " IP " not in line:
            continue
        t = float(line.split()[0])
        hdr = line.split(" IP ", 1)[1].split(":", 1)[0]
        length = re.search(r"length (\d+)", line)
        n = int(length.group(1)) if length else 0
        if SERVER_PORT in hdr:
            ack = re.search(r"ack (\d+)", line)
            if ack:
                a = unwrap(int(ack.group(1)))
                blocks = tuple((nearest(int(x), a), nearest(int(y), a))
                               for x, y in re.findall(r"\{(\d+):(\d+)\}", line))
                out.append((t, "A", a, blocks))
        elif n > 0:
            seq = re.search(r"seq (\d+):", line)
            if seq:
                out.append((t, "D", unwrap(int(seq.group(1))), n))
    return out


def episodes(times: list[float]) -> list[float]:
    """The first time of each run of times closer than EPISODE_GAP_S."""
    firsts, last = [], None
    for t in times:
        if last is None or t - last > EPISODE_GAP_S:
            firsts.append(t)
        last = t
    return firsts


def since(t0: float, times: list[float]) -> list[float]:
    return [round(t - t0, 3) for t in times]


def analyse(outdir: Path, rate: float, buffer_pkts: int, wire_bytes: int, mss: int, fit: tuple[float, float]) -> None:
    if (outdir / "receiver.pcap").is_file():
        rx = events(outdir / "receiver.pcap")
        receiver_batches(rx, mss)
        read_latency(rx, mss)
        arrival_bunching(rx, wire_bytes * 8 / rate)
    else:
        print("receiver: no receiver.pcap, left out")
    tx = events(outdir / "sender.pcap")
    pacing_gaps(tx, rate * mss / wire_bytes)
    fifo, resent = sender_bursts(tx, rate, buffer_pkts, wire_bytes, mss)
    at_emulator = None
    if (outdir / "tun.pcap").is_file():
        at_emulator = bottleneck_arrivals(tx, events(outdir / "tun.pcap"), outdir / "results", rate, buffer_pkts,
                                          wire_bytes, mss)
    else:
        print("into the emulator: no tun.pcap, left out")
    # With the emulator's own arrivals, an ACK's delay is counted from when its
    # segment left the real bottleneck, so the hosts' forwarding (measured
    # above, the access rate) is not counted again as ACK-path stalls.
    ack_stalls(tx, (at_emulator or fifo).departures, resent, mss, fit,
               "the emulator's arrivals" if at_emulator else "the sender's sends")


def receiver_batches(rx, mss: int) -> None:
    acks = [v for _, k, v, _ in rx if k == "A"]
    covered = collections.Counter()
    for a, b in zip(acks, acks[1:]):
        n = (b - a) // mss
        if n > 0:
            covered[n if n < 10 else min(n, 300) // 10 * 10] += n
    total = sum(covered.values()) or 1
    print("receiver: share of segments acknowledged by ACKs covering n new segments")
    print("  " + ", ".join(f"{n}{'+' if n >= 10 else ''}: {c / total:.3f}" for n, c in sorted(covered.items())))


def bunching_shares(every: float, length: float, spacing: float, n: int = 200_000, seed: int = 1) -> tuple:
    """The two shares `arrival_bunching` counts, for a regular stream (one
    packet every `spacing` s) through a far end that pauses as a link's
    `stalls` does (exponential gaps of mean `every`, pauses of mean
    `length`; netcore::link::Stalls): gaps under 20 us, gaps of the
    spacing plus 80 us or more."""
    import numpy as np

    rng = np.random.default_rng(seed)
    horizon = n * spacing
    k = int(horizon / (every + length) * 1.5) + 100
    lengths = rng.exponential(length, k)
    # Pause i runs from starts[i] to starts[i] + lengths[i]; the next gap starts there.
    starts = np.cumsum(np.concatenate(([rng.exponential(every)], (lengths + rng.exponential(every, k))[:-1])))
    ends = starts + lengths
    at = np.arange(n) * spacing
    i = np.searchsorted(starts, at, side="right") - 1  # the last pause begun by each arrival
    inside = (i >= 0) & (at < ends[np.maximum(i, 0)])
    out = np.where(inside, ends[np.maximum(i, 0)], at)
    gaps = np.diff(out)
    return float(np.mean(gaps < 20e-6)), float(np.mean(gaps >= spacing + 80e-6))


def _bisect_log(lo: float, hi: float, steps: int, above: Callable[[float], bool]) -> float:
    """The x in [lo, hi] where `above(x)` (the answer is above x) turns
    false, bisected on a log scale."""
    a, b = math.log(lo), math.log(hi)
    for _ in range(steps):
        mid = (a + b) / 2
        a, b = (mid, b) if above(math.exp(mid)) else (a, mid)
    return math.exp((a + b) / 2)


def arrival_bunching(rx, spacing: float) -> None:
    """How the data reaches the receiver while the bottleneck is busy:
    one segment every `spacing` (its wire size at the bottleneck's rate)
    from a regular path. A path that now and then holds what arrives and
    then hands it on at once (a late emulator or router, a host not
    scheduled) leaves gaps under 20 us (the held segments) and gaps longer
    than the spacing by 80 us or more (the holds). Prints both shares and
    the `stalls` whose pauses give the same two shares on a regular stream
    (`bunching_shares`, fitted by bisection): the scale of the path's
    noise as pauses of the bottleneck's far end, not its shape
    (docs/validation/README.md, "Session 28")."""
    t = [x[0] for x in rx if x[1] == "D"]
    gaps = [b - a for a, b in zip(t, t[1:])]
    if len(gaps) < 1000:
        print("  arrivals: too few segments to describe")
        return
    held = sum(g < 20e-6 for g in gaps) / len(gaps)
    holds = sum(g >= spacing + 80e-6 for g in gaps) / len(gaps)
    print(f"  data arrivals, gaps over {len(gaps)}: under 20 us {held * 100:.1f} %, at least {(spacing + 80e-6) * 1e6:.0f} "
          f"us {holds * 100:.1f} % (a regular path: every {spacing * 1e6:.0f} us)")
    if not (0 < holds < held < 0.9):
        return

    def every_for(length: float) -> float:
        # More frequent pauses hold more: `every` is above any that holds too many.
        return _bisect_log(1e-5, 10.0, 30, lambda e: bunching_shares(e, length, spacing)[0] > held)

    # At a fixed held share, longer pauses are fewer: the length is below any that leaves too few long gaps.
    length = _bisect_log(spacing / 10, 1.0, 20,
                         lambda ln: bunching_shares(every_for(ln), ln, spacing)[1] >= holds)
    every = every_for(length)
    print(f'  as pauses of the path (the bottleneck\'s far end), the same two shares: stalls = {{ every = '
          f'"{every * 1e3:.2f}ms", length = "{length * 1e3:.2f}ms" }}')


def paced_bursts(tx) -> list[tuple[float, int]]:
    """(time, bytes) of each burst of new data in a sender's capture: the
    segments that leave at one instant in sequence (one GSO packet in a
    kernel's capture, a burst's segments in the simulator's). A resend is
    not a burst of its own, nor are the new data that leave with it."""
    bursts, top = [], 0
    for t, kind, seq, n in tx:
        if kind != "D" or seq < top:
            continue
        if bursts and t - bursts[-1][0] < 2e-7 and seq == top:
            bursts[-1] = (bursts[-1][0], bursts[-1][1] + n)
        else:
            bursts.append((t, n))
        top = seq + n
    return bursts


def pacing_gaps(tx, rate: float) -> None:
    """How regularly a paced sender's bursts leave: the gap from each burst
    of new data to the next over the burst's bytes at `rate` (a flow paced
    at the bottleneck's rate sends one burst per such time), after the
    first 3 s. A pacer whose timer fires on time leaves on its grid (the
    simulator by default: quartiles within about 1 % of each other; BBR's
    gain phases move the tails, hardly the quartiles). A timer that fires
    late, with Linux's credit catching up after it, spreads them (the
    simulator's `[tcp] pacing_latency`), and a host that does not run the
    sender for a while makes the long gaps (`[tcp] sender_pauses`, of
    which the tails give a starting point). No pacing latency line: the quartiles
    follow the latency through the flow's own dynamics (a bare pacer with
    the same latency spreads them half as much), so the setting is matched
    by running the simulator with candidates (docs/validation/README.md,
    "Session 29")."""
    bursts = paced_bursts(tx)
    if not bursts:
        return
    t0 = bursts[0][0]
    bursts = [b for b in bursts if b[0] - t0 >= 3.0]
    gaps = [(b[0] - a[0]) * rate / (a[1] * 8) for a, b in zip(bursts, bursts[1:])]
    if len(gaps) < 1000:
        print("sender: too few bursts of new data to describe their pacing")
        return
    q1, med, q3 = statistics.quantiles(gaps, n=4)
    size = statistics.median(n for _, n in bursts)
    print(f"sender: {len(bursts)} bursts of new data (median {size:.0f} B); gap to the next over the burst at "
          f"{rate / 1e6:g} Mbit/s: quartiles {q1:.3f} / {med:.3f} / {q3:.3f} (interquartile range "
          f"{(q3 - q1) / med:.3f} of the median; a paced flow whose timer fires on time: about 0.01)")
    # The tails, as pauses of the sending host: a burst due during a pause
    # leaves at its end, the rest of the pause later (exponential, mean
    # `length`), so a share f of the gaps exceed 1 by an exponential of
    # mean length / T (T: a burst's time): over 1.5 f e^(-T/2L), over 3
    # f e^(-2T/L). BBR's gain phases stay under 1.5 (1.33).
    over = [sum(g > x for g in gaps) / len(gaps) for x in (1.5, 3.0)]
    print(f"  gaps over 1.5: {over[0] * 100:.2f} %, over 3: {over[1] * 100:.2f} %")
    if 0 < over[1] < over[0]:
        burst_s = size * 8 / rate
        length = 1.5 * burst_s / math.log(over[0] / over[1])
        f = min(0.5, over[0] * math.exp(0.5 * burst_s / length))
        every = length * (1 - f) / f
        print(f'  as pauses of the sending host, a starting point (check it by simulation): sender_pauses = {{ every = '
              f'"{every * 1e3:.1f}ms", length = "{length * 1e3:.2f}ms" }}')


def read_latency(rx, mss: int) -> None:
    """How long after the segment that made an ACK due (the second full
    segment since the last ACK) the receiver sent it: Linux sends that ACK
    from the application's read (docs/sim-model.md, "Read latency"), so
    this is the reader's latency, kernel work included. ACKs near loss
    recovery (with SACK blocks, or after one) and segments that arrived
    out of order are left out."""
    first_arrival = {}
    for t, kind, value, _ in rx:
        if kind == "D":
            first_arrival.setdefault(value, t)
    lat, prev, recovering = [], None, False
    for t, kind, value, blocks in rx:
        if kind != "A":
            continue
        if prev is not None and value >= prev + 2 * mss and not blocks and not recovering:
            due, before = first_arrival.get(prev + mss), first_arrival.get(prev)
            if due is not None and before is not None and before <= due <= t:
                lat.append(t - due)
        recovering = bool(blocks)
        prev = value if prev is None else max(prev, value)
    if len(lat) < 100:
        print("  read latency: too few ACKs to measure")
        return
    lat.sort()
    med, p90 = lat[len(lat) // 2], lat[int(0.9 * (len(lat) - 1))]
    p99 = lat[int(0.99 * (len(lat) - 1))]
    print(f"  each ACK after the segment that made it due ({len(lat)} ACKs): median {med * 1e6:.0f} us, p90 "
          f"{p90 * 1e6:.0f} us, p99 {p99 * 1e6:.0f} us, above 120 us {sum(x > 120e-6 for x in lat) / len(lat) * 100:.1f} %")
    if med > 0:  # a reader that always reads at once is the simulator's default
        print(f'  the simulator\'s reader with the same median and p90: read_latency = {{ median = "{med * 1e6:.0f}us", '
              f'p90 = "{p90 * 1e6:.0f}us" }}')


class Fifo:
    """A drop-tail queue of `buffer_pkts` packets served at `rate`, fed by
    (time, sequence, length) segments (a GSO packet is length // mss wire
    packets). `overflows`: when a packet found it full; `built`: per such
    time, how long the queue had taken to fill from empty; `departures`:
    per segment end that got in, when it left (its last copy's)."""

    def __init__(self, segments, rate: float, buffer_pkts: int, wire_bytes: int, mss: int):
        self.slot = wire_bytes * 8 / rate
        self.overflows, self.built, self.departures = [], {}, {}
        queue, last, empty_at, free_at = 0.0, None, 0.0, 0.0
        for t, seq, n in segments:
            if last is not None:
                drained = (t - last) / self.slot
                if drained >= queue:
                    empty_at = last + queue * self.slot
                queue = max(0.0, queue - drained)
            last = t
            for i in range(max(1, n // mss)):
                if queue + 1 > buffer_pkts:
                    self.overflows.append(t)
                    self.built.setdefault(t, t - empty_at)
                else:
                    queue += 1
                    free_at = max(free_at, t) + self.slot
                    self.departures[seq + (i + 1) * mss] = free_at


def sender_bursts(tx, rate: float, buffer_pkts: int, wire_bytes: int, mss: int) -> tuple[Fifo, list[float]]:
    """The sender's sends through the bottleneck's FIFO, beside its resends;
    returns that FIFO and the resend times."""
    data = [(t, v, n) for t, k, v, n in tx if k == "D"]
    if not data:
        sys.exit("no data segments in sender.pcap")
    t0 = data[0][0]
    fifo = Fifo(data, rate, buffer_pkts, wire_bytes, mss)
    highest, resent = 0, []
    for t, seq, n in data:
        if seq + n <= highest:
            resent.append(t)
        highest = max(highest, seq + n)
    print(f"sender: {len(data)} sends; a {buffer_pkts}-packet FIFO at {rate / 1e6:g} Mbit/s fed by them")
    firsts = episodes(fifo.overflows)
    print("  would overflow at (s):   ", since(t0, firsts))
    print("  the sender resent at (s):", since(t0, episodes(resent)))
    # A queue that filled from empty within a few of its own drain times was
    # filled by a burst; one that took round trips was filled by the window.
    print(f"  ms each overflow took to fill the queue from empty (draining it takes "
          f"{buffer_pkts * fifo.slot * 1e3:.2f} ms):", [round(fifo.built[t] * 1e3, 2) for t in firsts])
    return fifo, resent


def ack_stalls(tx, departures: dict, resent: list[float], mss: int, fit: tuple[float, float], fed_by: str) -> None:
    """The ACK path's stalls, from each ACK's delay after the FIFO's
    departure of the newest segment it covers (see the module's text)."""
    ends = sorted(departures)
    delays = []
    for t, kind, ack, sack in tx:
        if kind != "A" or sack:
            continue
        i = bisect.bisect_right(ends, ack) - 1
        if i < 0 or ack - ends[i] >= mss:
            continue
        j = bisect.bisect_right(resent, t) - 1
        if j >= 0 and t - resent[j] < RESEND_QUIET_S:
            continue
        delays.append((t, t - departures[ends[i]]))
    if len(delays) < 2:
        print("ACK path: too few ACKs to measure")
        return
    base = min(d for _, d in delays)
    stalls, cur, last_t = [], None, None
    for t, d in delays:
        late = d - base
        if late > STALL_MIN_S:
            if cur is not None and t - last_t <= STALL_JOIN_S:
                cur = max(cur, late)
            else:
                if cur is not None:
                    stalls.append(cur)
                cur = late
            last_t = t
    if cur is not None:
        stalls.append(cur)
    span = delays[-1][0] - delays[0][0]
    rate = {ms: sum(s >= ms / 1e3 for s in stalls) / span for ms in (0.5, 1, 2, 3, 5, *fit)}
    print(f"ACK path over {span:.1f} s ({len(delays)} ACKs, base {base * 1e3:.2f} ms, departures of a FIFO fed by "
          f"{fed_by}): stalls per second lasting at least")
    print("  " + ", ".join(f"{ms:g} ms: {rate[ms]:.2f}" for ms in (0.5, 1, 2, 3, 5)))
    lo, hi = fit
    if rate[hi] <= 0 or rate[lo] <= rate[hi]:
        print(f"  too few stalls of {hi:g} ms or more to fit exponential pauses")
        return
    mean = (hi - lo) / math.log(rate[lo] / rate[hi])  # ms: P(length >= x) = exp(-x / mean)
    starts = rate[lo] * math.exp(lo / mean)  # pauses per second
    print(f"  exponential pauses with the same rates at {lo:g} and {hi:g} ms: "
          f"stalls = {{ every = \"{1e3 / starts:.0f}ms\", length = \"{mean:.2f}ms\" }}")


def bottleneck_arrivals(tx, tun, results: Path, rate: float, buffer_pkts: int, wire_bytes: int,
                        mss: int) -> Fifo | None:
    """The hosts' path from the sender to the emulator. `tun`: the data
    segments as the hosts' kernel handed them to the emulator (the router's
    TUN, where GSO packets arrive already cut to the MTU). Fed into a FIFO of
    the bottleneck's rate and buffer they should give the emulator's drops
    (which the run's stats count): if so, the bottleneck saw those arrival
    times. Matched with the sender's capture, each segment's delay from the
    sender's interface to the TUN; while that delay is above its base by more
    than 0.1 ms the path is backlogged, and the rate of hand-offs in such a
    stretch is how fast the hosts' CPU forwards a burst. The simulator's
    access link sends a burst at its `rate` (10 Gbit/s by default).
    Returns the FIFO fed by the arrivals at the emulator."""
    data = [(t, v, n) for t, k, v, n in tun if k == "D"]
    if not data:
        print("into the emulator: no data segments in tun.pcap")
        return None
    fifo = Fifo(data, rate, buffer_pkts, wire_bytes, mss)
    drops = "an unknown number"
    if (results / "ccbench.duckdb").is_file():
        from ccbench.api import open_results

        with open_results(results) as r:
            drops = sum(int(json.loads(x).get("emu_bottleneck_drops") or 0) for x in r.runs["stats"] if x)
    print(f"into the emulator: {len(data)} data segments over {data[-1][0] - data[0][0]:.1f} s; the FIFO fed by "
          f"them drops {len(fifo.overflows)} (the emulator dropped {drops} in the whole run)")
    sent = collections.defaultdict(list)  # segment -> its send times (a resend appends)
    for t, kind, seq, n in tx:
        if kind == "D":
            for i in range(max(1, n // mss)):
                sent[seq + i * mss].append(t)
    pairs = []
    for t, kind, seq, _ in tun:
        sends = sent.get(seq) if kind == "D" else None
        i = bisect.bisect_right(sends, t) - 1 if sends else -1
        if i >= 0:  # the latest send before this hand-off is the copy handed on
            pairs.append((t, t - sends[i]))
    if len(pairs) < 2:
        print("  too few segments in both captures to measure the hosts' path")
        return fifo
    delays = sorted(d for _, d in pairs)
    base = delays[0]
    print(f"  sender to emulator: {len(pairs)} segments in both captures, delay above its base "
          f"({base * 1e6:.0f} us): median {(delays[len(delays) // 2] - base) * 1e6:.0f} us, "
          f"p99 {(delays[int(0.99 * (len(delays) - 1))] - base) * 1e6:.0f} us")
    stretches, cur = [], []
    for t, d in pairs:
        if d - base > BACKLOG_S:
            cur.append(t)
            continue
        if len(cur) >= BACKLOG_MIN_PKTS:
            stretches.append(cur)
        cur = []
    rates = sorted((len(c) - 1) * wire_bytes * 8 / (c[-1] - c[0]) / 1e9 for c in stretches if c[-1] > c[0])
    if len(rates) < 10:
        print(f"  fewer than 10 backlogged stretches of {BACKLOG_MIN_PKTS} segments or more: no rate")
        return fifo
    q = statistics.quantiles(rates, n=10)
    print(f"  {len(rates)} backlogged stretches of {BACKLOG_MIN_PKTS} segments or more: hand-offs at "
          f"{q[0]:.2f} / {statistics.median(rates):.2f} / {q[8]:.2f} Gbit/s (p10 / median / p90)")
    print(f"  the senders' access links at the median: access = {{ rate = \"{statistics.median(rates):.2f}Gbit\" }}")
    return fifo


def rate_samples(tx, capacity: float, mss: int) -> None:
    """The delivery-rate samples the sender's TCP took, rebuilt from its
    capture as Linux's tcp_rate.c takes them: per ACK that delivers
    segments (cumulatively or by SACK), the segments delivered since the
    newest of them was sent, over the longer of its send interval (from the
    sending of the segment delivered last before it was sent, to its own)
    and its ACK interval (from the last delivery before it was sent, to
    this ACK); a sample shorter than the lowest RTT seen is dropped. Approximate: GSO packets are taken apart into
    segments, nothing is marked application-limited. Prints the samples
    against `capacity` (the bottleneck's payload rate) and, for those above
    1.01 of it (what lifts BBR's max-filtered estimate over the capacity),
    how often the ACK they start from came after a gap of 0.5 ms or more in
    the ACK stream, and how fast their segments had been sent."""
    sent = {}  # segment start -> [sent at, delivered then, delivered_at then, first_tx then, delivered?]
    order = collections.deque()  # segment starts in the order first sent
    delivered, delivered_at, first_tx, in_flight = 0, 0.0, 0.0, 0
    min_rtt, samples, ack_times = math.inf, [], []
    for t, kind, value, x in tx:
        if kind == "D":
            if in_flight == 0:
                first_tx = delivered_at = t
            for i in range(max(1, x // mss)):
                seg = value + i * mss
                if seg not in sent:
                    order.append(seg)
                elif not sent[seg][4]:
                    in_flight -= 1  # a resend replaces the copy in flight
                if seg not in sent or not sent[seg][4]:
                    sent[seg] = [t, delivered, delivered_at, first_tx, False]
                    in_flight += 1
            continue
        ack_times.append(t)
        newly = []
        while order and order[0] + mss <= value:
            rec = sent.pop(order.popleft())
            if not rec[4]:
                newly.append(rec)
        for start, end in x:
            seg = start
            while seg + mss <= end:
                rec = sent.get(seg)
                if rec is not None and not rec[4]:
                    rec[4] = True
                    newly.append(rec)
                seg += mss
        if not newly:
            continue
        in_flight -= len(newly)
        ref = max(newly, key=lambda r: r[0])
        delivered += len(newly)
        delivered_at, first_tx = t, ref[0]
        min_rtt = min(min_rtt, t - ref[0])
        snd, ack = ref[0] - ref[3], t - ref[2]
        if max(snd, ack) >= min_rtt:
            bits = (delivered - ref[1]) * mss * 8
            samples.append((t - ack, bits / max(snd, ack) / capacity, bits / snd / capacity if snd > 0 else math.inf))
    if len(samples) < 10:
        print("delivery-rate samples: too few")
        return

    def gap_before(at: float) -> float:
        i = bisect.bisect_left(ack_times, at)
        return ack_times[i] - ack_times[i - 1] if 0 < i < len(ack_times) else 0.0

    rates = sorted(r for _, r, _ in samples)
    high = [x for x in samples if x[1] > 1.01]
    print(f"delivery-rate samples: {len(samples)}; over the capacity {capacity / 1e6:g} Mbit/s: median "
          f"{rates[len(rates) // 2]:.4f}, p99 {rates[int(0.99 * (len(rates) - 1))]:.4f}, max {rates[-1]:.4f}")
    for label, xs in (("all", samples), ("above 1.01", high)):
        if len(xs) < 10:
            print(f"  {label}: {len(xs)} samples, too few to describe")
            continue
        late = sum(gap_before(start) >= 0.0005 for start, _, _ in xs) / len(xs)
        q = statistics.quantiles([s for _, _, s in xs], n=10)
        print(f"  {label}: {len(xs)} ({len(xs) / len(samples) * 100:.1f} %); starting at an ACK after a gap of 0.5 ms "
              f"or more: {late * 100:.1f} %; their segments sent at {q[0]:.3f} / {statistics.median(s for _, _, s in xs):.3f} "
              f"/ {q[8]:.3f} of the capacity (p10 / median / p90)")


PAIR_GAP_S = 50e-6  # a segment this soon after the previous one of its flow is the second of a pair
# A data segment to the server: time, client port, sequence, length.
DATA_SEGMENT = re.compile(r"(\d+\.\d+) .*?IP \S+\.(\d+) > \S+\.5201: .*?seq (\d+):\d+,.* length (\d+)")


def data_segments(pcap: Path) -> list[tuple[float, int, int]]:
    """(time, client port, sequence) of every data segment to the server in
    `pcap`, in capture order, each flow's sequence unwrapped on its own."""
    last: dict[int, int] = {}
    out = []
    for line in tcpdump_text(pcap).splitlines():
        m = DATA_SEGMENT.match(line)
        if not m or int(m.group(4)) == 0:
            continue
        port, raw = int(m.group(2)), int(m.group(3))
        last[port] = raw if port not in last else nearest(raw, last[port])
        out.append((float(m.group(1)), port, last[port]))
    return out


def drops(outdirs: list[Path], delay_s: float, after_s: float) -> None:
    for d in outdirs:
        entered = data_segments(d / "tun.pcap" if (d / "tun.pcap").is_file() else d / "sender.pcap")
        received = data_segments(d / "receiver.pcap")
        if not entered:
            sys.exit(f"{d}: no data segments in its captures")
        sent_at: dict[tuple[int, int], list[tuple[float, int]]] = collections.defaultdict(list)
        for i, (t, port, seq) in enumerate(entered):
            sent_at[(port, seq)].append((t, i))
        delivered = set()
        for t, port, seq in received:
            tries = sent_at.get((port, seq), [])
            k = bisect.bisect_right([x for x, _ in tries], t - delay_s) - 1
            if k >= 0:
                delivered.add(tries[k][1])
        # What entered in the capture's last second may still have been on
        # its way when the capture ended: not judged.
        t0, t_end, prev = entered[0][0], received[-1][0] - delay_s - 1.0, {}
        count: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
        # Runs of a flow's consecutive segments dropped (in its own order of
        # arrival): their lengths, for how often a whole flight is lost.
        run: dict[int, int] = collections.defaultdict(int)
        runs: dict[int, list[int]] = collections.defaultdict(list)
        for i, (t, port, _) in enumerate(entered):
            second = port in prev and t - prev[port] < PAIR_GAP_S
            prev[port] = t
            if t - t0 < after_s or t > t_end:
                continue
            kind = "second" if second else "other"
            count[port][kind] += 1
            count[port][kind + " dropped"] += i not in delivered
            if i not in delivered:
                run[port] += 1
            elif run[port]:
                runs[port].append(run.pop(port))
        for port, n in run.items():
            if n:
                runs[port].append(n)
        print(f"{d}: drops at the bottleneck from {after_s:g} s to the capture's last second")
        for port, c in sorted(count.items(), key=lambda pc: -(pc[1]["second"] + pc[1]["other"])):
            n, lost = c["second"] + c["other"], c["second dropped"] + c["other dropped"]
            print(f"  flow on port {port}: {n} segments, {lost} dropped ({lost / n:.1%}); the second of a pair "
                  f"{c['second'] / n:.0%} of them, dropped {c['second dropped'] / max(1, c['second']):.1%}; "
                  f"the others dropped {c['other dropped'] / max(1, c['other']):.1%}")
            r = runs[port]
            if r:
                long = sum(x for x in r if x >= 3)
                print(f"    runs of consecutive drops: {len(r)}, mean length {sum(r) / len(r):.2f}, "
                      f"{long / sum(r):.1%} of the drops in runs of 3 or more, longest {max(r)}")

RESEND_ACK_S = 0.0002  # a retransmission this soon after an ACK of its flow was sent by that ACK
ACK_TO_CLIENT = re.compile(r"(\d+\.\d+) .*?IP \S+\.5201 > \S+\.(\d+): .*, ack \d+")


def flow_packets(pcap: Path, mss: int) -> tuple[dict, dict]:
    """Per client port: its data segments to the server as (time, sequence),
    GSO packets split into `mss` segments, and the times of the server's
    ACKs to it; sequences unwrapped per flow."""
    data: dict[int, list[tuple[float, int]]] = collections.defaultdict(list)
    acks: dict[int, list[float]] = collections.defaultdict(list)
    last: dict[int, int] = {}
    for line in tcpdump_text(pcap).splitlines():
        m = DATA_SEGMENT.match(line)
        if m and int(m.group(4)) > 0:
            t, port, raw, n = float(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4))
            last[port] = raw if port not in last else nearest(raw, last[port])
            data[port] += [(t, last[port] + k * mss) for k in range(max(1, n // mss))]
        elif a := ACK_TO_CLIENT.match(line):
            acks[int(a.group(2))].append(float(a.group(1)))
    return data, acks


def resends(outdirs: list[Path], delay_s: float, after_s: float, mss: int) -> None:
    count: collections.Counter = collections.Counter()
    since_ack: collections.Counter = collections.Counter()
    for d in outdirs:
        sent, acks = flow_packets(d / "sender.pcap", mss)
        received, _ = flow_packets(d / "receiver.pcap", mss)
        if not sent:
            sys.exit(f"{d}: no data segments in its sender capture")
        end = max(t for r in received.values() for t, _ in r) - delay_s - 1.0
        for port, segs in sent.items():
            arrivals: dict[int, list[float]] = collections.defaultdict(list)
            for t, seq in received.get(port, []):
                arrivals[seq].append(t)
            tries: dict[int, list[float]] = collections.defaultdict(list)
            for t, seq in segs:
                tries[seq].append(t)
            a = acks.get(port, [])
            t0 = segs[0][0]
            for t, seq in segs:
                if tries[seq][0] == t or t - t0 < after_s or t > end:
                    continue
                # Delivered: reached the receiver after this send and before the next one could.
                later = [x for x in tries[seq] if x > t]
                upto = (later[0] if later else math.inf) + delay_s
                delivered = any(t + delay_s <= r < upto for r in arrivals.get(seq, []))
                j = bisect.bisect_right(a, t) - 1
                gap = t - a[j] if j >= 0 else math.inf
                kind = "ACK" if gap < RESEND_ACK_S else "timer"
                count[kind] += 1
                count[kind + " dropped"] += not delivered
                if kind == "timer":
                    since_ack[12 if gap >= 0.012 else int(gap * 1000)] += 1
    names = ", ".join(str(d) for d in outdirs)
    print(f"{names}: retransmissions from {after_s:g} s to the captures' last second")
    for kind in ("ACK", "timer"):
        n = count[kind]
        print(f"  sent by {'an ACK' if kind == 'ACK' else 'a timer'}: {n}, dropped {count[kind + ' dropped'] / max(1, n):.1%}")
    n = sum(since_ack.values())
    if n:
        print("  the timer's, by ms after the flow's last ACK: "
              + " ".join(f"{b}{'+' if b == 12 else ''}:{since_ack[b] / n:.0%}" for b in range(13)))


def acked_alone(ev, i: int, end: int) -> bool:
    """Whether the data segment at `ev[i]` (events as `events` gives them)
    was acknowledged alone: an ACK covering `end` before the next data."""
    for _, kind, value, _ in ev[i + 1:]:
        if kind == "D":
            return False
        if value >= end:
            return True
    return False


def quick_acks(outdirs: list[Path], silence_s: float, after: int = 16) -> None:
    """At the receiver: the share of in-order data segments acknowledged
    alone (an ACK covering the segment before the next data arrives) among
    the `after` in-order segments that follow a duplicate (data below what
    the receiver had), or a silence of more than `silence_s` since in-order
    data last arrived, or of 0.1 s up to it; and over all in-order segments.
    Linux gives 16 quick ACKs after both (`tcp_enter_quickack_mode`,
    `tcp_event_data_recv` past the receiver's RTO), else one ACK per two
    segments (docs/sim-model.md, "Quick ACKs after old data and silences")."""
    for outdir in outdirs:
        ev = events(outdir / "receiver.pcap")
        segs = []  # (kind, acked alone, silence before it)
        rcv_nxt = None
        last_in = None
        for i, (t, kind, value, x) in enumerate(ev):
            if kind == "A":
                rcv_nxt = value if rcv_nxt is None else max(rcv_nxt, value)
                continue
            end = value + x
            if rcv_nxt is None:
                rcv_nxt = value
            if end <= rcv_nxt:
                cls = "dup"
            elif value <= rcv_nxt:
                cls = "in"
            else:
                cls = "ooo"
            gap = t - last_in if cls == "in" and last_in is not None else 0.0
            if cls == "in":
                last_in = t
                rcv_nxt = end
            segs.append((cls, acked_alone(ev, i, end), gap))

        def following(trigger) -> tuple[int, int, int]:
            n = hits = total = 0
            for i, s in enumerate(segs):
                if not trigger(s):
                    continue
                n += 1
                nxt = [s2 for s2 in segs[i + 1:] if s2[0] == "in"][:after]
                hits += sum(s2[1] for s2 in nxt)
                total += len(nxt)
            return n, hits, total

        counts = {c: sum(1 for s in segs if s[0] == c) for c in ("in", "ooo", "dup")}
        print(f"{outdir}: data segments in order {counts['in']}, out of order {counts['ooo']}, "
              f"duplicates {counts['dup']}")
        for label, trigger in [("a duplicate", lambda s: s[0] == "dup"),
                               (f"a silence over {silence_s * 1e3:g} ms", lambda s: s[0] == "in" and s[2] > silence_s),
                               (f"a silence of 100-{silence_s * 1e3:g} ms",
                                lambda s: s[0] == "in" and 0.1 < s[2] <= silence_s)]:
            n, hits, total = following(trigger)
            share = f"{hits / total:.2f}" if total else "-"
            print(f"  after {label} ({n}): {hits} of the next {total} in-order segments acknowledged alone, {share}")
        ins = [s for s in segs if s[0] == "in"]
        print(f"  all in-order segments: {sum(s[1] for s in ins)} of {len(ins)}, "
              f"{sum(s[1] for s in ins) / max(1, len(ins)):.2f}")


def delayed_acks(outdirs: list[Path], least_ms: float = 5.0) -> None:
    """At the receiver: the ACKs that left at least `least_ms` after the
    data segment before them (those the delayed-ACK timer sent; every other
    ACK leaves within microseconds of a segment), with the distribution of
    that delay. Linux's timer waits `ato` jiffies, which it adapts per
    connection: 40 ms at first, doubled each time the timer fires, brought
    back as segments arrive close together, at most the RTT (docs/sim-model.md,
    "The delayed-ACK timeout, adapted"), and runs on the wheel's next jiffy."""
    edges = [40, 41, 45, 50, 60, 70, 80, 120, 200, 1000]
    for outdir in outdirs:
        ev = events(outdir / "receiver.pcap")
        delays, acks, last_data = [], 0, None
        for t, kind, _, _ in ev:
            if kind == "D":
                last_data = t
                continue
            acks += 1
            if last_data is not None and (t - last_data) * 1e3 >= least_ms:
                delays.append((t - last_data) * 1e3)
        print(f"{outdir}: {acks} ACKs, {len(delays)} sent {least_ms:g} ms or more after the segment before them")
        if not delays:
            continue
        q = statistics.quantiles(delays, n=10) if len(delays) > 1 else delays * 9
        print(f"  delay (ms): min {min(delays):.1f}, median {statistics.median(delays):.1f}, "
              f"p10 {q[0]:.1f}, p90 {q[-1]:.1f}, max {max(delays):.1f}")
        bins = [f"<{edges[0]}: {sum(d < edges[0] for d in delays)}"]
        bins += [f"{a}-{b}: {sum(a <= d < b for d in delays)}" for a, b in zip(edges, edges[1:])]
        bins.append(f">={edges[-1]}: {sum(d >= edges[-1] for d in delays)}")
        print("  " + ", ".join(bins))


def skb_sizes(outdirs: list[Path], after: float, mss: int = 1448) -> None:
    """At a kernel sender's veth each captured data packet is one skb (a GSO
    packet of several segments): their sizes in segments from `after`
    seconds past the first data packet on, new data and retransmissions
    apart, with the share of segments whose skb carries PSH (every GSO
    packet does, and an skb that ends an application write). The
    simulator's captures hold segments, not skbs: its sizes come from a
    counting build (docs/sim-model.md, "PSH at the ends of writes, half a
    window per skb, and the clamp at establishment"). Each flow (its source
    address and port) has its own sequence space; the counts are summed."""
    for outdir in outdirs:
        sizes = {"new": collections.Counter(), "resent": collections.Counter()}
        segs = pushed = 0
        t0 = None
        tops: dict[str, int] = {}  # per flow: the highest sequence sent so far
        for line in tcpdump_text(outdir / "sender.pcap").splitlines():
            if " IP " not in line:
                continue
            hdr = line.split(" IP ", 1)[1].split(":", 1)[0]
            if SERVER_PORT in hdr:
                continue
            length = re.search(r"length (\d+)", line)
            seq = re.search(r"seq (\d+):(\d+)", line)
            if not length or not seq or int(length.group(1)) == 0:
                continue
            t = float(line.split()[0])
            t0 = t if t0 is None else t0
            flow = hdr.split(" > ")[0]
            top = tops.get(flow)
            start = int(seq.group(1)) if top is None else nearest(int(seq.group(1)), top)
            end = start + int(length.group(1))
            kind = "new" if top is None or start >= top else "resent"
            tops[flow] = end if top is None else max(top, end)
            if t - t0 < after:
                continue
            n = -(-int(length.group(1)) // mss)
            sizes[kind][min(n, 4)] += 1
            segs += n
            pushed += n if "[P" in line else 0
        print(f"{outdir}: skbs after {after:g} s by segments (4: four or more); {pushed / max(segs, 1):.1%} of "
              f"{segs} segments in skbs with PSH")
        for kind, c in sizes.items():
            print(f"  {kind}: " + ", ".join(f"{k}: {c[k]}" for k in (1, 2, 3, 4)))


def ecn_acks(outdirs: list[Path], mss: int = 1448, skip: int = 1000) -> None:
    """At a receiver with RFC 3168 ECN: the share acknowledged alone (an ACK
    covering it before the next data arrives) of the first CE-marked
    segment since the sender's last CWR, of the segment after it, and of
    data segments with CWR, against every other data segment. Linux gives
    two quick ACKs on that first mark and on a Not-ECT segment after ECT
    ones (a retransmission; `tcp_data_ecn_check`), and acknowledges CWR
    data at once (`tcp_ecn_accept_cwr`). The first `skip` segments are left
    out (the window's growth acknowledges every one), except Not-ECT ones.
    At the sender (if sender.pcap is there): how many new data segments and
    how many retransmissions left ECT (Linux sends retransmissions Not-ECT
    unless the CCA needs ECN: `tcp_ecn_send`)."""
    for outdir in outdirs:
        counts = {k: [0, 0] for k in ("first CE since CWR", "the segment after it", "data with CWR",
                                      "Not-ECT after ECT", "the segment after that", "the others")}
        cwr_seen, after, n, ect_seen = True, None, 0, False
        ev = ecn_segments(outdir / "receiver.pcap")
        for i, (_, kind, end, marks) in enumerate(ev):
            if kind != "D":
                continue
            n += 1
            alone = acked_alone(ev, i, end)
            ecn, cwr, _ = marks
            key = "the others"
            if cwr:
                key, cwr_seen, after = "data with CWR", True, None
            elif ecn == 3 and cwr_seen:
                key, cwr_seen, after = "first CE since CWR", False, "the segment after it"
            elif ecn == 0 and ect_seen:
                key, after = "Not-ECT after ECT", "the segment after that"
            elif after:
                key, after = after, None
            ect_seen = ect_seen or ecn != 0
            if n > skip or key.startswith("Not-ECT") or key == "the segment after that":
                counts[key][0] += alone
                counts[key][1] += 1
        print(f"{outdir}: acknowledged alone, " + "; ".join(
            f"{k} {a} of {t}" + (f" ({a / t:.2f})" if t else "") for k, (a, t) in counts.items()))
        if (outdir / "sender.pcap").is_file():
            sent = {"new data": [0, 0], "retransmissions": [0, 0]}
            top = None
            for _, kind, end, marks in ecn_segments(outdir / "sender.pcap"):
                if kind != "D":
                    continue
                ecn, _, length = marks
                # A GSO packet at the sender carries its segments' ECN field.
                key = "retransmissions" if top is not None and end <= top else "new data"
                segs = max(1, -(-length // mss))
                sent[key][0] += segs * (ecn != 0)
                sent[key][1] += segs
                top = end if top is None else max(top, end)
            print(f"{outdir}: sent ECT, " + "; ".join(
                f"{k} {a} of {t} segments" + (f" ({a / t:.2f})" if t else "") for k, (a, t) in sent.items()))


def ecn_segments(pcap: Path) -> list:
    """A capture's packets as `events` has them, untimed: (None, "D", end,
    (ECN field, CWR, length)) for data to the server, (None, "A", ack, None)
    for its ACKs. tcpdump -v prints the IP header (with the ECN field) on
    one line and the TCP header on the next; sequence numbers are relative
    to the first, so none wraps."""
    text = tcpdump_text(pcap, ("-v",))
    recs = re.findall(r"\(tos 0x([0-9a-f]+)[^\n]*\n\s+(\S+ > \S+): Flags \[([^\]]*)\],[^\n]*?"
                      r"(?:seq (\d+):(\d+))?,? ?(?:ack (\d+))?,[^\n]*length (\d+)", text)
    ev = []
    for tos, hdr, flags, start, end, ack, length in recs:
        if SERVER_PORT in hdr:
            if ack:
                ev.append((None, "A", int(ack), None))
        elif start and int(length) > 0:
            ev.append((None, "D", int(end), (int(tos, 16) & 3, "W" in flags, int(length))))
    return ev


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("study", type=Path)
    c.add_argument("outdir", type=Path)
    c.add_argument("--seconds", type=float, default=6.0)
    m = sub.add_parser("simulate")
    m.add_argument("study", type=Path)
    m.add_argument("outdir", type=Path)
    m.add_argument("--run", type=int, default=0, help="which of the study's runs (default 0)")
    m.add_argument("--seed", type=int, default=None, help="replace the run's seed")
    m.add_argument("--flow", type=int, default=None, help="the flow id to trace (default: the first flow)")
    a = sub.add_parser("analyse")
    a.add_argument("outdir", type=Path)
    a.add_argument("--rate", required=True, help="the bottleneck's rate, e.g. 1Gbit")
    a.add_argument("--buffer-pkts", type=int, required=True)
    a.add_argument("--mss", type=int, default=1448)
    a.add_argument("--wire-bytes", type=int, default=None, help="bytes per packet on the wire (default mss + 52)")
    a.add_argument("--fit-from", type=float, default=2.0, help="ms: the shorter stall length the fit matches")
    a.add_argument("--fit-to", type=float, default=5.0, help="ms: the longer stall length the fit matches")
    r = sub.add_parser("rates")
    r.add_argument("outdir", type=Path)
    r.add_argument("--capacity", required=True, help="the bottleneck's payload rate, e.g. 96.533Mbit")
    r.add_argument("--mss", type=int, default=1448)
    dr = sub.add_parser("drops")
    dr.add_argument("outdirs", type=Path, nargs="+")
    dr.add_argument("--delay", required=True, help="the bottleneck's one-way delay, e.g. 5ms")
    dr.add_argument("--after", type=float, default=3.0, help="seconds from the first segment to leave out")
    rs = sub.add_parser("resends")
    rs.add_argument("outdirs", type=Path, nargs="+")
    rs.add_argument("--delay", required=True, help="the bottleneck's one-way delay, e.g. 5ms")
    rs.add_argument("--after", type=float, default=3.0, help="seconds from the first segment to leave out")
    rs.add_argument("--mss", type=int, default=1448)
    q = sub.add_parser("quickacks")
    q.add_argument("outdirs", type=Path, nargs="+")
    q.add_argument("--silence", default="220ms",
                   help="the receiver's RTO: its handshake RTT R + max(2R, 200 ms); default 220ms, a 20 ms path")
    da = sub.add_parser("delacks")
    da.add_argument("outdirs", type=Path, nargs="+")
    da.add_argument("--least", type=float, default=5.0, help="ms: an ACK this long after the last segment is the timer's")
    sk = sub.add_parser("skbs")
    sk.add_argument("outdirs", type=Path, nargs="+")
    sk.add_argument("--after", type=float, default=3.0, help="seconds from the first data packet to leave out")
    sk.add_argument("--mss", type=int, default=1448)
    ea = sub.add_parser("ecnacks")
    ea.add_argument("outdirs", type=Path, nargs="+")
    ea.add_argument("--mss", type=int, default=1448, help="to count a GSO packet's segments at the sender")
    args = ap.parse_args()
    if args.cmd == "capture":
        capture(args.study, args.outdir, args.seconds)
    elif args.cmd == "simulate":
        simulate(args.study, args.outdir, args.run, args.seed, args.flow)
    elif args.cmd == "delacks":
        delayed_acks(args.outdirs, args.least)
    elif args.cmd == "skbs":
        skb_sizes(args.outdirs, args.after, args.mss)
    elif args.cmd == "ecnacks":
        ecn_acks(args.outdirs, args.mss)
    elif args.cmd == "quickacks":
        quick_acks(args.outdirs, parse_time_s(args.silence, "--silence"))
    elif args.cmd == "resends":
        resends(args.outdirs, parse_time_s(args.delay, "--delay"), args.after, args.mss)
    elif args.cmd == "drops":
        drops(args.outdirs, parse_time_s(args.delay, "--delay"), args.after)
    elif args.cmd == "rates":
        rate_samples(events(args.outdir / "sender.pcap"), parse_rate(args.capacity, "--capacity"), args.mss)
    else:
        if not 0 < args.fit_from < args.fit_to:
            sys.exit(f"--fit-from {args.fit_from:g} / --fit-to {args.fit_to:g}: need 0 < from < to (ms)")
        analyse(args.outdir, parse_rate(args.rate, "--rate"), args.buffer_pkts, args.wire_bytes or args.mss + 52, args.mss,
                (args.fit_from, args.fit_to))


if __name__ == "__main__":
    main()
