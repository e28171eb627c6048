"""The summary table computations, against numbers worked out by hand."""

from __future__ import annotations

import pytest

from ccbench.analysis import jain_index, summarize
from ccbench.executor import execute
from ccbench.store import Store

from fakes import FakeBackend, FakeStudy, make_runs

M = 1e6


def test_jain_index_by_hand():
    assert jain_index([5, 5, 5, 5]) == pytest.approx(1.0)
    assert jain_index([1, 0, 0, 0]) == pytest.approx(0.25)  # one flow takes everything: 1/n
    assert jain_index([1, 2, 3]) == pytest.approx(36 / 42)  # (1+2+3)² / (3·(1+4+9))
    assert jain_index([7]) == pytest.approx(1.0)
    assert jain_index([]) is None
    assert jain_index([0, 0]) is None


def _flow(run, fid, group, goodput, sent, retrans, rtt_mean, rtt_p99):
    return {"run_id": run, "flow_id": fid, "group_name": group, "goodput_bps": goodput, "sent_segs": sent,
            "retrans_segs": retrans, "rtt_mean_us": rtt_mean, "rtt_p99_us": rtt_p99}


def _run(run, config, status="ok", params=None):
    return {"study": "s", "run_id": run, "config_id": config, "params": params or {"loss": config},
            "status": status}


# Config A: 2 cubic flows + 1 bbr flow, reps r0 r1 r2 (r2 suspect) and r3 failed.
RUNS = [_run("r0", "A"), _run("r1", "A"), _run("r2", "A", "suspect"), _run("r3", "A", "failed"),
        _run("b0", "B")]
FLOWS = [
    _flow("r0", 0, "cubic", 10 * M, 100, 4, 20000, 50000),
    _flow("r0", 1, "cubic", 30 * M, 300, 8, 40000, 70000),
    _flow("r0", 2, "bbr", 60 * M, 600, 6, 10000, 20000),
    _flow("r1", 0, "cubic", 20 * M, 200, 0, 25000, 40000),
    _flow("r1", 1, "cubic", 20 * M, 200, 2, 25000, 40000),
    _flow("r1", 2, "bbr", 50 * M, 500, 0, 11000, 21000),
    _flow("r2", 0, "cubic", 40 * M, 100, 10, 30000, 45000),
    _flow("r2", 1, "cubic", 20 * M, 100, 0, None, None),  # never sampled an RTT
    _flow("r2", 2, "bbr", 30 * M, 300, 3, 12000, 22000),
    # config B: one flow that sent nothing
    _flow("b0", 0, "reno", 5 * M, 0, 0, None, None),
]


def test_summary_by_hand():
    rows = summarize(RUNS, FLOWS)
    assert [(r.config_id, r.params) for r in rows] == [("A", {"loss": "A"}), ("B", {"loss": "B"})]
    a, b = rows
    assert (a.reps, a.suspect, a.failed) == (3, 1, 1)
    # JFI per rep: r0 (100)²/(3·4600)=0.72464, r1 90²/(3·3300)=0.81818, r2 90²/(3·2900)=0.93103
    assert a.jfi == pytest.approx(8100 / 9900)
    assert [c.group for c in a.classes] == ["cubic", "bbr"]
    cubic, bbr = a.classes
    assert cubic.flows == 2 and bbr.flows == 1
    # cubic mean goodput per rep: 20, 20, 30 Mbit/s
    assert (cubic.goodput_bps, cubic.goodput_min_bps, cubic.goodput_max_bps) == (20 * M, 20 * M, 30 * M)
    # bbr per rep: 60, 50, 30
    assert (bbr.goodput_bps, bbr.goodput_min_bps, bbr.goodput_max_bps) == (50 * M, 30 * M, 60 * M)
    # cubic retrans per rep: 12/400 = 3 %, 2/400 = 0.5 %, 10/200 = 5 %  → median 3 %
    assert cubic.retrans_pct == pytest.approx(3.0)
    # bbr: 1 %, 0 %, 1 %
    assert bbr.retrans_pct == pytest.approx(1.0)
    # cubic RTT mean per rep: 30000, 25000, 30000 (the flow without samples left out) → 30000
    assert cubic.rtt_mean_us == pytest.approx(30000)
    # cubic RTT p99 per rep: 60000, 40000, 45000 → 45000
    assert cubic.rtt_p99_us == pytest.approx(45000)
    assert (bbr.rtt_mean_us, bbr.rtt_p99_us) == (11000, 21000)

    assert (b.reps, b.failed, b.jfi) == (1, 0, 1.0)
    (reno,) = b.classes
    assert reno.goodput_bps == 5 * M
    assert reno.retrans_pct is None  # nothing sent: no ratio
    assert reno.rtt_mean_us is None and reno.rtt_p99_us is None


def test_summary_of_only_failed_runs_has_no_numbers():
    (row,) = summarize([_run("x", "C", "failed")], [])
    assert (row.reps, row.failed, row.jfi, row.classes) == (0, 1, None, [])


