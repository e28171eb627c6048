"""`ccbench compare` flags a real difference and not run-to-run variation."""

from __future__ import annotations

import csv
import io
import json
import shutil

import pytest

from ccbench.analysis.compare import compare
from ccbench.analysis.study import analyze_store
from ccbench.cli import main
from ccbench.store import Store

from analysis_study import run_study

CCA_SWEEP = '"flows.0.cca" = ["reno", "cubic"]'


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    base = tmp_path_factory.mktemp("compare")
    return {
        # the same configurations, two independent sets of seeds
        "a": run_study(base / "a", name="cmp", reps=4, seed=1, loss="0%", sweep=CCA_SWEEP),
        "a2": run_study(base / "a2", name="cmp", reps=4, seed=2, loss="0%", sweep=CCA_SWEEP),
        # a known different outcome: 3 % random loss cuts Reno's goodput
        "lossy": run_study(base / "lossy", name="cmp", reps=4, seed=1, loss="3%", sweep=CCA_SWEEP),
    }


def test_repetitions_of_the_same_configuration_are_not_flagged(results):
    cmp = compare(analyze_store(results["a"]), analyze_store(results["a2"]))
    assert cmp.match == "config_id"
    assert len(cmp.pairs) == 2 and not cmp.only_a and not cmp.only_b
    assert all(p.rows for p in cmp.pairs)
    flagged = [(p.label, r.metric, r.a_median, r.b_median) for p in cmp.pairs for r in p.flagged]
    assert flagged == []
    # the seeds really differ: the numbers are not identical
    assert any(r.diff != 0 for p in cmp.pairs for r in p.rows)


def test_a_real_difference_is_flagged(results):
    cmp = compare(analyze_store(results["a"]), analyze_store(results["lossy"]))
    assert cmp.match == "params"  # different loss → different config_ids; paired by the swept cca
    pairs = {p.label: p for p in cmp.pairs}
    reno = pairs["flows.0.cca=reno"]
    rows = {r.metric: r for r in reno.rows}
    g = rows["goodput_mean_bps[reno bulk]"]
    assert g.exceeds and g.diff < 0
    assert abs(g.diff) > g.a_spread + g.b_spread
    assert rows["utilisation"].exceeds and rows["utilisation"].b_median < rows["utilisation"].a_median


