"""The linux backend: real kernel TCP in network namespaces.

Most tests need root (namespaces, veth, TUN). Not root: they fail with a
message saying so, unless CCBENCH_SKIP_ROOT_TESTS=1 (then they are skipped).
Every run uses the Rust emulator and load generator in ccbench._core.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ccbench import backends
from ccbench.backends.linux import cleanup, netns
from ccbench.backends.linux.backend import LinuxBackend
from ccbench.backends.sim import SimBackend
from ccbench.cli import main
from ccbench.errors import StudyError, UsageError
from ccbench.spec import kernel, parse_study

from kernel_retry import disturbed_testbed, emulator_late, stolen, until_clean
from root_checks import OURS, assert_nothing_left, need_linux_backend, record_run_tokens  # noqa: F401 (autouse)

HERE = Path(__file__).resolve().parent


@pytest.fixture
def root():
    """Root and a machine the linux backend runs on (else fail, or skip under
    CCBENCH_SKIP_ROOT_TESTS=1); no leftovers after."""
    need_linux_backend()
    yield
    assert_nothing_left()


@pytest.fixture
def core(root):
    """The real emulator and load generator (checked by ``root``)."""


def _ppid(pid: int):
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def runs_of(pid: int):
    """Runs (live) owned by process ``pid`` or one of its children (pool workers); recorded as ours."""
    runs = [r for r in cleanup.find(include_live=True) if r.owner is not None and pid in (r.owner, _ppid(r.owner))]
    OURS.update(r.token for r in runs)
    return runs


def study(text: str, backend: str = "linux"):
    return parse_study(textwrap.dedent(text), filename="test.toml", backend=backend)


def run1(text: str):
    s = study(text)
    (r,) = s.runs()
    return r, LinuxBackend().run(r)


def run_measured(text: str, timing: bool = False):
    """run1, again while the run comes back suspect only because the emulator could not
    keep up (kernel_retry.py) or, for a test of timing (``timing``), while the
    hypervisor took more than kernel_retry.STEAL_MAX of a CPU; the last try."""
    spoiled = disturbed_testbed if timing else emulator_late
    return until_clean(lambda: run1(text), lambda x: spoiled(x[1].stats, x[1].status),
                       lambda x: f"{x[1].note or x[1].status}; steal up to {100 * stolen(x[1].stats):.1f}%",
                       steal=lambda x: stolen(x[1].stats))[-1]


def goodput_after(res, flow_id: int, t0_s: float) -> float:
    s = res.samples
    pts = [(t, b) for f, t, b in zip(s["flow_id"], s["time_us"], s["delivered_bytes"]) if f == flow_id]
    pts.sort()
    a = next(p for p in pts if p[0] >= t0_s * 1e6)
    b = pts[-1]
    return (b[1] - a[1]) * 8 / ((b[0] - a[0]) / 1e6)


BULK = """
[study]
name = "linux-bulk"
duration = "{duration}"
[topology.bottleneck]
rate = "100Mbit"
delay = "10ms"
loss = "{loss}"
buffer = "1bdp"
[[flows]]
cca = "{cca}"
"""


# ------------------------------------------------------------------ no root needed


def test_unknown_cca_names_what_the_kernel_has(monkeypatch):
    monkeypatch.setattr(kernel, "available", lambda: ("reno", "cubic"))
    with pytest.raises(StudyError) as e:
        study(BULK.format(duration="1s", loss="0%", cca="westwoodish"))
    msg = str(e.value)
    assert "\n" not in msg
    assert "flows.0.cca" in msg and "this kernel has no such congestion control" in msg
    assert "allowed: reno, cubic" in msg
    with pytest.raises(StudyError, match="sim-only algorithm"):
        study(BULK.format(duration="1s", loss="0%", cca="bbr"))
    study(BULK.format(duration="1s", loss="0%", cca="cubic"))  # fine
    study(BULK.format(duration="1s", loss="0%", cca="bbr"), backend="sim")  # the sim has it


def test_pacing_off_for_bbr_and_hz_are_study_errors(monkeypatch):
    with pytest.raises(StudyError) as e:
        study(BULK.format(duration="1s", loss="0%", cca="bbr") + "[tcp]\npacing = 'off'\n")
    msg = str(e.value)
    assert "tcp.pacing" in msg and "paces by itself (bbr)" in msg and "allowed: 'auto' or 'on'" in msg, msg
    study(BULK.format(duration="1s", loss="0%", cca="cubic") + "[tcp]\npacing = 'off'\n")  # cubic does not pace
    monkeypatch.setattr(kernel, "config_hz", lambda: 250)
    with pytest.raises(StudyError) as e:
        study(BULK.format(duration="1s", loss="0%", cca="cubic") + "[tcp]\nkernel_hz = 1000\n")
    assert "tcp.kernel_hz" in str(e.value) and "CONFIG_HZ is 250" in str(e.value), str(e.value)
    study(BULK.format(duration="1s", loss="0%", cca="cubic") + "[tcp]\nkernel_hz = 250\n")
    with pytest.raises(StudyError) as e:
        study(BULK.format(duration="1s", loss="0%", cca="cubic") + "[tcp]\nhz = 250\n")
    assert "tcp.hz" in str(e.value) and "kernel's own timers" in str(e.value), str(e.value)


def test_socket_options_carry_class_max_rate_and_pacing():
    from ccbench.backends.linux.backend import PACING_ON_BPS, socket_options

    def opts(flow_extra: str, tcp: str = ""):
        (r,) = study(BULK.format(duration="1s", loss="0%", cca="cubic") + flow_extra + tcp).runs()
        return socket_options(r.config["flows"][0], r.config["tcp"])

    assert opts("") == {}
    assert opts("queue_class = 1\n") == {"dscp": 1}
    assert opts("cwnd_clamp = 100\n") == {"cwnd_clamp": 100}
    assert opts("max_rate = '20Mbit'\n") == {"max_pacing_rate_bps": 20_000_000}
    assert opts("", "[tcp]\npacing = 'on'\n") == {"max_pacing_rate_bps": PACING_ON_BPS}
    # max_rate wins over pacing = "on" (both turn pacing on; max_rate also caps it).
    assert opts("max_rate = '20Mbit'\n", "[tcp]\npacing = 'on'\n") == {"max_pacing_rate_bps": 20_000_000}


def test_cpu_busy_level_follows_the_rt_cap():
    from ccbench.backends.linux.backend import cpu_busy_level

    assert cpu_busy_level(950_000, 1_000_000) == pytest.approx(0.93)  # the kernel's default cap, 0.95
    assert cpu_busy_level(-1, 1_000_000) == pytest.approx(0.98)  # no RT throttling
    assert cpu_busy_level(None, None) == pytest.approx(0.98)
    assert cpu_busy_level(500_000, 1_000_000) == pytest.approx(0.48)


def test_steal_per_cpu_from_proc_stat():
    from ccbench.backends import steal

    before = steal.parse("cpu  10 0 5 100 0 0 1 4 0 0\ncpu0 5 0 2 50 0 0 1 2 0 0\ncpu1 5 0 3 50 0 0 0 2 0 0\n"
                         "intr 123\nctxt 456\n")
    assert before == {0: (60, 2), 1: (60, 2)}  # the all-CPU line and the others are not CPUs
    after = steal.parse("cpu0 25 0 12 70 0 0 1 42 0 0\ncpu1 45 0 13 100 0 0 0 2 0 0\ncpu2 1 0 0 1 0 0 0 0\n")
    # cpu0: 40 of its 90 ticks stolen; cpu1 none; cpu2 came online between the readings: left out
    assert steal.fractions(before, after) == {"0": round(40 / 90, 4), "1": 0.0}
    assert steal.parse("cpu0 1 2 3 4\n") == {0: (10, 0)}  # an old kernel without the steal column
    fr = {"0": 0.2, "1": 0.03}
    assert "3.0% of the emulator's CPU (1)" in steal.note(fr, 1)
    assert steal.note({"0": 0.2, "1": 0.004}, 1) is None  # below NOTEWORTHY
    assert "20.0% of CPU 0" in steal.note(fr, None)  # unpinned: the most stolen-from CPU
    assert steal.note({}, 1) is None


def test_a_window_past_four_send_buffers_is_a_corrupt_kernel_state():
    from ccbench.backends.linux.backend import corrupt_windows, window_peaks

    mss = 1448
    cfg = {"tcp": {"wmem_bytes": 4_000_000, "mss": mss},
           "flows": [{"id": i, "cca": c} for i, c in enumerate(("bpf:dctcp", "cubic", "reno", "bbr"))]}
    # Flow 0 as the kernel left it when it skipped the ssthresh hook: the
    # stale ssthresh (0x81104110) and the first window PRR made of it;
    # flow 1 just under the bound; flow 2 only its ssthresh; flow 3 never sampled.
    peaks = {0: {"max_cwnd_segs": 8_627_041, "max_ssthresh_segs": 2165326096},
             1: {"max_cwnd_segs": 11_049, "max_ssthresh_segs": 11_049}, 2: {"max_ssthresh_segs": 2072072323}}
    r0, r2 = corrupt_windows(cfg, peaks)
    assert r0.startswith("flow 0's congestion window reached 8627041 packets and its ssthresh reached 2165326096")
    assert "more than 4 send buffers (11049 packets)" in r0 and "does not measure the flow's congestion control" in r0
    assert r2.startswith("flow 2's ssthresh reached 2072072323 packets, more than")
    assert corrupt_windows(cfg, {1: {"max_cwnd_segs": 11_050}}) and not corrupt_windows(cfg, {})
    # The peaks: the load client's, raised by a larger sampled window; an iperf3 flow has only samples.
    cflows = {0: {"max_cwnd_segs": 250, "max_ssthresh_segs": 247}, 1: {"max_cwnd_segs": None}}
    rows = [{"flow_id": 0, "cwnd_bytes": 260 * mss}, {"flow_id": 1, "cwnd_bytes": 80 * mss},
            {"flow_id": 1, "cwnd_bytes": None}]
    assert window_peaks(cflows, rows, mss) == {0: {"max_cwnd_segs": 260, "max_ssthresh_segs": 247},
                                               1: {"max_cwnd_segs": 80}}


def test_a_flow_without_rtt_samples_or_past_its_clamp_had_no_sock_ops():
    from ccbench.backends.linux.backend import unapplied_sockops

    cfg = {"tcp": {"mss": 1448}, "flows": [{"id": 0, "cwnd_clamp": 20}, {"id": 1, "cwnd_clamp": 20}, {"id": 2},
                                         {"id": 3}]}
    cflows = {0: {"rtt_samples": 0, "bytes_acked": 5_000_000}, 1: {"rtt_samples": 900, "bytes_acked": 5_000_000},
              2: {"rtt_samples": None, "bytes_acked": 5_000_000}, 3: {"rtt_samples": 0, "bytes_acked": 0}}
    # Flow 0 unclamped (its window grew to 300); flow 1 a packet over its
    # clamp (PRR may send one past it); flow 2 had no cgroup; flow 3 sent nothing.
    peaks = {0: {"max_cwnd_segs": 300}, 1: {"max_cwnd_segs": 21}}
    r0, r1 = unapplied_sockops(cfg, cflows, peaks)
    assert r0 == ("flow 0 delivered 5000000 bytes but took no RTT sample: the sock_ops program did not run for "
                  "its connection (nor did a cwnd_clamp)")
    assert r1 == "flow 0's congestion window reached 300 packets, past its cwnd_clamp of 20"
    assert not unapplied_sockops(cfg, {1: cflows[1]}, {1: {"max_cwnd_segs": 42}})
    assert unapplied_sockops(cfg, {}, {1: {"max_cwnd_segs": 43}})


def test_the_ack_watch_filters_and_reads_tcp_probe(tmp_path):
    from ccbench.backends.linux import tcp_watch
    from ccbench.backends.linux.backend import caught_windows, window_limit_segs

    cfg = {"tcp": {"wmem_bytes": 4_194_304, "mss": 1448}}
    assert window_limit_segs(cfg) == 11586
    assert tcp_watch.event_filter(11586) == "snd_cwnd > 11586 || (ssthresh > 11586 && ssthresh != 2147483647)"
    # Two lines of the trace of a corrupt run (trimmed), and one that is not tcp_probe.
    line = ("tokio-rt-worker-75 [000] .Ns2. 13668.517301: tcp_probe: family=AF_INET src=10.77.30.6:40616 "
            "dest=10.77.30.2:5201 mark=0x0 data_len=0 snd_nxt=0xfa657e74 snd_una=0xfa601ffc snd_cwnd={} "
            "ssthresh={} snd_wnd=3930752 srtt=29489 rcv_wnd=3144960 sock_cookie=123 skbaddr=0 skaddr=0")
    text = "\n".join(["# tracer: nop", line.format(8661554, 2165326096), line.format(2618, 2618),
                      "<idle>-0 [000] d..2. 1.0: sched_switch: prev_comm=swapper/0"])
    w = tcp_watch.Watch("0123abcd")
    assert w.dir == tcp_watch.instances_dir() / "ccb0123abcd"
    w.dir = tmp_path  # a trace file as tracefs shows it
    (w.dir / "trace").write_text(text)
    caught = w.caught()
    assert [(c.src, c.dest, c.cwnd, c.ssthresh) for c in caught] == [
        ("10.77.30.6:40616", "10.77.30.2:5201", 8661554, 2165326096), ("10.77.30.6:40616", "10.77.30.2:5201", 2618, 2618)]
    assert caught_windows(cfg, caught).startswith(
        "the kernel saw a congestion window of 8661554 packets (ssthresh 2165326096) on the connection "
        "10.77.30.6:40616 -> 10.77.30.2:5201, in 2 ACKs on 1 connection past 4 send buffers (11586 packets)")
    assert caught_windows(cfg, []) is None


def test_plan_names_and_addresses():
    topo = netns.plan("0123abcd", 63, 1500)
    names = [topo.router_ns, topo.tun] + [n for h in topo.hosts for n in (h.ns, h.ifname, h.router_ifname)]
    assert all(len(n) <= 15 and n.startswith("ccb0123abcd-") for n in names)
    assert all(netns.NAME_RE.match(n) for n in names)
    ips = [h.ip for h in topo.hosts] + [h.router_ip for h in topo.hosts]
    assert len(set(ips)) == len(ips) and all(ip.startswith("10.77.") for ip in ips)
    with pytest.raises(netns.SetupError, match="1 to 63 senders"):
        netns.plan("0123abcd", 64, 1500)


def test_netstat_tables_parse_by_group():
    text = ("TcpExt: SyncookiesSent TCPTimeouts TCPLossProbes\nTcpExt: 0 7 23\n"
            "IpExt: InNoRoutes InOctets\nIpExt: 0 123456789012\n")
    assert netns.parse_netstat(text) == {"TcpExt": {"SyncookiesSent": 0, "TCPTimeouts": 7, "TCPLossProbes": 23},
                                         "IpExt": {"InNoRoutes": 0, "InOctets": 123456789012}}
    with pytest.raises(ValueError, match="not a netstat table"):
        netns.parse_netstat("TcpExt: A B\nIpExt: 1 2\n")
    # This machine's own table parses, with the counters the run stats read.
    from ccbench.backends.linux.backend import TCP_EXT_COUNTERS

    own = netns.parse_netstat(Path("/proc/self/net/netstat").read_text())["TcpExt"]
    assert {name for names in TCP_EXT_COUNTERS.values() for name in names} <= own.keys()


def test_names_of_others_are_not_ours():
    for n in ("ccb", "ccbx", "ccb0123abc-r", "ccb0123abcd", "ccb0123ABCD-r", "xccb0123abcd-r", "ccb0123abcd-r-x",
              "ccb0123abcd-"):
        assert not netns.NAME_RE.match(n), n
    assert cleanup.CMDLINE_RE.search("python -m x /run/ccbench/ccb0123abcd/emu.config.json")
    assert not cleanup.CMDLINE_RE.search("/run/ccbench/ccb0123abcdef/x")


def test_not_root_is_one_clear_message_and_creates_nothing(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    before = set(OURS)
    with pytest.raises(UsageError) as e:
        LinuxBackend().check()
    msg = str(e.value)
    assert msg.startswith("backend 'linux' is not available: it needs root") and "sudo" in msg
    assert "\n" not in msg
    r = study(BULK.format(duration="1s", loss="0%", cca="reno")).runs()[0]
    with pytest.raises(UsageError):
        LinuxBackend().run(r)
    assert OURS == before  # not even a run token was drawn


def test_doctor_cleanup_needs_root(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert main(["doctor", "--cleanup"]) == 2
    assert "needs root" in capsys.readouterr().err


# ------------------------------------------------------------------ plumbing (root)


def test_router_segments_gso_before_the_tun(root):
    """TSO/GSO super-packets of the senders are segmented before the TUN: the
    emulator only ever sees packets of at most the MTU (no offload changes needed)."""
    topo = netns.plan(netns.new_token(), 1, 1500)
    tcp = {"rmem_bytes": 6291456, "wmem_bytes": 4194304, "init_cwnd": 10, "min_rto_ns": 200_000_000,
           "sack": True, "ecn": False, "delayed_ack": "linux"}
    fwd = textwrap.dedent(f"""
        import fcntl, os, select, struct, time
        fd = os.open("/dev/net/tun", os.O_RDWR)
        fcntl.ioctl(fd, 0x400454ca, struct.pack("16sH", b"{topo.tun}", 0x1001))
        end, big, n = time.monotonic() + 4, 0, 0
        while time.monotonic() < end:
            if select.select([fd], [], [], 0.1)[0]:
                p = os.read(fd, 65536); big = max(big, len(p)); n += 1; os.write(fd, p)
        print(n, big)
    """)
    sink = textwrap.dedent(f"""
        import socket
        s = socket.socket(); s.bind(("{topo.receiver.ip}", 5001)); s.listen(); s.settimeout(5)
        c, _ = s.accept()
        while c.recv(1 << 20): pass
    """)
    send = textwrap.dedent(f"""
        import socket, time
        s = socket.create_connection(("{topo.receiver.ip}", 5001), timeout=5); t = time.time()
        while time.time() - t < 1.5: s.sendall(b"x" * 262144)
    """)
    procs = []
    try:
        netns.build(topo, tcp)
        procs.append(subprocess.Popen(["ip", "netns", "exec", topo.router_ns, sys.executable, "-c", fwd],
                                      stdout=subprocess.PIPE, text=True))
        procs.append(subprocess.Popen(["ip", "netns", "exec", topo.receiver.ns, sys.executable, "-c", sink]))
        time.sleep(0.5)
        subprocess.run(["ip", "netns", "exec", topo.senders[0].ns, sys.executable, "-c", send], timeout=20,
                       check=True)
        out, _ = procs[0].communicate(timeout=20)
        n, biggest = map(int, out.split())
        r0 = netns.link_stats(topo.router_ns)[topo.senders[0].router_ifname]["rx_packets"]
        assert n > 1000 and biggest <= 1500
        assert r0 < n / 2  # the router did receive super-packets from the sender (GSO/TSO on the veth)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        netns.teardown(topo)


def test_failed_run_leaves_nothing(root, monkeypatch):
    """An error after the processes started, and one half-way through the setup."""
    from ccbench.backends.linux import backend as be

    text = BULK.format(duration="2s", loss="0%", cca="reno")

    def boom(self, t0, clients, late_exit):
        assert netns.existing_namespaces()  # everything was there
        raise RuntimeError("boom")

    monkeypatch.setattr(be._Run, "_assemble", boom)
    with pytest.raises(RuntimeError, match="boom"):
        run1(text)
    assert_nothing_left()
    monkeypatch.undo()

    real_ip = netns.ip

    def failing_ip(*args, **kw):
        if "tuntap" in args:
            raise netns.SetupError("no TUN for you")
        return real_ip(*args, **kw)

    monkeypatch.setattr(netns, "ip", failing_ip)
    with pytest.raises(netns.SetupError, match="no TUN for you"):
        run1(text)
    monkeypatch.undo()
    assert_nothing_left()


def _wait_for(pred, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_sigkilled_runner_then_doctor_cleanup(root, tmp_path):
    p = tmp_path / "study.toml"
    p.write_text(textwrap.dedent(BULK.format(duration="30s", loss="0%", cca="cubic")))
    runner = textwrap.dedent(f"""
        import sys
        from ccbench.backends.linux.backend import LinuxBackend
        from ccbench.spec import load_study
        r = load_study({str(p)!r}, backend="linux").runs()[0]
        LinuxBackend().run(r)
    """)
    proc = subprocess.Popen([sys.executable, "-c", runner], start_new_session=True)
    try:
        def started():
            runs = runs_of(proc.pid)
            ok = (runs and len(runs[0].pids) >= 3 and len(runs[0].namespaces) == 3
                  and (runs[0].dir / "emu.stats.jsonl").exists())  # past "go": the run is running
            return runs if ok else None

        (run,) = _wait_for(started, 30, "the run to start its processes")
        assert run.owner == proc.pid
        # A live run is left alone by doctor --cleanup.
        assert main(["doctor", "--cleanup"]) == 0
        assert all((netns.NETNS_DIR / n).exists() for n in run.namespaces) and run.dir.exists()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        (left,) = [r for r in cleanup.find() if r.token == run.token]
        assert left.namespaces and left.pids and left.dir  # a killed run leaves things behind...
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert main(["doctor", "--cleanup"]) == 0  # ...which doctor --cleanup removes
    assert_nothing_left()
    assert all(cleanup._zombie(pid) for pid in left.pids)  # gone (or dead, waiting to be reaped)


def test_a_run_directory_without_its_owner_yet_is_a_run_opening_not_a_leftover(root):
    """Cluster workers clear dead runs' leftovers while other runs open: a
    run directory made a moment ago, before its owner.json, is left alone;
    an old one without an owner is a leftover."""
    cleanup.RUN_ROOT.mkdir(mode=0o755, parents=True, exist_ok=True)
    token = "%08x" % (os.getpid() * 7919 % 2**32)
    d = cleanup.run_dir(token)
    d.mkdir(mode=0o700)
    try:
        assert token not in {r.token for r in cleanup.find()}
        old = time.time() - cleanup.STARTING_S - 1
        os.utime(d, (old, old))
        assert token in {r.token for r in cleanup.find()}
        removed, problems = cleanup.cleanup()
        assert token in {r.token for r in removed} and not problems and not d.exists()
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("sig,jobs,code", [(signal.SIGINT, 1, 130), (signal.SIGTERM, 1, 143), (signal.SIGINT, 2, 130)])
def test_interrupted_run_cleans_up(root, tmp_path, sig, jobs, code):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) or SIGTERM
    to `ccbench run`: everything is removed. With --jobs 2 the linux runs still
    run one at a time (real time), and say so."""
    p = tmp_path / "study.toml"
    p.write_text(textwrap.dedent(BULK.format(duration="30s", loss="0%", cca="cubic"))
                 + '[sweep]\n"topology.bottleneck.loss" = ["0%", "0.1%"]\n')
    runner = textwrap.dedent(f"""
        import sys
        from ccbench import backends
        from ccbench.backends.linux.backend import LinuxBackend
        from ccbench.cli import main
        backends.register("linux", LinuxBackend(), replace=True)
        sys.exit(main(["run", {str(p)!r}, "--backend", "linux", "--out", {str(tmp_path / "out")!r},
                       "--jobs", "{jobs}"]))
    """)
    proc = subprocess.Popen([sys.executable, "-c", runner], start_new_session=True, stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)
    try:
        def running():
            runs = runs_of(proc.pid)
            return len(runs) >= 1 and all(r.dir and (r.dir / "emu.stats.jsonl").exists() for r in runs)

        _wait_for(running, 40, "the runs to start")
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert "interrupted" in err and "resume with: ccbench run" in err, err  # SIGTERM too (issue 12)
    if jobs > 1:
        assert "run one at a time" in err
    assert_nothing_left()


