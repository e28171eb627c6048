"""`ccbench validate`: the simulator against the real kernel.

The quick grid (reno and cubic, one flow, 100 Mbit/s, 20 ms, 1 BDP, no
loss) runs on both backends and must agree within the issue's tolerances:
goodput within 5 % and mean RTT within 10 % (both after the warm-up). The
linux runs need root: without it the test fails saying so, unless
CCBENCH_SKIP_ROOT_TESTS=1, which skips it. The rest (grid, study text,
comparison rules, outputs) runs anywhere.
"""

from __future__ import annotations

import csv
import json
import os

import pytest

from ccbench import validate
from ccbench.analysis.stats import spread
from ccbench.cli import main

from kernel_retry import STEAL_MAX
from root_checks import need_linux_backend


def test_grids_are_the_issues():
    full = validate.GRIDS["full"]
    assert full.size == 3 * 3 * 2 * 2 * 3 * 2
    assert set(full.ccas) == {"reno", "cubic", "bbr"} and full.flows == (1, 2, 4)
    assert full.rates == ("10Mbit", "100Mbit") and full.rtts == ("10ms", "40ms")
    assert full.buffers == ("0.5bdp", "1bdp", "4bdp") and full.losses == ("0%", "1%")
    q = validate.GRIDS["quick"]
    assert q.ccas == ("reno", "cubic") and q.flows == (1,) and q.rates == ("100Mbit",) and q.buffers == ("1bdp",)


def test_plan_parses_the_grid_and_shares_config_ids_across_backends():
    p = validate.plan("medium", duration="3s", reps=2)
    sim, linux = p.runs("sim"), p.runs("linux")
    assert len(sim) == len(linux) == validate.GRIDS["medium"].size * 2 == 96
    assert [r.config_id for r in sim] == [r.config_id for r in linux]
    assert not {r.run_id for r in sim} & {r.run_id for r in linux}  # both fit in one store
    cfgs = {(r.params["cases.rtt"], r.config["bottleneck"]["delay_ns"]) for r in sim}
    assert cfgs == {("10ms", 5_000_000), ("40ms", 20_000_000)}
    assert {len(r.config["flows"]) for r in sim} == {1, 2}
    assert p.duration_us == 3_000_000 and p.warmup_us == 1_500_000  # at most half the run
    assert validate.plan("quick").warmup_us == 2_000_000
    assert validate.warmup_us(30_000_000) == 6_000_000


def test_a_scenario_has_the_same_run_ids_in_every_grid():
    q = {(r.params["flows.0.cca"], r.repetition): r.run_id for r in validate.plan("quick").runs("linux")}
    g = validate.Grid("x", ("cubic",), (1,), ("100Mbit",), ("20ms",), ("1bdp",), ("0%",), reps=2, duration="10s")
    other = validate.plan(g).runs("linux")
    assert [r.run_id for r in other] == [q[("cubic", 0)], q[("cubic", 1)]]


def test_bad_values_are_usage_errors(capsys):
    assert main(["validate", "--grid", "medium", "--quick"]) == 2
    assert "--quick" in capsys.readouterr().err
    assert main(["validate", "--quick", "--duration", "10 parsecs", "--no-run"]) == 2
    err = capsys.readouterr().err
    assert "duration" in err and "Traceback" not in err
    assert main(["validate", "--quick", "--reps", "0", "--no-run"]) == 2


