"""Digests of every ready study's quick-profile results, for the test that the
simulator gives bit-identical results across a change of its core
(tests/test_topology.py::test_quick_profiles_give_the_same_results).

    PYTHONPATH=python python3 tests/digests.py --core /tmp/core_before.so > tests/data/quick_digests.json

writes one entry per run (study file, profile, run id): the sha256 of each
of its result tables in the columns the pre-topology core had — flow
summaries, samples, rpcs, and the queue rows of the links it sampled
(``bottleneck``, ``reverse``). Columns added later (``completion_us``,
``tx_bytes``, ``utilisation``) and rows of links sampled later are left out,
so the digests say "the same results as before" and nothing more.

Which runs of the studies as the pages were made did a core change move?

    PYTHONPATH=python python3 tests/digests.py --core OLD.so --every-profile --skip-profile 10g > old.json
    PYTHONPATH=python python3 tests/digests.py --core NEW.so --every-profile --skip-profile 10g > new.json
    PYTHONPATH=python python3 tests/digests.py --changed old.json new.json

digests every simulator run of every study's default profile and of each
of its profiles that runs on the simulator (a run shared by two profiles
once; mss-sweep's 10 Gbit/s profile takes tens of minutes), and prints the
runs whose digests differ, by study, with their labels (session 49: 1,063
runs; both cores' digests at once took 13 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.machinery
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[1]

FLOW_FIELDS = ("flow_id", "bytes_delivered", "goodput_bps", "sent_segs", "retrans_segs", "rtt_min_us",
               "rtt_mean_us", "rtt_p99_us", "active_start_us", "active_stop_us")
SAMPLE_COLUMNS = ("flow_id", "time_us", "cwnd_bytes", "srtt_us", "delivered_bytes", "retrans_segs",
                  "inflight_bytes", "pacing_rate_bps", "delivery_rate_bps", "cca_state", "bw_est_bps")
RPC_COLUMNS = ("flow_id", "request_bytes", "response_bytes", "start_us", "latency_us")
QUEUE_COLUMNS = ("link", "time_us", "backlog_bytes", "backlog_pkts", "drops", "ecn_marks", "lateness_us")
OLD_LINKS = ("bottleneck", "reverse")


def load_core(path: str | None) -> Any:
    """The simulator core: ``ccbench._core``, or the extension module at ``path``."""
    if path is None:
        from ccbench import _core

        return _core
    loader = importlib.machinery.ExtensionFileLoader("ccbench._core", path)
    spec = importlib.util.spec_from_file_location("ccbench._core", path, loader=loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def table_digests(result: dict) -> dict[str, str]:
    """sha256 per table of one core result (the pre-topology columns only)."""
    flows = [{k: f.get(k) for k in FLOW_FIELDS} for f in sorted(result["flows"], key=lambda f: f["flow_id"])]
    out = {"flows": _sha(flows)}
    for name, cols in (("samples", SAMPLE_COLUMNS), ("rpcs", RPC_COLUMNS)):
        t = result.get(name) or {}
        out[name] = _sha({c: t.get(c, []) for c in cols})
    q = result.get("queue") or {}
    keep = [i for i, link in enumerate(q.get("link", [])) if link in OLD_LINKS]
    out["queue"] = _sha({c: [q[c][i] for i in keep] if c in q else None for c in QUEUE_COLUMNS})
    return out


def quick_runs() -> Iterator[tuple[str, str | None, Any]]:
    """(study file relative to the repository, profile, RunSpec) for every run of
    every ready study in its quick profile (the whole study when it has none)."""
    from ccbench.spec import load_study

    for path in sorted((REPO / "studies").rglob("*.toml")):
        study = load_study(path)
        profile = "quick" if "quick" in study.profiles else None
        if profile is not None:
            study = load_study(path, profile=profile)
        for run in study.runs():
            yield str(path.relative_to(REPO)), profile, run


def every_profile_runs(skip: set[str]) -> Iterator[tuple[str, str | None, Any]]:
    """(study, profile, RunSpec) for every simulator run of every study's
    default profile and of its other simulator profiles but ``quick`` and
    those in ``skip``, each run id once."""
    from ccbench.spec import load_study

    for path in sorted((REPO / "studies").rglob("*.toml")):
        base = load_study(path)
        seen: set[str] = set()
        for profile in [None, *(p for p in base.profiles if p != "quick" and p not in skip)]:
            study = load_study(path, profile=profile)
            if study.backend != "sim":
                continue
            for run in study.runs():
                if run.run_id not in seen:
                    seen.add(run.run_id)
                    yield str(path.relative_to(REPO)), profile, run


def changed(old_path: str, new_path: str) -> int:
    """Print the runs whose digests differ between two outputs of this script."""
    def load(p: str) -> dict[tuple[str, str], dict]:
        try:
            return {(e["study"], e["run_id"]): e for e in json.loads(Path(p).read_text())["runs"]}
        except (OSError, ValueError, KeyError, TypeError) as e:
            sys.exit(f"--changed: {p}: not an output of this script ({type(e).__name__}: {e}); "
                     "allowed: the JSON that --every-profile writes")

    old, new = load(old_path), load(new_path)
    moved = [k for k in new if k in old and old[k]["digests"] != new[k]["digests"]]
    for study in sorted({s for s, _ in new}):
        n = sum(1 for s, _ in new if s == study)
        mine = [k for k in moved if k[0] == study]
        print(f"{study}: {len(mine)} of {n} runs changed")
        for k in mine:
            print(f"  {k[1]} ({new[k]['profile'] or 'default'}) {new[k].get('label', '')}")
    only = sorted(set(old) ^ set(new))
    if only:
        print(f"{len(only)} runs in one file only (another study text or profile set)")
    return 0


def uses_bpf(run: Any) -> bool:
    """A run with a BPF CCA: its object is compiled against this kernel's
    BTF (vmlinux.h), which enters the object's name, so the run id and the
    seed derived from it depend on the kernel."""
    from ccbench import bpf

    return any(bpf.is_bpf(f.get("cca", "")) for f in run.config.get("flows", []))


def kernel_btf() -> str:
    """This kernel's BTF as the BPF object cache names it (16 hex digits)."""
    from ccbench import bpf

    return bpf.vmlinux_header().name.removeprefix("vmlinux-")


