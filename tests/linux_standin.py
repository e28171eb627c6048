"""A slow pure-Python stand-in for the Rust emulator and load generator.

Only for testing the linux backend's plumbing (namespaces, processes,
cleanup, result assembly) at low rates, e.g. when ccbench._core lacks
emu_run / load_server / load_client. It follows the config and output
contracts of docs/interfaces.md §4 closely enough for that; it is no
emulator to measure anything with (FIFO only, timing in Python).

Used by LinuxBackend(impl="<path of this file>").
"""

from __future__ import annotations

import fcntl
import heapq
import json
import os
import random
import select
import signal
import socket
import struct
import threading
import time

TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000

_stop = threading.Event()


def _on_signal(signum, frame):
    _stop.set()


def _signals():
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, _on_signal)


def _sleep_until(t_ns: int) -> bool:
    while not _stop.is_set():
        d = t_ns - time.monotonic_ns()
        if d <= 0:
            return True
        _stop.wait(min(d / 1e9, 0.05))
    return False


# ------------------------------------------------------------------ emulator


class _Link:
    def __init__(self, rate_bps, delay_ns, loss, buffer_bytes, buffer_pkts, rng):
        self.rate = rate_bps
        self.delay = delay_ns
        self.loss = loss or 0.0
        self.buf_bytes = buffer_bytes
        self.buf_pkts = buffer_pkts
        self.rng = rng
        self.q: list = []
        self.qbytes = 0
        self.busy_until = 0
        self.drops = self.random_losses = self.ecn_marks = 0

    def stats(self):
        return {"backlog_bytes": self.qbytes, "backlog_pkts": len(self.q), "drops": self.drops,
                "random_losses": self.random_losses, "ecn_marks": self.ecn_marks}