def test_tolerance_rules():
    m = validate.METRIC
    one = lambda *xs: spread(xs)  # noqa: E731
    r = validate.compare_spreads(m["goodput_steady"], one(95.0, 95.2), one(100.0, 100.1))
    assert r.within is True and r.ratio == pytest.approx(95.1 / 100.05) and r.exceeds_spread
    r = validate.compare_spreads(m["goodput_steady"], one(94.0), one(100.0, 99.0))
    assert r.within is False
    r = validate.compare_spreads(m["rtt_mean_steady"], one(33.0, 36.0), one(30.0, 31.0))
    assert r.ratio == pytest.approx(34.5 / 30.5)  # outside 10 %, but not beyond the spread (4 = 3 + 1)
    assert r.within is False and r.exceeds_spread is False
    r = validate.compare_spreads(m["rtt_mean_steady"], one(33.0, 33.5), one(30.5, 31.0))
    assert r.within is True and r.exceeds_spread is True
    r = validate.compare_spreads(m["retrans_pct"], one(1.2), one(0.8))
    assert r.within is True and r.diff == pytest.approx(0.4)
    # one run a side (--reps 1): the spread is unknown, not exceeded (as compare's few_reps)
    assert r.exceeds_spread is None
    r = validate.compare_spreads(m["goodput_steady"], one(50.0), one(100.0))
    assert r.within is False and r.exceeds_spread is None
    r = validate.compare_spreads(m["retrans_pct"], one(1.6), one(0.8))
    assert r.within is False
    r = validate.compare_spreads(m["rtt_mean_summary"], one(1.0), one(2.0))
    assert r.within is None  # reported only
    r = validate.compare_spreads(m["goodput_steady"], one(), one(1.0))
    assert r.within is None and r.ratio is None


def test_the_summary_counts_disagreements_beyond_the_runs_spread():
    """Of the scenarios outside tolerance, the summary says how many differ by
    more than the repetitions spread on both backends (the ones the runs
    cannot explain)."""
    from pathlib import Path

    m = validate.METRIC
    one = lambda *xs: spread(xs)  # noqa: E731

    def scenario(rtt_sim, rtt_linux):
        rows = {name: validate.compare_spreads(m[name], one(1.0, 1.0), one(1.0, 1.0)) for name in validate.METRIC}
        rows["rtt_mean_steady"] = validate.compare_spreads(m["rtt_mean_steady"], one(*rtt_sim), one(*rtt_linux))
        params = dict(cca="bbr", flows=1, rate="100Mbit", rtt="10ms", buffer="1bdp", loss="0%")
        return validate.Scenario("c", params, rows, {"sim": {}, "linux": {}}, {})

    agree = scenario((30.0, 30.5), (30.2, 30.4))
    noisy = scenario((33.0, 36.0), (30.0, 31.0))  # outside 10 %, within the spread (as in test_tolerance_rules)
    beyond = scenario((25.0, 25.2), (31.0, 31.3))  # outside 10 % and far beyond both ranges
    assert [s.verdict for s in (agree, noisy, beyond)] == ["agree", "disagree", "disagree"]
    assert [s.beyond_spread for s in (agree, noisy, beyond)] == [False, False, True]
    v = validate.Validation(None, 15_000_000, 3_000_000, 2, [agree, noisy, beyond], Path("."))
    assert validate.summary_line(v).startswith(
        "1 of 3 scenarios agree (sim within ±5 % of linux on goodput and ±10 % on mean RTT, after a 3 s warm-up); "
        "2 disagree, 1 of them by more than the runs' spread")