def simulate(core: Any, run: Any) -> dict:
    """What the sim backend hands the core (without the linux-only flow keys)."""
    return simulate_config(core, run.config)


def simulate_config(core: Any, config: dict) -> dict:
    from ccbench.backends.sim import core_config

    return json.loads(core.simulate(json.dumps(core_config(config))))


def replay_of(run: Any) -> dict:
    """What a BPF run drew from its kernel-dependent seed: the seed and the
    flows' start times, with the run's label to find it by on another kernel."""
    return {"label": run.label(), "seed": run.config["seed"],
            "start_ns": [f["start_ns"] for f in run.config["flows"]]}


def replayed(config: dict, replay: dict) -> dict:
    """`config` (this kernel's run) with the seed and start times of `replay`
    (the same run as another kernel's objects named it)."""
    flows = config["flows"]
    if len(flows) != len(replay["start_ns"]):
        raise ValueError(f"{replay['label']}: {len(flows)} flows here, {len(replay['start_ns'])} recorded")
    return {**config, "seed": replay["seed"],
            "flows": [{**f, "start_ns": t} for f, t in zip(flows, replay["start_ns"])]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--core", help="path of the core extension module (default: ccbench._core)")
    ap.add_argument("--bpf-kernel", action="store_true",
                    help="only the studies with BPF CCAs, as the fixture's `bpf_kernels` entry for this kernel")
    ap.add_argument("--every-profile", action="store_true",
                    help="every simulator run of each study's default and simulator profiles, not the quick ones")
    ap.add_argument("--skip-profile", action="append", default=[], metavar="NAME",
                    help="with --every-profile, leave out this profile (repeat for several)")
    ap.add_argument("--changed", nargs=2, metavar=("OLD", "NEW"),
                    help="print the runs whose digests differ between two --every-profile outputs")
    args = ap.parse_args(argv)
    if args.changed:
        return changed(*args.changed)
    core = load_core(args.core)
    entries = []
    runs = list(every_profile_runs(set(args.skip_profile)) if args.every_profile else quick_runs())
    bpf_studies = {s for s, _, run in runs if uses_bpf(run)}
    for study, profile, run in runs:
        if args.bpf_kernel and study not in bpf_studies:
            continue
        entry = {"study": study, "profile": profile, "run_id": run.run_id}
        if args.every_profile:
            entry["label"] = run.label()
        if uses_bpf(run):
            entry["replay"] = replay_of(run)
        entries.append({**entry, "digests": table_digests(simulate(core, run))})
        print(f"{study} {run.run_id}", file=sys.stderr)
    out = {"bpf_kernels": {kernel_btf(): entries}} if args.bpf_kernel else {"runs": entries}
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
