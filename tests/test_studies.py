"""The ready studies in studies/: every file validates (with each of its
profiles), every one runs on sim in its quick profile through `ccbench run
--quick`, and the quick runs show the effects the studies exist for."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

from ccbench.cli import main

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib
from ccbench.spec import load_study
from ccbench.store import Store

REPO = Path(__file__).resolve().parents[1]
STUDIES = sorted((REPO / "studies").rglob("*.toml"))
EXPERIMENTS = [p for p in STUDIES if p.name != "quickstart.toml"]


def _id(p: Path) -> str:
    return p.stem


def test_the_studies_are_there():
    names = {p.stem for p in STUDIES}
    assert {"quickstart", "loss-sweep", "netdev-streams", "netdev-sizes", "netdev-buffers", "timers",
            "mss-sweep", "fairness"} <= names
    for p in EXPERIMENTS:
        assert (p.parent / "README.md").is_file(), f"{p.parent} has no README.md"


@pytest.mark.parametrize("path", STUDIES, ids=_id)
def test_study_validates_with_every_profile(path):
    study = load_study(path)
    assert study.name == path.stem, "a study file is named after its study"
    assert study.n_runs > 0 and study.profile is None and study.results_name == study.name
    if path in EXPERIMENTS:
        assert "quick" in study.profiles
    for prof in study.profiles:
        # on sim: a linux profile's algorithms need not be in this machine's kernel
        s = load_study(path, profile=prof, backend="sim")
        assert s.profile == prof and s.results_name == f"{study.name}-{prof}"
        assert s.n_runs > 0
    if "quick" in study.profiles:
        quick = load_study(path, profile="quick")
        assert quick.n_runs <= study.n_runs
        assert max(r.config["duration_ns"] for r in quick.runs()) <= max(r.config["duration_ns"] for r in study.runs())


# -- linux profiles -------------------------------------------------------------------------

# Every published experiment whose paths fit the linux backend has a `linux` profile.
LINUX_STUDIES = {"loss-sweep", "netdev-streams", "netdev-sizes", "netdev-buffers", "fairness", "fairness-cebinae",
                 "mss-sweep", "parking-lot", "noted"}
# The algorithms a linux profile may use: what the kernel these studies were
# written on offers (tcp_available_congestion_control: reno, cubic, bbr).
LINUX_CCAS = {"reno", "cubic", "bbr"}
# The fastest queueing link a linux profile may ask of the userspace emulator
# (a general network's host links are pipes: no queue, any rate).
LINUX_MAX_RATE_BPS = 1_000_000_000


def _linux_profiles() -> list[tuple[Path, str]]:
    return [(p, prof) for p in STUDIES for prof in load_study(p, backend="sim").profiles
            if prof == "linux" or prof.startswith("linux-")]


def test_every_linux_capable_study_has_a_linux_profile():
    have = {p.stem for p, prof in _linux_profiles() if prof == "linux"}
    assert LINUX_STUDIES <= have, LINUX_STUDIES - have


@pytest.mark.parametrize("path,prof", _linux_profiles(), ids=lambda x: x.stem if isinstance(x, Path) else x)
def test_linux_profile_is_valid_for_the_linux_backend(path, prof):
    """Every linux profile selects the linux backend, asks for nothing the
    backend cannot do, and passes the backend's own checks for every run
    (without running it: that needs root and real time)."""
    from ccbench.backends.linux import backend as linux, netns
    from ccbench.spec import kernel

    table = tomllib.loads(path.read_text())["profiles"][prof]
    assert table.get("study.backend") == "linux", f"{prof} does not set study.backend = 'linux'"
    s = load_study(path, profile=prof, backend="sim")  # resolves wherever the test runs
    for run in s.runs():
        cfg = run.config
        where = f"{path.stem} --profile {prof}, run {run.params}"
        # (bpf:OBJECT is registered with the kernel by the run itself: docs/bpf.md)
        assert {f["cca"] for f in cfg["flows"] if not f["cca"].startswith("bpf:")} <= LINUX_CCAS, where
        # What the linux backend refuses (a study error there; checked here too
        # because that load below needs a kernel with every LINUX_CCAS).
        assert cfg["tcp"]["hz"] is None, f"{where}: tcp.hz is simulator-only"
        mtu = cfg["tcp"]["mss"] + cfg["tcp"]["header_bytes"]
        # the backend's pure checks: topology plan (<= 63 senders, 2-64 hosts), host sysctls
        if cfg.get("network") is None:
            assert cfg["bottleneck"]["rate_bps"] <= LINUX_MAX_RATE_BPS, where
            netns.plan("0123abcd", len(cfg["senders"]), mtu)
        else:
            queues = [link for link in cfg["network"]["links"] if "qdisc" in link]
            assert queues and all(link["rate_bps"] <= LINUX_MAX_RATE_BPS for link in queues), where
            netns.plan_network("0123abcd", [n["name"] for n in cfg["network"]["nodes"] if n["kind"] == "host"], mtu)
        netns.host_sysctls(cfg["tcp"])
    have = set(kernel.available() or ())
    if not LINUX_CCAS <= have:
        pytest.skip(f"this kernel offers {sorted(have)}, not all of {sorted(LINUX_CCAS)}")
    on_linux = load_study(path, profile=prof)  # the study's own backend: linux, its CCAs checked against the kernel
    assert on_linux.backend == "linux" and on_linux.n_runs == s.n_runs
    for run in on_linux.runs():
        linux._validate(run.config)


_QUICK: dict[Path, Path] = {}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """Run a study's quick profile once (through the CLI) and return its results directory."""

    def run(path: Path) -> Path:
        if path not in _QUICK:
            out = tmp_path_factory.mktemp(path.stem)
            assert main(["run", str(path), "--quick", "--out", str(out), "--jobs", "1"]) == 0
            _QUICK[path] = out
        return _QUICK[path]

    return run