def test_analysis_and_outputs_without_root(tmp_path, capsys):
    """The comparison and its outputs, with the sim's results stored a second
    time as the 'linux' runs: every ratio is exactly 1 and every scenario agrees."""
    from ccbench.backends.sim import SimBackend
    from ccbench.executor import execute
    from ccbench.store import Store

    p = validate.plan("quick", duration="3s", reps=2)
    out = tmp_path / "v"
    execute(p.studies["sim"], p.runs("sim"), SimBackend(), out)
    sim = {(r.config_id, r.repetition): r for r in p.runs("sim")}
    with Store(out) as store:
        store.record_study(validate.STUDY_NAME, p.text, None)
        for lr in p.runs("linux")[:-1]:  # one linux run missing
            res = SimBackend().run(sim[(lr.config_id, lr.repetition)])
            store.write_run(study=validate.STUDY_NAME, runspec=lr, backend="linux", status="ok", result=res)
    v = validate.analyse(p, out)
    assert [s.verdict for s in v.scenarios] == ["agree", "agree"]
    assert v.scenarios[1].runs["linux"]["missing"] == 1 and v.scenarios[1].runs["linux"]["ok"] == 1
    # Per run: the judged numbers the medians are taken over; no emulator behind these runs.
    for s in v.scenarios:
        for b in ("sim", "linux"):
            rows = s.runs[b]["per_run"]
            assert [r["repetition"] for r in rows] == list(range(len(rows))) and len(rows) == s.runs[b]["ok"]
            for name in validate.JUDGED:
                assert sorted(r[name] for r in rows) == sorted(getattr(s.rows[name], b).values)
            assert {r["lateness_p99_us"] for r in rows} == {None}
    for s, rel in zip(v.scenarios, (1e-12, 0.01)):  # the second: a median of 2 sim runs against 1 "linux" run
        for name in validate.JUDGED + ("goodput", "rtt_mean", "rtt_mean_summary"):
            assert s.rows[name].ratio == pytest.approx(1.0, rel=rel), name
        assert abs(s.rows["retrans_pct"].diff) < 0.01 and s.rows["jfi_steady"].sim.median == 1.0
        g = s.rows["goodput_steady"]
        assert 80e6 < g.sim.median < 100e6 and not g.exceeds_spread
        assert 20_000 < s.rows["rtt_mean_steady"].sim.median < 45_000
    paths = validate.write_outputs(v)
    rows = list(csv.DictReader(paths["csv"].open()))
    assert len(rows) == 2 * len(validate.METRICS) and {r["within"] for r in rows if r["judged"] == "1"} == {"1"}
    doc = json.loads(paths["json"].read_text())
    assert doc["counts"] == {"agree": 2, "disagree": 0, "no data": 0} and doc["disagree_beyond_spread"] == 0
    assert [sc["beyond_spread"] for sc in doc["scenarios"]] == [False, False]
    assert doc["tolerances"]["goodput_steady"]["tolerance"] == 0.05
    assert "| reno | 1 | 100Mbit | 20ms | 1bdp | 0% |" in validate.markdown_table(v)
    summary = validate.markdown_summary(v)
    assert "| reno | 1.000 – 1.000 |" in summary and "| 1 / 1 |" in summary
    assert "| cca | cubic | 1 / 1 | 0 | 0 |" in summary  # agreement per value of the axes that vary
    html = paths["html"].read_text()
    assert html.count('<details class="run"') == 2
    assert html.count(">lateness p99 µs</th>") == 2

    # --rerun-sim: every finished sim run is set aside and runs again; the linux runs stay.
    sim_ids = [r.run_id for r in p.runs("sim")]
    assert sorted(validate.set_aside(out, sim_ids, "--rerun-sim")) == sorted(sim_ids)
    again = execute(p.studies["sim"], p.runs("sim"), SimBackend(), out)
    assert again.executed == len(sim_ids)
    with Store(out) as store:
        assert {r.status for r in store.runs(run_ids=sim_ids)} == {"ok"}
        assert len([r for r in store.runs() if r.backend == "linux"]) == len(p.runs("linux")) - 1

    # --no-run compares what is there; exit 0 as both agree
    assert main(["validate", "--grid", "quick", "--duration", "3s", "--reps", "2", "--out", str(out), "--no-run",
                 "--format", "csv"]) == 0

    # Sim settings outside the run ids: the runs stored without them are found
    # (the same ids, another config), and --no-run refuses to pass them off
    # as jittered ones.
    assert validate.sim_settings_changed(out, p.runs("sim")) == []
    jittered = validate.plan("quick", duration="3s", reps=2, sim_path_jitter="150us")
    assert sorted(validate.sim_settings_changed(out, jittered.runs("sim"))) == sorted(sim_ids)
    assert validate.sim_settings_changed(out, jittered.runs("linux")) == []
    assert main(["validate", "--grid", "quick", "--duration", "3s", "--reps", "2", "--out", str(out), "--no-run",
                 "--sim-path-jitter", "150us", "--format", "csv"]) == 2
    assert "4 sim runs in" in capsys.readouterr().err

    from cdp import Browser, chromium_path

    if chromium_path() is None:
        return
    with Browser(width=1400, height=1200) as b:
        b.navigate(paths["html"].resolve().as_uri())
        b.wait_for("window.ccbenchReady === true")
        b.wait_for("document.getElementById('ratio-figure').getAttribute('data-drawn') === '1'")
        cid = v.scenarios[0].config_id
        b.eval(f"location.hash = '#sc-{cid}'")
        b.wait_for(f"document.getElementById('series-{cid}').getAttribute('data-drawn') === '1'")
        assert b.errors() == [] and b.eval("window.ccbenchErrors") == []


