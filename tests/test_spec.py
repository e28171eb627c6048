"""Study files: validation, error messages, resolution and sweep expansion (ccbench.spec)."""

import json
from pathlib import Path

import pytest

from ccbench.errors import StudyError
from ccbench.spec import CCAS, RunSpec, Study, load_study

REPO = Path(__file__).resolve().parents[1]

BASE = """
[study]
name = "t"
duration = "10s"

[topology.bottleneck]
rate = "100Mbit"
delay = "10ms"

[[flows]]
cca = "cubic"
"""


def write(tmp_path: Path, text: str, name: str = "study.toml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def load(tmp_path: Path, text: str, **kw) -> Study:
    return load_study(write(tmp_path, text), **kw)


def error(tmp_path: Path, text: str, name: str = "bad.toml") -> str:
    p = write(tmp_path, text, name)
    with pytest.raises(StudyError) as ei:
        load_study(p)
    msg = str(ei.value)
    assert "\n" not in msg, msg
    assert msg.startswith(f"{p}: "), msg
    assert "Traceback" not in msg and "validation error" not in msg, msg
    return msg


# ------------------------------------------------------------------ quickstart


def test_quickstart_loads():
    study = load_study(REPO / "studies" / "quickstart.toml")
    assert study.name == "quickstart"
    assert study.backend == "sim"
    assert study.source_text == (REPO / "studies" / "quickstart.toml").read_text(encoding="utf-8")
    runs = study.runs()
    assert len(runs) == 6
    assert [r.params["flows.0.cca"] for r in runs] == ["reno", "reno", "cubic", "cubic", "bbr", "bbr"]
    assert [r.repetition for r in runs] == [0, 1, 0, 1, 0, 1]
    for r in runs:
        assert isinstance(r, RunSpec)
        cfg = r.config
        assert cfg["bottleneck"]["rate_bps"] == 100_000_000
        assert cfg["bottleneck"]["buffer_bytes"] == 250_000  # 1 BDP at 100 Mbit/s x 20 ms
        assert cfg["flows"][0]["cca"] == r.params["flows.0.cca"]
        assert cfg["flows"][1]["cca"] == "cubic"
        assert 5_000_000_000 <= cfg["flows"][1]["start_ns"] < 5_100_000_000
    json.dumps(study.to_dict())  # storable


def test_resolved_config_shape(tmp_path):
    study = load(tmp_path, BASE + 'kind = "bulk"\n[[flows]]\ncca = "reno"\nkind = "rpc"\n')
    cfg = study.runs()[0].config
    assert list(cfg) == ["seed", "duration_ns", "sample_interval_ns", "tcp", "senders", "bottleneck",
                         "reverse", "flows"]
    assert cfg["tcp"] == {
        "mss": 1448, "header_bytes": 52, "init_cwnd": 10, "min_rto_ns": 200_000_000,
        "delayed_ack": "linux", "delack_ns": 40_000_000, "sack": True, "rmem_bytes": 6_291_456,
        "wmem_bytes": 4_194_304, "ecn": False, "pacing": "auto", "hz": None,
    }
    assert cfg["duration_ns"] == 10_000_000_000
    assert cfg["sample_interval_ns"] == 100_000_000
    assert cfg["senders"] == [{"rate_bps": 10_000_000_000, "delay_ns": 0}]
    assert cfg["bottleneck"] == {"rate_bps": 100_000_000, "delay_ns": 10_000_000, "loss": 0.0,
                                 "buffer_bytes": 250_000, "buffer_pkts": None, "qdisc": {"kind": "fifo"}}
    assert cfg["reverse"] is None
    assert cfg["flows"] == [
        {"id": 0, "cca": "cubic", "sender": 0, "kind": "bulk", "start_ns": 0, "stop_ns": None},
        {"id": 1, "cca": "reno", "sender": 0, "kind": "rpc", "start_ns": 0, "stop_ns": None,
         "request_bytes": 10_000, "response_bytes": 100, "think_ns": 0},
    ]
    meta = study.runs()[0].flow_meta
    assert meta[0] == {"id": 0, "cca": "cubic", "sender": 0, "kind": "bulk", "group": "cubic bulk",
                       "start_us": 0, "stop_us": None}
    assert meta[1]["group"] == "reno rpc 10KB"
    assert 0 <= cfg["seed"] < 2**63


def test_units_resolved_to_ints(tmp_path):
    text = """
[study]
name = "u"
duration = "1min"
sample_interval = "500us"
[topology]
senders = [{rate = "1Gbit", delay = "1ms"}, {delay = "20µs"}]
access = {rate = "40Gbit"}
[topology.bottleneck]
rate = "1.5Gbit"
delay = "2ms"
loss = "0.5%"
buffer = "420pkt"
[tcp]
mss = "8948B"
rmem = "30MB"
[[flows]]
cca = "bbr"
count = 3
sender = 1
start = "1.5s"
stop = "30s"
"""
    cfg = load(tmp_path, text).runs()[0].config
    assert cfg["duration_ns"] == 60_000_000_000
    assert cfg["sample_interval_ns"] == 500_000
    assert cfg["senders"] == [{"rate_bps": 1_000_000_000, "delay_ns": 1_000_000},
                              {"rate_bps": 40_000_000_000, "delay_ns": 20_000}]
    assert cfg["bottleneck"]["rate_bps"] == 1_500_000_000
    assert cfg["bottleneck"]["loss"] == pytest.approx(0.005)
    assert cfg["bottleneck"]["buffer_pkts"] == 420 and cfg["bottleneck"]["buffer_bytes"] is None
    assert cfg["tcp"]["mss"] == 8948 and cfg["tcp"]["rmem_bytes"] == 30_000_000
    assert [f["id"] for f in cfg["flows"]] == [0, 1, 2]
    assert all(f["start_ns"] == 1_500_000_000 and f["stop_ns"] == 30_000_000_000 for f in cfg["flows"])
    assert all(f["sender"] == 1 for f in cfg["flows"])


# ------------------------------------------------------------------ BDP buffers


def _bottleneck(tmp_path, topo: str) -> dict:
    text = f"""
[study]
name = "b"
{topo}
[[flows]]
cca = "reno"
"""
    return load(tmp_path, text).runs()[0].config


@pytest.mark.parametrize(
    "bn, expected",
    [
        ('rate = "100Mbit"\ndelay = "10ms"', 250_000),  # 100e6 * 0.020 / 8
        ('rate = "100Mbit"\ndelay = "10ms"\nbuffer = "1.5bdp"', 375_000),
        ('rate = "100Mbit"\ndelay = "10ms"\nbuffer = "0.5bdp"', 125_000),
        ('rate = "10Gbit"\ndelay = "10us"', 25_000),
        ('rate = "100Mbit"\ndelay = "10ms"\nbdp_rtt = "40ms"', 500_000),
        ('rate = "100Mbit"\nbdp_rtt = "40ms"', 500_000),
        ('rate = "1Mbit"\ndelay = "1ms"', 1500),  # 250 bytes, floored to one full packet (1448 + 52)
    ],
)
def test_bdp_buffer(tmp_path, bn, expected):
    cfg = _bottleneck(tmp_path, "[topology.bottleneck]\n" + bn)
    assert cfg["bottleneck"]["buffer_bytes"] == expected
    assert cfg["bottleneck"]["buffer_pkts"] is None


def test_bdp_uses_largest_base_rtt(tmp_path):
    topo = """
[topology]
senders = [{delay = "1ms"}, {delay = "15ms"}]
[topology.bottleneck]
rate = "100Mbit"
delay = "10ms"
"""
    # base RTT of sender 1 = 2 x 15 + 10 + 10 = 50 ms -> 625000 bytes
    assert _bottleneck(tmp_path, topo)["bottleneck"]["buffer_bytes"] == 625_000


def test_reverse_path(tmp_path):
    topo = """
[topology.bottleneck]
rate = "100Mbit"
delay = "10ms"
buffer = "2bdp"
[topology.reverse]
rate = "10Mbit"
delay = "30ms"
loss = "1%"
"""
    cfg = _bottleneck(tmp_path, topo)
    # RTT = 10 + 30 ms = 40 ms; forward 2 x 100e6 x 0.04 / 8, reverse mirrors "2bdp" at 10 Mbit/s
    assert cfg["bottleneck"]["buffer_bytes"] == 1_000_000
    assert cfg["reverse"] == {"rate_bps": 10_000_000, "delay_ns": 30_000_000, "loss": pytest.approx(0.01),
                              "buffer_bytes": 100_000, "buffer_pkts": None}


def test_reverse_defaults_mirror_bottleneck(tmp_path):
    topo = """
[topology.bottleneck]
rate = "100Mbit"
delay = "10ms"
buffer = "100pkt"
loss = "2%"
[topology.reverse]
"""
    rev = _bottleneck(tmp_path, topo)["reverse"]
    assert rev == {"rate_bps": 100_000_000, "delay_ns": 10_000_000, "loss": 0.0,
                   "buffer_bytes": None, "buffer_pkts": 100}


def test_bdp_with_zero_rtt_is_an_error(tmp_path):
    msg = error(tmp_path, BASE.replace('delay = "10ms"\n', ""))
    assert "topology.bottleneck.buffer" in msg and "non-zero RTT" in msg and "'1bdp'" in msg


# ------------------------------------------------------------------ sweep


SWEPT = BASE + """
[[flows]]
cca = "reno"
start = "2s"

[sweep]
"topology.bottleneck.loss" = ["0%", "1%", "2%"]
"flows.0.cca" = ["cubic", "bbr"]
"""


def test_sweep_count_and_order(tmp_path):
    study = load(tmp_path, SWEPT.replace('duration = "10s"', 'duration = "10s"\nrepetitions = 3'))
    runs = study.runs()
    assert len(runs) == 3 * 2 * 3
    combos = [(r.params["topology.bottleneck.loss"], r.params["flows.0.cca"], r.repetition) for r in runs]
    expected = [(loss, cca, rep) for loss in ["0%", "1%", "2%"] for cca in ["cubic", "bbr"] for rep in range(3)]
    assert combos == expected
    for r in runs:
        assert r.config["bottleneck"]["loss"] == pytest.approx(float(r.params["topology.bottleneck.loss"][:-1]) / 100)
        assert r.config["flows"][0]["cca"] == r.params["flows.0.cca"]
        assert list(r.params) == ["topology.bottleneck.loss", "flows.0.cca"]
    assert study.sweep == {"topology.bottleneck.loss": ["0%", "1%", "2%"], "flows.0.cca": ["cubic", "bbr"]}


def test_sweep_params_are_strings_as_written(tmp_path):
    text = BASE + '[sweep]\n"tcp.mss" = [1448, "8948B"]\n"tcp.sack" = [true, false]\n'
    runs = load(tmp_path, text).runs()
    assert [r.params for r in runs] == [
        {"tcp.mss": "1448", "tcp.sack": "true"}, {"tcp.mss": "1448", "tcp.sack": "false"},
        {"tcp.mss": "8948B", "tcp.sack": "true"}, {"tcp.mss": "8948B", "tcp.sack": "false"},
    ]
    assert [r.config["tcp"]["mss"] for r in runs] == [1448, 1448, 8948, 8948]


def test_sweep_unquoted_dotted_keys(tmp_path):
    # `topology.bottleneck.loss = [...]` without quotes makes nested TOML tables; same meaning
    text = BASE + '[sweep]\ntopology.bottleneck.loss = ["0%", "1%"]\n'
    assert [r.params for r in load(tmp_path, text).runs()] == [
        {"topology.bottleneck.loss": "0%"}, {"topology.bottleneck.loss": "1%"}]


def test_sweep_into_absent_table_and_whole_table(tmp_path):
    text = BASE + '[sweep]\n"tcp.init_cwnd" = [4, 10]\n"topology.reverse" = [{rate = "10Mbit"}, {rate = "50Mbit"}]\n'
    runs = load(tmp_path, text).runs()
    assert len(runs) == 4
    assert [r.config["tcp"]["init_cwnd"] for r in runs] == [4, 4, 10, 10]
    assert [r.config["reverse"]["rate_bps"] for r in runs] == [10_000_000, 50_000_000] * 2


def test_sweep_count_of_senders(tmp_path):
    text = BASE + '[sweep]\n"topology.senders" = [1, 2, 4]\n"flows.0.count" = [1, 8]\n'
    runs = load(tmp_path, text).runs()
    assert [len(r.config["senders"]) for r in runs] == [1, 1, 2, 2, 4, 4]
    assert [len(r.config["flows"]) for r in runs] == [1, 8] * 3


@pytest.mark.parametrize(
    "key, fragment, allowed",
    [
        ("topology.bottlenek.loss", "topology has no field 'bottlenek'; did you mean 'bottleneck'?",
         "senders, access, bottleneck, reverse"),
        ("topology.bottleneck.los", "topology.bottleneck has no field 'los'; did you mean 'loss'?",
         "rate, delay, loss, buffer, qdisc"),
        ("toplogy.bottleneck.loss", "the study has no field 'toplogy'; did you mean 'topology'?",
         "study, topology, tcp, flows"),
        ("bottleneck.loss", "the study has no field 'bottleneck'; did you mean 'topology.bottleneck.loss'?",
         "study, topology, tcp, flows"),
        ("mss", "the study has no field 'mss'; did you mean 'tcp.mss'?", "study, topology, tcp, flows"),
        ("delay", "the study has no field 'delay' (got", "study, topology, tcp, flows"),
        ("tcp.mss.x", "tcp.mss is a value", "'tcp.mss' itself"),
        ("flows.first.cca", "flows is an array: expected an index", "flows.0"),
        ("study.name", "study.name cannot be swept", "study.duration"),
    ],
)
def test_sweep_bad_path(tmp_path, key, fragment, allowed):
    msg = error(tmp_path, BASE + f'[sweep]\n"{key}" = ["x"]\n')
    assert f'sweep."{key}"' in msg
    assert fragment in msg
    assert f"allowed: {allowed}" in msg
    assert f"got '{key}'" in msg


def test_sweep_flow_index_out_of_range(tmp_path):
    msg = error(tmp_path, BASE + '[sweep]\n"flows.3.cca" = ["reno"]\n')
    assert 'sweep."flows.3.cca"' in msg and "out of range" in msg and "flows has 1 entry" in msg
    assert "allowed: flows.0" in msg


def test_sweep_value_validated_like_the_file(tmp_path):
    msg = error(tmp_path, BASE + '[sweep]\n"topology.bottleneck.rate" = ["10Mbit", "10MB"]\n')
    assert msg.startswith(f"{tmp_path / 'bad.toml'}: sweep.\"topology.bottleneck.rate\": ")
    assert "got '10MB'" in msg and "bits per second" in msg


def test_sweep_unknown_cca_names_sweep_key(tmp_path):
    msg = error(tmp_path, BASE + '[sweep]\n"flows.0.cca" = ["reno", "bbr2"]\n')
    assert 'sweep."flows.0.cca"' in msg and "got 'bbr2'" in msg and "allowed: " + ", ".join(CCAS["sim"]) in msg


def test_sweep_cross_field_error_mentions_combination(tmp_path):
    msg = error(tmp_path, BASE + 'stop = "8s"\n[sweep]\n"study.duration" = ["10s", "5s"]\n')
    assert "flows.0.stop" in msg and "got '8s'" in msg and "study.duration = '5s'" in msg


@pytest.mark.parametrize(
    "sweep, fragment",
    [
        ('"tcp.mss" = 1448', "must be a list of values"),
        ('"tcp.mss" = []', "must not be empty"),
        ('"tcp.mss" = [1448, "1448"]', "duplicate value"),
        ('"topology.reverse" = [{}]\n"topology.reverse.loss" = ["1%"]', "overlaps"),
    ],
)
def test_sweep_structure_errors(tmp_path, sweep, fragment):
    msg = error(tmp_path, BASE + "[sweep]\n" + sweep + "\n")
    assert fragment in msg and "sweep." in msg


# ------------------------------------------------------------------ identity and seeds


def test_seeds_and_ids(tmp_path):
    text = SWEPT.replace('duration = "10s"', 'duration = "10s"\nrepetitions = 4')
    a = load(tmp_path, text).runs()
    b = load(tmp_path, text).runs()
    # stable across loads
    assert [(r.run_id, r.config_id, r.seed, r.config) for r in a] == [(r.run_id, r.config_id, r.seed, r.config) for r in b]
    # run ids unique, short hex
    assert len({r.run_id for r in a}) == len(a)
    assert all(len(r.run_id) == 12 and int(r.run_id, 16) >= 0 for r in a)
    # seeds differ across repetitions of one config; config_id shared by them
    by_config: dict = {}
    for r in a:
        by_config.setdefault(r.config_id, []).append(r)
    assert len(by_config) == 6
    for reps in by_config.values():
        assert [r.repetition for r in reps] == [0, 1, 2, 3]
        assert len({r.seed for r in reps}) == 4
        assert all(r.config["seed"] == r.seed for r in reps)
    assert len({r.seed for r in a}) == len(a)


def test_study_seed_changes_seeds_and_run_ids(tmp_path):
    a = load(tmp_path, BASE).runs()[0]
    b = load(tmp_path, BASE.replace('duration = "10s"', 'duration = "10s"\nseed = 2')).runs()[0]
    assert a.seed != b.seed and a.run_id != b.run_id
    assert a.config_id == b.config_id


def test_ids_ignore_unrelated_edits(tmp_path):
    # comments, order of keys and spelling of equal values do not change identities
    a = load(tmp_path, BASE).runs()[0]
    other = BASE.replace('rate = "100Mbit"\ndelay = "10ms"', '# a comment\ndelay = "10000us"\nrate = "0.1Gbit"')
    b = load(tmp_path, other).runs()[0]
    assert (a.run_id, a.config_id, a.seed) == (b.run_id, b.config_id, b.seed)


def test_start_jitter_is_deterministic_and_bounded(tmp_path):
    text = BASE.replace('cca = "cubic"', 'cca = "cubic"\ncount = 5\nstart = "1s"\nstart_jitter = "200ms"')
    text = text.replace('duration = "10s"', 'duration = "10s"\nrepetitions = 3')
    runs = load(tmp_path, text).runs()
    starts = [[f["start_ns"] for f in r.config["flows"]] for r in runs]
    assert starts == [[f["start_ns"] for f in r.config["flows"]] for r in load(tmp_path, text).runs()]
    for s in starts:
        assert all(1_000_000_000 <= x < 1_200_000_000 for x in s)
        assert len(set(s)) == 5  # flows of one class spread out
    assert starts[0] != starts[1] != starts[2]  # a fresh draw per repetition
    assert runs[0].flow_meta[0]["start_us"] == starts[0][0] // 1000


def test_backend_override(tmp_path):
    s = load(tmp_path, BASE, backend="linux")
    assert s.backend == "linux"
    assert s.runs()[0].run_id != load(tmp_path, BASE).runs()[0].run_id
    assert s.runs()[0].config_id == load(tmp_path, BASE).runs()[0].config_id


def test_cca_list_is_one_constant():
    # The spec's sim list is exactly what the simulator core implements.
    from ccbench import _core

    assert set(CCAS["sim"]) == set(_core.algorithms())
    assert len(CCAS["sim"]) == len(set(CCAS["sim"]))


# ------------------------------------------------------------------ bad files: one line each


def test_error_wrong_unit(tmp_path):
    msg = error(tmp_path, BASE.replace('delay = "10ms"', 'delay = "10mins"'))
    assert "topology.bottleneck.delay" in msg and "got '10mins'" in msg and "allowed: a time" in msg


def test_error_bare_number(tmp_path):
    msg = error(tmp_path, BASE.replace('delay = "10ms"', "delay = 10"))
    assert "topology.bottleneck.delay" in msg and "got 10" in msg and "'10ms'" in msg


@pytest.mark.parametrize("old, new, key", [
    ('delay = "10ms"', 'delay = ["10ms", "40ms"]', "topology.bottleneck.delay"),
    ('cca = "cubic"', 'cca = ["cubic", "bbr"]', "flows.0.cca"),
])
def test_error_list_in_place_of_a_value_points_to_sweep(tmp_path, old, new, key):
    msg = error(tmp_path, BASE.replace(old, new))
    assert msg.count(key) == 2, msg
    assert f'list them under [sweep] as "{key}" = [...]' in msg, msg
    # And that advice, followed, loads.
    values = new.split(" = ", 1)[1]
    study = load(tmp_path, BASE + f'\n[sweep]\n"{key}" = {values}\n')
    assert study.n_runs == 2


@pytest.mark.parametrize("old, new, key, guess", [
    ('duration = "10s"', 'duration = "10"', "study.duration", "'10s'"),
    ('duration = "10s"', "duration = 10", "study.duration", "'10s'"),
    ('cca = "cubic"', 'cca = "cubic"\nstart = 5', "flows.0.start", "'5s'"),
    ('delay = "10ms"', 'delay = "10"', "topology.bottleneck.delay", "'10ms'"),
])
def test_error_a_time_without_unit_guesses_the_fields_usual_unit(tmp_path, old, new, key, guess):
    msg = error(tmp_path, BASE.replace(old, new))
    assert msg.split(": ")[1] == key and guess in msg, msg


def test_error_unknown_cca(tmp_path):
    msg = error(tmp_path, BASE.replace('"cubic"', '"compound"'))
    assert "flows.0.cca" in msg and "got 'compound'" in msg and "allowed: " + ", ".join(CCAS["sim"]) in msg


def test_error_negative_rate(tmp_path):
    msg = error(tmp_path, BASE.replace('"100Mbit"', '"-100Mbit"'))
    assert "topology.bottleneck.rate" in msg and "positive" in msg and "got '-100Mbit'" in msg


def test_error_unknown_field(tmp_path):
    msg = error(tmp_path, BASE.replace('delay = "10ms"', 'delay = "10ms"\nlos = "1%"'))
    assert "topology.bottleneck.los: unknown field; did you mean 'loss'?" in msg
    assert "got '1%'" in msg and "allowed: rate, delay, loss, buffer, qdisc, bdp_rtt" in msg


def test_a_misspelt_required_field_is_named_not_reported_missing(tmp_path):
    """`rat = ...` where rate is required: the typo is the problem, not a
    missing rate (the user would hunt for it by eye); a list value there is
    no sweep written in place either."""
    msg = error(tmp_path, BASE.replace('rate = "100Mbit"', 'rat = "100Mbit"'))
    assert "topology.bottleneck.rat: unknown field; did you mean 'rate'? (rate is required) (got '100Mbit'" in msg, msg
    msg = error(tmp_path, BASE.replace('cca = "cubic"', 'cac = ["cubic", "bbr"]'))
    assert "flows.0.cac: unknown field; did you mean 'cca'? (cca is required) (got ['cubic', 'bbr']" in msg, msg
    assert "[sweep]" not in msg, msg
    # a missing field with no look-alike beside it is still reported missing
    msg = error(tmp_path, BASE.replace('rate = "100Mbit"', 'colour = "red"'))
    assert "topology.bottleneck.rate: required field is missing" in msg, msg


def test_error_unknown_top_level_table(tmp_path):
    msg = error(tmp_path, BASE + "[tpc]\nmss = 1448\n")
    assert "tpc: unknown field; did you mean 'tcp'?" in msg and "allowed: study, topology, tcp, flows, sweep" in msg


def test_error_sweep_missing_path(tmp_path):
    msg = error(tmp_path, BASE + '[sweep]\n"topology.bottleneck.lost" = ["1%"]\n')
    assert 'sweep."topology.bottleneck.lost"' in msg and "no field 'lost'" in msg
    assert "allowed: rate, delay, loss" in msg


def test_error_toml_syntax(tmp_path):
    msg = error(tmp_path, BASE.replace('rate = "100Mbit"', 'rate = "100Mbit'))
    assert ": line 7, column 16: TOML syntax error" in msg  # BASE starts with a blank line


def test_error_stop_before_start(tmp_path):
    msg = error(tmp_path, BASE + 'start = "5s"\nstop = "2s"\n')
    assert "flows.0.stop" in msg and "must be after start" in msg and "got '2s'" in msg


def test_error_stop_after_duration(tmp_path):
    msg = error(tmp_path, BASE + 'stop = "20s"\n')
    assert "flows.0.stop" in msg and "study.duration" in msg and "got '20s'" in msg


def test_error_missing_file(tmp_path):
    p = tmp_path / "nope.toml"
    with pytest.raises(StudyError) as ei:
        load_study(p)
    assert str(ei.value) == f"{p}: study file not found"


@pytest.mark.parametrize(
    "change, field, fragment",
    [
        (("[study]\nname = \"t\"", "[study]"), "study.name", "required field is missing"),
        (('rate = "100Mbit"\n', ""), "topology.bottleneck.rate", "required field is missing"),
        (("[[flows]]", "[flows]"), "flows", "must be an array"),
        (('duration = "10s"', "repetitions = 0"), "study.repetitions", "must be >= 1"),
        (('duration = "10s"', 'repetitions = "2"'), "study.repetitions", "must be a whole number"),
        (('duration = "10s"', 'backend = "ns3"'), "study.backend", "allowed: 'sim', 'linux'"),
        (('delay = "10ms"', 'delay = "10ms"\nloss = "100%"'), "topology.bottleneck.loss", "below 100%"),
        (('delay = "10ms"', 'delay = "10ms"\nloss = 0.01'), "topology.bottleneck.loss", "'1%'"),
        (('delay = "10ms"', 'delay = "10ms"\nqdisc = "sfq"'), "topology.bottleneck.qdisc", "allowed: a name ('fifo'"),
        (('delay = "10ms"', 'delay = "-1ms"'), "topology.bottleneck.delay", "negative"),
        (('cca = "cubic"', 'cca = "cubic"\nsender = 2'), "flows.0.sender", "no such sender"),
        (('cca = "cubic"', 'cca = "cubic"\nrequest = "1MB"'), "flows.0.request", "kind = 'rpc'"),
        (('cca = "cubic"', 'cca = "cubic"\nkind = "stream"'), "flows.0.kind", "allowed: 'bulk', 'rpc'"),
        (('cca = "cubic"', 'cca = "cubic"\ncount = 0'), "flows.0.count", "must be >= 1"),
        (('cca = "cubic"', 'cca = "cubic"\nstart = "12s"'), "flows.0.start", "before the end of the run"),
        (('[topology.bottleneck]', '[topology]\nsenders = 0\n[topology.bottleneck]'), "topology.senders",
         "at least 1"),
        (('[topology.bottleneck]', '[topology]\nsenders = [{rat = "1Gbit"}]\n[topology.bottleneck]'),
         "topology.senders.0.rat", "did you mean 'rate'"),
        (('duration = "10s"', 'duration = "10s"\nsample_interval = "20s"'), "study.sample_interval",
         "at most study.duration"),
        (('cca = "cubic"', 'cca = "cubic"\n[tcp]\nsack = "yes"'), "tcp.sack", "true or false"),
        (('cca = "cubic"', 'cca = "cubic"\n[tcp]\nmss = 20'), "tcp.mss", "out of range"),
    ],
)
def test_error_one_line_per_field(tmp_path, change, field, fragment):
    old, new = change
    assert old in BASE
    msg = error(tmp_path, BASE.replace(old, new))
    assert f": {field}: " in msg, msg
    assert fragment in msg, msg


def test_error_not_utf8(tmp_path):
    p = tmp_path / "bin.toml"
    p.write_bytes(b'[study]\nname = "\xff"\n')
    with pytest.raises(StudyError) as ei:
        load_study(p)
    assert str(ei.value) == f"{p}: line 2: not valid UTF-8 text"


# ------------------------------------------------------------------ storing


def test_to_dict_and_source_text(tmp_path):
    study = load(tmp_path, SWEPT)
    d = study.to_dict()
    assert d["name"] == "t" and d["backend"] == "sim" and d["n_runs"] == 6
    assert d["source_text"] == SWEPT == study.source_text
    assert d["sweep"] == {"topology.bottleneck.loss": ["0%", "1%", "2%"], "flows.0.cca": ["cubic", "bbr"]}
    json.loads(json.dumps(d))
    json.loads(json.dumps([r.to_dict() for r in study.runs()]))


def test_runs_returns_copies(tmp_path):
    study = load(tmp_path, BASE)
    study.runs()[0].config["flows"][0]["cca"] = "changed"
    assert study.runs()[0].config["flows"][0]["cca"] == "cubic"


LEAF_SWEEPS = [
    # plain paths of model fields, into lists, a whole table, an absent table
    '"topology.bottleneck.rate" = ["10Mbit", "20Mbit"]\n"topology.bottleneck.delay" = ["5ms", "7ms", "9ms"]',
    '"flows.0.cca" = ["reno", "cubic"]\n"flows.1.start" = ["0s", "2s"]',
    '"topology.bottleneck.qdisc" = ["fifo", {kind = "fq_codel"}]\n"tcp.mss" = [1000, 1448]',
    '"topology.access.rate" = ["1Gbit", "10Gbit"]\n"flows.0.start" = ["0s", "1s"]\n"flows.0.count" = [1, 3]',
    '"topology.senders" = [1, 2]\n"flows.1.sender" = [0, 1]',
]


@pytest.mark.parametrize("sweep", LEAF_SWEEPS)
def test_a_sweeps_models_are_those_of_validating_each_document(sweep):
    """spec/leaves.py builds each configuration's model from validated swept
    values; it must be exactly the model validating the whole document gives
    (fields, and which were set), or step aside."""
    import itertools
    import tomllib

    from ccbench.spec import cases
    from ccbench.spec.leaves import LeafModels, _fields_set
    from ccbench.spec.model import StudyFile
    from ccbench.spec.sweep import parse_sweep

    text = ('[study]\nname = "leaves"\nduration = "5s"\n[topology]\nbottleneck = { rate = "100Mbit", delay = "10ms" }\n'
            '[[flows]]\ncca = "cubic"\n[[flows]]\ncca = "reno"\n[sweep]\n' + sweep)
    doc = tomllib.loads(text)
    base = {k: v for k, v in doc.items() if k != "sweep"}
    axes = parse_sweep(doc["sweep"], base)
    leaves = LeafModels(base, axes)
    built = 0
    for combo in itertools.product(*(range(len(a.values)) for a in axes)):
        m = leaves.model(combo)
        if m is None:
            continue
        full = StudyFile.model_validate(cases.apply_all(base, axes, combo))
        assert m == full and _fields_set(m) == _fields_set(full), combo
        built += 1
    assert built > 0 or sweep.startswith('"topology.senders"'), "the fast path stepped aside"


def test_error_rmem_of_2gib(tmp_path):
    # The simulator's SACK blocks are 32-bit offsets within the receive buffer.
    msg = error(tmp_path, BASE + '\n[tcp]\nrmem = "2GiB"\n')
    assert "tcp.rmem" in msg and "below 2 GiB" in msg and "2GiB" in msg, msg
    assert load(tmp_path, BASE + '\n[tcp]\nrmem = "1GiB"\n').runs()[0].config["tcp"]["rmem_bytes"] == 1 << 30


# ------------------------------------------------------------------ sweep values that make the same runs


@pytest.mark.parametrize("file_part, key, values, why", [
    # a sender's own delay overrides topology.access.delay
    ('[topology]\nsenders = [{delay = "1ms"}]\n', "topology.access.delay", '["1ms", "30ms"]',
     "topology.access.delay has no effect: every sender in topology.senders sets its own delay"),
    # bdp_rtt sizes nothing when the buffer is in packets
    ('[topology.bottleneck]\nbuffer = "50pkt"\n', "topology.bottleneck.bdp_rtt", '["10ms", "100ms"]',
     "topology.bottleneck.bdp_rtt has no effect"),
    ("", "study.duration", '["1s", "1000ms"]', "they are the same value written two ways"),
    ("", "topology.bottleneck.loss", '["0%", "0.0%", "0.000%"]', "they are the same value written two ways"),
])
def test_sweep_values_that_give_the_same_runs_are_an_error(tmp_path, file_part, key, values, why):
    """They would be summarised as one configuration, the second value's runs counted as
    repetitions of the first."""
    text = BASE.replace("[topology.bottleneck]\n", file_part if "[topology.bottleneck]" in file_part
                        else file_part + "[topology.bottleneck]\n")
    first, second = (v.strip(' "') for v in values.strip("[]").split(",")[:2])
    msg = error(tmp_path, text + f'\n[sweep]\n"{key}" = {values}\n"flows.0.cca" = ["cubic", "reno"]\n')
    assert f'sweep."{key}": \'{first}\' and \'{second}\' give the same run configuration; {why}' in msg, msg
    assert "allowed:" in msg


def test_cases_that_give_the_same_runs_are_an_error(tmp_path):
    msg = error(tmp_path, BASE + '\n[sweep.cases.scenario]\na = { "flows.0.cca" = "reno" }\n'
                'b = { "flows.0.cca" = "reno", "study.repetitions" = 2 }\n')
    assert "sweep.cases.scenario: 'a' and 'b' give the same run configuration" in msg, msg


def test_sweep_values_that_change_the_runs_are_accepted(tmp_path):
    study = load(tmp_path, BASE + '\n[sweep]\n"topology.bottleneck.buffer" = ["20pkt", "30000B", "0.2bdp"]\n')
    assert len({r.config_id for r in study.runs()}) == 3
    # a buffer in bytes that the BDP of this link resolves to as well (100 Mbit/s x 20 ms x 0.12)
    msg = error(tmp_path, BASE + '\n[sweep]\n"topology.bottleneck.buffer" = ["30000B", "0.12bdp"]\n')
    assert "'30000B' and '0.12bdp' give the same run configuration (allowed:" in msg, msg


# ------------------------------------------------------------------ buffers, names, [analysis]


def test_byte_buffer_below_one_packet_is_an_error(tmp_path):
    msg = error(tmp_path, BASE.replace('delay = "10ms"', 'delay = "10ms"\nbuffer = "10B"'))
    assert "topology.bottleneck.buffer: a buffer must hold at least one full-size packet (got '10B'" in msg, msg
    assert "at least 1500B (mss 1448 + 52 header bytes)" in msg
    # the minimum follows the mss
    msg = error(tmp_path, BASE.replace('delay = "10ms"', 'delay = "10ms"\nbuffer = "3000B"') + '[tcp]\nmss = 8948\n')
    assert "at least 9000B" in msg, msg
    cfg = load(tmp_path, BASE.replace('delay = "10ms"', 'delay = "10ms"\nbuffer = "1500B"')).runs()[0].config
    assert cfg["bottleneck"]["buffer_bytes"] == 1500
    # a queue's threshold in bytes is not a buffer: it may be below a packet
    cfg = load(tmp_path, BASE.replace('delay = "10ms"', 'delay = "10ms"\nqdisc = { kind = "step_ecn", threshold = "100B" }')
               ).runs()[0].config
    assert cfg["bottleneck"]["qdisc"]["threshold_bytes"] == 100


@pytest.mark.parametrize("name", ["x v2", "cubic loss v10"])
def test_a_study_name_like_a_stored_version_is_reserved(tmp_path, name):
    msg = error(tmp_path, BASE.replace('name = "t"', f'name = "{name}"'))
    assert "study.name: ends in ' v' and a number, which is how ccbench names a new version" in msg, msg
    assert f"got '{name}'" in msg


@pytest.mark.parametrize("name", ["x-v2", "x v", "xv2", "x v2b"])
def test_names_near_the_version_suffix_are_fine(tmp_path, name):
    assert load(tmp_path, BASE.replace('name = "t"', f'name = "{name}"')).name == name


def test_steady_after_must_be_before_the_end_of_the_run(tmp_path):
    msg = error(tmp_path, BASE + '\n[analysis]\nsteady_after = "10s"\n')
    assert "analysis.steady_after: must be before the end of the run (study.duration = 10s)" in msg, msg
    assert "got '10s'" in msg
    # with a swept duration, the configuration that is too short is named
    msg = error(tmp_path, BASE + '\n[analysis]\nsteady_after = "5s"\n[sweep]\n"study.duration" = ["10s", "5s"]\n')
    assert "[with sweep study.duration = '5s']" in msg, msg
    assert load(tmp_path, BASE + '\n[analysis]\nsteady_after = "9s"\n').n_runs == 1
