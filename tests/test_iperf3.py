"""Bulk flows driven by iperf3 on the linux backend (tool = "iperf3")."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from ccbench.backends.linux import iperf3
from ccbench.errors import StudyError
from ccbench.spec import parse_study

from test_linux_backend import CEILING, core, goodput_after, root, run_measured  # noqa: F401 - fixtures

HERE = Path(__file__).resolve().parent

STUDY = """
[study]
name = "iperf3"
duration = "{duration}"
[topology.bottleneck]
rate = "100Mbit"
delay = "10ms"
buffer = "1bdp"
[[flows]]
cca = "cubic"
tool = "iperf3"
{extra}
"""


def study(backend: str = "linux", duration: str = "5s", extra: str = ""):
    return parse_study(textwrap.dedent(STUDY.format(duration=duration, extra=extra)), filename="t.toml",
                       backend=backend)


def test_convert_maps_iperf3_json_to_the_schema():
    """A real iperf3 3.12 client JSON (loopback, two 0.5 s intervals; the server
    reported 1 s intervals), trimmed to what ccbench reads."""
    doc = json.loads((HERE / "data" / "iperf3_client.json").read_text())
    row, samples, summary = iperf3.convert(doc, 7, offset_us=2_000_000)
    assert row == {"flow_id": 7, "tool": "iperf3", "connected": True, "bytes_acked": 3967352779, "sent_segs": None,
                   "retrans_segs": 10, "rtt_min_us": 44, "rtt_mean_us": None, "rtt_p99_us": None}
    assert [s["time_us"] for s in samples] == [2_500_138, 3_000_543]
    assert [s["cwnd_bytes"] for s in samples] == [9298586, 9298586]
    assert [s["srtt_us"] for s in samples] == [44, 121]
    assert [s["retrans_segs"] for s in samples] == [10, 10]  # cumulative
    # Delivered = what the server had received by the end of each client interval (its
    # intervals: 0–1.000117 s, then a 1 ms tail to 1.001228 s, within 1 ms of the client's end).
    assert [s["delivered_bytes"] for s in samples] == [0, 3967352779]
    assert all(s["pacing_rate_bps"] is None and s["flow_id"] == 7 for s in samples)
    assert summary["congestion"] == "cubic" and summary["version"] == "iperf 3.12"
    assert summary["received_bps"] == pytest.approx(31699894761.2332)


def test_argv_carries_cca_mss_class_and_pacing():
    f = {"id": 0, "cca": "bbr", "dscp": 1, "max_pacing_rate_bps": 20_000_000}
    argv = iperf3.client_argv("10.77.1.2", 5301, f, 5, 100_000_000, 1460)
    assert argv[:2] == ["iperf3", "-c"]
    for opt, val in (("-C", "bbr"), ("-M", "1460"), ("-t", "5"), ("-i", "0.1"), ("-S", "4"),
                     ("--fq-rate", "20000000"), ("-p", "5301")):
        assert argv[argv.index(opt) + 1] == val, (opt, argv)
    assert "--get-server-output" in argv and "-J" in argv
    assert iperf3.server_argv(5301, 100_000_000) == ["iperf3", "-s", "-1", "-p", "5301", "-i", "0.1", "-J"]


def test_study_errors():
    with pytest.raises(StudyError) as e:
        study(extra='kind = "rpc"')
    assert "flows.0.tool" in str(e.value) and "bulk flows only" in str(e.value)
    with pytest.raises(StudyError) as e:
        study(duration="2500ms")
    msg = str(e.value)
    assert "flows.0.tool" in msg and "whole seconds" in msg and "2.5s" in msg, msg
    with pytest.raises(StudyError, match="whole seconds"):
        study(extra='start_jitter = "10ms"')
    study(duration="2500ms", backend="sim")  # the simulator runs the same bulk flow, any length
    (r,) = study(extra='start = "1s"').runs()
    assert r.config["flows"][0]["tool"] == "iperf3"


def test_an_iperf3_flow_on_linux(core):
    if shutil.which("iperf3") is None:
        pytest.fail("iperf3 is not installed: `make test` installs it (apt-get install iperf3)")
    r, res = run_measured(textwrap.dedent(STUDY.format(duration="5s", extra="")))
    assert res.status == "ok", res.note
    (f,) = res.flows
    ip = res.stats["iperf3"]["0"]
    print(f"iperf3 flow: {f['goodput_bps'] / 1e6:.2f} Mbit/s (iperf3 says {ip['received_bps'] / 1e6:.2f} received "
          f"over {ip['seconds']:.3f} s), retrans {f['retrans_segs']}, rtt min {f['rtt_min_us']} us")
    assert ip["congestion"] == "cubic"
    assert f["sent_segs"] is None
    # ccbench's goodput and iperf3's own figure count the same bytes.
    assert f["bytes_delivered"] * 8 == pytest.approx(ip["received_bps"] * ip["seconds"], rel=0.02)
    assert goodput_after(res, 0, 2.0) >= 0.85 * CEILING
    assert 19_500 <= f["rtt_min_us"] <= 25_000  # iperf3's min of sampled srtt: at least the path's 20 ms
    n = sum(1 for x in res.samples["flow_id"] if x == 0)
    assert 40 <= n <= 51, n  # every 100 ms over 5 s
