"""Where the linux backend's ACK clock bunches: time stamps of one flow's
packets at every point of the emulated path, in one short linux run.

    sudo PYTHONPATH=python python3 bench/ack_clock.py --rate 10Mbit --rtt 10ms --buffer 4bdp --loss 1% \
        --out /tmp/ackclock.json

Runs one scenario of the validation grid `full` (BBR, one flow) on the linux
backend and records, for every packet of the flow:

- ``tun``: at the router's TUN device, kernel time stamps (SO_TIMESTAMPNS):
  packets the router sends into the emulator (outgoing) and the emulator's
  writes (incoming; stamped in netif_rx before the backlog queue, so the
  time of the write);
- ``snd`` / ``rcv``: at the sender's and the receiver's veth (incoming:
  stamped when the router's forwarding put the packet on the veth; outgoing:
  when the host's stack handed it to the veth);
- ``probe``: the tcp:tcp_probe trace point (perf, CLOCK_MONOTONIC), which
  fires when TCP processes a segment — for an ACK at the sender, the time
  its delivery-rate sample is taken (tcp_mstamp) — and whether that was in
  softirq context or in the process that owned the socket (its backlog,
  processed at release_sock).

It writes every record to --out and prints the analysis (also on its own:
``--analyze FILE``): per point, the ACK spacing and the share of 12 ms
windows whose cumulatively acknowledged bytes exceed the payload capacity;
the delay of each hop; how long after its segment the receiver sent each
SACK-bearing and each in-order PSH ACK; and Linux's delivery-rate samples
(tcp_rate.c) replayed on the sender's trace, with how many of those above
the capacity start their interval at a SACK-bearing ACK. perf records
system-wide while the run lasts (other runs' events are dropped by
address). Linux only, root.
"""

from __future__ import annotations

import argparse
import errno
import json
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ETH_P_IP = 0x0800
ETH_P_ALL = 0x0003
SO_TIMESTAMPNS = 35
SO_RCVBUFFORCE = 33
PACKET_OUTGOING = 4


def mono_minus_real() -> int:
    """CLOCK_MONOTONIC − CLOCK_REALTIME, ns (skb time stamps are real time)."""
    a = time.clock_gettime_ns(time.CLOCK_REALTIME)
    m = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    b = time.clock_gettime_ns(time.CLOCK_REALTIME)
    return m - (a + b) // 2


def open_socket(ifname: str) -> socket.socket:
    """A packet socket on `ifname` of the calling thread's namespace (it
    stays bound to that namespace whichever thread reads it)."""
    # ETH_P_ALL: outgoing packets reach only such taps.
    s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
    s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind((ifname, ETH_P_ALL))
    s.settimeout(0.2)
    return s


def capture(ns: str, ifname: str, point: str, out: list, stop: threading.Event, ready: threading.Event) -> None:
    """Record TCP packets on `ifname` in namespace `ns` until `stop`."""
    from ccbench.backends.linux.netns import in_netns

    s = in_netns(ns, lambda: open_socket(ifname))
    ready.set()
    while not stop.is_set():
        try:
            data, anc, _, addr = s.recvmsg(96, 64)
        except socket.timeout:
            continue
        except OSError as e:
            if e.errno in (errno.ENETDOWN, errno.ENODEV):
                break  # the run's namespaces went away before `stop` was set: the run is over
            raise
        ts = None
        for lvl, typ, v in anc:
            if lvl == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", v[:16])
                ts = sec * 1_000_000_000 + nsec
        if ts is None or addr[1] != ETH_P_IP or len(data) < 40 or data[9] != 6:
            continue
        ihl = (data[0] & 15) * 4
        tot = struct.unpack("!H", data[2:4])[0]
        src, dst = socket.inet_ntoa(data[12:16]), socket.inet_ntoa(data[16:20])
        sport, dport, seq, ack = struct.unpack("!HHII", data[ihl:ihl + 12])
        doff = (data[ihl + 12] >> 4) * 4
        flags = data[ihl + 13]
        out.append((point, ts, addr[2] == PACKET_OUTGOING, src, dst, sport, dport, seq, ack, tot - ihl - doff, flags,
                    sack_blocks(data[ihl + 20:ihl + doff])))
    s.close()


