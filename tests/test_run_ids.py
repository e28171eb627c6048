"""Run ids, config ids, seeds and resolved configs do not change.

A results directory is resumed by run id (the executor skips the runs it
holds), so a change to how a study expands into runs must keep every id of
every existing study. tests/data/run_ids.json pins them for every ready
study in every profile (on the sim backend, so that no kernel is needed) and
for a few synthetic sweeps that exercise what the expansion shares between
configurations (swept rates and delays, flows, start jitter, cases, a
general network): per study the first ids in full and a digest of all ids,
config ids, seeds and configs. Runs of BPF sources are left out: their cca
names the compiled object, whose name depends on the machine's clang
(ccbench.bpf), so their ids are pinned only on one machine (test_identity).

It was written by the expansion of commit cc1fdef (before run ids were
composed from cached JSON fragments) with ``python3 tests/test_run_ids.py
--write``; rewrite it only for a change that is meant to change run ids.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "data" / "run_ids.json"

BPF_SOURCES = {"studies/bpf-cca/bpf-dctcp.toml:-", "studies/bpf-cca/bpf-dctcp.toml:quick",
               "studies/bpf-cca/bpf-dctcp.toml:linux", "studies/bpf-cca/bpf-reno-vegas.toml:-",
               "studies/bpf-cca/bpf-reno-vegas.toml:quick", "studies/bpf-cca/bpf-reno-vegas.toml:linux",
               "studies/many-flows/vegas-newreno.toml:ns3-ssthresh",
               "studies/many-flows/vegas-newreno.toml:bpf-linux-ssthresh"}

SYNTHETIC = {
    "rate-delay": """
[study]
name = "expand"
duration = "10s"
repetitions = 2
[topology]
bottleneck = { rate = "100Mbit", delay = "10ms", buffer = "1bdp" }
[[flows]]
cca = "cubic"
[[flows]]
cca = "bbr"
start = "1s"
[sweep]
"topology.bottleneck.rate" = ["10Mbit", "11Mbit", "12.5Mbit", "1Gbit"]
"topology.bottleneck.delay" = ["1ms", "2ms", "0.5ms", "100ms"]
""",
    "flows-jitter-tcp": """
[study]
name = "flows"
duration = "20s"
repetitions = 3
seed = 7
[topology]
senders = [{ delay = "1ms" }, { delay = "5ms" }]
bottleneck = { rate = "50Mbit", delay = "10ms", buffer = "2bdp", qdisc = "fq_codel" }
reverse = { rate = "10Mbit" }
[[flows]]
cca = "reno"
count = 2
start_jitter = "100ms"
[[flows]]
cca = "vegas"
sender = 1
start = "2s"
stop = "15s"
[sweep]
"flows.0.cca" = ["reno", "cubic", "bbr"]
"study.duration" = ["20s", "30s"]
"tcp.mss" = [1448, 536]
"flows.1.start_jitter" = ["0s", "50ms"]
""",
    "cases": """
[study]
name = "cases"
duration = "10s"
[topology]
bottleneck = { rate = "20Mbit", delay = "20ms" }
[[flows]]
cca = "cubic"
[sweep]
"topology.bottleneck.buffer" = ["1bdp", "100pkt"]
[sweep.cases.mix]
one = {}
[sweep.cases.mix.two]
"flows" = [{ cca = "reno", count = 2 }, { cca = "cubic" }]
"topology.bottleneck.delay" = "5ms"
""",
    "network": """
[study]
name = "net"
duration = "10s"
[topology]
hosts = ["a", "b"]
routers = ["r0", "r1"]
[[topology.links]]
name = "mid"
between = ["r0", "r1"]
rate = "100Mbit"
delay = "10ms"
[[topology.links]]
between = ["a", "r0"]
rate = "10Gbit"
[[topology.links]]
between = ["r1", "b"]
rate = "10Gbit"
[[flows]]
cca = "cubic"
src = "a"
dst = "b"
count = 2
start_jitter = "10ms"
[sweep]
"topology.links.mid.rate" = ["10Mbit", "100Mbit"]
"topology.links.mid.delay" = ["1ms", "30ms"]
"flows.0.cca" = ["cubic", "reno"]
""",
    "link-jitter": """