def test_a_recheck_adds_runs_to_the_chosen_scenarios_only():
    p = validate.plan("quick", duration="3s", reps=2)
    cubic = next(r.config_id for r in p.runs("sim") if r.params["flows.0.cca"] == "cubic")
    q = p.rechecked([cubic], 3)
    for b in ("sim", "linux"):
        before, after = p.runs(b), q.runs(b)
        assert {r.run_id for r in before} < {r.run_id for r in after}  # the first runs are the same runs
        reps = {cid: sorted(r.repetition for r in after if r.config_id == cid) for cid in {r.config_id for r in after}}
        assert reps[cubic] == [0, 1, 2, 3, 4]
        assert [v for k, v in reps.items() if k != cubic] == [[0, 1]]
    assert q.reps == 2 and q.recheck == {cubic: 5}
    assert [r.config_id for r in q.runs("sim")] == [r.config_id for r in q.runs("linux")]


def _as_linux(store, p, runspecs, rtt_scale=1.0):
    """Store the sim's result of each of ``runspecs``' repetitions as that linux
    run, its sampled srtt scaled by ``rtt_scale``."""
    from ccbench.backends.sim import SimBackend

    sim = {(r.config_id, r.repetition): r for r in p.runs("sim")}
    for lr in runspecs:
        res = SimBackend().run(sim[(lr.config_id, lr.repetition)])
        res.samples["srtt_us"] = [None if x is None else x * rtt_scale for x in res.samples["srtt_us"]]
        store.write_run(study=validate.STUDY_NAME, runspec=lr, backend="linux", status="ok", result=res)


def _cubic_disagrees(tmp_path, reps):
    """A quick-grid store of ``reps`` runs a side: the sim's, and as the
    linux half the same results, cubic's with its RTT 25 % higher (so that
    cubic disagrees and reno agrees). Returns (plan, store path, cubic's
    config id)."""
    from ccbench.backends.sim import SimBackend
    from ccbench.executor import execute
    from ccbench.store import Store

    p = validate.plan("quick", duration="3s", reps=reps)
    out = tmp_path / "v"
    execute(p.studies["sim"], p.runs("sim"), SimBackend(), out)
    cubic = next(r.config_id for r in p.runs("sim") if r.params["flows.0.cca"] == "cubic")
    with Store(out) as store:
        store.record_study(validate.STUDY_NAME, p.text, None)
        _as_linux(store, p, [r for r in p.runs("linux") if r.config_id != cubic])
        _as_linux(store, p, [r for r in p.runs("linux") if r.config_id == cubic], rtt_scale=1.25)
    return p, out, cubic