def emu_run(config_json: str) -> str:
    _signals()
    c = json.loads(config_json)
    rng = random.Random(c["seed"])
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", c["tun"].encode(), IFF_TUN | IFF_NO_PI))
    os.set_blocking(fd, False)
    bn = c["bottleneck"]
    rv = c["reverse"] or {**bn, "loss": 0.0}
    fwd = _Link(bn["rate_bps"], bn["delay_ns"], bn["loss"], bn["buffer_bytes"], bn["buffer_pkts"], rng)
    rev = _Link(rv["rate_bps"], rv["delay_ns"], rv.get("loss", 0.0), rv["buffer_bytes"], rv["buffer_pkts"], rng)
    recv = socket.inet_aton(c["receiver_ip"])
    senders = {socket.inet_aton(s["ip"]): s for s in c["senders"]}
    t0, stop_at = c["t0_monotonic_ns"], c["stop_at_monotonic_ns"]
    interval = c["sample_interval_ns"]
    tol = c["late_tolerance_ns"]
    heap: list = []  # (time, seq, action, link, pkt)
    seq = 0
    late = []
    late_pkts = unclassified = 0
    next_sample = t0 + interval
    stats_f = open(c["stats_path"], "w")
    cpu0 = time.process_time_ns()
    wall0 = time.monotonic_ns()

    def push(t, action, link, pkt):
        nonlocal seq
        seq += 1
        heapq.heappush(heap, (t, seq, action, link, pkt))

    def enqueue(now, link, pkt):
        if link.loss and rng.random() < link.loss:
            link.random_losses += 1
            return
        n = len(pkt)
        if (link.buf_pkts is not None and len(link.q) >= link.buf_pkts) or (
                link.buf_bytes is not None and link.qbytes + n > link.buf_bytes):
            link.drops += 1
            return
        link.q.append(pkt)
        link.qbytes += n
        if len(link.q) == 1:
            start = max(now, link.busy_until)
            push(start + n * 8 * 1_000_000_000 // link.rate, "txdone", link, None)

    while not _stop.is_set():
        now = time.monotonic_ns()
        if now >= stop_at:
            break
        timeout = 0.05
        if heap:
            timeout = max(0.0, min(timeout, (heap[0][0] - now) / 1e9))
        r, _, _ = select.select([fd], [], [], timeout)
        now = time.monotonic_ns()
        if r:
            while True:
                try:
                    pkt = os.read(fd, 65536)
                except BlockingIOError:
                    break
                if len(pkt) < 20:
                    continue
                src, dst = pkt[12:16], pkt[16:20]
                if dst == recv and src in senders:
                    push(now + senders[src]["delay_ns"], "enq", fwd, pkt)
                elif src == recv and dst in senders:
                    push(now, "enq", rev, pkt)
                else:
                    unclassified += 1
                    os.write(fd, pkt)
        while heap and heap[0][0] <= now:
            t, _, action, link, pkt = heapq.heappop(heap)
            if action == "enq":
                enqueue(t, link, pkt)
            elif action == "txdone":
                pkt = link.q.pop(0)
                link.qbytes -= len(pkt)
                link.busy_until = t
                if link is fwd:
                    push(t + link.delay, "deliver", None, pkt)
                else:
                    push(t + link.delay + senders[pkt[16:20]]["delay_ns"], "deliver", None, pkt)
                if link.q:
                    push(t + len(link.q[0]) * 8 * 1_000_000_000 // link.rate, "txdone", link, None)
            else:
                lateness = now - t
                late.append(lateness)
                if lateness > tol:
                    late_pkts += 1
                try:
                    os.write(fd, pkt)
                except OSError:
                    pass
        if now >= next_sample:
            late.sort()
            q = (lambda p: late[min(len(late) - 1, int(p * len(late)))] / 1000 if late else 0.0)
            cpu = time.process_time_ns()
            line = {"time_us": (next_sample - t0) // 1000,
                    "links": {"bottleneck": fwd.stats(), "reverse": rev.stats()},
                    "lateness_us": {"p50": q(0.5), "p99": q(0.99), "max": late[-1] / 1000 if late else 0.0},
                    "late_pkts": late_pkts, "tun_read_errors": 0, "tun_write_errors": 0,
                    "forwarded_unclassified": unclassified,
                    "cpu_busy_fraction": min(1.0, (cpu - cpu0) / max(1, now - wall0))}
            cpu0, wall0 = cpu, now
            late = []
            stats_f.write(json.dumps(line) + "\n")
            stats_f.flush()
            next_sample += interval
    stats_f.close()
    os.close(fd)
    return json.dumps({"late_pkts": late_pkts, "links": {"bottleneck": fwd.stats(), "reverse": rev.stats()},
                       "forwarded_unclassified": unclassified, "standin": True})


# ------------------------------------------------------------------ load generator

_HDR = struct.Struct("!QQ")  # request bytes (2^64-1: bulk), response bytes
_BULK = 2**64 - 1


def _recv_exact(s, n):
    got = 0
    while got < n:
        b = s.recv(min(1 << 20, n - got))
        if not b:
            return False
        got += len(b)
    return True


def _serve(conn):
    try:
        while True:
            hdr = b""
            while len(hdr) < _HDR.size:
                b = conn.recv(_HDR.size - len(hdr))
                if not b:
                    return
                hdr += b
            req, resp = _HDR.unpack(hdr)
            if req == _BULK:
                while conn.recv(1 << 20):
                    pass
                return
            if not _recv_exact(conn, req):
                return
            conn.sendall(b"r" * resp)
    except OSError:
        pass
    finally:
        conn.close()


def load_server(config_json: str) -> str:
    _signals()
    c = json.loads(config_json)
    host, port = c["listen"].rsplit(":", 1)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, int(port)))
    ls.listen(128)
    ls.settimeout(0.05)
    n = 0
    while not _stop.is_set() and time.monotonic_ns() < c["stop_at_monotonic_ns"]:
        try:
            conn, _ = ls.accept()
        except socket.timeout:
            continue
        n += 1
        threading.Thread(target=_serve, args=(conn,), daemon=True).start()
    ls.close()
    return json.dumps({"connections": n})


_TI = struct.Struct("=BBBBBBBB" + "I" * 24 + "QQQQ" + "II" + "II" + "II" + "Q" + "QQQ")


def _tcp_info(s):
    raw = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    v = _TI.unpack_from(raw.ljust(_TI.size, b"\0"))
    u = v[8:]
    return {"ca_state": v[1], "snd_mss": u[2], "unacked": u[4], "rtt": u[15], "cwnd": u[18],
            "total_retrans": u[23], "pacing_rate": v[32], "bytes_acked": v[34], "segs_out": v[36],
            "min_rtt": v[39], "data_segs_out": v[41], "delivery_rate": v[42], "busy": v[43],
            "rwnd_limited": v[44], "sndbuf_limited": v[45]}