[study]
name = "jit"
duration = "10s"
[topology]
bottleneck = { rate = "100Mbit", delay = "10ms", buffer = "1bdp", jitter = "200us" }
reverse = { jitter = "1ms" }
[[flows]]
cca = "bbr"
[sweep]
"topology.bottleneck.jitter" = ["0ms", "200us", "2ms"]
""",
}


def _cases():
    """(name, loader) for every study file × profile, then the synthetic sweeps."""
    from ccbench.spec import load_study, parse_study

    out = []
    for path in sorted((REPO / "studies").glob("**/*.toml")):
        rel = str(path.relative_to(REPO))
        for profile in (None, *load_study(path, backend="sim").profiles):
            if f"{rel}:{profile or '-'}" in BPF_SOURCES:
                continue
            out.append((f"{rel}:{profile or '-'}",
                        lambda path=path, profile=profile: load_study(path, backend="sim", profile=profile)))
    for name, text in SYNTHETIC.items():
        out.append((name, lambda text=text, name=name: parse_study(text, filename=f"{name}.toml", backend="sim")))
    return out


def _entry(study) -> dict:
    runs = study.runs()
    h = hashlib.sha256()
    for r in runs:
        h.update(json.dumps([r.run_id, r.config_id, r.seed, r.params, r.config, r.flow_meta],
                            sort_keys=True).encode())
    return {"runs": len(runs), "first": [r.run_id for r in runs[:3]],
            "ids": hashlib.sha256(" ".join(r.run_id for r in runs).encode()).hexdigest()[:16],
            "all": h.hexdigest()[:16]}


def _expected() -> dict:
    return json.loads(FIXTURE.read_text())


def test_the_fixture_covers_every_study_and_profile():
    assert sorted(name for name, _ in _cases()) == sorted(_expected())


@pytest.mark.parametrize("name,load", _cases(), ids=[n for n, _ in _cases()])
def test_run_ids_configs_and_seeds_are_unchanged(name, load):
    study = load()
    assert study.run_ids() == [r.run_id for r in study.runs()]
    assert _entry(study) == _expected()[name]


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: PYTHONPATH=python python3 tests/test_run_ids.py --write")
    FIXTURE.write_text(json.dumps({n: _entry(load()) for n, load in _cases()}, indent=1) + "\n")
    print(f"wrote {FIXTURE}")


# Sweeps whose first configurations are fine and a later one is not, in a part of
# its config (flows, senders, bottleneck, run-wide) that the earlier ones share
# with it except for the one field that breaks it: the expansion reuses parts
# across configurations (spec.resolve.Resolver) and must still find the error.
# The messages are those of commit d12e37b, which resolved each configuration alone.
_H = '[study]\nname = "e"\nduration = "10s"\n'
_T = '[topology]\nbottleneck = { rate = "100Mbit", delay = "10ms", buffer = "1bdp" }\n'
_F = '[[flows]]\ncca = "cubic"\n[[flows]]\ncca = "bbr"\nstart = "1s"\n'
LATE_ERRORS = {
    "flows-need-duration": (
        _H + _T + _F + '[sweep]\n"study.duration" = ["10s", "1s"]\n"topology.bottleneck.delay" = ["1ms", "2ms"]\n',
        "e.toml: flows.1.start: start + start_jitter must be before the end of the run (study.duration = 1s; "
        "start = 1s, start_jitter = 0ns) [with sweep study.duration = '1s'] (got '1s'; allowed: a time below 1s)"),
    "flows-need-senders": (
        _H + _T + _F + 'sender = 1\n[sweep]\n"topology.senders" = [2, 1]\n"topology.bottleneck.delay" = ["1ms", "2ms"]\n',
        "e.toml: flows.1.sender: no such sender: the topology has 1 sender [with sweep topology.senders = '1'] "
        "(got 1; allowed: 0 .. 0)"),
    "bottleneck-needs-rtt": (
        _H + _T + _F + '[sweep]\n"topology.bottleneck.rate" = ["10Mbit", "20Mbit"]\n'
        '"topology.bottleneck.delay" = ["1ms", "0ms"]\n',
        "e.toml: topology.bottleneck.buffer: a buffer in BDP needs a non-zero RTT [with sweep "
        "topology.bottleneck.rate = '10Mbit', topology.bottleneck.delay = '0ms'] (got '1bdp'; allowed: set "
        "topology.bottleneck.delay, topology.access.delay or topology.bottleneck.bdp_rtt, or give the buffer in "
        "bytes or packets)"),
    "run-needs-tcp": (
        _H + _T + _F + '[sweep]\n"tcp.min_rto" = ["200ms", "0s"]\n"topology.bottleneck.delay" = ["1ms", "2ms"]\n',
        "e.toml: sweep.\"tcp.min_rto\": must be positive (got '0s'; allowed: a positive time)"),
}


@pytest.mark.parametrize("name", sorted(LATE_ERRORS))
def test_an_error_in_a_later_configuration_is_found(name):
    from ccbench.spec import StudyError, parse_study

    text, message = LATE_ERRORS[name]
    with pytest.raises(StudyError) as e:
        parse_study(text, filename="e.toml", backend="sim")
    assert str(e.value) == message
