#!/usr/bin/env python3
"""Replay Linux's delayed-ACK rules on a receiver capture's data arrivals and
compare the ACK delays they give with the captured ones.

    python bench/delack_replay.py OUTDIR [--hz 250] [--srtt-ms 200] [--min-rto-ms 200] [--psh]

OUTDIR holds a receiver.pcap of `bench/pcap_bursts.py capture` (the kernel)
or `simulate` (the simulator), of `bench/delack-ato.toml` for instance. From
just after the first ACK the delayed-ACK timer sent (the receiver's quick
ACKs over), each data segment is fed, in order, to the rules the simulator
models after Linux 6.18 (docs/sim-model.md, "The delayed-ACK timeout,
adapted"): `ato` adapted to the gap since the last segment
(`tcp_event_data_recv`); an ACK at once for the second unacknowledged
segment (and with `--psh` for a segment with PSH: ICSK_ACK_PUSHED); else
the timer armed `ato` jiffies ahead, bounded by the receiver's RTT and
`tcp_delack_max`, an armed timer due within ato/4 giving way to an ACK at
once (`tcp_send_delayed_ack`); the timer on the wheel's next jiffy, `ato`
doubled up to the RTO when it fires (`tcp_delack_timer_handler`). The
receiver's RTT is its handshake's (`--srtt-ms`, the path's RTT), its RTO
that RTT plus max(2 RTT, min RTO). The jiffy clock's phase against the
capture's clock is unknown for a kernel capture: the best of sixteen
phases is taken. Prints the captured and replayed delays of the
timer-sent ACKs (an ACK 5 ms or more after the segment before it).
Nothing here is a test: it prints figures.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pcap_bursts


def replay(data, before, psh, phase_ms, hz, srtt_ms, min_rto_ms):
    """The timer-sent ACKs' (fire time, time of the last data before it)
    for `data`, (time, seq) pairs starting just after a timer-sent ACK;
    `before`: the time of the segment that ACK covered."""
    jiffy_ms = 1000 / hz
    ato_min = hz // 25
    rto = int(-(-(srtt_ms + max(2 * srtt_ms, min_rto_ms)) * hz // 1000))
    max_ato = int(-(-srtt_ms * hz // 1000))
    delack_max = min(hz // 5, max(int(-(-min_rto_ms * hz // 1000)), 2) - 1)

    def jiffies(t):
        return int((t * 1000 + phase_ms) // jiffy_ms)

    ato, lrcv = 2 * ato_min, jiffies(before)
    unacked, due, fire_at, last = 0, None, None, None
    out = []
    for t, seq in data:
        if fire_at is not None and fire_at <= t:
            out.append((fire_at, last))
            ato, unacked, due, fire_at = min(2 * ato, rto), 0, None, None
        now = jiffies(t)
        m = now - lrcv
        if m <= ato_min // 2:
            ato = ato // 2 + ato_min // 2
        elif m < ato:
            ato = min(ato // 2 + m, rto)
        lrcv, last = now, t
        unacked += 1
        if unacked >= 2 or seq in psh:
            unacked, due, fire_at = 0, None, None
            continue
        wait = min(ato, max(max_ato, ato_min)) if ato > ato_min else ato
        wait = min(wait, delack_max)
        if due is not None and due <= now + wait // 4:
            unacked, due, fire_at = 0, None, None
            continue
        due = now + wait if due is None else min(now + wait, due)
        fire_at = ((due + 1) * jiffy_ms - phase_ms) / 1000
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--hz", type=int, default=250)
    ap.add_argument("--srtt-ms", type=float, default=200.0)
    ap.add_argument("--min-rto-ms", type=float, default=200.0)
    ap.add_argument("--psh", action="store_true", help="a segment with PSH is acknowledged at once")
    args = ap.parse_args()
    pcap = args.outdir / "receiver.pcap"
    ev = pcap_bursts.events(pcap)
    psh = set()
    if args.psh:
        for line in pcap_bursts.tcpdump_text(pcap).splitlines():
            m = re.search(r"Flags \[P\.?\], seq (\d+):", line)
            if m and pcap_bursts.SERVER_PORT not in line.split(" IP ", 1)[1].split(":", 1)[0]:
                psh.add(int(m.group(1)))
    captured, start, last = [], None, None
    for t, kind, _, _ in ev:
        if kind == "D":
            last = t
        elif last is not None and t - last >= 0.005:
            if start is None:
                start, before = t, last
            else:
                captured.append(round((t - last) * 1e3, 1))
    if start is None:
        raise SystemExit(f"{pcap}: no ACK sent by the delayed-ACK timer")
    data = [(t, seq) for t, kind, seq, _ in ev if kind == "D" and t > start]
    best = None
    for phase in (i * 0.25 for i in range(16)):
        got = [round((f - l) * 1e3, 1) for f, l in replay(data, before, psh, phase, args.hz, args.srtt_ms, args.min_rto_ms)]
        err = sum(abs(a - b) for a, b in zip(got, captured)) + 100 * abs(len(got) - len(captured))
        if best is None or err < best[0]:
            best = (err, phase, got)
    err, phase, got = best
    close = sum(abs(a - b) <= 0.15 for a, b in zip(got, captured))
    print(f"{args.outdir}: {len(captured)} timer-sent ACKs after the first; replayed {len(got)}, "
          f"{close} within 0.1 ms (jiffy phase {phase:g} ms)")
    print(f"  captured (ms): {' '.join(f'{x:g}' for x in captured)}")
    print(f"  replayed (ms): {' '.join(f'{x:g}' for x in got)}")


if __name__ == "__main__":
    main()