def sack_blocks(opts: bytes) -> list:
    """The SACK blocks (start, end) of a TCP header's options."""
    i, out = 0, []
    while i < len(opts):
        kind = opts[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(opts) or opts[i + 1] < 2:
            break
        n = opts[i + 1]
        if kind == 5:
            body = opts[i + 2:i + n]
            out += [list(struct.unpack("!II", body[k:k + 8])) for k in range(0, len(body) - 7, 8)]
        i += n
    return out


def parse_perf(path: Path, block: str) -> list:
    """tcp_probe events of our run's addresses: (mono ns, pid, src, dst, data_len, snd_una, snd_nxt, cwnd, srtt)."""
    txt = subprocess.run(["perf", "script", "-i", str(path), "-F", "pid,time,trace", "--ns"],
                         capture_output=True, text=True, check=True).stdout
    rows = []
    for line in txt.splitlines():
        if block not in line:
            continue
        head, _, trace = line.partition(": ")
        pid_s, t_s = head.split()[:2]
        f = dict(kv.split("=", 1) for kv in trace.split() if "=" in kv)
        sec, _, frac = t_s.rstrip(":").partition(".")
        rows.append((int(sec) * 1_000_000_000 + int(frac.ljust(9, "0")), int(pid_s), f["src"], f["dest"],
                     int(f["data_len"]), int(f["snd_una"], 16), int(f["snd_nxt"], 16), int(f["snd_cwnd"]),
                     int(f["srtt"])))
    return rows


def pick(plan, rate: str, rtt: str, buf: str, loss: str, cca: str, rep: int):
    for r in plan.runs("linux"):
        p = r.params
        if (p["flows.0.cca"], p["flows.0.count"], p["topology.bottleneck.rate"], p["cases.rtt"],
                p["topology.bottleneck.buffer"], p["topology.bottleneck.loss"], r.repetition) == \
                (cca, "1", rate, rtt, buf, loss, rep):
            return r
    sys.exit(f"no such scenario in grid full: {cca} 1 flow {rate} {rtt} {buf} {loss} rep {rep}")


def pct(x, qs=(10, 50, 90, 99)) -> str:
    import numpy as np

    return " ".join(f"p{q}={np.percentile(x, q):.0f}" for q in qs) + f" max={np.max(x):.0f}"


def analyze(d: dict, window_s: float = 12e-3) -> None:
    """Print where the ACK clock departs from the link's (see the module doc)."""
    import numpy as np

    mss, off = d["mss"], d["mono_minus_real"]
    cap = d["rate_bps"] / 8 * mss / (mss + d["header_bytes"])  # payload bytes/s
    P = d["packets"]
    snd = next(p[3] for p in P if p[0] == "snd" and p[2])
    isn = min((p for p in P if p[0] == "snd" and p[2] and p[3] == snd), key=lambda p: p[1])[7]
    rel = lambda x: (x - isn) % 2**32  # noqa: E731
    warm = min(p[1] for p in P) + off + 2e9

    def stream(point, out, data):
        return sorted((p for p in P if p[0] == point and p[2] == out and (p[3] == snd) == data), key=lambda p: p[1])

    acks = {"receiver sends": stream("rcv", True, False), "enters emulator": stream("tun", True, False),
            "emulator writes": stream("tun", False, False), "sender veth": stream("snd", False, False)}
    print(f"payload capacity {cap * 8 / 1e6:.3f} Mbit/s; ACKs, after a 2 s warm-up:")
    first = {}
    for name, rows in acks.items():
        t = np.array([r[1] + off for r in rows], dtype=np.int64)
        a = np.maximum.accumulate(np.array([rel(r[8]) for r in rows], dtype=np.int64))
        k = t >= warm
        t, a = t[k], a[k]
        j = np.searchsorted(t, t + window_s * 1e9)
        i = np.nonzero(j < len(t))[0]
        r = (a[j[i]] - a[i]) / ((t[j[i]] - t[i]) / 1e9) / cap
        print(f"  {name:16s} n={len(t):5d} spacing us {pct(np.diff(t) / 1e3)}; windows > 1.005 x capacity {np.mean(r > 1.005) * 100:.1f} %")
        first[name] = {}
        for row in rows:
            first[name].setdefault((row[8], row[9], row[10]), row[1] + off)
    names = list(acks)
    for x, y in zip(names, names[1:]):
        dl = np.array([first[y][k] - first[x][k] for k in first[x] if k in first[y]]) / 1e3
        print(f"  hop {x} -> {y}: us {pct(dl, (1, 50, 99))}")
    # The ACK path's delay variation after the warm-up: each ACK's delay from
    # the receiver's TCP to the sender's veth above the smallest, the timing
    # noise a simulated path does not have (docs/sim-model.md, "Host jitter").
    x, y = names[0], names[-1]
    dl = np.array([first[y][k] - first[x][k] for k in first[x] if k in first[y] and first[x][k] >= warm]) / 1e3
    print(f"  ACK path {x} -> {y}, above its minimum: us {pct(dl - dl.min(), (50, 90, 99, 99.9))}")
    # The receiver: how long after the segment it answers each ACK left.
    R = sorted((p for p in P if p[0] == "rcv" and ((not p[2] and p[3] == snd and p[9] > 0) or (p[2] and p[4] == snd))),
               key=lambda p: p[1])
    last, sack_dl, psh_dl, psh_end = None, [], [], {}
    for p in R:
        if not p[2]:
            last = p[1]
            if p[10] & 8:
                psh_end[(p[7] + p[9]) % 2**32] = p[1]
        elif last is not None and p[1] + off >= warm:
            if p[11]:
                sack_dl.append((p[1] - last) / 1e3)
            elif p[8] in psh_end and psh_end[p[8]] == last:
                psh_dl.append((p[1] - last) / 1e3)
    if sack_dl:
        x = np.array(sack_dl)
        print(f"  SACK-bearing ACKs after their segment, us: n={len(x)} {pct(x, (10, 25, 50, 75, 90))}; "
              f"held > 300 us: {np.mean(x > 300) * 100:.0f} %, their median {np.median(x[x > 300]) if (x > 300).any() else 0:.0f}")
    if psh_dl:
        print(f"  in-order PSH ACKs after their segment, us: n={len(psh_dl)} {pct(np.array(psh_dl))}")
    replay_rate(d, snd, rel, warm - off, cap / mss)


def replay_rate(d: dict, snd: str, rel, warm: float, cap_pps: float) -> None:
    """tcp_rate.c's samples on the sender's trace (veth time stamps)."""
    import numpy as np

    mss = d["mss"]
    ev = sorted((p for p in d["packets"] if p[0] == "snd"), key=lambda p: p[1])
    seg: dict = {}
    delivered, dmst, dmst_sack, first_tx, out = 0, None, False, None, 0
    samples = []
    for p in ev:
        t = p[1]
        if p[2] and p[3] == snd and p[9] > 0:  # a data skb: every segment shares its send time
            for k in range(p[9] // mss):
                if out == 0 or dmst is None:
                    first_tx = dmst = t
                seg[(rel(p[7]) - 1) // mss + k] = dict(tx=t, first_tx=first_tx, dmst=dmst, dsack=dmst_sack,
                                                        delivered=delivered, sacked=False)
                out += 1
        elif not p[2] and p[4] == snd:  # an ACK: newly acked and newly SACKed segments
            ai = (rel(p[8]) - 1) // mss
            newly = [i for i, v in seg.items() if i < ai and not v["sacked"]]
            for s_, e_ in p[11]:
                for i in range((rel(s_) - 1) // mss, (rel(e_) - 1) // mss):
                    if i in seg and i >= ai and not seg[i]["sacked"]:
                        seg[i]["sacked"] = True
                        newly.append(i)
            if not newly:
                continue
            best = max(newly, key=lambda i: (seg[i]["tx"], i))
            v = seg[best]
            delivered += len(newly)
            interval = max(v["tx"] - v["first_tx"], t - v["dmst"])
            samples.append((t, delivered - v["delivered"], interval, v["dsack"]))
            first_tx, dmst, dmst_sack = v["tx"], t, bool(p[11])
            for i in [i for i in seg if i < ai]:
                del seg[i]
            out = sum(1 for v in seg.values() if not v["sacked"])
    s = [x for x in samples if x[0] >= warm and x[2] > 0]
    rate = np.array([x[1] / (x[2] / 1e9) / cap_pps for x in s])
    hi = rate > 1.005
    print(f"  tcp_rate.c replayed: {len(s)} samples, over the capacity p50 {np.median(rate):.4f} p99 "
          f"{np.percentile(rate, 99):.4f} max {rate.max():.4f}; > 1.005 x: {hi.mean() * 100:.1f} %, of which "
          f"{sum(1 for x, h in zip(s, hi) if h and x[3])} of {hi.sum()} start at a SACK-bearing ACK")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", default="10Mbit")
    ap.add_argument("--rtt", default="10ms")
    ap.add_argument("--buffer", default="4bdp")
    ap.add_argument("--loss", default="1%")
    ap.add_argument("--cca", default="bbr")
    ap.add_argument("--rep", type=int, default=0)
    ap.add_argument("--duration", default="10s")
    ap.add_argument("--out", help="where to write the records (JSON)")
    ap.add_argument("--analyze", metavar="FILE", help="only analyse the records of an earlier run")
    a = ap.parse_args()
    if a.analyze:
        analyze(json.load(open(a.analyze)))
        return
    if not a.out:
        sys.exit("--out: required unless --analyze")

    from ccbench.backends.linux import netns
    from ccbench.backends.linux.backend import LinuxBackend
    from ccbench.validate import grid

    plan = grid.plan("full", a.duration, a.rep + 1)
    spec = pick(plan, a.rate, a.rtt, a.buffer, a.loss, a.cca, a.rep)
    got: dict = {}
    orig = netns.new_token

    def token() -> str:  # learn the run's token, to find its namespaces
        got["token"] = orig()
        return got["token"]

    netns.new_token = token
    recs: list = []
    stop = threading.Event()

    def watch() -> None:
        while "token" not in got and not stop.is_set():
            time.sleep(0.002)
        pre = f"ccb{got['token']}-"
        for ns, ifn, point in [(pre + "r", pre + "tun", "tun"), (pre + "s0", pre + "s0", "snd"), (pre + "d", pre + "d", "rcv")]:
            while not stop.is_set():
                try:
                    if (netns.NETNS_DIR / ns).exists() and netns.in_netns(ns, lambda: socket.if_nametoindex(ifn)):
                        break
                except OSError:
                    pass
                time.sleep(0.002)
            ready = threading.Event()
            threading.Thread(target=capture, args=(ns, ifn, point, recs, stop, ready), daemon=True).start()
            ready.wait(2)

    tmp = Path(tempfile.mkdtemp(prefix="ackclock"))
    perf = subprocess.Popen(["perf", "record", "-q", "-e", "tcp:tcp_probe", "-a", "-k", "mono", "-m", "1024",
                             "-o", str(tmp / "perf.data")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    w = threading.Thread(target=watch, daemon=True)
    w.start()
    off = mono_minus_real()
    res = LinuxBackend().run(spec)
    stop.set()
    perf.send_signal(2)
    perf.wait()
    w.join(1)
    print(f"run {res.status}: goodput {res.flows[0]['goodput_bps'] / 1e6:.2f} Mbit/s, mean RTT "
          f"{res.flows[0]['rtt_mean_us'] / 1e3:.2f} ms")
    src = sorted({r[3] for r in recs if r[0] == "snd" and r[2]})
    probe = parse_perf(tmp / "perf.data", ".".join(src[0].split(".")[:3]) + ".")
    d = {"params": spec.params, "rate_bps": spec.config["bottleneck"]["rate_bps"], "mss": spec.config["tcp"]["mss"],
         "header_bytes": spec.config["tcp"]["header_bytes"], "mono_minus_real": off, "packets": recs, "probe": probe}
    with open(a.out, "w") as f:
        json.dump(d, f)
    print(f"{len(recs)} packets, {len(probe)} tcp_probe events -> {a.out}")
    analyze(json.loads(json.dumps(d)))


if __name__ == "__main__":
    main()