def test_sim_and_linux_give_the_same_schema_and_show(root, tmp_path, monkeypatch, capsys):
    """A bulk flow and an RPC flow on sim and on linux; also the RPC latency rows."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text(textwrap.dedent("""
        [study]
        name = "both"
        duration = "6s"
        [topology]
        senders = 2
        [topology.bottleneck]
        rate = "20Mbit"
        delay = "10ms"
        [[flows]]
        cca = "cubic"
        [[flows]]
        cca = "reno"
        kind = "rpc"
        sender = 1
        request = "10KB"
        response = "100B"
    """))
    with backends.registered("linux", LinuxBackend()):
        assert main(["run", "s.toml", "--backend", "sim", "--out", "sim"]) == 0
        # --jobs is for the simulator: linux runs are real time, one at a time.
        assert main(["run", "s.toml", "--backend", "linux", "--out", "linux", "--jobs", "2"]) == 0
    assert "--jobs 2 ignored: linux runs are real time and run one at a time" in capsys.readouterr().err
    shown = {}
    for b in ("sim", "linux"):
        from ccbench.store import Store

        with Store.open_existing(b) as st:
            (run,) = st.runs()
            # The schema is complete even when the emulator could not keep up (a busy
            # machine): the run is then suspect and says why.
            assert run.status == "ok" or (b == "linux" and run.status == "suspect"
                                          and run.stats["suspect_kinds"] == ["emulator"]), run.error
            rid = run.run_id
            for t in ("samples", "queue", "rpcs"):
                assert st.count(t, rid) > 0, (b, t)
        assert main(["show", rid, "--results", b, "--format", "json"]) == 0
        j = json.loads(capsys.readouterr().out)
        assert main(["show", rid, "--results", b]) == 0
        shown[b] = (j, capsys.readouterr().out)
    (js, ts), (jl, tl) = shown["sim"], shown["linux"]
    assert set(js["run"]) == set(jl["run"])
    assert [sorted(f) for f in js["flows"]] == [sorted(f) for f in jl["flows"]]
    for f in jl["flows"]:
        assert f["bytes_delivered"] > 0 and f["goodput_bps"] > 0 and f["rtt_min_us"] >= 20_000

    def shape(text):  # row labels, the flows table's header and its number of rows, without values
        lines = text.splitlines()
        top = lines.index(next(ln for ln in lines if ln.startswith("flows")))
        labels = [ln.split()[0] for ln in lines[:top] if ln.strip() and not ln.startswith(" ")]
        header = next(ln for ln in lines if ln.startswith("┃"))
        return ([x for x in labels if x != "note"], [c.strip() for c in header.split("┃") if c.strip()],
                sum(1 for ln in lines if ln.startswith("│")))

    assert shape(ts) == shape(tl)
    assert shape(tl)[2] == 2
    from ccbench.store import Store

    with Store.open_existing("linux") as st:
        rid = st.runs()[0].run_id
        n = st.count("rpcs", rid)
        assert n > 20  # ~ 6 s / (RTT + 10 KB at 20 Mbit/s)
        rows = st.con.execute("SELECT min(latency_us), max(latency_us) FROM rpcs WHERE run_id = ?", [rid]).fetchone()
        assert rows[0] >= 20_000
        lat = st.con.execute("SELECT count(lateness_us) FROM queue WHERE run_id = ?", [rid]).fetchone()[0]
        assert lat > 0  # the emulator reports lateness


# ------------------------------------------------------------------ measurements (root + Rust core)

CEILING = 100e6 * 1448 / 1500  # goodput of a full 100 Mbit/s link with 1448-byte segments


@pytest.mark.parametrize("cca", ["cubic", "bbr", "reno"])
def test_bulk_goodput_and_rtt(core, cca):
    r, res = run_measured(BULK.format(duration="20s", loss="0%", cca=cca))
    assert res.status == "ok", res.note
    g = goodput_after(res, 0, 5.0)
    print(f"{cca}: goodput after 5 s {g / 1e6:.2f} Mbit/s = {100 * g / CEILING:.1f}% of the ceiling; "
          f"whole run {res.flows[0]['goodput_bps'] / 1e6:.2f} Mbit/s; min RTT {res.flows[0]['rtt_min_us']} us; "
          f"retrans {res.flows[0]['retrans_segs']}; emulator {res.stats['cpu_busy_mean']}")
    assert g >= 0.9 * CEILING
    assert g <= 1.01 * CEILING
    # The idle-path RTT TCP measured is the configured 20 ms: no less, and
    # above it only by a data segment's serialisation (120 us at 100 Mbit/s)
    # and the emulator's and hosts' wake-ups. Flows with many retransmissions
    # read exactly 20 ms (an ACK of a resent segment is timed by the
    # timestamp echo, in whole ms); a loss-free CUBIC flow reads the
    # segment-timed minimum, measured 20.34-20.52 ms on this 2-CPU VM.
    assert 19_900 <= res.flows[0]["rtt_min_us"] <= 21_000
    # The emulator ran pinned to the last CPU, the hosts' kernel work steered (RPS) to the others.
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) >= 2:
        assert (res.stats["emu_cpu"], res.stats["emu_rps_cpus"]) == (allowed[-1], allowed[:-1]), res.note
        # ...and the load generator's processes stayed off the emulator's CPU,
        # which an idle-priority thread kept awake.
        assert res.stats["host_cpus"] == allowed[:-1], res.stats["host_cpus"]
        assert res.stats["emulator"]["keep_awake"] is True
    else:
        assert res.stats["emu_cpu"] is None, "one CPU: nothing to pin or steer"
        assert res.stats["emulator"]["keep_awake"] is False
    # Each CPU's steal time over the run, as a fraction of it (the emulator could not run while it grew).
    assert set(res.stats["steal"]) == {str(c) for c in range(os.cpu_count())}, res.stats["steal"]
    assert all(0 <= v <= 1 for v in res.stats["steal"].values()), res.stats["steal"]


def test_random_loss_rate_and_retransmissions(core):
    text = BULK.format(duration="10s", loss="1%", cca="bbr")
    # timing: the queue's overflow at the end of Startup (drops, and the
    # retransmissions lost again in it) depends on how the sender's bursts
    # meet the queue, which a sender the hypervisor holds back changes; so a
    # run with more than STEAL_MAX stolen is measured again. (A CI run,
    # session 56, saw 760 drops and 168 lost again, against 441-600 and
    # 56-87 in six quiet runs the same hour; its steal was not recorded.)
    r, res = run_measured(text, timing=True)
    bn = res.stats["emulator"]["links"]["bottleneck"]
    offered = bn["tx_pkts"] + bn["drops"] + bn["random_losses"] + bn["backlog_pkts"]
    rate = bn["random_losses"] / offered
    st = res.stats
    (sim_run,) = study(text, backend="sim").runs()
    sim = backends.get("sim").run(sim_run).stats
    print(f"loss {100 * rate:.3f}% of {offered}; retrans {st['kernel_retrans_segs']}, drops "
          f"{st['emu_bottleneck_drops']} + {st['emu_bottleneck_random_losses']}, spurious {st['spurious_retrans_segs']}; "
          f"recoveries {st['recoveries']} (simulator {sim['recoveries']}), retransmissions lost again "
          f"{st['lost_retransmits']} (simulator {sim['lost_retransmits']}); {res.status} {res.note}; "
          f"steal up to {100 * stolen(st):.1f}%")
    # Fast recoveries (TcpExt TCPSackRecovery) as the simulator counts them
    # on the same path: each needs a loss (measured: 245 in the kernel, 249
    # in the simulator, of 1,252 losses).
    drops = st["emu_bottleneck_drops"] + st["emu_bottleneck_random_losses"]
    assert 0 < st["recoveries"] <= drops
    assert 0.8 <= st["recoveries"] / sim["recoveries"] <= 1.25
    # Retransmissions lost again (TCPLostRetransmit), nearly all in the
    # queue's overflow at the end of Startup, where the pacer resends one
    # lost skb per slot: measured 68-78 in the kernel (sessions 40 and 41)
    # and 52 in the simulator (36 when it let new data join a burst of
    # retransmissions).
    assert 0.5 <= st["lost_retransmits"] / sim["lost_retransmits"] <= 2
    assert 0.008 <= rate <= 0.012
    # the queue table keeps the count: its last sample's, at most the emulator's final one
    last = max(v for link, v in zip(res.queue["link"], res.queue["random_losses"]) if link == "bottleneck")
    assert 0.95 * bn["random_losses"] <= last <= bn["random_losses"], (last, bn)
    # Every retransmission is accounted for by an emulator drop or reported as spurious...
    assert st["kernel_retrans_segs"] <= drops + st["spurious_retrans_segs"]
    assert st["spurious_retrans_segs"] == max(0, st["kernel_retrans_segs"] - drops)
    if st["spurious_retrans_segs"]:
        assert "spurious retransmission" in res.note
    # ...and nothing was lost outside the emulator.
    assert st["interface_drops"] == {} and st["tun_drops"] == 0


def test_timeouts_and_loss_probes_are_counted_as_the_simulator_counts_them(core):
    """stats rto_count and tlp_count: one segment in flight and 10 % random
    loss, so nothing but a tail loss probe (2 srtt + 200 ms after the send,
    one segment out) or, when the probe is lost too, the retransmission
    timer repairs a loss. Both backends count each per firing (Linux's
    TcpExt TCPTimeouts and TCPLossProbes, read as the run's time ends).
    The simulator on this study, seeds 1 to 3: 5, 7, 4 timeouts and 24, 23,
    27 probes in 12 s; the kernel, seed 1: 5 and 24 (6 timeouts when the
    counters were read after the clients had closed their sockets)."""
    text = (BULK.format(duration="12s", loss="10%", cca="reno")
            + "cwnd_clamp = 1\n[tcp]\ndelayed_ack = 'off'\n")
    _, linux = run_measured(text)
    assert linux.status == "ok", linux.note
    (sim_run,) = study(text, backend="sim").runs()
    counts = {}
    sim = backends.get("sim").run(sim_run)
    for backend, res in (("linux", linux), ("sim", sim)):
        counts[backend] = (res.stats["rto_count"], res.stats["tlp_count"], res.flows[0]["retrans_segs"])
        first = {k: res.stats[k] for k in ("rto_in_recovery", "rto_in_loss", "rto_in_disorder")}
        print(f"{backend}: {counts[backend][0]} timeouts, {counts[backend][1]} loss probes, "
              f"{counts[backend][2]} retransmitted segments; first timeouts by state {first}; "
              f"{res.stats['recoveries']} recoveries")
        # The first timeouts by state are some of the timeouts.
        assert sum(first.values()) <= res.stats["rto_count"]
    (lr, lt, lx), (sr, st, sx) = counts["linux"], counts["sim"]
    # Every retransmission is a probe's or the timer's (one segment at a time).
    assert lr + lt >= lx > 0 and sr + st >= sx > 0
    assert 10 <= lt <= 60 and 1 <= lr <= 20, counts
    assert 0.5 <= (lr + lt) / (sr + st) <= 2, counts
    # Fast recoveries (a probe sends new data past the clamp, whose SACK
    # lets RACK find the loss): 21 on both backends, measured.
    recoveries = {backend: res.stats["recoveries"] for backend, res in (("linux", linux), ("sim", sim))}
    assert recoveries["linux"] > 0 and 0.5 <= recoveries["linux"] / recoveries["sim"] <= 2, recoveries


def test_max_rate_caps_the_kernel_pacing_rate(core):
    r, res = run_measured(BULK.format(duration="6s", loss="0%", cca="cubic") + "max_rate = '20Mbit'\n")
    g = goodput_after(res, 0, 2.0)
    print(f"cubic with max_rate 20 Mbit/s on 100 Mbit/s: {g / 1e6:.2f} Mbit/s after 2 s; {res.note}")
    # SO_MAX_PACING_RATE counts payload bytes (TCP paces the headerless skb,
    # tcp_update_skb_after_send): goodput reaches the cap (measured 19.99 Mbit/s
    # on Linux 6.18; counting whole packets would give 19.31).
    assert 0.9 * 20e6 <= g <= 1.01 * 20e6


TWOCLASS = """
[study]
name = "linux-twoclass"
duration = "10s"
[topology.bottleneck]
rate = "100Mbit"
delay = "10ms"
buffer = "1bdp"
qdisc = {{ kind = "twoclass", classes = [{{ weight = 1 }}, {{ weight = 3 }}] }}
[[flows]]
cca = "cubic"
{class0}
[[flows]]
cca = "cubic"
{class1}
"""


@pytest.mark.parametrize("heavy", [1, 0])
def test_queue_class_reaches_the_emulator(core, heavy):
    """The flow whose DSCP puts it in the twoclass queue of weight 3 gets about
    3/4 of the link under contention, whichever of the two it is; the other
    stays in the default class 0. (Not two flows in one queue as the control:
    how two CUBIC flows share a drop-tail FIFO over a few seconds is not the
    emulator's doing, and one run in CI saw a 0.21 share.)"""
    marks = ["", ""]
    marks[heavy] = "queue_class = 1"
    r, res = run_measured(TWOCLASS.format(class0=marks[0], class1=marks[1]), timing=True)
    g = [goodput_after(res, 0, 3.0), goodput_after(res, 1, 3.0)]
    share = g[heavy] / sum(g)
    print(f"queue_class 1 on flow {heavy}: it gets {share:.3f} of {sum(g) / 1e6:.1f} Mbit/s; {res.note}")
    assert share >= 0.65


def test_cwnd_clamp_by_tcp_bpf(core):
    """flows.cwnd_clamp on linux: the load client's sock_ops program clamps the
    first flow's window to 20 segments; the second flow is not clamped. The
    run's cgroup is gone afterwards (the root fixture checks for leftovers)."""
    from ccbench.backends.linux import cgroups

    text = BULK.format(duration="6s", loss="0%", cca="cubic") + "cwnd_clamp = 20\n[[flows]]\ncca = 'cubic'\n"
    r, res = run_measured(text)
    cwnd = {0: [], 1: []}
    for f, c in zip(res.samples["flow_id"], res.samples["cwnd_bytes"]):
        cwnd[f].append(c)
    g0 = goodput_after(res, 0, 2.0)
    print(f"clamped flow: max cwnd {max(cwnd[0])} B, {g0 / 1e6:.2f} Mbit/s; other: max cwnd {max(cwnd[1])} B; "
          f"{res.status} {res.note}")
    assert max(cwnd[0]) == 20 * 1448  # reached, never exceeded
    assert max(cwnd[1]) > 40 * 1448
    assert not [d for d in cgroups.existing() if netns.NAME_RE.match(d.name).group(1) in OURS]


def test_rtt_statistic_is_raw_samples_once_per_round(core):
    """rtt_mean_us / rtt_p99_us on linux come from the sock_ops RTT callback
    (docs/analysis.md "RTT statistics"): raw measurements, one per round trip.
    On a 20 ms path with a one-BDP FIFO (20 ms to drain) raw RTTs lie between
    the base RTT and base + drain (plus the allowances below); there is about
    one sample per RTT (not one per TCP_INFO reading: 10 per second here)."""
    base_us, drain_us = 20_000, 20_000
    r, res = run_measured(BULK.format(duration="8s", loss="0%", cca="cubic"))
    f = res.flows[0]
    n = res.stats["rtt_samples"]["0"]
    srtt = [v for fid, v in zip(res.samples["flow_id"], res.samples["srtt_us"]) if fid == 0 and v]
    srtt_mean = sum(srtt) / len(srtt)
    active_us = f["active_stop_us"] - f["active_start_us"]
    print(f"rtt min {f['rtt_min_us']} mean {f['rtt_mean_us']:.0f} p99 {f['rtt_p99_us']:.0f} us over {n} samples; "
          f"{len(srtt)} srtt readings, mean {srtt_mean:.0f} us; {res.status} {res.note}")
    assert base_us - 500 <= f["rtt_min_us"] <= f["rtt_mean_us"] <= f["rtt_p99_us"]
    assert f["rtt_mean_us"] <= base_us + drain_us
    # Beyond a full queue: the emulator's lateness (it measures it) on the way
    # out and back; 1 ms for the millisecond timestamps of the samples Linux
    # takes from TSecr (when a retransmission is acknowledged); and an ACK's
    # sample is the age of the *oldest* segment it covers, which can be a
    # whole 64 KB aggregate (GSO/GRO) behind the newest: 5.2 ms at 100 Mbit/s.
    # Measured here: p99 up to 5.4 ms above base + drain with 1.7 ms of
    # lateness. An RTT in srtt's units (<< 3) or one that waited for a delayed
    # ACK (20 ms and more) is far beyond.
    late_us = max((x for x in res.queue["lateness_us"] if x is not None), default=0.0)
    print(f"emulator lateness (p99 per interval) at most {late_us:.0f} us")
    aggregate_us = 65_536 * 8 / 100e6 * 1e6
    assert f["rtt_p99_us"] <= base_us + drain_us + 2 * late_us + 1_000 + aggregate_us
    # One sample per round trip: active time / mean RTT, give or take the slow start's rounds.
    rounds = active_us / f["rtt_mean_us"]
    assert 0.8 * rounds <= n <= 1.2 * rounds, (n, rounds)
    assert n > 2 * len(srtt)


def plain_run(measure, limit_us: float, what: str, attempts: int = 5, pause_s: float = 10.0):
    """``measure()`` of a run without the impairment under test, returning
    ``(config, flow, lateness_us, ...)``: the testbed's own noise. The hosts
    of this 2-CPU VM stall now and then for milliseconds where the emulator
    cannot see it (docs/validation/README.md, sessions 26 and 27), which
    spreads a plain run's RTT samples as it spreads the impaired run's: a CI
    run (session 56) saw the 99th percentile 2.3-3.2 ms above the minimum in
    five plain runs in a row with 0.1-1.8 ms of emulator lateness and under
    5 % steal. The tests allow for the spread measured here (``noise``).
    Measured again (up to ``attempts``, ``pause_s`` apart) while that spread
    is ``limit_us`` or more, where ``what`` could not be told from it; then
    the test fails."""
    for attempt in range(attempts):
        out = measure()
        spread = noise(out[1])[0]
        if spread < limit_us:
            return out
        print(f"attempt {attempt + 1}: the hosts' own stalls spread the plain run's samples by {spread:.0f} us; "
              "measuring again")
        time.sleep(pause_s)
    pytest.fail(f"the hosts' own stalls spread the RTT samples of {attempts} plain runs in a row by {limit_us:.0f} us "
                f"or more (99th percentile above the minimum): too much to measure {what}")


def noise(plain: dict) -> tuple[float, float]:
    """How far a plain run's RTT samples spread above their minimum: its 99th
    percentile's and its mean's distance from it, in µs."""
    return plain["rtt_p99_us"] - plain["rtt_min_us"], plain["rtt_mean_us"] - plain["rtt_min_us"]


def sim_twin(text: str):
    """The flow record of the same study on the simulator: the same seed, so
    its links draw the same pauses and jitter (netcore's, in both)."""
    (r,) = study(text, backend="sim").runs()
    return r.config["seed"], SimBackend().run(r).flows[0]


def test_link_stalls_reach_the_emulator(core):
    """topology stalls on linux: the emulator's links pause as the
    simulator's do. One segment in flight, acknowledged at once: a segment
    that reaches the bottleneck's far end during a pause (mean 10 ms, 45 ms
    apart) waits out the rest of it, an exponential 10 ms. At random times
    10/55 of arrivals would wait, the mean RTT gaining 1.8 ms and the 99th
    percentile 10 ms × ln(18) = 29 ms above the minimum;
    tests/test_sim_options.py checks that arithmetic on the simulator, where
    nothing else varies. An array of two such processes, overlaid (the
    emulator builds its links with netcore's `with_more_stalls`, as the
    simulator does): a segment is held while either pauses, so the mean
    gains about twice as much.

    Both backends draw the pauses lazily from the run seed's streams, one
    after another from the first arrival, so a run and the simulator's run
    of the same study pause at the same times: which segments meet which
    pause differs with the hosts' timing (here a round trip is ~0.7 ms
    longer than the simulator's). Seed by seed the figures spread far more
    than that moves them, so each figure is compared with the simulator's on
    the same seed. The simulator on this study (session 57), seeds 1 to 10:
    99th percentile +22 to +36 ms above the minimum with one process, +34
    to +53 ms with two. This run's seed held and the bottleneck's delay set
    to 10.0-10.375 ms (16 runs, round trips up to 0.75 ms longer): mean
    +1.6 to +1.7 ms and 99th percentile +21.5 to +24.8 ms with one, +3.9 to
    +4.0 ms and +51.4 to +56.2 ms with two."""
    text = (BULK.format(duration="12s", loss="0%", cca="reno")
            + "cwnd_clamp = 1\n[tcp]\ndelayed_ack = 'off'\n")
    runs = {}
    one = '{ every = "45ms", length = "10ms" }'

    def measure(name: str, s: str):
        t = text.replace('buffer = "1bdp"', f'buffer = "1bdp"\n{s}')
        r, res = run_measured(t, timing=True)
        assert res.status == "ok", res.note
        late_us = max((x for x in res.queue["lateness_us"] if x is not None), default=0.0)
        f = res.flows[0]
        seed, sim = sim_twin(t)
        assert seed == r.config["seed"]
        print(f"{name}: rtt min {f['rtt_min_us']} mean {f['rtt_mean_us']:.0f} p99 {f['rtt_p99_us']:.0f} us over "
              f"{res.stats['rtt_samples']['0']} samples; emulator lateness at most {late_us:.0f} us; the simulator: "
              f"min {sim['rtt_min_us']} mean {sim['rtt_mean_us']:.0f} p99 {sim['rtt_p99_us']:.0f} us")
        return r.config, f, late_us, sim

    # The hosts' own stalls spread the plain run's samples (plain_run), and
    # the stalled runs' by as much: the upper bounds allow for that spread.
    runs["plain"] = plain_run(lambda: measure("plain", ""), 5_000, "stalls with a 10 ms mean")
    for name, s in (("stalls", f"stalls = {one}"), ("two", f"stalls = [{one}, {one}]")):
        runs[name] = measure(name, s)
    (cp, plain, late_p, sim_plain), (cs, _, _, _), (c2, _, _, _) = runs["plain"], runs["stalls"], runs["two"]
    assert "stall_ns" not in cp["bottleneck"]
    assert (cs["bottleneck"]["stall_every_ns"], cs["bottleneck"]["stall_ns"]) == (45_000_000, 10_000_000)
    assert "stall_more_ns" not in cs["bottleneck"]
    assert c2["bottleneck"]["stall_more_ns"] == [[45_000_000, 10_000_000]]
    noise_p99, noise_mean = noise(plain)
    for name in ("stalls", "two"):
        _, f, late, sim = runs[name]
        slack = late_p + late  # the emulator's own timing, on top
        gain, sim_gain = f["rtt_mean_us"] - plain["rtt_mean_us"], sim["rtt_mean_us"] - sim_plain["rtt_mean_us"]
        assert sim_gain - 500 - noise_mean < gain < sim_gain + 500 + noise_mean + slack, (name, gain, sim_gain)
        tail, sim_tail = f["rtt_p99_us"] - plain["rtt_min_us"], sim["rtt_p99_us"] - sim_plain["rtt_min_us"]
        assert sim_tail - 8_000 < tail < sim_tail + 8_000 + noise_p99 + slack, (name, tail, sim_tail)
    assert runs["two"][1]["rtt_mean_us"] - runs["stalls"][1]["rtt_mean_us"] > 1_000, "both processes pause the link"


def test_link_jitter_reaches_the_emulator(core):
    """topology jitter on linux: the emulator's links draw it as the
    simulator's do. One segment in flight, acknowledged at once, so every
    packet is alone on its link and each RTT sample is the path's own RTT
    plus one uniform draw in [0, J] per direction: with J = 10 ms both
    ways, the mean is J above the same path's without jitter, the 99th
    percentile (2 - √0.02) J above its minimum, and the least of n samples
    close to that minimum.

    J is large next to the spread the hosts' own stalls give every run here
    (plain_run: 99th percentile up to 3-4 ms above the minimum), which the
    bounds allow for as measured on the plain run."""
    jitter_us = 10_000
    text = (BULK.format(duration="10s", loss="0%", cca="reno")
            + "cwnd_clamp = 1\n{reverse}\n[tcp]\ndelayed_ack = 'off'\n")

    def measure(name: str, j: str):
        t = text.format(reverse=f"[topology.reverse]\n{j}").replace('buffer = "1bdp"', f'buffer = "1bdp"\n{j}')
        r, res = run_measured(t, timing=True)
        assert res.status == "ok", res.note
        late_us = max((x for x in res.queue["lateness_us"] if x is not None), default=0.0)
        f = res.flows[0]
        print(f"{name}: rtt min {f['rtt_min_us']} mean {f['rtt_mean_us']:.0f} p99 {f['rtt_p99_us']:.0f} us over "
              f"{res.stats['rtt_samples']['0']} samples; emulator lateness at most {late_us:.0f} us")
        assert res.stats["rtt_samples"]["0"] > 150
        return r.config, f, late_us, res.stats["rtt_samples"]["0"]

    cp, plain, late_p, _ = plain_run(lambda: measure("plain", ""), jitter_us / 2, f"{jitter_us} us of jitter")
    cj, jit, late_j, n = measure("jitter", f"jitter = '{jitter_us}us'")
    assert "jitter_ns" not in cp["bottleneck"]
    assert cj["bottleneck"]["jitter_ns"] == cj["reverse"]["jitter_ns"] == jitter_us * 1000
    noise_p99, noise_mean = noise(plain)
    late = late_p + late_j  # the emulator's own timing, on top
    # The least of n sums of two uniform draws in [0, J] exceeds x with
    # probability (1 - x²/2J²)^n: this x, one run in 10,000. The plain
    # minimum can be a small packet's (the handshake's), the jittered one is
    # a full segment's, up to 120 us of serialisation at 100 Mbit/s later:
    # in the simulator (session 56) the plain minimum is 20,009 us and a full
    # segment's RTT 20,124 us. The hosts' stalls only add.
    segment_us = 1500 * 8 / 100
    assert plain["rtt_min_us"] <= jit["rtt_min_us"] <= plain["rtt_min_us"] + segment_us + jitter_us * math.sqrt(
        2 * math.log(1e4) / n), n
    # Sampling error, four standard deviations: the mean of n such sums has
    # J/√(6n); their 99th percentile, where the sum's density is √0.02/J,
    # J·√(0.99·0.01/(0.02·n)), and the load generator reports it as the
    # middle of a bucket 1/128 of its octave wide.
    assert abs(jit["rtt_mean_us"] - plain["rtt_mean_us"] - jitter_us) < (
        4 * jitter_us / math.sqrt(6 * n) + noise_mean + late), n
    p99_us = (2 - 0.02 ** 0.5) * jitter_us
    assert abs(jit["rtt_p99_us"] - plain["rtt_min_us"] - p99_us) < (
        4 * jitter_us * math.sqrt(0.495 / n) + jit["rtt_p99_us"] / 256 + noise_p99 + late), n

