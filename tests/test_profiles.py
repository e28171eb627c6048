"""Study profiles ([profiles.NAME], `ccbench run --profile/--quick`) and sweep
cases ([sweep.cases.AXIS]): ccbench.spec.profiles, ccbench.spec.cases."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ccbench.cli import main
from ccbench.errors import StudyError
from ccbench.spec import load_study, parse_study

BASE = """
[study]
name = "t"
duration = "10s"
repetitions = 3

[topology.bottleneck]
rate = "100Mbit"
delay = "10ms"

[[flows]]
cca = "cubic"

[[flows]]
cca = "cubic"
start = "2s"
"""


def study(tail: str, profile=None):
    return parse_study(BASE + tail, filename="f.toml", profile=profile)


def error(tail: str, profile=None) -> str:
    with pytest.raises(StudyError) as ei:
        study(tail, profile)
    msg = str(ei.value)
    assert "\n" not in msg and msg.startswith("f.toml: "), msg
    return msg


# ------------------------------------------------------------------ cases


CASES = """
[sweep]
"topology.bottleneck.loss" = ["0%", "1%"]

[sweep.cases.cca]
reno = { "flows.*.cca" = "reno" }
cubic-clamp = { "flows.*.cwnd_clamp" = 100 }
dctcp = { "flows.*.cca" = "dctcp", "flows.*.queue_class" = 1, "topology.bottleneck.qdisc" = "twoclass", "study.repetitions" = 1 }
"""


def test_cases_set_several_fields_and_multiply_with_the_sweep():
    s = study(CASES)
    assert s.sweep == {"topology.bottleneck.loss": ["0%", "1%"], "cases.cca": ["reno", "cubic-clamp", "dctcp"]}
    runs = s.runs()
    assert len(runs) == 2 * (3 + 3 + 1)  # dctcp's case sets study.repetitions = 1
    seen = {}
    for r in runs:
        flows = r.config["flows"]
        seen[r.params["cases.cca"]] = (
            {f["cca"] for f in flows}, {f.get("cwnd_clamp") for f in flows}, {f.get("queue_class") for f in flows},
            r.config["bottleneck"]["qdisc"]["kind"])
    assert seen == {
        "reno": ({"reno"}, {None}, {None}, "fifo"),
        "cubic-clamp": ({"cubic"}, {100}, {None}, "fifo"),
        "dctcp": ({"dctcp"}, {None}, {1}, "twoclass"),
    }
    assert [r.params for r in runs[:4]] == [{"topology.bottleneck.loss": "0%", "cases.cca": "reno"}] * 3 + [
        {"topology.bottleneck.loss": "0%", "cases.cca": "cubic-clamp"}]


def test_case_axes_sit_where_cases_is_written_and_an_empty_case_changes_nothing():
    s = study('[sweep.cases.x]\na = {}\nb = { "tcp.mss" = 1000 }\n\n[sweep]\n"flows.0.cca" = ["reno", "bbr"]\n')
    assert list(s.sweep) == ["cases.x", "flows.0.cca"]
    assert [r.config["tcp"]["mss"] for r in s.runs() if r.repetition == 0] == [1448, 1448, 1000, 1000]


def test_case_names_may_hold_dots():
    s = study('[sweep.cases.rtt]\n"0.2ms" = { "topology.bottleneck.delay" = "0.1ms" }\n"2ms" = {}\n')
    assert s.sweep == {"cases.rtt": ["0.2ms", "2ms"]}


@pytest.mark.parametrize("tail, fragment", [
    ('[sweep.cases.x]\na = {"tcp.mss" = 10}\n', 'sweep.cases.x.a."tcp.mss": out of range (got 10;'),
    ('[sweep.cases.x]\na = {"tcp.mtu" = 10}\n', "sweep.cases.x.a.\"tcp.mtu\": unknown path: tcp has no field 'mtu'"),
    ('[sweep.cases.x]\na = {"topology.*.rate" = "1Gbit"}\n', "'*' stands for every entry of an array"),
    ('[sweep]\n"tcp.mss" = [1448]\n[sweep.cases.x]\na = {"tcp.mss" = 1000}\n',
     'sweep.cases.x.a."tcp.mss": sets tcp.mss, which sweep."tcp.mss" sweeps too'),
    ('[sweep.cases.x]\na = {"tcp.mss" = 1000}\n[sweep.cases.y]\nb = {"tcp.mss" = 2000}\n',
     "which the cases of sweep.cases.x set too"),
    ('[sweep.cases.x]\na = {"flows.*.cca" = "foo"}\n',
     "sweep.cases.x.a.\"flows.*.cca\": unknown congestion control for backend 'sim' (got 'foo'"),
    ('[sweep.cases.x]\na = {"flows.1.start" = "20s"}\n',
     'sweep.cases.x.a."flows.1.start": start + start_jitter must be before the end of the run'),
    ('[sweep.cases.x]\na = 1\n', "sweep.cases.x.a: must be a table of dotted paths to values"),
    ('[sweep]\ncases = 1\n', "sweep.cases: must be a table of case axes"),
    ('[sweep.cases."a b"]\nc = {}\n', "sweep.cases: not a valid axis name"),
    ('[sweep.cases.x]\na = {"study.seed" = 3}\n', "not a [study] field that can be set here"),
    ('[sweep.cases.x]\na = {"analysis.collapse_min" = "1s"}\n', "[analysis] cannot be changed here"),
    ('[sweep.cases.x]\na = {"flows" = [], "flows.0.cca" = "reno"}\n', 'which sweep.cases.x.a."flows" sets too'),
])
def test_case_errors_name_the_case(tail, fragment):
    assert fragment in error(tail)


# ------------------------------------------------------------------ profiles


PROFILED = CASES + """
[profiles.quick]
"study.repetitions" = 1
"study.duration" = "5s"
"sweep.topology.bottleneck.loss" = ["1%"]
"sweep.cases.cca" = ["dctcp", "reno"]