def test_compare_cli_formats(results, capsys):
    assert main(["compare", str(results["a"]), str(results["lossy"]), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["match"] == "params"
    rows = {r["metric"]: r for c in doc["configs"] if c["label"] == "flows.0.cca=reno" for r in c["rows"]}
    assert rows["goodput_mean_bps[reno bulk]"]["exceeds"] is True

    assert main(["compare", str(results["a"]), str(results["lossy"]), "--format", "csv"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("config,a_config_id,b_config_id,metric")
    rows = {(r["config"], r["metric"]): r for r in csv.DictReader(io.StringIO(text))}
    g = rows[("flows.0.cca=reno", "goodput_mean_bps[reno bulk]")]
    assert (g["exceeds_spread"], g["few_reps"], g["a_study"], g["b_study"]) == ("1", "0", "cmp", "cmp")

    assert main(["compare", str(results["a"]), str(results["a2"])]) == 0
    out = capsys.readouterr().out
    assert "matched by config_id" in out
    assert "0 differences exceed the spread across repetitions in 0 of 2 judged configurations" in out


@pytest.mark.parametrize("tolerance", ["nan", "inf", "-0.1"])
def test_a_tolerance_that_is_not_a_finite_fraction_is_a_usage_error(results, capsys, tolerance):
    """nan compares false with every difference, so it would flag nothing (and inf too)."""
    assert main(["compare", str(results["a"]), str(results["lossy"]), "--tolerance", tolerance]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ccbench: error: --tolerance: got ") and "allowed: a" in err and err.count("\n") == 1, err


def test_results_with_nothing_in_common_are_not_reported_as_no_differences(results, tmp_path, capsys):
    other = run_study(tmp_path / "other", name="other", reps=1, seed=1, loss="1%", sweep='"flows.0.cca" = ["bbr"]')
    assert main(["compare", str(results["a"]), str(other)]) == 2
    err = capsys.readouterr().err
    assert "(2 configurations) and" in err and "have none in common (matched by params)" in err
    assert err.count("\n") == 1


NETWORK_STUDY = """\
[study]
name = "cmp-net"
duration = "3s"
repetitions = 3
seed = {seed}

[topology]
hosts = ["a", "b"]
routers = ["r1", "r2"]

[[topology.links]]
between = ["a", "r1"]
rate = "1Gbit"
[[topology.links]]
name = "l1"
between = ["r1", "r2"]
rate = "20Mbit"
delay = "10ms"
buffer = "{buffer}"
[[topology.links]]
between = ["r2", "b"]
rate = "1Gbit"

[[flows]]
cca = "reno"
count = 2
src = "a"
dst = "b"
start_jitter = "100ms"
"""


def _network_results(directory, seed: int, buffer: str):
    directory.mkdir(parents=True)
    study = directory / "cmp-net.toml"
    study.write_text(NETWORK_STUDY.format(seed=seed, buffer=buffer))
    assert main(["run", str(study), "--out", str(directory / "results")]) == 0
    return directory / "results"


def test_queue_metrics_are_compared(results):
    """The bottleneck's drops and backlog are compared like the other metrics."""
    cmp = compare(analyze_store(results["a"]), analyze_store(results["lossy"]))
    rows = {r.metric: r for r in {p.label: p for p in cmp.pairs}["flows.0.cca=reno"].rows}
    assert {"drops", "backlog_mean_bytes"} <= set(rows)
    b = rows["backlog_mean_bytes"]  # 3 % random loss keeps Reno's window, and the queue, small
    assert b.exceeds and b.b_median < b.a_median


def test_link_drops_and_backlog_are_compared(tmp_path):
    """A general topology's per-link drops and backlog: flagged when the buffer
    shrinks, not between two sets of seeds of the same configuration."""
    a = analyze_store(_network_results(tmp_path / "a", 1, "1bdp"))
    a2 = analyze_store(_network_results(tmp_path / "a2", 2, "1bdp"))
    small = analyze_store(_network_results(tmp_path / "small", 1, "8pkt"))
    keys = {"link_drops[l1]", "link_backlog_mean_bytes[l1]", "link_utilisation[l1]"}

    same = compare(a, a2)
    rows = {r.metric: r for r in same.pairs[0].rows}
    assert keys <= set(rows)
    assert not [k for k in keys if rows[k].exceeds], [(k, rows[k]) for k in keys]

    diff = compare(a, small)
    assert diff.match == "params" and len(diff.pairs) == 1
    rows = {r.metric: r for r in diff.pairs[0].rows}
    drops, backlog = rows["link_drops[l1]"], rows["link_backlog_mean_bytes[l1]"]
    assert drops.exceeds
    assert backlog.exceeds and backlog.b_median < backlog.a_median


def test_one_repetition_a_side_is_spread_unknown_not_a_difference(tmp_path, capsys):
    """Two seeds, 1 repetition each: seed noise, and no spread to judge it by. No row
    exceeds the spread or counts in the closing line; each says spread unknown and
    gives its difference (signed); the CSV has few_reps."""
    a = run_study(tmp_path / "a", name="cmp", reps=1, seed=1, loss="1%", sweep=CCA_SWEEP)
    b = run_study(tmp_path / "b", name="cmp", reps=1, seed=2, loss="1%", sweep=CCA_SWEEP)
    cmp = compare(analyze_store(a), analyze_store(b))
    rows = [r for p in cmp.pairs for r in p.rows]
    assert rows and all(r.few_reps and not r.exceeds for r in rows)
    assert all(r.a_spread is None and r.b_spread is None for r in rows)  # one value: no spread measured
    # the seeds differ, and by more than the tolerance: the old rule called these "exceeds spread"
    assert any(r.differs for r in rows) and all(r.differs == (abs(r.diff) > 0.01 * max(abs(r.a_median),
                                                                                      abs(r.b_median))) for r in rows)
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "exceeds spread" not in out and "differs; spread unknown (1 rep each)" in out
    unjudged = sum(1 for r in rows if r.differs)
    assert (f"0 differences exceed the spread across repetitions in 0 of 0 judged configurations ({len(cmp.pairs)} "
            f"more with 1 repetition on each side: the spread is unknown; {unjudged} differences of more than 1 % "
            "there, not judged)") in out
    assert main(["compare", str(a), str(b), "--format", "csv"]) == 0
    csv_rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(csv_rows) == len(rows)
    assert all(r["few_reps"] == "1" and r["exceeds_spread"] == "0" and r["a_spread"] == "" for r in csv_rows)


def test_a_positive_difference_has_a_sign(results, capsys):
    assert main(["compare", str(results["lossy"]), str(results["a"])]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "goodput_mean_bps[reno bulk]" in ln)
    cells = [c.strip() for c in line.split("│")]
    assert cells[4].startswith("+") and cells[4].endswith("Mbit/s") and cells[5].startswith("+")


def test_two_versions_of_a_study_are_paired_by_study(tmp_path, capsys):
    """A directory with 'cmp' and 'cmp v2' (same config ids, --new-version) against one
    with 'cmp': cmp pairs with cmp, and 'cmp v2' is listed as only on its side (it was
    dropped silently); labels and the tables name the study."""
    one = run_study(tmp_path / "one", name="cmp", reps=2, seed=1, sweep=CCA_SWEEP)
    both = run_study(tmp_path / "both", name="cmp", reps=2, seed=1, sweep=CCA_SWEEP)
    v2 = tmp_path / "both" / "cmp-v2.toml"
    v2.write_text((tmp_path / "both" / "cmp.toml").read_text().replace("seed = 1", "seed = 2"))
    assert main(["run", str(v2), "--out", str(both), "--new-version"]) == 0
    capsys.readouterr()
    for a, b in ((one, both), (both, one)):
        cmp = compare(analyze_store(a), analyze_store(b))
        assert cmp.by_study and cmp.match == "config_id"
        assert sorted(p.label for p in cmp.pairs) == ["cmp: flows.0.cca=cubic", "cmp: flows.0.cca=reno"]
        assert all(p.a.study == p.b.study == "cmp" for p in cmp.pairs)
        other = cmp.only_b if b == both else cmp.only_a
        assert sorted(cmp.name(c) for c in other) == ["cmp v2: flows.0.cca=cubic", "cmp v2: flows.0.cca=reno"]
    assert main(["compare", str(one), str(both)]) == 0
    out = capsys.readouterr().out
    assert "configurations matched by study and config_id" in out and "(cmp, cmp v2)" in out
    assert "only in B: cmp v2: flows.0.cca=reno, cmp v2: flows.0.cca=cubic" in out


def test_a_side_whose_runs_all_failed_says_so(tmp_path, capsys):
    """B's runs of a configuration all failed: the pair says there is nothing to
    compare and why, in the table, the CSV (a row for the pair) and the JSON."""
    a = run_study(tmp_path / "a", name="cmp", reps=2, seed=1, loss="1%", sweep=CCA_SWEEP)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    with Store(b) as s:
        ids = sorted(s.run_ids_of("cmp", "sim"))
        cfg = analyze_store(b).configs[0].config_id
        bad = [r for r in s.runs() if r.config_id == cfg]
        s.set_aside([r.run_id for r in bad], "failed on purpose: ")
    assert len(ids) > len(bad) == 2
    assert main(["compare", str(a), str(b)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "nothing to compare: B has no finished run (2 failed)" in out, out
    assert "1 more with 1 repetition" not in out and out.endswith("; 1 with no finished run on a side"), out
    assert main(["compare", str(a), str(b), "--format", "csv"]) == 0
    rows = [r for r in csv.DictReader(io.StringIO(capsys.readouterr().out)) if r["b_config_id"] == cfg]
    assert len(rows) == 1 and rows[0]["metric"] == "" and rows[0]["b_failed"] == "2" and rows[0]["a_n"] == "2"
    assert main(["compare", str(a), str(b), "--format", "json"]) == 0
    (pair,) = [p for p in json.loads(capsys.readouterr().out)["configs"] if p["b_config_id"] == cfg]
    assert (pair["b_runs"], pair["b_failed"], pair["rows"]) == (0, 2, [])
