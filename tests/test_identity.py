"""Every ready study's quick profile gives the results it gave before general
topologies came in: the same run ids and, per run, the same flow summaries,
samples, RPCs and bottleneck/reverse queue series, bit for bit.

tests/data/quick_digests.json was written by the core of commit ee1f130 (the
one before the network description moved into crates/netcore) with
``tests/digests.py --core /tmp/core_before.so``; this test runs the current
core on the same runs and compares digests. The flows digests were
rewritten once, on purpose, when rtt_mean_us/rtt_p99_us became one raw
sample per round trip (docs/analysis.md "RTT statistics"): the samples,
queue and rpcs digests stayed the same. 12 runs' digests were rewritten on
purpose when a resent head started restarting the retransmission timer and
RACK went on judging what a timeout left unmarked, as Linux does
(docs/sim-model.md, "Two recovery fixes"). All of them were rewritten on
purpose when the sender took Linux's send buffer, GSO PSH marks, TSO
deferral and `tcp_push_one`, and the TSO size (docs/sim-model.md, "The
send buffer, skbs and PSH"), and again when it took Linux 6.18's TSO
deferral bound and `tcp_sendmsg`'s write path (75 runs, then 56;
"Session 17: found, and modelled"), and the 12 runs of netdev-sizes
when an RPC's pending ACK started riding on its next segment (one
connection in Linux) instead of going as a packet of its own (session 20,
docs/sim-model.md "Applications"), and the 23 BBR and BBRv3 runs when
BBR's `bbr_packets_in_net_at_edt` started counting what the path
delivers until the paced sender's next slot (session 30,
docs/sim-model.md "BBR's in-network count at the next departure"), and
89 of the 94 when the sender took the write queue's skbs: a transmission
ends where its skb ends, and TSO deferral sends an skb short of the
queue's tail once it fits (session 31, docs/sim-model.md "The write
queue's skbs"), and the five Cebinae runs when links lost their event
per transmission and a transmission's end came first at a tie with an
arrival (session 32, docs/sim-model.md "No event per transmission"),
and two netdev-sizes runs when a loss probe's resend of the last segment
stopped counting as a retransmission in flight, as in Linux (session 40,
docs/sim-model.md "Tail loss probe"), and the 23 paced runs with
retransmissions when a paced sender started resending one skb per
pacing slot, as Linux does (session 40, docs/sim-model.md "Pacing"),
and 27 runs when the retransmission timer started running a jiffy after
its expiry, as Linux's timer wheel does (session 42, docs/sim-model.md
"The timer wheel"), and the 12 netdev-sizes runs when an RPC's receivers
came to enter ping-pong mode on a reply and leave it when the
delayed-ACK timer fires or data arrives twice, as Linux does (session
43, docs/sim-model.md "Applications"), and 71 of the 94 when the sender took three of Linux's rules: a write
that tops up the unsent tail skb takes its PSH away, an skb takes at
most half of cwnd, and a `cwnd_clamp` is set as the TCP-BPF clamp is, at
establishment with ssthresh (session 47, docs/sim-model.md "PSH at the
ends of writes, half a window per skb, and the clamp at establishment"),
and 89 of the 94 when the sender came to grow the head skb from the next
one, as Linux 6.10+'s `tcp_write_xmit` does (session 48, docs/sim-model.md
"The head skb grows from the next one: tcp_grow_skb"), and 68 of the 94
when the writer came to wake and the send buffer to grow as Linux 5.10+
and 5.18+ have them (every ACK and every new skb looks, the tail skb's
own room topped up; session 48, docs/sim-model.md "The writer's wake and
the send buffer's growth"), and 3 of the 94 when a write's PSH came to
stay with the write queue's skb that holds it, so that the segment of a
grown skb that ended a write keeps none for its retransmission (session
49, docs/sim-model.md "The head skb grows from the next one:
tcp_grow_skb");
the BPF studies' entries in ``runs`` are those of the kernel build
session 49's machine ran (6.18.44-fc-v657, BTF 0ad581b5657148c1), as in
``bpf_kernels``, whose entry for it session 49 rewrote with the current
core (it had been left from an older one); ``bpf_kernels`` also holds,
since session 40, the build that session's machine ran (6.18.44-fc-v669,
BTF 309e2b4c8d95a3d2), last written in session 48 (on 0ad581b5657148c1
session 49's change left the BPF studies' digests as they were).

A study with a BPF CCA compiles it against the running kernel's BTF
(vmlinux.h), which enters the object's name and so the run ids and seeds:
its runs differ from one kernel build to another. The fixture's
``bpf_kernels`` holds those studies' digests per kernel BTF besides the
ones in ``runs`` (written with ``tests/digests.py --bpf-kernel`` by a core
whose results the rest of the fixture pins), and the test compares with the
entry whose run ids this kernel gives. On a kernel build the fixture has
not seen, it compares the study's runs without a BPF CCA, and
``test_bpf_runs_with_the_fixtures_seeds`` runs the BPF runs with the seed
and start times their ``runs`` entry records (its ``replay``, since session
50): what the objects compute does not depend on the build, so that kernel
must give the same digests. Before, such a kernel failed the test (a CI
machine on a new build would have kept every change from landing).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

import digests

FIXTURE = Path(__file__).parent / "data" / "quick_digests.json"
_DATA = json.loads(FIXTURE.read_text())
EXPECTED = _DATA["runs"]
# Per kernel BTF: the studies with BPF CCAs, as that kernel's objects run them.
BPF_KERNELS: dict[str, list[dict]] = _DATA.get("bpf_kernels", {})


def _by_study(entries: list[dict] = EXPECTED) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for e in entries:
        out[e["study"]].append(e)
    return out


def test_the_fixture_covers_every_study():
    studies = {str(p.relative_to(digests.REPO)) for p in (digests.REPO / "studies").glob("**/*.toml")}
    old = {e["study"] for e in EXPECTED}
    # studies added after the fixture (parking-lot, noted) have no "before"
    assert old <= studies
    assert len(old) >= 9


def _recorded_for(study: str, ids: list[str]) -> list[dict] | None:
    """The fixture's entries of `study` whose run ids are `ids` (this kernel's):
    those of `runs` or of a `bpf_kernels` build; None on a build it lacks."""
    variants = [_by_study()[study]] + [_by_study(v)[study] for v in BPF_KERNELS.values()]
    return next((v for v in variants if [e["run_id"] for e in v] == ids), None)


@pytest.mark.parametrize("study", sorted(_by_study()), ids=lambda s: Path(s).stem)
def test_quick_profile_gives_the_same_results(study):
    core = digests.load_core(None)
    runs = [(s, p, r) for s, p, r in digests.quick_runs() if s == study]
    ids = [r.run_id for _, _, r in runs]
    want = _by_study()[study]
    if any(digests.uses_bpf(r) for _, _, r in runs):
        match = _recorded_for(study, ids)
        if match is None:
            # A kernel build the fixture has not seen: its BPF runs have other
            # ids and seeds (test_bpf_runs_with_the_fixtures_seeds checks
            # them); the study's other runs must be as recorded.
            print(f"kernel BTF {digests.kernel_btf()} is not in the fixture ({sorted(BPF_KERNELS)} and that of "
                  f"`runs`): {study}'s BPF runs are checked with the fixture's seeds; record this kernel's "
                  f"with tests/digests.py --bpf-kernel")
            runs = [(s, p, r) for s, p, r in runs if not digests.uses_bpf(r)]
            ids = [r.run_id for _, _, r in runs]
            recorded = {e["run_id"]: e for e in want}
            assert all(i in recorded for i in ids), "run ids of runs without a BPF CCA changed"
            match = [recorded[i] for i in ids]
        want = match
    assert ids == [e["run_id"] for e in want], "run ids changed"
    for (_, profile, run), e in zip(runs, want):
        assert profile == e["profile"]
        got = digests.table_digests(digests.simulate(core, run))
        assert got == e["digests"], f"{study} run {run.run_id} ({run.label()}): results changed"


_REPLAYED = _by_study([e for e in EXPECTED if "replay" in e])


@pytest.mark.parametrize("study", sorted(_REPLAYED), ids=lambda s: Path(s).stem)
def test_bpf_runs_with_the_fixtures_seeds(study):
    """A BPF run's id, and so its seed and start times, follow the kernel's BTF
    (its object is compiled against vmlinux.h), but what it computes should
    not: this kernel's objects, run with the seed and start times the
    fixture's kernel drew for the same run, give that kernel's digests. So
    the BPF studies are checked on any kernel, one the fixture has never
    seen included."""
    core = digests.load_core(None)
    runs = [r for s, _, r in digests.quick_runs() if s == study]
    ids = [r.run_id for r in runs]
    if _recorded_for(study, ids) not in (None, _by_study()[study]):
        # Not needed, and not asked of it: a build the fixture has is compared
        # exactly. (Here it runs on builds the fixture lacks, and on that of
        # `runs`, where the replay is the run itself.)
        pytest.skip(f"kernel BTF {digests.kernel_btf()} is in the fixture: "
                    f"test_quick_profile_gives_the_same_results compares its BPF runs exactly")
    here = {r.label(): r for r in runs if digests.uses_bpf(r)}
    want = _REPLAYED[study]
    assert sorted(here) == sorted(e["replay"]["label"] for e in want), "the study's BPF runs changed"
    for e in want:
        run = here[e["replay"]["label"]]
        got = digests.table_digests(digests.simulate_config(core, digests.replayed(run.config, e["replay"])))
        assert got == e["digests"], (
            f"{study} {run.label()}: this kernel's BPF object ({digests.kernel_btf()}), run with the seed and "
            f"start times of run {e['run_id']}, gives other results than it did on the fixture's kernel")
