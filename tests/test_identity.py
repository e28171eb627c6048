"""Every ready study's quick profile gives the results it gave before general
topologies came in: the same run ids and, per run, the same flow summaries,
samples, RPCs and bottleneck/reverse queue series, bit for bit.

tests/data/quick_digests.json was written by the core of commit ee1f130 (the
one before the network description moved into crates/netcore) with
``tests/digests.py --core /tmp/core_before.so``; this test runs the current
core on the same runs and compares digests. The flows digests were
rewritten once, on purpose, when rtt_mean_us/rtt_p99_us became one raw
sample per round trip (docs/analysis.md "RTT statistics"): the samples,
queue and rpcs digests stayed the same.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

import digests

FIXTURE = Path(__file__).parent / "data" / "quick_digests.json"
EXPECTED = json.loads(FIXTURE.read_text())["runs"]


def _by_study() -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for e in EXPECTED:
        out[e["study"]].append(e)
    return out


def test_the_fixture_covers_every_study():
    studies = {str(p.relative_to(digests.REPO)) for p in (digests.REPO / "studies").glob("**/*.toml")}
    old = {e["study"] for e in EXPECTED}
    # studies added after the fixture (parking-lot, noted) have no "before"
    assert old <= studies
    assert len(old) >= 9


@pytest.mark.parametrize("study", sorted(_by_study()), ids=lambda s: Path(s).stem)
def test_quick_profile_gives_the_same_results(study):
    core = digests.load_core(None)
    want = _by_study()[study]
    runs = [(s, p, r) for s, p, r in digests.quick_runs() if s == study]
    assert [r.run_id for _, _, r in runs] == [e["run_id"] for e in want], "run ids changed"
    for (_, profile, run), e in zip(runs, want):
        assert profile == e["profile"]
        got = digests.table_digests(digests.simulate(core, run))
        assert got == e["digests"], f"{study} run {run.run_id} ({run.label()}): results changed"