[profiles.more]
study.seed = 7
"sweep.flows.1.start" = ["2s", "3s"]
"sweep.cases.cca.reno.tcp.mss" = 9000
"""


def test_profile_overrides_fields_sweep_lists_and_case_choice():
    full = study(PROFILED)
    assert full.profile is None and full.profiles == ("quick", "more") and full.results_name == "t"
    q = study(PROFILED, profile="quick")
    assert q.profile == "quick" and q.results_name == "t-quick"
    assert q.sweep == {"topology.bottleneck.loss": ["1%"], "cases.cca": ["dctcp", "reno"]}
    assert [(r.params["cases.cca"], r.repetition, r.config["duration_ns"]) for r in q.runs()] == [
        ("dctcp", 0, 5_000_000_000), ("reno", 0, 5_000_000_000)]
    more = study(PROFILED, profile="more")
    assert more.seed == 7 and more.sweep["flows.1.start"] == ["2s", "3s"]
    assert list(more.sweep) == ["topology.bottleneck.loss", "cases.cca", "flows.1.start"]
    assert {r.config["tcp"]["mss"] for r in more.runs() if r.params["cases.cca"] == "reno"} == {9000}
    assert {r.config["tcp"]["mss"] for r in more.runs() if r.params["cases.cca"] != "reno"} == {1448}


def test_profile_runs_have_their_own_ids():
    full = {r.run_id for r in study(PROFILED).runs()}
    quick = {r.run_id for r in study(PROFILED, profile="quick").runs()}
    assert not full & quick


@pytest.mark.parametrize("tail, fragment", [
    ('[profiles.quick]\n"study.duration" = "5 parsecs"\n', "profiles.quick.\"study.duration\": unknown time unit"),
    ('[profiles.quick]\n"topology.bottleneck.rat" = "1Gbit"\n',
     "profiles.quick.\"topology.bottleneck.rat\": unknown path: topology.bottleneck has no field 'rat'"),
    ('[profiles.quick]\n"study.name" = "x"\n', "profiles.quick.\"study.name\": not a [study] field that can be set"),
    ('[profiles.quick]\n"analysis.steady_after" = "1s"\n', "[analysis] cannot be changed here"),
    ('[sweep]\n"topology.bottleneck.loss" = ["0%"]\n[profiles.quick]\n"topology.bottleneck.loss" = "1%"\n',
     "profiles.quick.\"topology.bottleneck.loss\": topology.bottleneck.loss is varied by "
     "sweep.\"topology.bottleneck.loss\": a profile cannot set it directly (got '1%'; allowed: override the "
     "sweep list instead: 'sweep.topology.bottleneck.loss')"),
    ('[sweep]\n"topology.bottleneck.loss" = ["0%"]\n[profiles.quick]\n"sweep.topology.bottleneck.loss" = ["x"]\n',
     "profiles.quick.\"sweep.topology.bottleneck.loss\": does not start with a number (got 'x'"),
    ('[profiles.quick]\n"sweep.topology.bottleneck.loss" = []\n', "must be a non-empty list of values"),
    ('[profiles.quick]\n"sweep.topology.bottleneck.loss" = ["1%", "1%"]\n', "duplicate value"),
    ('[sweep.cases.x]\na = {}\n[profiles.quick]\n"sweep.cases.x" = ["b"]\n',
     "profiles.quick.\"sweep.cases.x\": no such case (got 'b'; allowed: a)"),
    ('[sweep.cases.x]\na = {}\n[profiles.quick]\n"sweep.cases.y" = ["a"]\n', "no such case axis"),
    ('[sweep.cases.x]\na = {}\n[profiles.quick]\n"sweep.cases.x.b.tcp.mss" = 1000\n', "no such case of this axis"),
    ('[sweep.cases.x]\na = {}\n[profiles.quick]\n"sweep.cases.x.a.tcp.mss" = 9\n',
     "profiles.quick.\"sweep.cases.x.a.tcp.mss\": out of range (got 9;"),
    ('[sweep.cases.x]\na = {"tcp.mss" = 1000}\n[profiles.quick]\n"tcp.mss" = 1200\n',
     "tcp.mss is varied by every case of sweep.cases.x"),
    ('[profiles."qu ick"]\n"study.seed" = 1\n', "profiles: not a valid profile name"),
    ('[profiles.quick]\n"flows" = []\n"flows.0.cca" = "reno"\n', "which profiles.quick.\"flows\" sets too"),
    ('[profiles]\nquick = 1\n', "profiles.quick: must be a table"),
])
def test_profile_errors_name_the_profile_key(tail, fragment):
    assert fragment in error(tail, profile="quick")


def test_every_profile_is_checked_even_when_not_selected():
    assert "profiles.other.\"tcp.msss\"" in error('[profiles.other]\n"tcp.msss" = 1\n')


@pytest.mark.parametrize("tail, fragment", [
    # a value that only the run's checks refuse (a negative duration), not the schema
    ('[profiles.other]\n"study.duration" = "-1s"\n', 'profiles.other."study.duration": a time must not be negative'),
    # a sweep list and a case's field the profile replaces, checked with the file's values
    ('[profiles.other]\n"sweep.topology.bottleneck.loss" = ["0%", "101%"]\n',
     'profiles.other."sweep.topology.bottleneck.loss"'),
    ('[sweep.cases.x]\na = {}\n[profiles.other]\n"sweep.cases.x.a.tcp.mss" = 9\n',
     'profiles.other."sweep.cases.x.a.tcp.mss": out of range (got 9;'),
    ('[profiles.other]\n"sweep.study.duration" = ["5s", "5000ms"]\n',
     'profiles.other."sweep.study.duration": \'5s\' and \'5000ms\' give the same run configuration'),
    # a field the profile does not set, wrong only with the profile's values: the profile is named
    ('[profiles.other]\n"study.duration" = "1s"\n', "flows.1.start: start + start_jitter must be before the end "
     "of the run (study.duration = 1s; start = 2s, start_jitter = 0ns) [in profile 'other']"),
])
def test_every_profile_is_checked_on_load_not_only_the_selected_one(tail, fragment):
    assert fragment in error(tail)
    # and whichever profile is selected
    assert fragment in error(tail + '[profiles.quick]\n"study.repetitions" = 1\n', profile="quick")


def test_the_file_without_a_profile_is_checked_when_one_is_selected():
    tail = '[sweep]\n"tcp.mss" = [1448, 9]\n[profiles.quick]\n"sweep.tcp.mss" = [1448]\n'
    assert 'sweep."tcp.mss": out of range [in the study without a profile] (got 9;' in error(tail, profile="quick")


def test_a_profile_not_selected_is_not_checked_against_this_machine():
    """What the linux kernel offers is checked only for the profile that runs here (it may
    run on another machine): a CCA this machine's kernel lacks does not stop a sim run."""
    s = study('[profiles.linux]\n"study.backend" = "linux"\n"flows.*.cca" = "no_such_cca_here"\n')
    assert s.n_runs == 3
    assert "this kernel has no such congestion control" in error(
        '[profiles.linux]\n"study.backend" = "linux"\n"flows.*.cca" = "no_such_cca_here"\n', profile="linux")