def test_summary_from_the_store(tmp_path):
    """The fake backend gives flow f in rep r goodput 8·(f+1)+r Mbit/s, retrans 10·(f+1)/1000."""
    runs = make_runs(losses=("0%", "1%"), reps=2)
    execute(FakeStudy(), runs, FakeBackend(), tmp_path)
    with Store.open_existing(tmp_path) as store:
        recs = store.runs()
        rows = summarize(recs, store.flows([r.run_id for r in recs]))
    assert [r.params for r in rows] == [{"topology.bottleneck.loss": "0%"}, {"topology.bottleneck.loss": "1%"}]
    for r in rows:
        assert r.reps == 2
        cubic, bbr = r.classes
        assert (cubic.group, bbr.group) == ("cubic", "bbr")
        assert (cubic.goodput_bps, cubic.goodput_min_bps, cubic.goodput_max_bps) == (8.5 * M, 8 * M, 9 * M)
        assert bbr.goodput_bps == 16.5 * M
        # JFI rep0: 24²/(2·(64+256)) = 0.9; rep1: 26²/(2·(81+289)) = 0.913514; median = mean of the two
        assert r.jfi == pytest.approx((0.9 + 676 / 740) / 2)
        assert cubic.retrans_pct == pytest.approx(1.0) and bbr.retrans_pct == pytest.approx(2.0)
        assert (cubic.rtt_mean_us, bbr.rtt_mean_us, bbr.rtt_p99_us) == (25000, 25001, 31000)


IDENTICAL_STUDY = """
[study]
name = "reps"
duration = "3s"
repetitions = 2
[topology.bottleneck]
rate = "20Mbit"
delay = "10ms"
buffer = "1bdp"
[[flows]]
cca = "cubic"
[[flows]]
cca = "reno"
[sweep]
"flows.1.start_jitter" = ["0ms", "50ms"]
"""


def test_repetitions_that_gave_the_same_results_are_marked(tmp_path, capsys):
    """The simulator is deterministic: without a start_jitter (or a link's loss
    or jitter, or a CCA that draws, as BBR's cycle phase) two repetitions give
    the same results, and their min–max and interval say nothing about
    variation; every view says so."""
    import json

    from ccbench.analysis import IDENTICAL_NOTE, analyze_store, summary_rows
    from ccbench.backends.sim import SimBackend
    from ccbench.cli import main
    from ccbench.spec import parse_study

    study = parse_study(IDENTICAL_STUDY)
    out = tmp_path / "res"
    execute(study, study.runs(), SimBackend(), out)
    a = analyze_store(out)
    by_jitter = {c.params["flows.1.start_jitter"]: c for c in a.configs}
    fixed, jittered = by_jitter["0ms"], by_jitter["50ms"]
    assert fixed.identical and not jittered.identical
    assert fixed.stats["jfi"].min == fixed.stats["jfi"].max
    assert jittered.stats["jfi"].min != jittered.stats["jfi"].max
    assert [r.identical for r in summary_rows(a)] == [c.identical for c in a.configs]

    assert main(["summary", str(out)]) == 0
    table = capsys.readouterr().out
    assert table.count("2 (same)") == 1 and "same = identical: its repetitions" in " ".join(table.split())
    assert main(["show", str(out), "--format", "json"]) == 0
    shown = {c["params"]["flows.1.start_jitter"]: c["identical"] for c in json.loads(capsys.readouterr().out)["configs"]}
    assert shown == {"0ms": True, "50ms": False}
    report = tmp_path / "r.html"
    assert main(["report", str(out), "--out", str(report)]) == 0
    html = report.read_text()
    assert html.count("2 (identical)") == 1
    assert "Identical: its repetitions gave the same results (nothing random in it changed them" in html
    assert IDENTICAL_NOTE.startswith("identical: its repetitions gave the same results (nothing random in it")


RATES_STUDY = """\
[study]
name = "rates"
duration = "2s"
[topology.bottleneck]
rate = "10Mbit"
delay = "5ms"
[[flows]]
cca = "cubic"
[sweep]
"topology.bottleneck.rate" = ["2Gbit", "2Mbit"]
"""


def test_a_column_scaled_to_its_largest_rate_shows_small_ones_not_as_zero(tmp_path, capsys):
    """The goodput column takes the unit of its largest value (Gbit/s here):
    a 2 Mbit/s configuration's ~1.9 Mbit/s reads 0.00190, not 0.00 as a run
    that delivered nothing would."""
    from ccbench.cli import main

    st = tmp_path / "rates.toml"
    st.write_text(RATES_STUDY)
    assert main(["run", str(st), "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    assert main(["summary", str(tmp_path / "r")]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if " 2Mbit " in line]
    cells = row.split()
    assert "Gbit/s" not in row and cells[cells.index("bulk") + 2].startswith("0.001"), row
