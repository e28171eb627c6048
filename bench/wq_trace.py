#!/usr/bin/env python3
"""Does the kernel's sender grow its head skb from the next one? Trace its
write queue at each ACK during a captured linux run, then test.

    python bench/wq_trace.py capture STUDY.toml OUTDIR [--seconds S]
    python bench/wq_trace.py spans OUTDIR [--window A:B ...]

`capture` builds bench/wq_trace/probe.bpf.c (clang, with a vmlinux.h from
bpftool and this kernel's BTF) and its loader (cc, libbpf), attaches the
probe to the `tcp_probe` tracepoint, and runs `bench/pcap_bursts.py
capture STUDY.toml OUTDIR --seconds S` under it (give the study one
configuration and one repetition). Each ACK a socket takes in writes one
line to the trace buffer: snd_una, snd_nxt, write_seq, cwnd,
packets_out, the number of skbs in the write queue, the lengths of its
first two (the send head, and the skb `tcp_grow_skb` would take bytes
from), and the send buffer's charge and size. The lines go to
OUTDIR/wq.txt. The loader's exit detaches the probe; the trace buffer's
size is put back. Needs root, clang, bpftool, libbpf-dev and tcpdump.

`spans` reads OUTDIR/wq.txt and OUTDIR/sender.pcap and prints, for each
sender's socket and each time window (seconds after its first data
segment; default 0-0.6 and 0.6-end):

- the write queue's depth at the ACKs (`tcp_grow_skb` returns when the
  send head is the queue's only skb);
- the sender's new-data GSO packets (the sender-side capture sees each
  transmitted skb whole) by where they end against the write queue's
  skb boundaries seen at the ACKs: **across** one (the head was grown
  from the next skb: only `tcp_grow_skb` makes such a packet), **at** one
  (the head left whole; with growth that means cwnd's quota or the TSO
  size was exactly the head), or **inside** the head (split by
  `tso_fragment`);
- cwnd every 100 ms.

Found with it (docs/sim-model.md, "The head skb grows from the next one"):
Linux 6.18 grows in slow start as after it, and a bulk flow's write
queue holds two skbs or more at every ACK after the first 0.3 s (in
the first, at all but a few dozen of some 500).
"""

from __future__ import annotations

import argparse
import bisect
import collections
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRACEFS = Path("/sys/kernel/tracing")
SERVER_PORT = 5201  # the load generator's port
TRACE_BUFFER_KB = 65536  # per CPU: a few seconds of two bulk flows' ACKs
LINE = re.compile(r"(\d+\.\d+): bpf_trace_printk: wq port (\d+) una (\d+) nxt (\d+) wseq (\d+) cwnd (\d+) "
                  r"pout (\d+) skbs (\d+) head (\d+) next (\d+) queued (-?\d+) sndbuf (\d+)")
Ack = collections.namedtuple("Ack", "t una nxt wseq cwnd pout skbs head next queued sndbuf")


def build(workdir: Path) -> tuple[Path, Path]:
    for tool in ("clang", "bpftool", "cc"):
        if not shutil.which(tool):
            sys.exit(f"capture needs {tool} (apt-get install clang bpftool libbpf-dev gcc)")
    vmlinux = workdir / "vmlinux.h"
    with vmlinux.open("w") as f:
        subprocess.run(["bpftool", "btf", "dump", "file", "/sys/kernel/btf/vmlinux", "format", "c"], stdout=f,
                       check=True)
    obj = workdir / "probe.bpf.o"
    subprocess.run(["clang", "-O2", "-g", "-target", "bpf", "-I", str(workdir), "-c", str(HERE / "wq_trace" /
                    "probe.bpf.c"), "-o", str(obj)], check=True)
    loader = workdir / "load"
    subprocess.run(["cc", "-O2", str(HERE / "wq_trace" / "load.c"), "-o", str(loader), "-lbpf"], check=True)
    return obj, loader


def restorable_size(text: str) -> str:
    """What to write back to buffer_size_kb: a buffer never used reads
    "7 (expanded: 1408)", which the file does not take back (EINVAL); its
    size once used is the expanded one."""
    m = re.fullmatch(r"(\d+)(?: \(expanded: (\d+)\))?", text.strip())
    if m is None:
        sys.exit(f"{TRACEFS / 'buffer_size_kb'}: unexpected content {text.strip()!r} (allowed: a size in KiB)")
    return m.group(2) or m.group(1)