def _table(out: Path) -> list[tuple[dict, list[dict]]]:
    """(params, flows) of every run in a results directory."""
    with Store.open_existing(out) as store:
        runs = store.runs()
        flows = store.flows([r.run_id for r in runs])
    by_run: dict[str, list[dict]] = {}
    for f in flows:
        by_run.setdefault(f["run_id"], []).append(f)
    for r in runs:
        assert r.status == "ok", (r.params, r.error)
    return [(r.params, by_run[r.run_id]) for r in runs]


TESTBED_NOISE = [REPO / "studies/parking-lot/parking-lot.toml", REPO / "bench/parking-lot-fifo.toml",
                 REPO / "bench/parking-lot-bbr-cebinae.toml"]


@pytest.mark.parametrize("path", TESTBED_NOISE, ids=_id)
def test_testbed_profile_stalls_each_senders_ack_path_and_jitters_the_router_links(path):
    # The profile names the host links by index (they have no names): a link
    # added or moved in the file must not move the stalls off the ACK paths.
    for r in load_study(path, profile="testbed").runs():
        links, flows = r.config["network"]["links"], r.config["flows"]
        stalled = {ln["name"] for ln in links if ln.get("stall_ns")}
        assert stalled == {f["return_path"][-1] for f in flows}, (path, stalled)
        assert all(ln["to"] == f["src"] for f in flows for ln in links if ln["name"] == f["return_path"][-1])
        jittered = {ln["name"] for ln in links if ln.get("jitter_ns")}
        assert jittered == {f"l{i}{d}" for i in (1, 2, 3) for d in ("", "/back")}, (path, jittered)


DUMBBELL_TESTBED_NOISE = [REPO / "studies/many-flows/many-flows.toml", REPO / "studies/fairness/fairness.toml",
                          REPO / "bench/fairness-rtt-mix.toml"]


@pytest.mark.parametrize("path", DUMBBELL_TESTBED_NOISE, ids=_id)
def test_dumbbell_testbed_profile_mirrors_the_bottleneck_on_its_noisy_ack_path(path):
    # The profile gives the return path its noise; the rest of it must stay
    # the bottleneck mirrored (in every case of the sweep), or the noise
    # would come with another path.
    for r in load_study(path, profile="testbed").runs():
        bn, rev = r.config["bottleneck"], r.config["reverse"]
        for k in ("rate_bps", "delay_ns", "buffer_bytes", "buffer_pkts", "jitter_ns"):
            assert rev[k] == bn[k], k
        assert bn["jitter_ns"] == 250_000 and rev["loss"] == 0.0
        assert (rev["stall_every_ns"], rev["stall_ns"]) == (169_000_000, 2_470_000)
        assert "stall_ns" not in bn


@pytest.mark.parametrize("path", EXPERIMENTS, ids=_id)
def test_quick_profile_runs_on_sim(path, quick):
    out = quick(path)
    study = load_study(path, profile="quick")
    rows = _table(out)
    assert len(rows) == study.n_runs
    for params, flows in rows:
        assert sum(f["goodput_bps"] or 0 for f in flows) > 0, params


def _goodput(rows, **match) -> float:
    vals = [sum(f["goodput_bps"] for f in flows) for params, flows in rows
            if all(params.get(k) == v for k, v in match.items())]
    assert vals, match
    return statistics.median(vals)


def test_loss_sweep_cubic_collapses_at_1pct_and_bbr_does_not(quick):
    rows = _table(quick(REPO / "studies" / "loss-sweep" / "loss-sweep.toml"))
    for topo in ("symmetric", "asymmetric"):
        at = {(cca, loss): _goodput(rows, **{"flows.0.cca": cca, "topology.bottleneck.loss": loss,
                                            "cases.topology": topo})
              for cca in ("cubic", "bbr") for loss in ("0%", "1%")}
        assert at["cubic", "1%"] < 0.5 * at["cubic", "0%"], (topo, at)
        assert at["bbr", "1%"] > 0.8 * at["bbr", "0%"], (topo, at)


def _jfi(xs) -> float:
    xs = list(xs)
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def test_fairness_fq_beats_fifo_for_the_cubic_rtt_mix(quick):
    rows = _table(quick(REPO / "studies" / "fairness" / "fairness.toml"))
    jfi = {params["topology.bottleneck.qdisc"]: _jfi(f["goodput_bps"] for f in flows)
           for params, flows in rows if params["cases.mix"] == "cubic-rtt"}
    assert jfi["fq"] > jfi["fifo"], jfi
    assert len([f for params, flows in rows if params["cases.mix"] == "cubic-rtt" for f in flows]) == 3 * 10
