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
    from ccbench.backends.sim import core_config

    return json.loads(core.simulate(json.dumps(core_config(run.config))))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--core", help="path of the core extension module (default: ccbench._core)")
    ap.add_argument("--bpf-kernel", action="store_true",
                    help="only the studies with BPF CCAs, as the fixture's `bpf_kernels` entry for this kernel")
    args = ap.parse_args(argv)
    core = load_core(args.core)
    entries = []
    runs = list(quick_runs())
    bpf_studies = {s for s, _, run in runs if uses_bpf(run)}
    for study, profile, run in runs:
        if args.bpf_kernel and study not in bpf_studies:
            continue
        entries.append({"study": study, "profile": profile, "run_id": run.run_id,
                        "digests": table_digests(simulate(core, run))})
        print(f"{study} {run.run_id}", file=sys.stderr)
    out = {"bpf_kernels": {kernel_btf(): entries}} if args.bpf_kernel else {"runs": entries}
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
