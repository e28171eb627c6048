"""The hosts backend on a testbed of namespaces running OpenSSH servers (hosts_testbed.py).

Root tests (like the linux backend's): CCBENCH_SKIP_ROOT_TESTS=1 skips them
off root. The unit tests at the top need nothing.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import ccbench
from ccbench.backends.hosts.inventory import parse
from ccbench.backends.hosts.ssh import Connection
from ccbench.errors import StudyError

from kernel_retry import emulator_late, skip_if_stolen, stolen, until_clean
from root_checks import need_root

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PKG = str(Path(ccbench.__file__).resolve().parents[1])


# ---------------------------------------------------------------- no root needed

def _table(**kw):
    t = {"bottleneck": "path", "known_hosts": "/tmp/kh",
         "senders": [{"ssh": "10.0.0.1", "address": "10.1.0.1", "interface": "eth1"}],
         "receiver": {"ssh": "10.0.0.2", "address": "10.1.0.2", "interface": "eth1"}}
    t.update(kw)
    return t


def test_inventory_refuses_option_like_hosts_and_bad_values():
    inv = parse(_table(), source="inv.toml", n_senders=1)
    assert [h.role for h in inv.hosts] == ["s0", "d"]
    with pytest.raises(StudyError, match=r"inv.toml: hosts.senders\[0\].ssh: not a host name"):
        parse(_table(senders=[{"ssh": "-oProxyCommand=touch /tmp/x", "address": "10.1.0.1", "interface": "e"}]),
              source="inv.toml")
    with pytest.raises(StudyError, match=r"senders\[0\].ssh: a host and a port in one value .got '10.0.0.1:2222'; "
                                         r"allowed: the host alone, with the port as its own key: ssh = '10.0.0.1', "
                                         r"port = 2222"):
        parse(_table(senders=[{"ssh": "10.0.0.1:2222", "address": "10.1.0.1", "interface": "e"}]), source="inv.toml")
    assert parse(_table(senders=[{"ssh": "fd00::1", "address": "10.1.0.1", "interface": "e"}]),
                 source="inv.toml").hosts[0].ssh_host == "fd00::1"  # IPv6: colons of its own
    with pytest.raises(StudyError, match="receiver.address: not an IPv4 address"):
        parse(_table(receiver={"ssh": "h", "address": "10.1.0.2; rm -rf /", "interface": "eth1"}), source="inv.toml")
    with pytest.raises(StudyError, match="the study has 2 senders .got 1; allowed: at least 2"):
        parse(_table(), source="inv.toml", n_senders=2)
    with pytest.raises(StudyError, match="bottleneck = 'emu' needs a forwarding host"):
        parse(_table(bottleneck="emu"), source="inv.toml")
    # a bad default for every host is named where it is written, not as the first sender's key
    with pytest.raises(StudyError, match=r"inv.toml: hosts.port: not a port \(got 70000"):
        parse(_table(port=70000), source="inv.toml")
    with pytest.raises(StudyError, match=r"inv.toml: hosts.senders\[0\].port: not a port \(got 0"):
        parse(_table(senders=[{"ssh": "10.0.0.1", "address": "10.1.0.1", "interface": "e", "port": 0}]),
              source="inv.toml")


def test_remote_commands_are_quoted_argument_lists():
    inv = parse(_table(user="root", identity="/k/id"), source="i")
    c = Connection(inv.senders[0])
    argv = c.command_argv(["sh", "-c", 'echo "$1"', "sh", "a b; rm -rf /"])
    # the destination follows "--" (never an option); the remote command is one shlex-quoted string
    assert argv[-3:] == ["--", "10.0.0.1", "sh -c 'echo \"$1\"' sh 'a b; rm -rf /'"]
    assert "StrictHostKeyChecking=yes" in argv and "BatchMode=yes" in argv and 'UserKnownHostsFile="/tmp/kh"' in argv
    assert "StrictHostKeyChecking=accept-new" in Connection(inv.senders[0], accept_new=True).command_argv(["true"])


def test_key_file_paths_reach_ssh_as_one_value_without_tokens():
    """ssh splits an -o value at spaces (UserKnownHostsFile takes several
    files) and expands %-tokens in it and in -i: a path with either must
    reach ssh as itself. Double quotes, which ssh's values cannot hold, are
    refused in the inventory."""
    inv = parse(_table(known_hosts="/k/known hosts %d", identity="/k/id %h"), source="i")
    argv = Connection(inv.senders[0]).command_argv(["true"])
    assert 'UserKnownHostsFile="/k/known hosts %%d"' in argv
    assert argv[argv.index("-i") + 1] == "/k/id %%h"
    with pytest.raises(StudyError, match="without double quotes"):
        parse(_table(known_hosts='/k/"kh'), source="i")


def test_a_manifest_from_the_host_is_checked_before_it_is_undone():
    """The manifest lives on the host: only entries of the shapes ccbench writes are undone."""
    from ccbench.backends.hosts.remote import undo_steps

    good = "/sys/fs/cgroup/ccbh0123abcd-s0"
    args, _ = undo_steps([{"kind": "cgroup", "path": good},
                          {"kind": "cgroup", "path": "/sys/fs/cgroup/../../etc/ccbh0123abcd-s0"},
                          {"kind": "cgroup", "path": "/sys/fs/cgroup/user.slice"},
                          {"kind": "cgroup", "path": "/sys/fs/cgroup/ccb0123abcd-s0"},  # the linux backend's shape
                          {"kind": "cgroup", "path": ["/sys/fs/cgroup/ccbh0123abcd-s0"]},
                          {"kind": "sysctl", "key": "kernel.panic", "value": "1"}])
    assert args == [f"cgroup={good}"]


# ---------------------------------------------------------------- the testbed



@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    need_root("the hosts backend tests need root (namespaces running sshd)")
    sys.path.insert(0, str(HERE))
    from hosts_testbed import Testbed

    from ccbench.backends.hosts import deploy

    deploy.local_binaries()  # builds the static ccbench-load / ccbench-emu first when they are missing
    tb = Testbed(tmp_path_factory.mktemp("hostbed"))
    try:
        tb.build()
        yield tb
    finally:
        tb.teardown()


def ccbench_cmd(*args: str, **kw) -> subprocess.CompletedProcess:
    """`ccbench ARGS`; ``env``: settings added to this process's environment."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PKG, os.environ.get("PYTHONPATH", "")]), **kw.pop("env", {}))
    return subprocess.run([sys.executable, "-m", "ccbench", *args], capture_output=True, text=True, env=env,
                          timeout=kw.pop("timeout", 600), **kw)


