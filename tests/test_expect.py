"""Expectations ([[expect]]): one that holds, one that fails (exit 3, the table
says which and by how much), a malformed one (exit 2, nothing run), one whose
`where` matches nothing (an error, not a pass), and one a profile leaves out
(skipped, not passed). Real simulator runs of a small study."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ccbench
from ccbench import console
from ccbench.cli import main

STUDY = """\
[study]
name = "expect-test"
duration = "2s"
repetitions = 2
seed = 1
sample_interval = "100ms"

[topology.bottleneck]
rate = "20Mbit"
delay = "10ms"

[[flows]]
cca = "cubic"

[sweep]
"flows.0.cca" = ["cubic", "bbr"]
"topology.bottleneck.loss" = ["0%", "2%"]

[profiles.lossless]
"sweep.topology.bottleneck.loss" = ["0%"]
"""

HOLDS = """
[[expect]]
name = "a lone flow fills half the link"
where = { cca = ["cubic", "bbr"], loss = "0%" }
metric = "goodput"
op = ">="
value = "0.5 * ceiling"

[[expect]]
metric = "goodput"
ratio = { of = { cca = "bbr" }, to = { cca = "cubic" } }
where = { loss = "2%" }
op = ">"
value = 1
"""

FAILS = """
[[expect]]
name = "impossible: twice the link"
where = { cca = "cubic" }
metric = "goodput"
op = ">="
value = "40Mbit"
"""


def _write(tmp_path: Path, extra: str) -> Path:
    p = tmp_path / "study.toml"
    p.write_text(STUDY + extra)
    return p


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """The study run once, with the expectation that holds."""
    d = tmp_path_factory.mktemp("expect")
    out = d / "results"
    assert main(["run", str(_write(d, HOLDS)), "--out", str(out)]) == 0
    return out


def test_expectations_that_hold(results, capsys):
    assert main(["check", str(results)]) == 0
    out = capsys.readouterr().out
    assert "a lone flow fills half the link" in out and "FAIL" not in out and "2 of 2 expectations hold" in out
    with ccbench.open(results) as r:
        outcomes = r.check()
        by = r.by_config()
    assert [o.index for o in outcomes] == [0, 0, 1]  # two configurations at 0 %, one ratio at 2 %
    assert all(o.passed and not o.failed for o in outcomes)
    # the measured value is the median of the pipeline's statistics; the threshold 0.5 × rate × 1448/1500
    med = by[(by.metric == "goodput") & (by["topology.bottleneck.loss"] == "0%")].set_index("flows.0.cca")["median"]
    assert sorted(o.value for o in outcomes[:2]) == sorted(med.tolist())
    assert outcomes[0].threshold == pytest.approx(0.5 * 20e6 * 1448 / 1500)
    ratio = outcomes[2]
    gp = by[(by.metric == "goodput") & (by["topology.bottleneck.loss"] == "2%")].set_index("flows.0.cca")["median"]
    assert ratio.value == pytest.approx(gp["bbr"] / gp["cubic"]) and ratio.label == "loss=2%: cca=bbr / cca=cubic"


def test_an_expectation_that_fails_exits_3_and_says_by_how_much(tmp_path, results, capsys):
    study = _write(tmp_path, FAILS)
    # the same runs (same run ids): only the expectations differ, nothing runs again
    code = main(["run", str(study), "--out", str(results)])
    out = capsys.readouterr().out
    assert code == 3
    assert "impossible: twice the link" in out and "FAIL" in out and "1 of 1 expectations failed (#0)" in out
    assert main(["check", str(results), "--format", "json"]) == 3
    rows = json.loads(capsys.readouterr().out)
    assert [r["config"] for r in rows] == ["cca=cubic loss=0%", "cca=cubic loss=2%"]
    for r in rows:
        assert r["passed"] is False and r["threshold"] == 40e6 and r["name"] == "impossible: twice the link"
        assert r["margin"] == pytest.approx(r["value"] - 40e6) and r["margin"] < -20e6
        # the table prints the margin (measured − expected) and its share of the threshold
        assert f"-{console.value(40e6 - r['value'], 'bps')} ({100 * r['margin'] / 40e6:+.0f}%)" in out


@pytest.mark.parametrize("bad, field, allowed", [
    ('metric = "goodputt"\nop = ">="\nvalue = 1', "expect.0.metric", "goodput_sum"),
    ('metric = "goodput"\nop = "=>"\nvalue = 1', "expect.0.op", "'>='"),
    ('metric = "goodput"\nop = ">="\nvalue = "fast"', "expect.0.value", "ceiling"),
    ('metric = "goodput"\nop = ">="\nvalue = 1\nstat = "mode"', "expect.0.stat", "median"),
    ('metric = "goodput"\nop = ">="', "expect.0.value", None),
    ('metric = "goodput"\nop = ">="\nvalue = 1\nwehre = { cca = "bbr" }', "expect.0.wehre", None),
    # nan fails every comparison and inf passes every one
    ('metric = "goodput"\nop = ">="\nvalue = nan', "expect.0.value: must be a finite number", "ceiling"),
    ('metric = "goodput"\nop = "<"\nvalue = inf', "expect.0.value: must be a finite number", "ceiling"),
    ('metric = "goodput"\nop = "<"\nvalue = "1e999 * rate"', "expect.0.value: must be a finite number", None),
    # a rate is in the unit of rate metrics only, written as a quantity or as a share of the link
    ('metric = "rtt"\nop = ">="\nvalue = "5Mbit"', "expect.0.value: '5Mbit' is not in the unit of rtt",
     "a time such as '20ms'"),
    ('metric = "rtt"\nop = ">="\nvalue = "0.5 * rate"', "expect.0.value: '0.5 * rate' is a rate", "a time"),
    # a link metric needs its link, and only link metrics take one
    ('metric = "link_utilisation"\nop = ">="\nvalue = 0.9', "expect.0.link: the link_* metrics need the link",
     None),
    ('metric = "goodput"\nlink = "l1"\nop = ">="\nvalue = 1', "expect.0.link: no such link in the study's "
     "topology (got 'l1'; allowed: none: a dumbbell has the run-level keys)", None),
    ('metric = "jfi"\nop = ">="\nvalue = "1 * ceiling"', "expect.0.value: '1 * ceiling' is a rate", "a number"),
    ('metric = "goodput"\nop = ">="\nvalue = "20ms"', "expect.0.value: '20ms' is not in the unit of goodput",
     "'<number> * rate'"),
    # the study has no rpc flows: their completion times could never be measured
    ('metric = "rpc_p99"\nop = "<="\nvalue = "100ms"', "expect.0.metric: rpc_p99 is measured on kind = 'rpc' "
     "flows, and no configuration of the study has one", "kind = 'rpc' flow"),
])
def test_a_malformed_expectation_is_a_study_error_before_any_run(tmp_path, capsys, bad, field, allowed):
    study = _write(tmp_path, "\n[[expect]]\n" + bad + "\n")
    out = tmp_path / "results"
    assert main(["run", str(study), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ccbench: error: {study}: {field}") and err.count("\n") == 1, err
    if allowed:
        assert "allowed:" in err and allowed in err
    assert not out.exists()  # nothing ran


@pytest.mark.parametrize("where, problem", [
    ('{ cca = "vegas" }', "no configuration with flows.0.cca = 'vegas'"),
    ('{ mss = "1448" }', "'mss' is not a swept parameter"),
])
def test_a_where_that_matches_nothing_is_an_error(tmp_path, capsys, where, problem):
    study = _write(tmp_path, f'\n[[expect]]\nwhere = {where}\nmetric = "jfi"\nop = ">="\nvalue = 0.9\n')
    out = tmp_path / "results"
    assert main(["run", str(study), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{study}: expect.0.where" in err and problem in err
    assert not out.exists()


def test_check_on_results_whose_expectation_matches_nothing_is_an_error(tmp_path, results, capsys):
    """The same rule on stored results: a ratio whose `to` side is not in them."""
    from ccbench.analysis.expect import ExpectationError, evaluate
    from ccbench.spec.expect import Expect

    e = Expect.model_validate({"metric": "goodput", "op": ">", "value": 1,
                               "ratio": {"of": {"cca": "bbr"}, "to": {"cca": "reno"}}})
    with ccbench.open(results) as r:
        with pytest.raises(ExpectationError, match="no configuration with flows.0.cca = 'reno'"):
            evaluate(e, 0, r.analysis(), "expect-test")


def test_a_profile_that_leaves_the_selection_out_skips_it(tmp_path, capsys):
    study = _write(tmp_path, '\n[[expect]]\nwhere = { loss = "2%" }\nmetric = "jfi"\nop = ">="\nvalue = 2\n')
    out = tmp_path / "results"
    assert main(["run", str(study), "--profile", "lossless", "--out", str(out)]) == 0  # skipped, not failed
    text = capsys.readouterr().out
    assert "skipped" in text and "0 of 1 expectations hold; 1 skipped" in text
    why = "topology.bottleneck.loss = '2%' is in the study but not in these results (the profile 'lossless' left it out)"
    assert "(the profile" in text, text
    with ccbench.open(out) as r:
        (o,) = r.check()
    assert o.skipped and not o.passed and not o.failed
    assert why in o.skipped, o.skipped  # the stored plan knows the profile too


def test_kind_of_names_every_metric_of_one_kind_of_flow():
    """spec.expect.KIND_OF (the schema's side, which cannot import the analysis) and the
    analysis's rpc_* metrics agree."""
    from ccbench.analysis.metrics import METRICS
    from ccbench.spec.expect import KIND_OF

    assert set(KIND_OF) == {m for m in METRICS if m.startswith("rpc_")}


def test_rpc_metrics_are_accepted_when_some_configuration_has_rpc_flows():
    from ccbench.spec import parse_study

    text = STUDY.replace("[sweep]", '[[flows]]\ncca = "cubic"\n\n[[expect]]\nmetric = "rpc_p99"\nop = "<="\n'
                         'value = "1s"\n\n[sweep]\n"flows.1.kind" = ["bulk", "rpc"]')
    assert parse_study(text, filename="s.toml").n_runs == 16


def test_a_plain_value_near_one_is_not_rounded_to_one():
    from ccbench import console

    # a JFI of 0.9996 against a threshold of 0.9999 must not both read "1"
    assert (console.value(0.9996, ""), console.value(0.9999, ""), console.value(1.0, "")) == ("0.9996", "0.9999", "1")
    assert console.value(1234.4, "") == "1234"


NETWORK = """\
[study]
name = "links"
duration = "3s"

[topology]
hosts = ["a", "b", "c", "d"]
routers = ["ra", "rb"]

[[topology.links]]
name = "core"
between = ["ra", "rb"]
rate = "20Mbit"
delay = "5ms"

[[topology.links]]
between = ["a", "ra"]
rate = "1Gbit"
[[topology.links]]
between = ["c", "ra"]
rate = "1Gbit"
[[topology.links]]
between = ["rb", "b"]
rate = "1Gbit"
[[topology.links]]
between = ["rb", "d"]
rate = "1Gbit"

[[flows]]
cca = "cubic"
src = "a"
dst = "b"

[[flows]]
cca = "cubic"
src = "c"
dst = "d"

[[expect]]
metric = "link_utilisation"
link = "core"
op = ">="
value = 0.9

[[expect]]
metric = "link_utilisation"
link = "core/back"
op = "<"
value = 0.1
"""


def test_link_metrics_of_a_network_are_expectations_too(tmp_path, capsys):
    """Two flows through one 20 Mbit/s core link: its data direction is full,
    its ACK direction nearly idle; a link the network lacks is named."""
    study = tmp_path / "links.toml"
    study.write_text(NETWORK)
    out = tmp_path / "results"
    assert main(["run", str(study), "--out", str(out)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    v = ccbench.open(out).by_config()
    core = v[v.key == "link_utilisation[core]"]["median"].item()
    assert 0.9 <= core <= 1.01
    assert set(v[v.metric == "link_drops"].key) == {"link_drops[core]", "link_drops[core/back]"}
    # a link on a metric of flows, and a link the topology lacks: study errors before anything runs
    study.write_text(NETWORK.replace('metric = "link_utilisation"\nlink = "core/back"',
                                     'metric = "goodput"\nlink = "core/back"'))
    assert main(["run", str(study), "--out", str(tmp_path / "other")]) == 2
    assert "expect.1.link: only for the link_* metrics, not goodput" in capsys.readouterr().err
    study.write_text(NETWORK.replace('link = "core/back"', 'link = "edge"'))
    assert main(["run", str(study), "--out", str(tmp_path / "other")]) == 2
    err = capsys.readouterr().err
    assert "expect.1.link: no such link in the study's topology (got 'edge'; allowed: the queueing links: core, " \
        "core/back)" in err
    assert not (tmp_path / "other").exists()


def test_a_pipe_link_is_refused_before_any_run(tmp_path, capsys):
    """A host's link without a buffer or qdisc is a pipe: no queue, no samples, so
    no link_* value could ever be measured; the allowed list names queueing links only."""
    study = tmp_path / "links.toml"
    study.write_text(NETWORK.replace('link = "core/back"', 'link = "a-ra"'))
    out = tmp_path / "results"
    assert main(["run", str(study), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"ccbench: error: {study}: expect.1.link: a-ra is a pipe (a host's link without a buffer or a "
                   "qdisc): it has no queue and is not sampled (got 'a-ra'; allowed: the queueing links: core, "
                   "core/back)\n")
    assert not out.exists()
    # with a buffer the host's link queues, and is sampled
    study.write_text(NETWORK.replace('link = "core/back"', 'link = "a-ra"').replace(
        'between = ["a", "ra"]\nrate = "1Gbit"', 'between = ["a", "ra"]\nrate = "1Gbit"\nbuffer = "100KB"'))
    from ccbench.spec import load_study
    assert load_study(study).n_runs == 1


@pytest.mark.parametrize("value, ref", [('"0.1 * ceiling"', "ceiling"), ('"0.5*rate"', "rate")])
def test_rate_and_ceiling_in_a_general_topology_are_study_errors_before_any_run(tmp_path, capsys, value, ref):
    """'rate' and 'ceiling' are the bottleneck's: a network has none, which is
    known when the study is loaded, not after its runs."""
    study = tmp_path / "links.toml"
    study.write_text(NETWORK + f'\n[[expect]]\nmetric = "goodput"\nop = ">="\nvalue = {value}\n')
    out = tmp_path / "results"
    assert main(["run", str(study), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ccbench: error: {study}: expect.2.value: '{ref}' is the bottleneck's") \
        and err.count("\n") == 1, err
    assert "a general topology has no bottleneck" in err and "allowed: a number, or a quantity" in err
    assert not out.exists()  # nothing ran
    # a quantity is fine
    study.write_text(NETWORK + '\n[[expect]]\nmetric = "goodput"\nop = ">="\nvalue = "5Mbit"\n')
    from ccbench.spec import load_study
    assert load_study(study).n_runs == 1


def _store_runs(study_path: Path, out: Path, keep=lambda r: True, fail=lambda r: False) -> None:
    """Store the study's runs as `ccbench run` does (the same run list, so the same
    run indices), but run only those ``keep`` selects and store those ``fail``
    selects as failed: a study still running, or one with failed runs."""
    from ccbench import backends
    from ccbench.executor import execute
    from ccbench.executor.local import Outcome, run_one
    from ccbench.spec import load_study

    def runner(todo, backend, committer):
        for r in todo:
            if fail(r):
                committer.commit(r, Outcome(r.run_id, "failed", None, "failed on purpose", 0.0))
            elif keep(r):
                committer.commit(r, run_one(backend, r))

    study = load_study(study_path)
    execute(study, study.runs(), backends.get("sim"), out, runner=runner)


RATIO = """
[[expect]]
name = "loss costs goodput"
metric = "goodput"
ratio = { of = { loss = "2%" }, to = { loss = "0%" } }
op = "<="
value = 1.0
"""


def test_check_on_a_study_still_running_judges_the_study_not_its_finished_runs(tmp_path, capsys):
    """No finished run: not 'loss is not a swept parameter (swept: nothing)'; some:
    not 'a profile left it out' (no profile was used) but no finished run yet."""
    study = _write(tmp_path, RATIO)
    out = tmp_path / "results"
    _store_runs(study, out, keep=lambda r: False)
    assert main(["check", str(out)]) == 1  # nothing evaluated yet: skipped, not failed, but not settled either
    text = capsys.readouterr().out
    assert "not a swept parameter" not in text and "0 of 1 expectations hold; 1 skipped" in text
    assert main(["check", str(out), "--format", "json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert [r["skipped"] for r in rows] == ["no finished run yet: the study is still running or was interrupted "
                                            "(0 of its 8 runs done)"] * 2
    _store_runs(study, out, keep=lambda r: r.params["topology.bottleneck.loss"] == "0%")
    assert main(["check", str(out), "--format", "json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert [r["config"] for r in rows] == ["cca=cubic: loss=2% / loss=0%", "cca=bbr: loss=2% / loss=0%"]
    for r in rows:
        assert r["status"] == "skipped" and "profile" not in r["skipped"]
        assert r["skipped"].startswith("no finished run yet") and "4 of its 8 runs done" in r["skipped"]
    # loss=2% with one of its two repetitions (loss=0% has both): judged so far, said, not settled (exit 1)
    _store_runs(study, out, keep=lambda r: r.repetition == 0)
    assert main(["check", str(out), "--format", "json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert [(r["status"], r["n"], r["pending_runs"]) for r in rows] == [("pass", 1, 1)] * 2, rows
    assert main(["check", str(out)]) == 1
    text = " ".join(capsys.readouterr().out.split())
    assert "pass so far: 1 run to come" in text and "#0 held so far on configurations whose runs are not all" in text
    # and once the study is done, it is evaluated
    _store_runs(study, out)
    assert main(["check", str(out)]) == 0
    assert "1 of 1 expectations hold" in capsys.readouterr().out


def test_failed_runs_of_an_evaluated_configuration_are_shown_and_exit_1(tmp_path, capsys):
    """A configuration with 1 of 2 runs failed: the value of the other is shown with
    'n = 1 (1 failed)', the row says so, and check exits 1 (as run does for failed runs);
    with every run failed the row fails (no finished run)."""
    study = _write(tmp_path, '\n[[expect]]\nwhere = { loss = "0%" }\nmetric = "goodput"\nop = ">="\n'
                   'value = "1Mbit"\n')
    out = tmp_path / "results"
    _store_runs(study, out, fail=lambda r: r.params["flows.0.cca"] == "bbr" and r.repetition == 1)
    assert main(["check", str(out)]) == 1
    text = capsys.readouterr().out
    assert "1 (1 failed)" in text and "pass, but 1 run failed" in text
    assert "1 of 1 expectations hold; #0 held on configurations some of whose runs failed" in text
    assert main(["check", str(out), "--format", "json"]) == 1
    rows = {r["config"]: r for r in json.loads(capsys.readouterr().out)}
    assert (rows["cca=bbr loss=0%"]["n"], rows["cca=bbr loss=0%"]["failed_runs"]) == (1, 1)
    assert (rows["cca=cubic loss=0%"]["n"], rows["cca=cubic loss=0%"]["failed_runs"]) == (2, 0)

    out2 = tmp_path / "all-failed"
    _store_runs(study, out2, fail=lambda r: r.params["flows.0.cca"] == "bbr")
    assert main(["check", str(out2)]) == 3
    assert "FAIL: no finished run (2 failed)" in capsys.readouterr().out


def test_group_that_is_not_a_class_of_the_study_is_an_error_before_any_run(tmp_path, capsys):
    study = _write(tmp_path, '\n[[expect]]\nmetric = "goodput"\ngroup = "cubic"\nop = ">="\nvalue = "1Mbit"\n')
    out = tmp_path / "results"
    assert main(["run", str(study), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"ccbench: error: {study}: expect.0.group: no flows of that class in the study (got 'cubic'; "
                   "allowed: cubic bulk, bbr bulk)\n")
    # a class some selected configurations lack: named with the configuration
    study = _write(tmp_path, '\n[[expect]]\nmetric = "goodput"\ngroup = "cubic bulk"\nop = ">="\nvalue = 1\n')
    assert main(["run", str(study), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"ccbench: error: {study}: expect.0.group: flows.0.cca=bbr topology.bottleneck.loss=0% has no "
                   "flows of that class (got 'cubic bulk'; allowed: bbr bulk)\n")
    assert not out.exists()


def test_a_ratio_whose_where_leaves_out_its_to_configurations_is_an_error_before_any_run(tmp_path, capsys):
    study = _write(tmp_path, RATIO.replace('metric = "goodput"', 'metric = "goodput"\nwhere = { loss = "2%" }'))
    out = tmp_path / "results"
    assert main(["run", str(study), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ccbench: error: {study}: expect.0.where: leaves out flows.0.cca=cubic "
                          "topology.bottleneck.loss=0%, which ratio.to divides") and err.count("\n") == 1, err
    assert "(got { loss = \"2%\" }; allowed: a where that keeps the ratio's of and to configurations" in err
    assert not out.exists()


def test_one_bad_expectation_on_stored_results_does_not_hide_the_others(results, capsys):
    """E.g. results stored by an older ccbench that did not check groups: the bad one
    is a row of its own (an error, which fails), the good ones are still evaluated."""
    from ccbench.analysis.expect import evaluate_all
    from ccbench.cli_analysis import _print_outcomes
    from ccbench.spec.expect import Expect

    good = Expect.model_validate({"metric": "goodput", "op": ">=", "value": 1})
    bad = Expect.model_validate({"metric": "goodput", "group": "cubic", "op": ">=", "value": 1})
    with ccbench.open(results) as r:
        outcomes = evaluate_all([bad, good], r.analysis(), "expect-test", "s.toml")
    assert [o.status for o in outcomes] == ["error", "pass", "pass", "pass", "pass"]
    assert outcomes[0].error.startswith("s.toml: expect.0.group: no flows of that class")
    assert _print_outcomes(outcomes) == 1
    text = capsys.readouterr().out
    assert "ERROR" in text and "1 of 2 expectations failed (#0)" in text


ZERO = """
[[expect]]
name = "no link loses more for bbr than for cubic"
where = { loss = "0%" }
metric = "random_losses"
ratio = { of = { cca = "bbr" }, to = { cca = "cubic" } }
op = "<="
value = 2

[[expect]]
name = "a ratio to none"
where = { cca = "cubic" }
metric = "random_losses"
ratio = { of = { loss = "2%" }, to = { loss = "0%" } }
op = "<="
value = 2
"""


def test_a_ratio_to_zero_is_said_and_written_as_strict_json(tmp_path, capsys):
    """0 / 0 is undefined and fails, saying why (not 'no data'); x / 0 is +inf (fails
    <=), written as null with a note in JSON, which must parse strictly."""
    study = _write(tmp_path, ZERO)
    out = tmp_path / "results"
    assert main(["run", str(study), "--out", str(out)]) == 3
    text = capsys.readouterr().out
    with ccbench.open(out) as r:
        zero, inf = r.check()
    assert zero.value is None and zero.failed and zero.note == "0 / 0: both medians are 0, the ratio is undefined"
    assert inf.value == float("inf") and inf.failed and inf.note == "x / 0: the median of loss=0% is 0"
    assert "FAIL: 0 / 0: both medians are 0, the ratio is undefined" in text and "no data" not in text
    assert main(["check", str(out), "--format", "json"]) == 3
    raw = capsys.readouterr().out

    def strict(name):
        raise ValueError(name)

    rows = json.loads(raw, parse_constant=strict)
    assert rows[1]["value"] is None and rows[1]["status"] == "fail" and "value is +inf" in rows[1]["note"]
    assert rows[0]["value"] is None and rows[0]["note"].startswith("0 / 0")


@pytest.mark.parametrize("where", ["{ sack = true }", '{ sack = "true" }', "{ sack = [true] }"])
def test_a_boolean_where_matches_a_boolean_sweep(tmp_path, capsys, where):
    text = STUDY.replace('"topology.bottleneck.loss" = ["0%", "2%"]', '"tcp.sack" = [true, false]')
    study = tmp_path / "bool.toml"
    study.write_text(text + f'\n[[expect]]\nwhere = {where}\nmetric = "goodput"\nop = ">="\nvalue = "1Mbit"\n')
    out = tmp_path / "results"
    assert main(["run", str(study), "--out", str(out)]) == 0, capsys.readouterr().err
    with ccbench.open(out) as r:
        assert sorted(o.label for o in r.check()) == ["cca=bbr sack=true", "cca=cubic sack=true"]


def test_run_and_check_of_a_new_study_version(tmp_path, capsys):
    """`--new-version` stores the runs as 'NAME v2': run evaluates them (it looked
    for 'NAME' before), and check names the study in each row and counts each
    version's expectations."""
    base = STUDY.replace('"topology.bottleneck.loss" = ["0%", "2%"]', "").replace("[profiles.lossless]\n"
                                                                                  '"sweep.topology.bottleneck.loss" = ["0%"]\n', "")
    exp = '\n[[expect]]\nwhere = { cca = "bbr" }\nmetric = "goodput"\nop = ">="\nvalue = "1Mbit"\n'
    one, two = tmp_path / "one.toml", tmp_path / "two.toml"
    one.write_text(base + exp)
    two.write_text(base.replace("seed = 1", "seed = 2") + exp)
    out = tmp_path / "results"
    assert main(["run", str(one), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["run", str(two), "--out", str(out), "--new-version"]) == 0, capsys.readouterr().err
    assert "1 of 1 expectations hold" in capsys.readouterr().out
    assert main(["check", str(out)]) == 0
    text = capsys.readouterr().out
    assert "expect-test: cca=bbr" in text and "expect-test v2: cca=bbr" in text
    assert "2 of 2 expectations hold" in text


PROFILE_PREFIX = """
[study]
name = "pq"
duration = "1s"
repetitions = 2
[topology.bottleneck]
rate = "20Mbit"
delay = "10ms"
[[flows]]
cca = "cubic"
[sweep]
"flows.0.cca" = ["bbr", "cubic"]
[profiles.quick]
"sweep.flows.0.cca" = ["bbr"]
[[expect]]
metric = "goodput"
op = ">="
value = "1Mbit"
"""


def test_check_after_a_profile_whose_runs_begin_the_full_list_judges_the_profile(tmp_path, capsys):
    """--quick keeps the first sweep value: its runs are also the first runs of
    the whole study, at the same indices. The finished profile is what the
    store holds exactly, not a full study still running."""
    st = tmp_path / "pq.toml"
    st.write_text(PROFILE_PREFIX)
    assert main(["run", str(st), "--out", str(tmp_path / "r"), "--quick"]) == 0
    capsys.readouterr()
    assert main(["check", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "1 of 1 expectations hold" in out and "still running" not in out and "cca=cubic" not in out, out


def test_a_stored_study_that_no_longer_resolves_still_gives_its_declared_sweep():
    """A BPF source moved, or results read on another machine: the stored text
    does not resolve, but its [sweep] says what the study has, so a value the
    results lack is skipped (a profile left it out), not refused as unknown."""
    from ccbench.analysis.expect import stored_plan

    text = PROFILE_PREFIX.replace('cca = "cubic"', 'cca = "bpf:gone.bpf.c"').replace(
        '"flows.0.cca" = ["bbr", "cubic"]', '"topology.bottleneck.loss" = ["0%", "1%"]').replace(
        '"sweep.flows.0.cca" = ["bbr"]', '"sweep.topology.bottleneck.loss" = ["1%"]')
    plan = stored_plan(text, "pq.toml", {"abc": 0})
    assert plan is not None and plan.full == {"topology.bottleneck.loss": ["0%", "1%"]} and plan.configs == []


def test_a_full_study_interrupted_where_a_profile_ends_is_not_read_as_that_profile(tmp_path, capsys):
    """The full study stopped after its bbr runs, which are exactly what its quick
    profile makes: the store records the profile each run of the study used
    (none here), so check says the cubic runs are still to come (exit 1)
    instead of judging a finished quick profile (exit 0)."""
    st = tmp_path / "pq.toml"
    st.write_text(PROFILE_PREFIX)
    out = tmp_path / "r"
    _store_runs(st, out, keep=lambda r: r.params["flows.0.cca"] == "bbr")
    assert main(["check", str(out), "--format", "json"]) == 1  # not settled: runs are to come
    rows = json.loads(capsys.readouterr().out)
    assert [(r["config"], r["status"]) for r in rows] == [("cca=bbr", "pass"), ("cca=cubic", "skipped")], rows
    assert rows[1]["skipped"].startswith("no finished run yet") and rows[1]["pending_runs"] == 2, rows


def test_a_study_whose_text_no_longer_resolves_still_says_runs_are_to_come(tmp_path, capsys):
    """Its BPF source moved: the configurations are not known, but the recorded
    profile (none) and the repetitions the text declares are: a configuration
    with one of its two runs is judged so far, not as complete (exit 1)."""
    text = PROFILE_PREFIX.replace('cca = "cubic"', 'cca = "bpf:reno.bpf.c"').replace(
        '"flows.0.cca" = ["bbr", "cubic"]', '"topology.bottleneck.loss" = ["0%", "1%"]').replace(
        '"sweep.flows.0.cca" = ["bbr"]', '"sweep.topology.bottleneck.loss" = ["1%"]')
    repo = Path(__file__).resolve().parents[1]
    (tmp_path / "reno.bpf.c").write_bytes((repo / "studies" / "bpf-cca" / "reno.bpf.c").read_bytes())
    st = tmp_path / "s.toml"
    st.write_text(text)
    out = tmp_path / "r"
    _store_runs(st, out, keep=lambda r: r.repetition == 0)
    (tmp_path / "reno.bpf.c").rename(tmp_path / "moved.bpf.c")
    assert main(["check", str(out), "--format", "json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert [(r["config"], r["n"], r["pending_runs"]) for r in rows] == [("loss=0%", 1, 1), ("loss=1%", 1, 1)], rows


def test_a_quoted_plain_number_is_that_number():
    """value = "0.9" reads as 0.9 (it was 'not a number, a reference or a
    quantity'); a quoted nan is still refused."""
    from ccbench.errors import StudyError
    from ccbench.spec.expect import parse

    (e,) = parse({"expect": [{"metric": "jfi", "op": ">=", "value": "0.9"}]}, "s.toml")
    assert e.value == 0.9
    with pytest.raises(StudyError) as err:
        parse({"expect": [{"metric": "jfi", "op": ">=", "value": "nan"}]}, "s.toml")
    assert "must be a finite number" in str(err.value)
