"""The HTML report of a small finished study (simulator), rendered in headless
Chromium: no console errors, plots drawn with the expected series. Also
`ccbench plot` and `ccbench show RESULTS`.

The Chromium part needs Debian's `chromium` (make install-dev installs it);
without it the test is skipped, except under CI where that is a failure.
A screenshot is kept in test-artifacts/report.png (and report-run.png).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path

import pytest

import ccbench
from ccbench.cli import main

from analysis_study import run_study
from cdp import Browser, chromium_path

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_study(tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def report(results):
    out = results.parent / "report.html"
    assert main(["report", str(results), "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="ccbench-data">(.*?)</script>', text, re.S)
    assert m, "the report embeds its data"
    return out, text, json.loads(m.group(1).replace("<\\/", "</"))


def _names(fig: dict) -> list[str]:
    return [t.get("name") for t in fig["data"]]


def test_report_is_self_contained(report):
    out, text, doc = report
    assert "Plotly" in text[:6_000_000]
    # nothing fetched from the network: no external scripts, styles or images
    assert not re.search(r'<script[^>]+src=', text)
    assert not re.search(r'<link[^>]+href=\s*"?https?:', text)
    assert not re.search(r'<img[^>]+src=\s*"?https?:', text)
    assert out.stat().st_size < 8_000_000
    assert "report-test" in text and "[[flows]]" in text  # the study file is in it


def test_report_data_has_the_expected_series(report, results):
    _, text, doc = report
    figs = doc["figures"]
    sweeps = {f["layout"]["title"]["text"]: f for k, f in figs.items() if k.startswith("sweep-")}
    g = sweeps["goodput per flow vs topology.bottleneck.loss"]
    means = [t["name"] for t in g["data"] if t.get("meta", {}).get("role") == "mean"]
    assert set(means) == {"reno bulk · cca=reno", "cubic rpc 10KB · cca=reno", "bbr bulk · cca=bbr",
                          "reno bulk · cca=bbr", "cubic rpc 10KB · cca=bbr"}
    models = [t["name"] for t in g["data"] if t.get("meta", {}).get("role") == "model"]
    assert any(n.startswith("Mathis model") for n in models) and any(n.startswith("Padhye model") for n in models)
    bands = [t for t in g["data"] if t.get("meta", {}).get("role") == "band"]
    assert bands and all(t["fill"] == "toself" for t in bands)
    runs_dots = [t for t in g["data"] if t.get("meta", {}).get("role") == "runs"]
    # a dot per repetition and class: reno configs have 2 classes, bbr configs 3; 2 losses; 3 reps
    assert sum(len(t["y"]) for t in runs_dots) == 2 * 3 * (2 + 3)
    assert "Jain's fairness index vs topology.bottleneck.loss" in sweeps
    assert "RPC completion time p99 vs topology.bottleneck.loss" in sweeps
    assert any(t.startswith("goodput per flow vs flows.0.cca") for t in sweeps)

    # one lazily drawn time-series figure per run, with goodput/cwnd/RTT per flow, backlog and JFI
    run_figs = {k: f for k, f in figs.items() if k.startswith("run-plot-")}
    assert len(run_figs) == 12 and set(doc["lazy"]) == {k[len("run-plot-"):] for k in run_figs}
    for f in run_figs.values():
        series = {(t["meta"].get("series"), t["meta"].get("flow")) for t in f["data"]}
        for fid in (0, 1, 2):
            assert {("goodput", fid), ("cwnd", fid), ("rtt", fid)} <= series
        assert ("backlog", None) in series and ("jfi", None) in series
        goodput = next(t for t in f["data"] if t["meta"] == {"series": "goodput", "flow": 0})
        assert len(goodput["x"]) == len(goodput["y"]) >= 30 and max(goodput["y"]) > 1  # Mbit/s, real numbers
    cdfs = [f for k, f in figs.items() if k.startswith("cdf-")]
    assert len(cdfs) == 4 and all(_names(f)[0].startswith("cubic rpc 10KB (") for f in cdfs)
    assert all(f["data"][0]["y"][-1] == 1.0 for f in cdfs)
    assert len([k for k in figs if k.startswith("jfi-")]) == 4
    # flagged runs link to their sections
    for flag in doc["flags"]:
        assert f'href="#run-{flag["run_id"]}"' in text and f'id="run-{flag["run_id"]}"' in text


def test_report_renders_in_chromium(report):
    if chromium_path() is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: `make install-dev` installs it")
        pytest.skip("chromium is not installed (make install-dev installs it)")
    out, _, doc = report
    ARTIFACTS.mkdir(exist_ok=True)
    first_run = next(iter(doc["lazy"]))
    with Browser(width=1400, height=2000) as b:
        b.navigate(out.resolve().as_uri())
        b.wait_for("window.ccbenchReady === true")
        n_eager = len(doc["eager"])
        b.wait_for(f"document.querySelectorAll('[data-drawn]').length >= {n_eager}")
        b.pump(0.3)
        assert b.errors() == []
        assert b.eval("window.ccbenchErrors") == []
        # every eager plot is drawn with exactly the traces of its figure, legends in the DOM
        drawn = b.eval("""(() => { const out = {};
            document.querySelectorAll('.js-plotly-plot').forEach(el => {
              out[el.id] = {names: el.data.map(t => t.name),
                            legend: Array.from(el.querySelectorAll('.legendtext')).map(e => e.textContent),
                            traces: el.querySelectorAll('.scatterlayer .trace').length}; });
            return out; })()""")
        assert set(drawn) == set(doc["eager"])
        for fid, d in drawn.items():
            assert d["names"] == _names(doc["figures"][fid]), fid
            assert d["traces"] == len(doc["figures"][fid]["data"]), fid
        goodput = next(fid for fid in doc["eager"]
                       if doc["figures"][fid]["layout"]["title"]["text"] == "goodput per flow vs topology.bottleneck.loss")
        assert "reno bulk · cca=reno" in drawn[goodput]["legend"]
        assert any(x.startswith("Mathis model") for x in drawn[goodput]["legend"])
        # the summary table lists every configuration
        rows = b.eval("document.querySelectorAll('table.summary tbody tr').length")
        assert rows == 2 + 3 + 2 + 3  # classes per configuration: reno×2 (2 classes), bbr×2 (3 classes)
        b.screenshot(ARTIFACTS / "report.png")

        # a run's section opens from its link and draws its time series
        b.eval(f"location.hash = '#run-{first_run}'")
        b.wait_for(f"document.getElementById('run-plot-{first_run}').getAttribute('data-drawn') === '1'")
        assert b.eval(f"document.getElementById('run-{first_run}').open") is True
        names = b.eval(f"document.getElementById('run-plot-{first_run}').data.map(t => t.meta.series)")
        assert names.count("goodput") == 3 and names.count("backlog") == 1
        assert b.eval(f"document.querySelectorAll('#run-plot-{first_run} .subplot').length") >= 5
        b.pump(0.3)
        assert b.errors() == [] and b.eval("window.ccbenchErrors") == []
        b.screenshot(ARTIFACTS / "report-run.png")
    assert (ARTIFACTS / "report.png").stat().st_size > 10_000


@pytest.mark.parametrize("fmt,magic", [("png", b"\x89PNG"), ("svg", b"<?xml"), ("pdf", b"%PDF")])
def test_plot_command(results, tmp_path, fmt, magic, capsys):
    out = tmp_path / f"fig.{fmt}"
    assert main(["plot", str(results), "--metric", "goodput", "--x", "loss", "--group", "cca",
                 "--format", fmt, "--out", str(out)]) == 0
    assert out.read_bytes().startswith(magic)
    if fmt == "svg":
        svg = out.read_text()
        # grouped by the flows' CCA (not by the swept flows.0.cca, which would pool the bulk and the
        # RPC flows of a run): the reno flows of both sweep values, bbr's, and the RPC flow's cubic
        # apart, each with its model unless it is the RPC flow's
        for name in ("reno · cca=reno", "reno · cca=bbr", "bbr · cca=bbr", "cubic · cca=reno"):
            assert f"<!-- {name} -->" in svg, name
        assert "Mathis model · bbr · cca=bbr" in svg and "model · cubic" not in svg
        pooled = tmp_path / "pooled.svg"  # the swept parameter by its full name: all flows of a run
        assert main(["plot", str(results), "--metric", "goodput", "--x", "loss", "--group", "flows.0.cca",
                     "--format", "svg", "--out", str(pooled)]) == 0
        svg = pooled.read_text()
        assert "<!-- cca=reno -->" in svg and "<!-- cca=bbr -->" in svg and "Mathis model" not in svg
        by_class = tmp_path / "by-class.svg"
        assert main(["plot", str(results), "--metric", "goodput", "--x", "loss", "--format", "svg",
                     "--out", str(by_class)]) == 0
        svg = by_class.read_text()
        assert "Mathis model · reno bulk · cca=bbr" in svg and "Padhye model · bbr bulk · cca=bbr" in svg
        assert "model · cubic rpc" not in svg


def test_plot_default_path_and_errors(results, capsys):
    assert main(["plot", str(results), "--metric", "jfi", "--x", "cca"]) == 0
    assert (results / "figures" / "jfi-vs-cca.png").exists()
    capsys.readouterr()
    assert main(["plot", str(results), "--x", "nope"]) == 2
    assert "not a swept parameter" in capsys.readouterr().err
    assert main(["plot", str(results), "--x", "loss", "--metric", "speed"]) == 2
    capsys.readouterr()
    # a per-link metric on the dumbbell: says why, and what to plot instead
    assert main(["plot", str(results), "--x", "loss", "--metric", "link_drops"]) == 2
    err = capsys.readouterr().err
    assert "per-link metrics are a general topology's; the dumbbell's bottleneck has 'drops'" in err, err


def test_show_results_formats(results, capsys):
    assert main(["show", str(results), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["configs"]) == 4
    c = doc["configs"][0]
    st = c["stats"]["goodput_mean_bps[reno bulk]"]
    assert st["n"] == 3 and st["min"] <= st["median"] <= st["max"] and st["ci_low"] <= st["mean"] <= st["ci_high"]
    assert set(c["anomalies"]) == {"collapse", "starvation", "not steady"}

    assert main(["show", str(results), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {"jfi", "utilisation", "rpc_p99_us[cubic rpc 10KB]"} <= {r["metric"] for r in rows}

    assert main(["show", str(results)]) == 0
    out = capsys.readouterr().out
    assert "goodput_mean_bps[reno bulk]" in out and "95% CI" in out


def test_report_draws_the_controller_over_link_utilisation(tmp_path):
    """A NOTED run's section has a second figure: every queueing link's
    utilisation with the controller's states and moves on it, the action
    period shaded (issue 11)."""
    out = tmp_path / "noted"
    assert main(["run", str(REPO / "studies" / "noted" / "noted.toml"), "--quick", "--out", str(out)]) == 0
    html = tmp_path / "report.html"
    assert main(["report", str(out), "--out", str(html)]) == 0
    text = html.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="ccbench-data">(.*?)</script>', text, re.S)
    doc = json.loads(m.group(1).replace("<\\/", "</"))
    import ccbench

    r = ccbench.open(out)
    ev = r.events
    on = set(ev.run_id[ev.kind == "controller"])
    assert len(on) == 1, "only the run with the controller enabled has controller events"
    nets = {fid: fig for fid, fig in doc["figures"].items() if fid.startswith("net-plot-")}
    assert len(nets) == 2, "both runs are networks: both get the figure"
    fig = doc["figures"][f"net-plot-{next(iter(on))}"]
    links = {t["meta"]["link"] for t in fig["data"]}
    assert links == set(r.queue.link[r.queue.run_id == next(iter(on))])
    watched = set(ev.link[ev.kind == "controller"].dropna())
    assert any(t["name"].endswith("(watched)") and t["meta"]["link"] in watched for t in fig["data"])
    # one annotation per event, at its time; the action period is shaded until the release
    rows = ev[ev.run_id == next(iter(on))]
    assert [round(a["x"], 6) for a in fig["layout"]["annotations"]] == [round(t / 1e6, 6) for t in rows.time_us]
    states = list(rows.state[rows.flow_id.isna()])
    assert "action" in states and "released" in states
    t_action = rows.time_us[rows.state == "action"].iloc[0] / 1e6
    t_release = rows.time_us[rows.state == "released"].iloc[0] / 1e6
    rects = [s for s in fig["layout"]["shapes"] if s["type"] == "rect"]
    assert [(round(s["x0"], 6), round(s["x1"], 6)) for s in rects] == [(round(t_action, 6), round(t_release, 6))]
    if chromium_path() is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: `make install-dev` installs it")
        pytest.skip("chromium is not installed (make install-dev installs it)")
    ARTIFACTS.mkdir(exist_ok=True)
    rid = next(iter(on))
    with Browser(width=1400, height=2600) as b:
        b.navigate(html.resolve().as_uri())
        b.wait_for("window.ccbenchReady === true")
        b.eval(f"location.hash = '#run-{rid}'")
        b.wait_for(f"document.getElementById('net-plot-{rid}').getAttribute('data-drawn') === '1'")
        assert b.eval(f"document.getElementById('net-plot-{rid}').data.length") == len(fig["data"])
        b.pump(0.3)
        assert b.errors() == [] and b.eval("window.ccbenchErrors") == []
        b.eval(f"document.getElementById('net-plot-{rid}').scrollIntoView()")
        b.pump(0.3)
        b.screenshot(ARTIFACTS / "report-network.png")


@pytest.mark.parametrize("numeric", [True, False])
def test_figure_series_never_share_colour_and_marker(numeric):
    """More series than the ten colours (a per-link metric over a sweep draws
    one per directed link and configuration): the marker changes with every
    round of colours, so no two series look the same."""
    from ccbench.analysis.stats import spread
    from ccbench.analysis.sweeps import Point, Series, SweepPlot
    from ccbench.report.figures import MARKERS, series_style, sweep_figure

    n = 10 * len(MARKERS)
    styles = [series_style(i)[:2] for i in range(n)]
    assert len(set(styles)) == n
    assert [series_style(i) for i in range(10)] == [(f"C{i}", "o", "-") for i in range(10)]  # as before
    assert len({series_style(i) for i in range(4 * n)}) == 4 * n  # then the line style changes too

    series = [Series(f"l{i}", [Point(str(x), float(x), spread([i + x, i + x + 0.5]), ["r"]) for x in (1, 2)])
              for i in range(25)]
    fig = sweep_figure(SweepPlot("link_backlog", "topology.links.l2.rate", "", numeric, "", "t", series))
    drawn = {}
    for handle, label in zip(*fig.axes[0].get_legend_handles_labels()):
        line = handle.lines[0] if hasattr(handle, "lines") else handle  # errorbar: its data line
        drawn[label] = (line.get_color(), line.get_marker())
    assert sorted(drawn) == sorted(s.label for s in series)
    assert len(set(drawn.values())) == 25, drawn


ONE_FLOW = """\
[study]
name = "one-flow"
duration = "2s"
repetitions = 2
[topology.bottleneck]
rate = "10Mbit"
delay = "5ms"
[[flows]]
cca = "cubic"
start_jitter = "20ms"
[sweep]
"topology.bottleneck.loss" = ["0%", "1%"]
"flows.0.cca" = ["reno", "bbr"]
"""


def test_one_flow_sweep_by_cca_and_its_models_at_the_median_rtt(tmp_path):
    """--group cca on a study of one flow whose cca is swept: a series per
    CCA, not labelled again with the swept value (no series meets two). Its
    model curves take the median of the repetitions' mean RTTs (of two, their
    mean; it was the larger of the two)."""
    import statistics

    from ccbench.analysis.sweeps import sweep_plot

    st = tmp_path / "one.toml"
    st.write_text(ONE_FLOW)
    assert main(["run", str(st), "--out", str(tmp_path / "r")]) == 0
    with ccbench.open(tmp_path / "r") as r:
        plot = sweep_plot(r.analysis(), "goodput", "loss", "cca")
        m = r.metrics()
    assert sorted(s.label for s in plot.series) == ["bbr", "reno"]
    assert sorted(s.label for s in plot.models) == ["Mathis model · bbr", "Mathis model · reno",
                                                     "Padhye model · bbr", "Padhye model · reno"]
    (pt,) = [p for s in plot.series if s.label == "bbr" for p in s.points if p.x_label == "1%"]
    rtts = m[m.run_id.isin(pt.run_ids) & (m.metric == "rtt")].value.tolist()
    assert len(rtts) == 2 and rtts[0] != rtts[1], rtts
    assert pt.rtt_us == pytest.approx(statistics.median(rtts)), (pt.rtt_us, rtts)