def ccbench_popen(*args: str) -> subprocess.Popen:
    """ccbench in a process group of its own, as a terminal's foreground job."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PKG, os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-m", "ccbench", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)


def quickstart(tmp: Path, duration: str = "10s", ccas: str = '"cubic"', reps: int = 1) -> Path:
    """studies/quickstart.toml, shorter: one repetition of the given algorithms."""
    text = (ROOT / "studies" / "quickstart.toml").read_text()
    text = text.replace('duration = "20s"', f'duration = "{duration}"')
    text = text.replace("repetitions = 2 ", f"repetitions = {reps} ")
    text = text.replace('"flows.0.cca" = ["reno", "cubic", "bbr"]', f'"flows.0.cca" = [{ccas}]')
    p = tmp / f"quickstart-{duration}-{reps}.toml"
    p.write_text(text)
    return p


def store_rows(out: Path):
    from ccbench.store import Store

    with Store.open_existing(out) as s:
        runs = s.runs(with_config=True)
        flows = s.flows()
        counts = {t: s.count(t) for t in ("samples", "queue")}
    return runs, flows, counts


def run_measured(bed, study: Path, inv: Path, out: Path):
    """`ccbench run` on the hosts backend, again (into a fresh store) while its run comes back
    suspect only because the emulator could not keep up (kernel_retry.py). Each attempt
    succeeds and leaves nothing behind. (runs, flows, counts) of the last."""
    def once():
        if out.exists():
            shutil.rmtree(out)
        r = ccbench_cmd("run", str(study), "--backend", "hosts", "--inventory", str(inv), "--out", str(out))
        assert r.returncode == 0, r.stderr + r.stdout
        assert bed.leftovers() == []
        return store_rows(out)

    return until_clean(once, lambda x: emulator_late(x[0][0].stats, x[0][0].status), lambda x: x[0][0].error,
                       steal=lambda x: stolen(x[0][0].stats))[-1]


def wait_for_processes(bed, role: str, timeout: float = 60) -> None:
    """Until a ccbench program runs from this host's run directory (the run is under way)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in subprocess.run(["ip", "netns", "pids", bed.ns[role]], capture_output=True,
                                  text=True).stdout.split():
            try:
                exe = os.readlink(f"/proc/{pid}/exe")
            except OSError:
                continue
            if exe.startswith(bed.workdir) and f"-{role}/" in exe:
                args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if b"client" in args or b"run" in args:
                    return
        time.sleep(0.1)
    raise AssertionError(f"no ccbench process appeared on {role}")


