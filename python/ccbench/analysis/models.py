"""Reference models of TCP throughput under random loss.

mathis_bps — Mathis, Semke, Mahdavi, Ott, "The macroscopic behavior of the TCP
congestion avoidance algorithm" (CCR 1997):

    throughput = MSS / RTT · C / √p    (bytes/s; × 8 for bits/s)

with C = √(3/2) ≈ 1.22 for periodic loss and an ACK per segment (√(3/(2b))
with b segments per ACK: 0.87 with delayed ACKs).

padhye_bps — Padhye, Firoiu, Towsley, Kurose, "Modeling TCP throughput: a
simple model and its empirical validation" (SIGCOMM 1998), the approximate
full model (their eq. 31), which adds retransmission timeouts and the
receive-window limit:

    B(p) = min( Wmax / RTT,
                1 / ( RTT·√(2bp/3) + T0 · min(1, 3·√(3bp/8)) · p · (1 + 32p²) ) )   segments/s

b = segments acknowledged per ACK, T0 = the retransmission timeout, Wmax =
the receive window in segments. ccbench draws both beside loss sweeps with
p = the configured random loss, RTT = the flows' measured mean RTT and MSS =
the run's mss; for Padhye T0 = RTT + min_rto (Linux's RTO with a small
RTT variance), b = 2 with delayed ACKs on, Wmax = the receive window a
Linux receiver advertises for the run's rmem (0.625 × rmem for 1448-byte
segments; the simulator's senders fill the same), in segments.
"""

from __future__ import annotations

import math
from typing import Optional

from ccbench import core

MATHIS_C = math.sqrt(1.5)


def mathis_bps(mss_bytes: float, rtt_s: float, p: float, c: float = MATHIS_C) -> Optional[float]:
    """Mathis throughput in bits/s; None where undefined (p ≤ 0 or RTT ≤ 0)."""
    if p <= 0 or rtt_s <= 0:
        return None
    return 8.0 * mss_bytes / rtt_s * c / math.sqrt(p)


def padhye_bps(mss_bytes: float, rtt_s: float, p: float, *, t0_s: float, b: int = 1,
               wmax_segs: Optional[float] = None) -> Optional[float]:
    """Padhye (PFTK) throughput in bits/s; None where undefined (p ≤ 0 or RTT ≤ 0)."""
    if p <= 0 or rtt_s <= 0:
        return None
    denom = rtt_s * math.sqrt(2 * b * p / 3) + t0_s * min(1.0, 3 * math.sqrt(3 * b * p / 8)) * p * (1 + 32 * p * p)
    rate = 1.0 / denom
    if wmax_segs:
        rate = min(rate, wmax_segs / rtt_s)
    return 8.0 * mss_bytes * rate


def receive_window_segs(tcp: dict) -> float:
    """Padhye's Wmax for a run's `tcp` settings: the largest window a Linux
    receiver with its `rmem_bytes` advertises, in segments (the core
    computes it, as its senders use it)."""
    mss = tcp.get("mss", 1448)
    window = core.load("the Padhye model").receive_window(mss, tcp.get("header_bytes", 52), tcp["rmem_bytes"])
    return window / mss