def capture(study: Path, outdir: Path, seconds: float) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="wq_trace.") as tmp:
        obj, loader = build(Path(tmp))
        size_file = TRACEFS / "buffer_size_kb"
        old_size = restorable_size(size_file.read_text())
        size_file.write_text(str(TRACE_BUFFER_KB))
        (TRACEFS / "trace").write_text("")
        probe = subprocess.Popen([str(loader), str(obj)], stdout=subprocess.PIPE, text=True)
        reader = None
        try:
            if probe.stdout is None or probe.stdout.readline().strip() != "attached":
                sys.exit(f"the probe did not attach (exit {probe.wait()})")
            with (outdir / "wq.txt").open("w") as sink:
                reader = subprocess.Popen(["cat", str(TRACEFS / "trace_pipe")], stdout=sink)
                run = subprocess.run([sys.executable, str(HERE / "pcap_bursts.py"), "capture", str(study),
                                      str(outdir), "--seconds", str(seconds)])
                probe.terminate()
                probe.wait(timeout=10)
                time.sleep(0.5)  # let the reader drain what is left
        finally:
            if probe.poll() is None:
                probe.kill()
                probe.wait()
            if reader is not None:
                reader.terminate()
                reader.wait()
            size_file.write_text(old_size)
    print(f"{sum(1 for _ in (outdir / 'wq.txt').open())} ACK lines in {outdir / 'wq.txt'}")
    sys.exit(run.returncode)


def read_acks(path: Path) -> dict[int, list[Ack]]:
    """The senders' ACK lines by local port (the receiver's, port 5201, left out)."""
    if not path.is_file():
        sys.exit(f"{path}: no such trace (write it with `capture` first)")
    by_port: dict[int, list[Ack]] = collections.defaultdict(list)
    for line in path.open():
        m = LINE.search(line)
        if m and int(m.group(2)) != SERVER_PORT:
            g = m.groups()
            by_port[int(g[1])].append(Ack(float(g[0]), *map(int, g[2:])))
    if not by_port:
        sys.exit(f"{path}: no sender ACK lines")
    return by_port


def new_data_packets(pcap: Path, port: int) -> list[tuple[float, int, int]]:
    """(time, start, end) of each packet from `port` that carries new data
    (absolute sequence numbers, as the probe reads them)."""
    p = subprocess.run(["tcpdump", "-r", str(pcap), "-tt", "-n", "-S", "src", "port", str(port)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{pcap}: tcpdump cannot read it")
    out, top = [], None
    for line in p.stdout.splitlines():
        m = re.search(r"seq (\d+):(\d+)", line)
        if not m:
            continue
        start, end = int(m.group(1)), int(m.group(2))
        if top is None or end > top:  # 32-bit wrap left aside: a few seconds of a run
            out.append((float(line.split()[0]), start, end))
            top = end
    return out


def spans(outdir: Path, windows: list[tuple[float, float]]) -> None:
    for port, acks in sorted(read_acks(outdir / "wq.txt").items()):
        packets = new_data_packets(outdir / "sender.pcap", port)
        if not packets:
            continue
        ends = sorted({a.nxt + a.head for a in acks if a.skbs >= 1} | {a.nxt + a.head + a.next for a in acks
                                                                        if a.skbs >= 2})
        ends_set = set(ends)
        t_pkt, t_ack = packets[0][0], acks[0].t
        print(f"sender port {port}: {len(acks)} ACKs, {len(packets)} new-data packets")
        for lo, hi in windows:
            depth = sorted(a.skbs for a in acks if lo <= a.t - t_ack < hi)
            kinds = collections.Counter()
            for t, start, end in packets:
                if not lo <= t - t_pkt < hi:
                    continue
                i = bisect.bisect_right(ends, start)
                kinds["across" if i < len(ends) and ends[i] < end else "at" if end in ends_set else "inside"] += 1
            shown = f"{hi:g}" if hi != float("inf") else "end"
            if depth:
                print(f"  {lo:g}-{shown} s: write queue at {len(depth)} ACKs: skbs min {depth[0]}, median "
                      f"{depth[len(depth) // 2]}, max {depth[-1]}; one skb or none at {sum(d < 2 for d in depth)}")
            print(f"  {lo:g}-{shown} s: packets across an skb boundary {kinds['across']}, at one {kinds['at']}, "
                  f"inside the head {kinds['inside']}")
        cwnd, next_t = [], 0.0
        for a in acks:
            if a.t - t_ack >= next_t:
                cwnd.append(f"{next_t:.1f}:{a.cwnd}")
                next_t += 0.1
        print("  cwnd every 100 ms: " + " ".join(cwnd[:40]))


def parse_window(text: str) -> tuple[float, float]:
    try:
        lo, hi = text.split(":")
        return float(lo), float(hi) if hi else float("inf")
    except ValueError:
        sys.exit(f"--window {text!r}: give A:B in seconds (B empty for the end)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("study", type=Path)
    c.add_argument("outdir", type=Path)
    c.add_argument("--seconds", type=float, default=6.0)
    s = sub.add_parser("spans")
    s.add_argument("outdir", type=Path)
    s.add_argument("--window", action="append", default=None, help="A:B seconds (repeatable)")
    args = ap.parse_args()
    if args.cmd == "capture":
        capture(args.study, args.outdir, args.seconds)
    else:
        spans(args.outdir, [parse_window(w) for w in args.window] if args.window else [(0, 0.6), (0.6, float("inf"))])


if __name__ == "__main__":
    main()
