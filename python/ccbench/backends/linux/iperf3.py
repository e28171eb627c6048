"""Bulk flows driven by iperf3 (``tool = "iperf3"`` in the study), for people
who want their usual tool's numbers next to ccbench's.

Per such flow the backend starts two processes (``iperf3_proc``, the same
ready/go protocol as the others): in the receiver namespace ``iperf3 -s -1``
on a port of its own, and in the sender namespace a client that waits until
the flow's start and runs

    iperf3 -c RECEIVER -p PORT -t SECONDS -i INTERVAL -J --get-server-output
           -C CCA -M MSS [-S TOS] [--fq-rate BPS]

iperf3 runs for whole seconds (its ``-t``), so such a flow's active time
must be a whole number of seconds (a study error otherwise). Its JSON
becomes the flow's row and samples:

* samples at iperf3's interval ends: ``cwnd_bytes`` = snd_cwnd, ``srtt_us``
  = rtt (the sender's TCP_INFO at each interval end), ``retrans_segs``
  cumulative, ``delivered_bytes`` = the bytes the *server* received up to
  that interval's end (its own intervals, same length); no inflight, pacing
  or delivery rate (iperf3 does not report them). iperf3 times its
  intervals from its test start, which follows its control-connection
  set-up; ccbench places them at (client launch − t0) + interval end, so
  they sit a few round trips early.
* the flow: bytes delivered = the server's received bytes; retransmissions,
  min and mean RTT from the sender's summary (iperf3's min/mean of its
  sampled srtt); no p99.
* ``stats["iperf3"][flow id]``: iperf3's own summary (bits per second sent
  and received, retransmits, max cwnd, RTTs), as iperf3 printed it.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from typing import Optional

BASE_PORT = 5301  # flow i listens on BASE_PORT + i
EXIT_GRACE_S = 5.0  # after its planned end, how long iperf3 gets to print its JSON


def available() -> Optional[str]:
    """Why iperf3 cannot be used, or None."""
    if shutil.which("iperf3") is None:
        return "iperf3 is not installed (apt-get install iperf3)"
    return None


def whole_seconds(active_ns: int) -> Optional[int]:
    """iperf3's -t for an active time, or None when it is not whole seconds."""
    if active_ns <= 0 or active_ns % 1_000_000_000:
        return None
    return active_ns // 1_000_000_000


def server_argv(port: int, interval_ns: int) -> list[str]:
    return ["iperf3", "-s", "-1", "-p", str(port), "-i", _seconds(interval_ns), "-J"]


def client_argv(server_ip: str, port: int, flow: dict, seconds: int, interval_ns: int, mss_opt: int) -> list[str]:
    argv = ["iperf3", "-c", server_ip, "-p", str(port), "-t", str(seconds), "-i", _seconds(interval_ns), "-J",
            "--get-server-output", "-C", flow["cca"], "-M", str(mss_opt)]
    if flow.get("dscp"):
        argv += ["-S", str(int(flow["dscp"]) << 2)]
    if flow.get("max_pacing_rate_bps") is not None:
        argv += ["--fq-rate", str(int(flow["max_pacing_rate_bps"]))]
    return argv


def _seconds(ns: int) -> str:
    return f"{ns / 1e9:g}"


def _monotonic_ns() -> int:
    return time.monotonic_ns()


def run(config_text: str) -> str:
    """The body of an iperf3_proc: a server or a client (``role``)."""
    cfg = json.loads(config_text)
    if cfg["role"] == "server":
        return json.dumps(_serve(cfg))
    return json.dumps(_client(cfg))