def load_client(config_json: str) -> str:
    _signals()
    c = json.loads(config_json)
    host, port = c["server"].rsplit(":", 1)
    t0, stop_at = c["t0_monotonic_ns"], c["stop_at_monotonic_ns"]
    socks: dict = {}
    rtts: dict = {}
    rpcs: list = []
    starts: dict = {}
    stops: dict = {}
    lock = threading.Lock()

    def flow(f):
        if not _sleep_until(t0 + f["start_ns"]):
            return
        end = stop_at if f["stop_ns"] is None else min(stop_at, t0 + f["stop_ns"])
        s = socket.socket()
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, f["cca"].encode())
        if f.get("mss"):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, f["mss"] + 12)
        starts[f["id"]] = time.monotonic_ns()
        try:
            s.connect((host, int(port)))
        except OSError:
            return
        with lock:
            socks[f["id"]] = s
        s.settimeout(0.1)
        try:
            if f["kind"] == "bulk":
                s.sendall(_HDR.pack(_BULK, 0))
                buf = b"b" * 65536
                while time.monotonic_ns() < end and not _stop.is_set():
                    try:
                        s.send(buf)
                    except socket.timeout:
                        pass
            else:
                while time.monotonic_ns() < end and not _stop.is_set():
                    st = time.monotonic_ns()
                    s.settimeout(None)
                    s.sendall(_HDR.pack(f["request_bytes"], f["response_bytes"]) + b"q" * f["request_bytes"])
                    if not _recv_exact(s, f["response_bytes"]):
                        break
                    done = time.monotonic_ns()
                    if done <= end:
                        rpcs.append({"flow_id": f["id"], "request_bytes": f["request_bytes"],
                                     "response_bytes": f["response_bytes"], "start_us": (st - t0) // 1000,
                                     "latency_us": (done - st) / 1000})
                    if f["think_ns"]:
                        _sleep_until(done + f["think_ns"])
        except OSError:
            pass
        stops[f["id"]] = time.monotonic_ns()
        with lock:
            info = _tcp_info(s)
            finals[f["id"]] = info
        s.close()

    finals: dict = {}
    threads = [threading.Thread(target=flow, args=(f,), daemon=True) for f in c["flows"]]
    for t in threads:
        t.start()
    out = open(c["samples_path"], "w")
    nxt = t0 + c["sample_interval_ns"]
    while _sleep_until(nxt) and nxt <= stop_at:
        with lock:
            for fid, s in sorted(socks.items()):
                if s.fileno() < 0:
                    continue
                try:
                    i = _tcp_info(s)
                except OSError:
                    continue
                rtts.setdefault(fid, []).append(i["rtt"])
                out.write(json.dumps({
                    "flow_id": fid, "time_us": (nxt - t0) // 1000, "cwnd_bytes": i["cwnd"] * i["snd_mss"],
                    "srtt_us": i["rtt"], "delivered_bytes": i["bytes_acked"], "retrans_segs": i["total_retrans"],
                    "inflight_bytes": i["unacked"] * i["snd_mss"], "pacing_rate_bps": i["pacing_rate"] * 8,
                    "delivery_rate_bps": i["delivery_rate"] * 8, "cca_state": None, "bw_est_bps": None}) + "\n")
        nxt += c["sample_interval_ns"]
    out.close()
    for t in threads:
        t.join(timeout=2)
    flows = []
    for f in c["flows"]:
        i = finals.get(f["id"]) or {}
        r = sorted(rtts.get(f["id"], []))
        flows.append({"flow_id": f["id"], "bytes_acked": i.get("bytes_acked", 0),
                      "sent_segs": i.get("data_segs_out", 0), "retrans_segs": i.get("total_retrans", 0),
                      "rtt_min_us": i.get("min_rtt"), "rtt_mean_us": sum(r) / len(r) if r else None,
                      "rtt_p99_us": r[min(len(r) - 1, int(0.99 * len(r)))] if r else None,
                      "busy_us": i.get("busy", 0), "rwnd_limited_us": i.get("rwnd_limited", 0),
                      "sndbuf_limited_us": i.get("sndbuf_limited", 0),
                      "active_start_us": (starts[f["id"]] - t0) // 1000 if f["id"] in starts else None,
                      "active_stop_us": (stops[f["id"]] - t0) // 1000 if f["id"] in stops else None})
    return json.dumps({"flows": flows, "rpcs": rpcs})