def test_a_profile_may_set_a_field_some_cases_leave_alone():
    s = study('[sweep.cases.x]\na = {"tcp.mss" = 1000}\nb = {}\n[profiles.quick]\n"tcp.mss" = 1200\n',
              profile="quick")
    assert [r.config["tcp"]["mss"] for r in s.runs() if r.repetition == 0] == [1000, 1200]


def test_unknown_profile():
    assert error("", profile="quick") == (
        "f.toml: --profile: the study has no profile 'quick' (allowed: none: it has no [profiles] tables)")
    assert "allowed: quick, more" in error(PROFILED, profile="fast")


# ------------------------------------------------------------------ command line


def test_run_quick_writes_to_its_own_results_directory(tmp_path, capsys):
    p = tmp_path / "s.toml"
    p.write_text(BASE.replace('duration = "10s"', 'duration = "3s"') + """
[profiles.quick]
"study.duration" = "2s"
"study.repetitions" = 1
"flows.1.start" = "1s"
""", encoding="utf-8")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(["run", str(p), "--quick"]) == 0
        assert (tmp_path / "results" / "t-quick").is_dir() and not (tmp_path / "results" / "t").exists()
        assert main(["run", str(p), "--profile", "quick"]) == 0  # the same runs: resumed, nothing new
        assert "results: results/t-quick" in capsys.readouterr().out
        assert main(["run", str(p), "--quick", "--profile", "other"]) == 2
        assert "--quick is --profile quick" in capsys.readouterr().err
        assert main(["run", str(p), "--profile", "nope"]) == 2
        assert "has no profile 'nope' (allowed: quick)" in capsys.readouterr().err
    finally:
        os.chdir(cwd)