def _wait(p: subprocess.Popen, until_ns: int) -> None:
    """Wait for ``p`` until the monotonic time ``until_ns``; then SIGINT (iperf3
    prints its JSON on SIGINT), and SIGKILL if that is not enough."""
    try:
        p.wait(timeout=max(0.0, (until_ns - _monotonic_ns()) / 1e9))
        return
    except subprocess.TimeoutExpired:
        pass
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def _serve(cfg: dict) -> dict:
    p = subprocess.Popen(server_argv(cfg["port"], cfg["sample_interval_ns"]), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    _wait(p, cfg["stop_at_monotonic_ns"])
    err = p.stderr.read().decode(errors="replace").strip() if p.stderr else ""
    return {"exit": p.returncode, "stderr": err[-500:]}


def _client(cfg: dict) -> dict:
    flow = cfg["flow"]
    start = cfg["t0_monotonic_ns"] + int(flow["start_ns"])
    delay = (start - _monotonic_ns()) / 1e9
    if delay > 0:
        time.sleep(delay)
    launch = _monotonic_ns()
    argv = client_argv(cfg["server_ip"], cfg["port"], flow, cfg["seconds"], cfg["sample_interval_ns"], cfg["mss"])
    with open(cfg["json_path"], "wb") as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE)
        _wait(p, launch + cfg["seconds"] * 1_000_000_000 + int(EXIT_GRACE_S * 1e9))
    err = p.stderr.read().decode(errors="replace").strip() if p.stderr else ""
    try:
        with open(cfg["json_path"]) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise RuntimeError(f"flow {flow['id']}: iperf3 wrote no JSON (exit {p.returncode}: {err or e})") from None
    if doc.get("error"):
        raise RuntimeError(f"flow {flow['id']}: iperf3: {doc['error']}")
    offset_us = (launch - cfg["t0_monotonic_ns"]) // 1000
    row, samples, summary = convert(doc, int(flow["id"]), offset_us)
    with open(cfg["samples_path"], "w") as f:
        for s in samples:
            f.write(json.dumps(s) + "\n")
    return {"flows": [row], "iperf3": {str(flow["id"]): summary}}


def convert(doc: dict, flow_id: int, offset_us: int) -> tuple[dict, list[dict], dict]:
    """iperf3's client JSON (with the server's output) → the flow's record for
    the backend, its sample rows, and iperf3's own summary."""
    intervals = doc.get("intervals") or []
    server = (doc.get("server_output_json") or {}).get("intervals") or []
    received, recv_ends = 0, []
    for iv in server:
        received += int(iv["sum"]["bytes"])
        recv_ends.append((float(iv["sum"]["end"]), received))
    samples = []
    retrans = 0
    for iv in intervals:
        st = iv["streams"][0]
        retrans += int(st.get("retransmits") or 0)
        end = float(st["end"])
        # The server's bytes up to the same point of its own clock (its intervals end
        # within milliseconds of the client's).
        delivered = max((b for e, b in recv_ends if e <= end + 1e-3), default=0)
        samples.append({
            "flow_id": flow_id, "time_us": offset_us + round(end * 1e6),
            "cwnd_bytes": st.get("snd_cwnd"), "srtt_us": st.get("rtt"),
            "delivered_bytes": delivered, "retrans_segs": retrans,
            "inflight_bytes": None, "pacing_rate_bps": None, "delivery_rate_bps": None,
            "cca_state": None, "bw_est_bps": None,
        })
    end = doc.get("end") or {}
    sender = ((end.get("streams") or [{}])[0]).get("sender") or {}
    got = int((end.get("sum_received") or {}).get("bytes") or received)
    row = {
        "flow_id": flow_id, "tool": "iperf3",
        "connected": bool((doc.get("start") or {}).get("connected")),
        "bytes_acked": got, "sent_segs": None,
        "retrans_segs": int(sender.get("retransmits") or 0),
        # iperf3's mean_rtt averages srtt readings, not the flows table's RTT
        # statistic (docs/analysis.md): it stays in the summary below.
        "rtt_min_us": sender.get("min_rtt"), "rtt_mean_us": None, "rtt_p99_us": None,
    }
    summary = {
        "sent_bps": (end.get("sum_sent") or {}).get("bits_per_second"),
        "received_bps": (end.get("sum_received") or {}).get("bits_per_second"),
        "retransmits": sender.get("retransmits"),
        "max_snd_cwnd_bytes": sender.get("max_snd_cwnd"),
        "min_rtt_us": sender.get("min_rtt"), "mean_rtt_us": sender.get("mean_rtt"),
        "max_rtt_us": sender.get("max_rtt"),
        "seconds": (end.get("sum_sent") or {}).get("seconds"),
        "congestion": end.get("sender_tcp_congestion"),
        "version": (doc.get("start") or {}).get("version"),
    }
    return row, samples, summary


def config_seconds(flow: dict, duration_ns: int) -> Optional[int]:
    stop = flow["stop_ns"] if flow.get("stop_ns") is not None else duration_ns
    return whole_seconds(int(stop) - int(flow["start_ns"]))


__all__ = ["available", "run", "convert", "server_argv", "client_argv", "whole_seconds", "config_seconds",
           "BASE_PORT"]