def test_quickstart_through_a_forwarder_matches_the_linux_backend(bed, tmp_path):
    """bottleneck = "emu": the full schema, goodput within 5% of the same study on the linux backend."""
    study = quickstart(tmp_path)
    inv = bed.write_inventory(bottleneck="emu")
    runs, flows, counts = run_measured(bed, study, inv, tmp_path / "h")
    assert [x.status for x in runs] == ["ok"], [x.error for x in runs]
    run = runs[0]
    assert run.backend == "hosts"
    stats = run.stats
    # clock offsets of every host at the start and the end; on one machine the monotonic clocks agree
    assert set(stats["clock"]) == {"s0", "s1", "d", "f"}
    # every host's steal time per CPU over the run (on this testbed all are this machine's CPUs)
    assert set(stats["steal"]) == {"s0", "s1", "d", "f"}
    for per_cpu in stats["steal"].values():
        assert set(per_cpu) == {str(c) for c in range(os.cpu_count())} and all(0 <= v <= 1 for v in per_cpu.values())
    for c in stats["clock"].values():
        for when in ("start", "end"):
            assert abs(c[when]["monotonic_offset_ns"]) <= c[when]["rtt_us"] * 1000 / 2 + 1_000_000
    hosts = run.config["hosts"]
    assert hosts["bottleneck"] == "emu" and hosts["s0"]["interface"]["mtu"] == 1500
    assert "offloads" in hosts["d"]["interface"] and hosts["f"]["interfaces"]["td"]["mtu"] == 1500
    assert counts["samples"] > 0 and counts["queue"] > 0
    assert {f["flow_id"] for f in flows} == {0, 1}
    assert all(f["rtt_min_us"] >= 20_000 for f in flows)  # the emulated 20 ms path
    # RTT statistics over every sample, from the TCP-BPF program in each sender's cgroup, as on linux
    assert all(f["rtt_mean_us"] is not None and f["rtt_p99_us"] >= f["rtt_mean_us"] >= f["rtt_min_us"]
               for f in flows), flows

    # The linux run is retried too while it comes back suspect (a late emulator takes goodput away:
    # a CI run compared a clean hosts run with a suspect linux one).
    lin = ccbench_cmd("run", str(study), "--backend", "linux", "--out", str(tmp_path / "l"), "--retry-suspect", "4")
    assert lin.returncode == 0, lin.stderr + lin.stdout
    lruns, lflows, _ = store_rows(tmp_path / "l")
    skip_if_stolen(lruns[0].stats, lruns[0].status, "the linux run to compare with")
    assert [x.status for x in lruns] == ["ok"], [x.error for x in lruns]
    # Aggregate goodput (all flows' bytes over the run): how the two backends' paths carry the study.
    # The split between the flows (the second starts at 5 s) varies from run to run on either backend.
    seconds = 10
    hosts_total = sum(f["bytes_delivered"] for f in flows) * 8 / seconds
    linux_total = sum(f["bytes_delivered"] for f in lflows) * 8 / seconds
    print(f"aggregate goodput: hosts {hosts_total / 1e6:.2f} Mbit/s, linux {linux_total / 1e6:.2f} Mbit/s "
          f"(flows hosts {[round(f['goodput_bps'] / 1e6, 2) for f in flows]}, "
          f"linux {[round(f['goodput_bps'] / 1e6, 2) for f in lflows]})")
    assert hosts_total == pytest.approx(linux_total, rel=0.05)


# 15 s: iperf3's server writes more JSON than a pipe holds (64 KB by about
# 14 s at its 0.1 s interval), which once held its ssh open past the run's end
# (suspect: "iperf3-0-server did not stop in time").
PATH_STUDY = """
[study]
name = "hosts-path"
duration = "15s"
[topology.bottleneck]
rate = "1Gbit"
buffer = "1000pkt"
[[flows]]
cca = "cubic"
tool = "iperf3"
max_rate = "200Mbit"
"""


