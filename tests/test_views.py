"""Every view of the analysis pipeline gives the same numbers for the same
results: the summary table (`ccbench run` / `summary`), `ccbench show
RESULTS`, the HTML report, `ccbench validate` and the Python API.

The results are the sim half of validate's quick grid (2 scenarios × 2
repetitions, 3 s), which every view can read: validate compares it with
nothing on the linux side, the others show it as a study.
"""

from __future__ import annotations

import json
import re

import pytest

import ccbench
from ccbench import validate
from ccbench.analysis import analyze_store, summary_rows
from ccbench.analysis.metrics import METRICS
from ccbench.backends.sim import SimBackend
from ccbench.cli import main
from ccbench.executor import execute


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    p = validate.plan("quick", duration="3s", reps=2)
    out = tmp_path_factory.mktemp("views") / "v"
    execute(p.studies["sim"], p.runs("sim"), SimBackend(), out)
    return p, out


def _show(out, capsys) -> dict:
    assert main(["show", str(out), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    return {c["config_id"]: c["stats"] for c in doc["configs"]}


def _report(out, tmp_path, capsys) -> dict:
    page = tmp_path / "r.html"
    assert main(["report", str(out), "--out", str(page)]) == 0
    capsys.readouterr()
    text = page.read_text()
    data = re.search(r'<script type="application/json" id="ccbench-data">(.*?)</script>', text, re.S).group(1)
    doc = json.loads(data.replace("<\\/", "</"))
    return {c["config_id"]: c["stats"] for c in doc["configs"]}


def test_every_view_gives_the_same_numbers(grid, tmp_path, capsys):
    p, out = grid
    show = _show(out, capsys)
    report = _report(out, tmp_path, capsys)
    with ccbench.open(out) as r:
        by = r.by_config()
    api = {(row.config_id, row.key): row for row in by.itertuples()}
    assert set(show) == set(report) == {c for c, _ in api} and len(show) == 2

    # show, report and the API: every statistic of every metric
    n = 0
    for cid, stats in show.items():
        assert set(stats) == set(report[cid]) == {k for c, k in api if c == cid}
        for key, s in stats.items():
            for f in ("n", "median", "mean", "ci_low", "ci_high", "min", "max"):
                a = getattr(api[(cid, key)], f)
                assert s[f] == report[cid][key][f] and (s[f] is None and a != a or s[f] == a), (cid, key, f)
                n += 1
    assert n > 2 * 20 * 7

    # the summary table (run / summary): its numbers are the same statistics
    rows = summary_rows(analyze_store(out, series=False))
    assert len(rows) == 2
    for row in rows:
        stats = show[row.config_id]
        (cls,) = row.classes
        g = cls.group
        assert row.jfi == stats["jfi"]["median"]
        assert cls.goodput_bps == stats[f"goodput_mean_bps[{g}]"]["median"]
        assert (cls.goodput_min_bps, cls.goodput_max_bps) == (stats[f"goodput_mean_bps[{g}]"]["min"],
                                                              stats[f"goodput_mean_bps[{g}]"]["max"])
        assert cls.retrans_pct == stats[f"retrans_pct[{g}]"]["median"]
        assert cls.rtt_mean_us == stats[f"rtt_mean_us[{g}]"]["median"]
        assert cls.rtt_p99_us == stats[f"rtt_p99_us[{g}]"]["median"]
        assert row.reps == stats["jfi"]["n"] == 2
    # ... and the table `ccbench summary` prints shows them
    assert main(["summary", str(out)]) == 0
    printed = capsys.readouterr().out
    for row in rows:
        assert f"{row.classes[0].goodput_bps / 1e6:.1f}" in printed and f"{row.jfi:.3f}" in printed

    # validate: each of its metrics on the sim side is the pipeline's statistic of its source metric
    v = validate.analyse(p, out)
    assert len(v.scenarios) == 2
    for s in v.scenarios:
        stats = show[s.config_id]
        (g,) = {k.split("[")[1][:-1] for k in stats if "[" in k}
        for name, row in s.rows.items():
            key = METRICS[validate.METRIC[name].source].key(g)
            for f in ("n", "median", "min", "max"):
                assert getattr(row.sim, f) == stats[key][f], (s.label, name, f)
            assert row.linux.n == 0  # nothing ran on linux here
        assert 80e6 < s.rows["goodput_steady"].sim.median < 100e6 and s.rows["rtt_mean_steady"].sim.median > 20_000
    # and its JSON output carries the same numbers
    paths = validate.write_outputs(v)
    doc = json.loads(paths["json"].read_text())
    for sc in doc["scenarios"]:
        stats = show[sc["config_id"]]
        (g,) = {k.split("[")[1][:-1] for k in stats if "[" in k}
        for name, m in sc["metrics"].items():
            assert m["sim"]["median"] == stats[METRICS[validate.METRIC[name].source].key(g)]["median"]