def test_recheck_judges_a_disagreeing_scenario_again_on_all_its_runs(tmp_path, capsys):
    """The sim's results stored a second time as the 'linux' half, cubic's
    first two with a 25 % higher RTT: it disagrees at 2 runs a side. With
    --recheck 3 it is judged on 5 a side, the 3 more stored unscaled, and
    agrees; reno, which agreed, keeps its 2 runs."""
    from ccbench.backends.sim import SimBackend
    from ccbench.executor import execute
    from ccbench.store import Store

    p, out, cubic = _cubic_disagrees(tmp_path, reps=2)
    args = ["validate", "--grid", "quick", "--duration", "3s", "--reps", "2", "--out", str(out), "--no-run",
            "--format", "json"]
    assert main(args) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [s["verdict"] for s in doc["scenarios"]] == ["agree", "disagree"] and doc["recheck"] is None
    # --no-run before the re-check's runs exist: judged on what there is, and said so.
    assert main(args[:-2] + ["--recheck", "3", "--format", "table"]) == 1
    assert "(6 of their runs not run yet)" in " ".join(capsys.readouterr().out.split())

    # The re-check's runs, as a finished --recheck 3 would have left them.
    q = p.rechecked([cubic], 3)
    first = set(p.run_ids())
    execute(q.studies["sim"], [r for r in q.runs("sim") if r.run_id not in first], SimBackend(), out,
            versions_apart=False)
    with Store(out) as store:
        _as_linux(store, q, [r for r in q.runs("linux") if r.run_id not in first])
    assert main(args + ["--recheck", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    reno, cub = doc["scenarios"]
    assert (reno["verdict"], reno["rechecked"], reno["runs"]["linux"]["ok"]) == ("agree", False, 2)
    assert (cub["verdict"], cub["rechecked"]) == ("agree", True)
    assert cub["runs"]["sim"]["ok"] == cub["runs"]["linux"]["ok"] == 5
    assert cub["metrics"]["rtt_mean_steady"]["linux"]["n"] == 5
    assert doc["recheck"] == {"repetitions": 5, "scenarios": 1, "agree": 1}
    rows = list(csv.DictReader((out / "validation.csv").open()))
    assert {r["rechecked"] for r in rows if r["config_id"] == cubic} == {"1"}
    assert {r["rechecked"] for r in rows if r["config_id"] != cubic} == {"0"}
    assert "(rechecked)" in (out / "validation.html").read_text()
    v = validate.analyse(q, out)
    assert validate.summary_line(v).endswith(
        "1 that disagreed at 2 runs a side were judged on 5 (--recheck), 1 of them now agrees")

    for bad in ("-1", "101"):
        assert main(args + ["--recheck", bad]) == 2
        err = capsys.readouterr().err
        assert "--recheck" in err and bad in err and "Traceback" not in err


def _root_or_skip():
    need_linux_backend("ccbench validate runs the linux backend, which needs root (network namespaces, veth, TUN)")


def test_quick_validation_sim_agrees_with_the_kernel(tmp_path, capsys):
    """reno and cubic, 100 Mbit/s, 20 ms, 1 BDP: sim within 5 % of linux on
    goodput and 10 % on mean RTT (medians over repetitions, after the warm-up)."""
    _root_or_skip()
    out = tmp_path / "validate"
    code = main(["validate", "--quick", "--out", str(out), "--retry-suspect", "4", "--format", "json"])
    printed = capsys.readouterr()
    doc = json.loads(printed.out)
    assert json.loads((out / "validation.json").read_text())["counts"] == doc["counts"]
    rows = list(csv.DictReader((out / "validation.csv").open()))
    assert {r["metric"] for r in rows} == {m.name for m in validate.METRICS}
    html = (out / "validation.html").read_text()
    assert 'id="ccbench-data"' in html and "reno 1 flow 100Mbit 20ms 1bdp 0%" in html

    by_cca = {s["params"]["cca"]: s for s in doc["scenarios"]}
    assert set(by_cca) == {"reno", "cubic"}
    problems = []
    for cca, s in by_cca.items():
        lin = s["runs"]["linux"]
        stolen = [r["emu_cpu_steal"] for r in lin["per_run"]]
        if not lin["ok"] and lin["per_run"] and all(x is not None and x > STEAL_MAX for x in stolen):
            pytest.skip(f"the testbed could not measure: the hypervisor took {100 * min(stolen):.1f}-"
                        f"{100 * max(stolen):.1f}% of a CPU in each of {cca}'s {len(stolen)} linux runs "
                        f"(steal time, more than {100 * STEAL_MAX:.0f}%: kernel_retry.py)")
        assert lin["ok"] >= 1, f"{cca}: no usable linux run ({lin})"
        # Every kernel run carries its emulator's lateness beside its numbers.
        assert len(lin["per_run"]) == lin["ok"] + lin["suspect"]
        assert all(r["lateness_p99_us"] is not None and r["late_pkts"] is not None for r in lin["per_run"]), lin
        for name, tol in (("goodput_steady", 0.05), ("rtt_mean_steady", 0.10)):
            m = s["metrics"][name]
            if m["ratio"] is None or abs(m["ratio"] - 1) > tol:
                problems.append(f"{cca} {name}: sim {m['sim']['median']:.6g} vs linux {m['linux']['median']:.6g} "
                                f"(ratio {m['ratio']}; linux runs {m['linux']['values']}, sim {m['sim']['values']})")
    assert not problems, "; ".join(problems)
    assert code == 0


def test_recheck_runs_the_disagreeing_scenario_on_both_backends(tmp_path, capsys):
    """A real --recheck: the first half stored beforehand (the sim's results
    as the 'linux' runs, cubic's with a 25 % higher RTT, so that it
    disagrees); the command then runs cubic once more on each backend, the
    linux run in the kernel, and judges it on both runs a side."""
    _root_or_skip()
    from ccbench.store import Store

    p, out, cubic = _cubic_disagrees(tmp_path, reps=1)
    main(["validate", "--grid", "quick", "--duration", "3s", "--reps", "1", "--out", str(out), "--recheck", "1",
          "--retry-suspect", "4", "--format", "json"])
    printed = capsys.readouterr()
    assert "--recheck: 1 scenario disagrees at 1 runs a side" in printed.err
    doc = json.loads(printed.out)
    # Only the re-check's two runs (the kernel's again if it came back suspect).
    done = doc["invocation"]
    assert done["executed"] == {"sim": 1, "linux": 1 + done["suspect_retried"]}
    assert "--recheck 1" in doc["invocation"]["command"]
    reno, cub = doc["scenarios"]
    assert not reno["rechecked"] and reno["runs"]["linux"]["ok"] == 1
    assert cub["rechecked"] and cub["runs"]["sim"]["ok"] == 2
    assert cub["runs"]["linux"]["ok"] + cub["runs"]["linux"]["suspect"] == 2, cub["runs"]
    q = p.rechecked([cubic], 1)
    added = [r.run_id for r in q.runs("linux") if r.repetition == 1]
    with Store(out) as store:
        (rec,) = store.runs(run_ids=added)
    assert rec.backend == "linux" and rec.status in ("ok", "suspect")


def test_sim_runs_get_the_kernels_hz_without_changing_run_ids(monkeypatch):
    from ccbench.spec import kernel

    monkeypatch.setattr(kernel, "config_hz", lambda: None)
    plain = validate.plan("quick")
    monkeypatch.setattr(kernel, "config_hz", lambda: 250)
    p = validate.plan("quick")
    assert p.sim_tcp == {"kernel_hz": 250}
    assert [r.run_id for r in p.runs("sim")] == [r.run_id for r in plain.runs("sim")]
    assert {r.config["tcp"]["kernel_hz"] for r in p.runs("sim")} == {250}
    assert all("kernel_hz" not in r.config["tcp"] for r in p.runs("linux"))
    assert all("kernel_hz" not in r.config["tcp"] for r in plain.runs("sim"))



def test_sim_host_jitter_reaches_the_sim_runs_only_without_changing_run_ids(capsys):
    from ccbench.backends.sim import core_config
    from ccbench.core import load

    plain = validate.plan("quick", duration="3s", reps=1)
    p = validate.plan("quick", duration="3s", reps=1, sim_host_jitter="200us")
    assert [r.run_id for r in p.runs("sim")] == [r.run_id for r in plain.runs("sim")]
    assert {r.config["tcp"]["host_jitter_ns"] for r in p.runs("sim")} == {200_000}
    assert all("host_jitter_ns" not in r.config["tcp"] for r in p.runs("linux"))
    assert p.sim_tcp["host_jitter_ns"] == 200_000
    # It changes what the simulator does: the same run, with and without it.
    a, b = plain.runs("sim")[0], p.runs("sim")[0]
    sim = load()
    assert sim.simulate(json.dumps(core_config(a.config))) != sim.simulate(json.dumps(core_config(b.config)))
    for bad, why in (("20ms", "out of range"), ("soon", "--sim-host-jitter")):
        assert main(["validate", "--quick", "--no-run", "--sim-host-jitter", bad]) == 2
        err = capsys.readouterr().err
        assert why in err and bad in err and "Traceback" not in err


def test_sim_path_jitter_reaches_the_sim_runs_links_only_without_changing_run_ids(capsys):
    from ccbench.backends.sim import core_config
    from ccbench.core import load

    plain = validate.plan("quick", duration="3s", reps=1)
    p = validate.plan("quick", duration="3s", reps=1, sim_path_jitter="150us")
    assert [r.run_id for r in p.runs("sim")] == [r.run_id for r in plain.runs("sim")]
    for a, b in zip(plain.runs("sim"), p.runs("sim")):
        # The bottleneck and the return link (written out: the grid mirrors the bottleneck) get it.
        assert b.config["bottleneck"] == {**a.config["bottleneck"], "jitter_ns": 150_000}
        assert a.config["reverse"] is None
        assert b.config["reverse"] == {**a.config["bottleneck"], "loss": 0.0, "jitter_ns": 150_000}
    assert all("jitter_ns" not in r.config["bottleneck"] and r.config["reverse"] is None for r in p.runs("linux"))
    assert p.sim_path == {"jitter_ns": 150_000}
    a, b = plain.runs("sim")[0], p.runs("sim")[0]
    sim = load()
    ra, rb = (json.loads(sim.simulate(json.dumps(core_config(c.config)))) for c in (a, b))
    assert ra["flows"] != rb["flows"]
    # Jitter only adds delay: no RTT sample below the base RTT.
    base_us = 2 * a.config["bottleneck"]["delay_ns"] / 1000
    assert all(f["rtt_min_us"] >= base_us for f in ra["flows"] + rb["flows"])
    for bad, why in (("20ms", "out of range"), ("soon", "--sim-path-jitter")):
        assert main(["validate", "--quick", "--no-run", "--sim-path-jitter", bad]) == 2
        err = capsys.readouterr().err
        assert why in err and bad in err and "Traceback" not in err


def test_sim_return_stalls_reach_the_sim_runs_return_link_only_without_changing_run_ids(capsys):
    from ccbench.backends.sim import core_config
    from ccbench.core import load

    plain = validate.plan("quick", duration="3s", reps=1)
    p = validate.plan("quick", duration="3s", reps=1, sim_path_jitter="150us", sim_return_stalls="20ms,2ms")
    assert [r.run_id for r in p.runs("sim")] == [r.run_id for r in plain.runs("sim")]
    stalls = {"stall_every_ns": 20_000_000, "stall_ns": 2_000_000}
    for a, b in zip(plain.runs("sim"), p.runs("sim")):
        # The ACK path stalls; the bottleneck does not; the jitter goes on both.
        assert b.config["bottleneck"] == {**a.config["bottleneck"], "jitter_ns": 150_000}
        assert b.config["reverse"] == {**a.config["bottleneck"], "loss": 0.0, "jitter_ns": 150_000, **stalls}
    assert all(r.config["reverse"] is None for r in p.runs("linux"))
    assert p.sim_return == stalls
    alone = validate.plan("quick", duration="3s", reps=1, sim_return_stalls="20ms,2ms").runs("sim")[0]
    assert alone.config["bottleneck"] == plain.runs("sim")[0].config["bottleneck"]
    sim = load()
    ra, rb = (json.loads(sim.simulate(json.dumps(core_config(c.config)))) for c in (plain.runs("sim")[0], alone))
    assert ra["flows"] != rb["flows"]
    for bad, why in (("20ms", "needs two times"), ("20ms,soon", "--sim-return-stalls (length)"),
                     ("10us,1ms", "out of range")):
        assert main(["validate", "--quick", "--no-run", "--sim-return-stalls", bad]) == 2
        err = capsys.readouterr().err
        assert why in err and bad in err and "Traceback" not in err, err


def test_sim_host_noise_options_reach_the_sim_runs_only_without_changing_run_ids(capsys):
    from ccbench.backends.sim import core_config
    from ccbench.core import load

    plain = validate.plan("quick", duration="3s", reps=1)
    p = validate.plan("quick", duration="3s", reps=1, sim_read_latency="12us,60us",
                      sim_pacing_latency="25us, 100us", sim_sender_pauses="11ms,1ms")
    assert [r.run_id for r in p.runs("sim")] == [r.run_id for r in plain.runs("sim")]
    given = {"read_latency_median_ns": 12_000, "read_latency_p90_ns": 60_000, "pacing_latency_median_ns": 25_000,
             "pacing_latency_p90_ns": 100_000, "sender_pause_every_ns": 11_000_000, "sender_pause_ns": 1_000_000}
    for r in p.runs("sim"):
        assert {k: r.config["tcp"][k] for k in given} == given
    assert all(not set(given) & set(r.config["tcp"]) for r in p.runs("linux"))
    assert {k: p.sim_tcp[k] for k in given} == given
    a, b = plain.runs("sim")[0], p.runs("sim")[0]
    sim = load()
    ra, rb = (json.loads(sim.simulate(json.dumps(core_config(c.config)))) for c in (a, b))
    assert ra["flows"] != rb["flows"]
    for option, bad, why in (("--sim-pacing-latency", "100us,25us", "below the median"),
                             ("--sim-read-latency", "12us", "needs two times"),
                             ("--sim-read-latency", "0us,5us", "out of range"),
                             ("--sim-sender-pauses", "11ms,soon", "--sim-sender-pauses (length)"),
                             ("--sim-sender-pauses", "10us,1ms", "out of range")):
        assert main(["validate", "--quick", "--no-run", option, bad]) == 2
        err = capsys.readouterr().err
        assert why in err and bad in err and "Traceback" not in err, err


def test_grid_run_ids_are_unchanged():
    """Validation halves are paired by run id, also across ccbench versions (a
    linux half collected earlier): the grids' run ids are pinned."""
    import hashlib

    for name, digest in RUN_ID_DIGESTS.items():
        ids = sorted(r.run_id for b in ("sim", "linux") for r in validate.plan(name).runs(b))
        assert hashlib.sha256(" ".join(ids).encode()).hexdigest()[:16] == digest, name


RUN_ID_DIGESTS = {"quick": "334fedd92dc6d368", "medium": "9720961a7fba0e31", "full": "ead457226649c99c"}


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_cca_option_takes_bpf_paths_relative_to_the_current_directory(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    p = validate.plan("quick", duration="3s", reps=1, ccas=["bpf:studies/bpf-cca/reno.bpf.c", "cubic"])
    ccas = {r.params["flows.0.cca"]: r.config["flows"][0]["cca"] for r in p.runs("linux")}
    assert set(ccas) == {"bpf:studies/bpf-cca/reno.bpf.c", "cubic"}
    assert ccas["bpf:studies/bpf-cca/reno.bpf.c"].startswith("bpf:") and ccas["cubic"] == "cubic"
    # Both halves hold the same scenarios under the same config ids.
    assert sorted(r.config_id for r in p.runs("sim")) == sorted(r.config_id for r in p.runs("linux"))
    # Without --cca nothing changes.
    assert validate.plan("quick").runs("linux")[0].run_id == validate.plan("quick", ccas=None).runs("linux")[0].run_id

    monkeypatch.chdir(os.path.join(REPO, "studies"))
    assert main(["validate", "--quick", "--cca", "bpf:studies/bpf-cca/reno.bpf.c", "--no-run"]) == 2
    err = capsys.readouterr().err
    assert "--cca: no such file" in err and os.path.join(REPO, "studies", "studies", "bpf-cca", "reno.bpf.c") in err
    assert "relative to the current directory" in err


def test_validation_with_a_bpf_cca_on_both_backends(tmp_path, monkeypatch, capsys):
    """`ccbench validate --cca bpf:...`: the same BPF Reno runs in the simulator
    and in the kernel, and the two halves pair up into one scenario."""
    _root_or_skip()
    monkeypatch.chdir(REPO)
    out = tmp_path / "validate"
    cca = "bpf:studies/bpf-cca/reno.bpf.c"
    main(["validate", "--quick", "--cca", cca, "--reps", "1", "--duration", "6s", "--out", str(out),
          "--retry-suspect", "4", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    (s,) = doc["scenarios"]
    assert s["params"]["cca"] == cca
    assert s["runs"]["sim"]["ok"] == 1 and s["runs"]["linux"]["ok"] == 1, s["runs"]["linux"]
    g = s["metrics"]["goodput_steady"]
    print(f"BPF reno goodput: sim {g['sim']['median']:.4g} linux {g['linux']['median']:.4g} ratio {g['ratio']}")
    assert g["ratio"] is not None and abs(g["ratio"] - 1) <= 0.10
    assert "--cca " + cca in json.loads((out / "validation.json").read_text())["invocation"]["command"]