def run_ok(bed, tmp_path: Path, text: str, bottleneck: str, name: str):
    """Run a study text on the testbed; it succeeds and leaves nothing behind. (runs, flows, counts)"""
    study = tmp_path / f"{name}.toml"
    study.write_text(text)
    inv = bed.write_inventory(bottleneck=bottleneck)
    runs, flows, counts = run_measured(bed, study, inv, tmp_path / name)
    assert runs[0].status == "ok", runs[0].error
    return runs, flows, counts


CLAMP_STUDY = """
[study]
name = "hosts-clamp"
duration = "6s"
[topology]
senders = 2
[topology.bottleneck]
rate = "100Mbit"
delay = "10ms"
buffer = "1bdp"
[[flows]]
cca = "cubic"
sender = 0
cwnd_clamp = 20
[[flows]]
cca = "cubic"
sender = 1
"""


def test_cwnd_clamp_on_a_sender_by_its_tcp_bpf_program(bed, tmp_path):
    """flows.cwnd_clamp on hosts, as on linux: the sender's load client attaches its sock_ops program
    in the cgroup the run created there; the clamped flow's window reaches 20 segments and never more,
    the other's grows past it; the cgroups are gone afterwards (run_measured checks for leftovers)."""
    # One run: a late emulator does not change what is checked here (a window the sender sets).
    study = tmp_path / "clamp.toml"
    study.write_text(CLAMP_STUDY)
    r = ccbench_cmd("run", str(study), "--backend", "hosts", "--inventory", str(bed.write_inventory(bottleneck="emu")),
                    "--out", str(tmp_path / "clamp"))
    assert r.returncode == 0, r.stderr + r.stdout
    assert bed.leftovers() == []
    runs, _, _ = store_rows(tmp_path / "clamp")
    assert runs[0].status == "ok" or emulator_late(runs[0].stats, runs[0].status), runs[0].error
    from ccbench.store import Store

    with Store.open_existing(tmp_path / "clamp") as st:
        samples = st.reader("samples").read_all().to_pydict()
    cwnd = {0: [], 1: []}
    for f, c in zip(samples["flow_id"], samples["cwnd_bytes"]):
        if c is not None:
            cwnd[int(f)].append(int(c))
    print(f"clamped flow: max cwnd {max(cwnd[0])} B; other: {max(cwnd[1])} B; {runs[0].stats['rtt_samples']}")
    assert max(cwnd[0]) == 20 * 1448  # reached, never exceeded
    assert max(cwnd[1]) > 40 * 1448
    assert all(n > 0 for n in runs[0].stats["rtt_samples"].values())


def test_path_with_iperf3_flow_rows_agree_with_iperf3(bed, tmp_path):
    runs, flows, counts = run_ok(bed, tmp_path, PATH_STUDY, "path", "p")
    ip3 = runs[0].stats["iperf3"]["0"]
    print(f"path: ccbench {flows[0]['goodput_bps'] / 1e6:.2f} Mbit/s, iperf3 {ip3['received_bps'] / 1e6:.2f} Mbit/s")
    assert flows[0]["goodput_bps"] == pytest.approx(ip3["received_bps"], rel=0.02)
    assert counts["samples"] > 0 and counts["queue"] == 0


def _refused(bed, tmp_path, inv_text: str, study: Path) -> str:
    inv = tmp_path / "bad-inventory.toml"
    inv.write_text(inv_text)
    r = ccbench_cmd("run", str(study), "--backend", "hosts", "--inventory", str(inv), "--out", str(tmp_path / "x"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert not (tmp_path / "x").exists()
    assert bed.leftovers() == []
    return r.stderr.strip()


def test_preflight_refuses_before_any_run(bed, tmp_path):
    study = quickstart(tmp_path, duration="6s")
    # an unknown host key: sender 1's entry replaced by another key
    bad_kh = tmp_path / "known_hosts"
    lines = bed.known_hosts.read_text().splitlines()
    other = (bed.tmp / "s0" / "hostkey.pub").read_text().split()
    lines[1] = f"{bed.mgmt['s1']} {other[0]} {other[1]}"
    bad_kh.write_text("\n".join(lines) + "\n")
    err = _refused(bed, tmp_path, bed.inventory().replace(str(bed.known_hosts), str(bad_kh)), study)
    assert f"host sender 1 (root@{bed.mgmt['s1']}:22): its host key" in err, err
    # a host that refuses the key: the receiver gets an identity it does not know
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other_key")], check=True)
    text = bed.inventory().replace("[hosts.receiver]\n", f'[hosts.receiver]\nidentity = "{tmp_path / "other_key"}"\n')
    err = _refused(bed, tmp_path, text, study)
    assert f"host receiver (root@{bed.mgmt['d']}:22): refused the key" in err, err
    # a CPU the host does not have: refused before any run, not a failed run each
    n_cpus = len(os.sched_getaffinity(0))
    text = bed.inventory().replace("cpus = [0]", f"cpus = [{n_cpus + 3}]", 1)  # sender 0's
    err = _refused(bed, tmp_path, text, study)
    assert f"host sender 0 (root@{bed.mgmt['s0']}:22): has no CPU {n_cpus + 3} that ccbench may use (its cpus" in err, err
    # a sender's interface left out of the forwarder's to_senders: its packets bypassed the emulator,
    # and the run was stored "ok" at 28 times the bottleneck's rate
    text = bed.inventory().replace('to_senders = ["ts0", "ts1"]', 'to_senders = ["ts0"]')
    assert text != bed.inventory()
    err = _refused(bed, tmp_path, text, study)
    assert (f"host forwarder (root@{bed.mgmt['f']}:22): reaches sender 1 (root@{bed.mgmt['s1']}:22)'s address "
            f"{bed.test_ip['s1']} through ts1, which is not hosts.forwarder.to_senders (ts0): its packets would "
            "bypass the bottleneck") in err, err
    # a congestion control the hosts' kernel does not have
    vegas = tmp_path / "vegas.toml"
    vegas.write_text(study.read_text().replace('"flows.0.cca" = ["cubic"]', '"flows.0.cca" = ["vegas"]'))
    err = _refused(bed, tmp_path, bed.inventory(), vegas)
    assert f"host sender 0 (root@{bed.mgmt['s0']}:22): its kernel" in err and "no congestion control vegas" in err
    # jitter with tc: netem's jitter would reorder packets, ccbench's keeps their order
    jit = tmp_path / "jitter.toml"
    jit.write_text(study.read_text().replace('jitter = "0ms"', 'jitter = "1ms"', 1))
    err = _refused(bed, tmp_path, bed.inventory(bottleneck="tc"), jit)
    assert f"error: {jit}: topology.bottleneck.jitter = '1ms'" in err and "bottleneck = 'emu'" in err, err
    # stalls with tc: netem cannot pause a link
    stalls = tmp_path / "stalls.toml"
    stalls.write_text(study.read_text().replace('jitter = "0ms"', 'jitter = "0ms"\nstalls = { every = "50ms", '
                                                'length = "2ms" }', 1))
    err = _refused(bed, tmp_path, bed.inventory(bottleneck="tc"), stalls)
    assert "topology.bottleneck.stalls" in err and "bottleneck = 'emu'" in err, err
    # tc where the kernel has no netem (the quickstart's 10 ms needs it)
    if "CONFIG_NET_SCH_NETEM=" not in subprocess.run(["sh", "-c", "zcat /proc/config.gz 2>/dev/null"],
                                                     capture_output=True, text=True).stdout:
        err = _refused(bed, tmp_path, bed.inventory(bottleneck="tc"), study)
        assert "host forwarder" in err and "no netem qdisc" in err and "bottleneck = 'emu'" in err


def test_a_host_dying_fails_its_run_and_the_next_run_proceeds(bed, tmp_path):
    study = quickstart(tmp_path, duration="6s", reps=2)
    inv = bed.write_inventory(bottleneck="emu")
    p = ccbench_popen("run", str(study), "--backend", "hosts", "--inventory", str(inv), "--out", str(tmp_path / "k"))
    try:
        wait_for_processes(bed, "s1")
        time.sleep(4)  # into the flows (t0 is 1.5 s after the processes start)
        bed.kill_host("s1")  # sshd, its sessions and ccbench's processes: the host is gone
        bed.start_sshd("s1")  # ... and back for the next run
        out, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 1, out + err  # some runs failed
    runs, _, _ = store_rows(tmp_path / "k")
    # The other run proceeds: ok, or suspect only because the emulator could not keep up.
    status = sorted("ok" if x.status == "suspect" and (x.stats or {}).get("suspect_kinds") == ["emulator"] else x.status
                    for x in runs)
    assert status == ["failed", "ok"], [(x.status, x.error) for x in runs]
    failed = next(x for x in runs if x.status == "failed")
    assert f"host sender 1 (root@{bed.mgmt['s1']}:22): connection lost during the run" in failed.error, failed.error
    print("the failed run:", failed.error.splitlines()[0])
    assert bed.leftovers() == []


def test_a_host_still_down_at_the_end_is_named_for_doctor_cleanup(bed, tmp_path):
    """The study's last run loses a host for good: its cleanup there fails,
    is tried once more at the end, and what stays is named with the command
    that removes it once the host is back. The next run fails at once (the
    host is unreachable) and leaves nothing there to name."""
    study = quickstart(tmp_path, duration="6s", reps=2)
    inv = bed.write_inventory(bottleneck="emu")
    p = ccbench_popen("run", str(study), "--backend", "hosts", "--inventory", str(inv), "--out", str(tmp_path / "k"))
    try:
        wait_for_processes(bed, "s1")
        time.sleep(3)
        bed.kill_host("s1")  # and it stays down
        out, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
        bed.start_sshd("s1")
    assert p.returncode == 1, out + err  # the runs failed
    assert (f"could not clean up 1 run directory on unreachable hosts; run `ccbench doctor --cleanup --inventory "
            f"{inv}` once they are back:") in err, err
    assert re.search(rf"^  host sender 1 \(root@{re.escape(bed.mgmt['s1'])}:22\): .*\(run directory "
                     rf"{re.escape(bed.workdir)}/\S+-s1\)$", err, re.M), err
    assert err.count("(run directory ") == 1, err  # the second run never reached sender 1
    assert bed.leftovers() != []  # its run directory on sender 1
    r = ccbench_cmd("doctor", "--cleanup", "--inventory", str(inv))
    assert r.returncode == 0, r.stdout + r.stderr
    assert bed.leftovers() == []


def test_controller_killed_then_doctor_cleanup_leaves_nothing(bed, tmp_path):
    study = quickstart(tmp_path, duration="8s")
    inv = bed.write_inventory(bottleneck="emu")
    logs = os.path.join(tempfile.gettempdir(), "ccbench-hosts-*")
    others = set(glob.glob(logs))
    p = ccbench_popen("run", str(study), "--backend", "hosts", "--inventory", str(inv), "--out", str(tmp_path / "c"))
    try:
        wait_for_processes(bed, "s0")
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    time.sleep(0.5)
    assert bed.leftovers() != []  # the run directories, the TUN device, the rules, the sysctls
    killed = set(glob.glob(logs)) - others
    assert len(killed) == 1, killed  # and this machine's log directory of the run
    left = bed.leftovers()
    r = ccbench_cmd("doctor", "--inventory", str(inv), env={"COLUMNS": "400"})  # lists, removes nothing
    assert r.returncode == 4, r.stdout + r.stderr
    assert r.stdout.count("1 run directory left by killed controllers") == 4, r.stdout  # each of the 4 hosts
    assert bed.leftovers() == left
    # a run now (the resume) is refused before anything starts: the killed run's TUN and rules on the
    # forwarder took about half of the next runs' traffic (degenerate runs, stored as results)
    r = ccbench_cmd("run", str(study), "--backend", "hosts", "--inventory", str(inv), "--out", str(tmp_path / "c"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout.count("left by a killed controller: `ccbench doctor --cleanup --inventory FILE` removes it") == 4 \
        or r.stderr.count("left by a killed controller") == 4, r.stdout + r.stderr
    assert bed.leftovers() == left
    # a host down as well: its leftovers are unknown, so "not ready" (1) is the answer
    bed.kill_host("d")
    try:
        r = ccbench_cmd("doctor", "--inventory", str(inv), env={"COLUMNS": "400"})
        assert r.returncode == 1, r.stdout + r.stderr
        r = ccbench_cmd("doctor", "--cleanup", "--inventory", str(inv))  # cleans the others
        assert r.returncode == 1 and "again once the hosts above are back" in r.stderr, r.stdout + r.stderr
        assert r.stderr.startswith(f"ccbench: error: host receiver (root@{bed.mgmt['d']}:22): "), r.stderr
    finally:
        bed.start_sshd("d")
    r = ccbench_cmd("doctor", "--cleanup", "--inventory", str(inv))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "removed" in r.stdout
    deadline = time.monotonic() + 10
    while bed.leftovers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert bed.leftovers() == []
    r = ccbench_cmd("doctor", "--cleanup", "--inventory", str(inv))
    assert "nothing left behind" in r.stdout, r.stdout
    r = ccbench_cmd("doctor", "--inventory", str(inv), env={"COLUMNS": "400"})
    assert r.returncode == 0 and r.stdout.count("ready (root); nothing left behind") == 4, r.stdout + r.stderr
    assert glob.glob("/tmp/ccbh-*") == []  # nor the killed controller's ssh control sockets
    assert not any(os.path.exists(d) for d in killed)  # nor its log directory


TC_STUDY = """
[study]
name = "hosts-tc"
duration = "4s"
[topology.bottleneck]
rate = "50Mbit"
buffer = "100pkt"
[[flows]]
cca = "cubic"
"""


def test_tc_bottleneck_sets_the_rate_and_is_removed(bed, tmp_path):
    """bottleneck = "tc": tbf on the forwarder's egress (this kernel has tbf, not netem: no delay)."""
    runs, flows, _ = run_ok(bed, tmp_path, TC_STUDY, "tc", "t")
    ceiling = 50e6 * 1448 / (1500 + 14)  # tbf counts the Ethernet header
    print(f"tc: {flows[0]['goodput_bps'] / 1e6:.2f} Mbit/s of a {ceiling / 1e6:.2f} Mbit/s payload ceiling")
    assert 0.85 * ceiling <= flows[0]["goodput_bps"] <= 1.01 * ceiling


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_mid_run_leaves_nothing(bed, tmp_path, presses):
    """Ctrl-C as a terminal sends it, to the whole foreground process group,
    once or twice 0.3 s apart: a second press once killed the cleanup's own
    ssh commands (they were in ccbench's group) and left everything on
    every host."""
    study = quickstart(tmp_path, duration="8s")
    inv = bed.write_inventory(bottleneck="emu")
    p = ccbench_popen("run", str(study), "--backend", "hosts", "--inventory", str(inv), "--out", str(tmp_path / "i"))
    try:
        wait_for_processes(bed, "s0")
        time.sleep(1)
        for i in range(presses):
            time.sleep(0.3 * i)
            os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, out + err
    assert "--inventory" in err  # the resume command
    assert bed.leftovers() == []


def test_a_study_may_carry_its_own_hosts_table():
    from ccbench.spec import parse_study

    text = (ROOT / "studies" / "quickstart.toml").read_text().replace('backend = "sim"', 'backend = "hosts"')
    text += '\n[hosts]\nbottleneck = "path"\n' + "".join(
        f'[[hosts.senders]]\nssh = "a{i}"\naddress = "10.0.0.{i + 1}"\ninterface = "e"\n' for i in range(2))
    study = parse_study(text, filename="q.toml")
    assert study.backend == "hosts" and study.document["hosts"]["bottleneck"] == "path"
    with pytest.raises(StudyError, match="hosts.receiver: not a table"):
        parse(study.document["hosts"], source="q.toml", n_senders=2)


def test_a_work_directory_that_was_there_stays_and_one_ccbench_made_goes(bed, tmp_path):
    """The end of every run removed the work directory when empty, also one
    ccbench did not make (workdir = "/var/tmp" would have removed /var/tmp):
    now only one it made (marked) goes."""
    study = quickstart(tmp_path, duration="6s")
    inv = bed.write_inventory(bottleneck="emu")
    wd = Path(bed.workdir)
    assert not wd.exists()
    wd.mkdir()
    wd.chmod(0o1777)  # as /var/tmp
    try:
        r = ccbench_cmd("run", str(study), "--backend", "hosts", "--inventory", str(inv), "--out", str(tmp_path / "a"))
        assert r.returncode == 0, r.stdout + r.stderr
        assert wd.is_dir() and list(wd.iterdir()) == [] and wd.stat().st_mode & 0o7777 == 0o1777
    finally:
        wd.rmdir()
    r = ccbench_cmd("run", str(study), "--backend", "hosts", "--inventory", str(inv), "--out", str(tmp_path / "b"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert not wd.exists() and bed.leftovers() == []
