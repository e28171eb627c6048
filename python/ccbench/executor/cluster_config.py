"""What `ccbench run --cluster` should run on: parsed and checked before any run.

The settings come from three places, the first that sets a key wins:

1. the command line: ``--cluster SPEC`` and ``--queue``, ``--cores``,
   ``--memory``, ``--walltime``, ``--jobs`` (batch jobs), ``--retries``;
2. the study's optional ``[cluster]`` table;
3. ``~/.config/ccbench/cluster.toml`` (``$XDG_CONFIG_HOME/ccbench/cluster.toml``;
   ``$CCBENCH_CLUSTER_CONFIG`` names another file), a ``[cluster]`` table or
   the same keys at the top level.

SPEC (or ``kind`` in a table) is one of

    local[:N]            an embedded distributed.LocalCluster of N worker processes
    tcp://HOST:PORT      a running Dask scheduler (in a table also ``address =
                         "tcp://HOST:PORT"``, with ``kind = "tcp"`` or alone)
    slurm | pbs | sge    workers started as batch jobs by dask-jobqueue

Every mistake is a :class:`UsageError` naming where the value came from, what
was given and what is allowed. Batch-job settings (``BATCH_ONLY``) given on
the command line or beside a ``kind`` that is not a batch system are
refused, not ignored. Nothing here imports Dask.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ccbench.errors import UsageError

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

BATCH_KINDS = ("slurm", "pbs", "sge")
KINDS = ("local",) + BATCH_KINDS  # plus tcp:// addresses
DEFAULT_RETRIES = 2
BATCH_ONLY = ("queue", "cores", "memory", "walltime", "jobs", "account", "job_extra", "log_directory")

# key → (what is allowed, checker returning the clean value or raising ValueError)
_WALLTIME = re.compile(r"^(\d+-)?\d{1,3}(:\d{2}){0,2}$")
_MEMORY = re.compile(r"^\d+(\.\d+)?\s*([KMGT]i?B|[kmgt]i?b|[KMGT])$")


def _int_at_least(lo: int) -> Any:
    def check(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise ValueError
        n = int(v)
        if n < lo:
            raise ValueError
        return n

    return check


_pos_int, _nonneg_int = _int_at_least(1), _int_at_least(0)


def max_local_workers() -> int:
    """The most worker processes local:N (and --jobs) starts: 4 per CPU, at least 32. A
    sim run keeps a CPU busy, so more only share the CPUs and cost memory
    (each worker is a Python process); the floor keeps a study's small
    local:N valid on a small machine. Unbounded, a typo (local:99999999999)
    made Dask build its workers until the machine ran out of memory."""
    return max(32, 4 * (os.cpu_count() or 1))


def _local_workers(v: Any) -> int:
    n = _pos_int(v)
    if n > max_local_workers():
        raise ValueError
    return n


def _text(v: Any) -> str:
    if not isinstance(v, str) or not v.strip() or "\n" in v:
        raise ValueError
    return v.strip()


def _walltime(v: Any) -> str:
    s = _text(v)
    if not _WALLTIME.match(s):
        raise ValueError
    return s


def _memory(v: Any) -> str:
    s = _text(v)
    if not _MEMORY.match(s):
        raise ValueError
    return s


def _text_list(v: Any) -> list[str]:
    if not isinstance(v, list):
        raise ValueError
    return [_text(x) for x in v]


_KEYS: dict[str, tuple[str, Any]] = {
    "kind": ("local, local:N, tcp://HOST:PORT, tcp (with address), slurm, pbs or sge", None),  # parse_spec
    "address": ("a scheduler address such as 'tcp://head:8786'", None),  # parse_spec
    "workers": (f"a number of local worker processes from 1 to {max_local_workers()} (4 per CPU, at least 32)",
                _local_workers),
    "queue": ("a queue (Slurm partition) name such as 'batch'", _text),
    "cores": ("a number of cores per batch job >= 1", _pos_int),
    "memory": ("memory per batch job such as '4GB' or '512MiB'", _memory),
    "walltime": ("a wall time such as '01:00:00' or '2-00:00:00'", _walltime),
    "jobs": ("a number of batch jobs >= 1", _pos_int),
    "retries": ("how often a run whose worker died is tried again, >= 0", _nonneg_int),
    "account": ("an account (project) name to charge the batch jobs to", _text),
    "job_extra": ("a list of extra batch directives such as ['--constraint=ib']", _text_list),
    "log_directory": ("a directory for the batch jobs' output files", _text),
}


@dataclass
class ClusterConfig:
    kind: str  # local | tcp | slurm | pbs | sge
    address: Optional[str] = None  # tcp
    workers: Optional[int] = None  # local
    queue: Optional[str] = None
    cores: int = 1
    memory: str = "2GB"
    walltime: str = "01:00:00"
    jobs: int = 1
    retries: int = DEFAULT_RETRIES
    account: Optional[str] = None
    job_extra: list[str] = field(default_factory=list)
    log_directory: Optional[str] = None
    sources: dict[str, str] = field(default_factory=dict)  # key → where it was set

    @property
    def batch(self) -> bool:
        return self.kind in BATCH_KINDS

    @property
    def named(self) -> str:
        """How the user named this cluster, for messages: ``--cluster slurm``,
        or the table that did, ``study.toml [cluster] (slurm)``."""
        spec = {"tcp": self.address, "local": f"local:{self.workers}"}.get(self.kind, self.kind)
        src = self.sources.get("kind", "the command line")
        return f"--cluster {spec}" if src == "the command line" else f"{src} ({spec})"

    def describe(self) -> str:
        if self.kind == "local":
            return f"local cluster of {self.workers} worker processes"
        if self.kind == "tcp":
            return f"Dask scheduler {self.address}"
        q = f" on queue {self.queue}" if self.queue else ""
        return f"{self.kind}: {self.jobs} job(s) of {self.cores} core(s), {self.memory}, {self.walltime}{q}"


def user_config_path() -> Path:
    env = os.environ.get("CCBENCH_CLUSTER_CONFIG")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ccbench" / "cluster.toml"


def parse_spec(spec: str, where: str) -> dict[str, Any]:
    """``local:4`` → {kind: local, workers: 4}; ``tcp://h:1`` → {kind: tcp, address: ...}."""
    s = spec.strip() if isinstance(spec, str) else spec
    allowed = "local, local:N, tcp://HOST:PORT, slurm, pbs or sge"
    if not isinstance(s, str) or not s:
        raise UsageError(f"{where}: unknown cluster kind (got {spec!r}; allowed: {allowed})")
    if s.startswith("tls://"):  # Dask's TLS needs certificates (a Security object) ccbench does not take
        raise UsageError(f"{where}: tls:// schedulers are not supported (got {spec!r}; expected tcp://HOST:PORT)")
    if s.startswith("tcp://"):
        host = s.split("://", 1)[1]
        m = re.match(r"^(\[[0-9A-Fa-f:]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$", host)
        if not m or not (0 < int(m.group(2)) < 65536):
            raise UsageError(f"{where}: not a scheduler address (got {spec!r}; expected tcp://HOST:PORT)")
        return {"kind": "tcp", "address": s}
    if s == "local" or s.startswith("local:"):
        out: dict[str, Any] = {"kind": "local"}
        if ":" in s:
            n = s.split(":", 1)[1]
            if not (n.isascii() and n.isdigit()) or not 1 <= int(n) <= max_local_workers():
                raise UsageError(f"{where}: local:N needs a number of workers from 1 to {max_local_workers()} "
                                 f"(4 per CPU of this machine, at least 32; more only share the CPUs) (got {spec!r})")
            out["workers"] = int(n)
        return out
    if s in BATCH_KINDS:
        return {"kind": s}
    raise UsageError(f"{where}: unknown cluster kind (got {spec!r}; allowed: {allowed})")


def _table(doc: Any, where: str) -> dict[str, Any]:
    """Check a [cluster] table's keys and values; returns the clean values."""
    if not isinstance(doc, dict):
        raise UsageError(f"{where}: must be a table of cluster settings (got {doc!r})")
    out: dict[str, Any] = {}
    workers: Optional[int] = None
    for key, value in doc.items():
        if key not in _KEYS:
            raise UsageError(f"{where}: {key}: unknown cluster setting (allowed: {', '.join(_KEYS)})")
        allowed, check = _KEYS[key]
        if key == "kind":
            if not isinstance(value, str):
                raise UsageError(f"{where}: kind: got {value!r}; allowed: {allowed}")
            if value.strip() == "tcp":  # the scheduler's address in `address`
                out["kind"] = "tcp"
            else:
                out.update(parse_spec(value, f"{where}: kind"))
            continue
        if key == "address":
            if not isinstance(value, str) or not value.strip().startswith("tcp://"):
                raise UsageError(f"{where}: address: got {value!r}; expected {allowed}")
            out["address"] = parse_spec(value, f"{where}: address")["address"]
            continue
        try:
            checked = check(value)
        except (ValueError, TypeError):
            raise UsageError(f"{where}: {key}: got {value!r}; expected {allowed}") from None
        if key == "workers":
            workers = checked  # beside the kind, below: 'local:N' may come after it
        else:
            out[key] = checked
    if "address" in out:
        kind = out.setdefault("kind", "tcp")  # an address alone: that scheduler
        if kind != "tcp":
            raise UsageError(f"{where}: address is for a running scheduler (kind = 'tcp' or no kind), "
                             f"not kind = {kind!r}")
    if workers is not None:
        # like local:N's number it counts only beside kind = 'local' in the same table
        if out.get("kind") != "local":
            beside = f"kind = {out.get('address') or out['kind']!r}" if out.get("kind") else "no kind"
            raise UsageError(f"{where}: workers: only beside kind = 'local' in the same table (got workers = "
                             f"{workers} with {beside})")
        if out.get("workers", workers) != workers:
            raise UsageError(f"{where}: workers: {workers} and kind = 'local:{out['workers']}' disagree "
                             "(give the number once)")
        out["workers"] = workers
    if out.get("kind") not in (None, *BATCH_KINDS):  # checked with or without --cluster
        for k in BATCH_ONLY:
            if k in out:
                raise UsageError(f"{where}: {k}: only for batch clusters (slurm, pbs, sge), not kind = "
                                 f"{out.get('address') or out['kind']!r}")
    return out


def _user_file() -> tuple[dict[str, Any], str]:
    path = user_config_path()
    if not path.is_file():
        return {}, str(path)
    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read the cluster settings ({e})") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: TOML syntax error: {e}") from None
    if "cluster" in doc:
        return _table(doc["cluster"], f"{path} [cluster]"), f"{path} [cluster]"
    return _table(doc, str(path)), str(path)


def resolve(spec: Optional[str], study_table: Any = None, study_file: str = "study",
            cli: Optional[dict[str, Any]] = None) -> ClusterConfig:
    """The cluster to run on: CLI > the study's [cluster] > the user's file.

    ``spec`` is the --cluster value (None or "" = take ``kind`` from the tables).
    """
    layers: list[tuple[str, dict[str, Any]]] = []
    cli_vals: dict[str, Any] = {}
    if spec:
        cli_vals.update(parse_spec(spec, "--cluster"))
    for key, value in (cli or {}).items():
        if value is None:
            continue
        allowed, check = _KEYS[key]
        try:
            cli_vals[key] = check(value)
        except (ValueError, TypeError):
            raise UsageError(f"--{key}: got {value!r}; expected {allowed}") from None
    layers.append(("the command line", cli_vals))
    if study_table is not None:
        layers.append((f"{study_file} [cluster]", _table(study_table, f"{study_file} [cluster]")))
    user, user_path = _user_file()
    layers.append((user_path, user))

    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    # kind and its companions (address, workers) come from the same layer as kind
    for name, vals in layers:
        if "kind" in vals:
            merged.update({k: vals[k] for k in ("kind", "address", "workers") if k in vals})
            sources.update({k: name for k in ("kind", "address", "workers") if k in vals})
            break
    if "kind" not in merged:
        raise UsageError(
            "--cluster: no cluster given (give --cluster local:N, tcp://HOST:PORT, slurm, pbs or sge, "
            f"or kind = ... in the study's [cluster] table or {user_path})"
        )
    for name, vals in layers:
        for k, v in vals.items():
            if k not in merged and k not in ("kind", "address", "workers"):
                merged[k] = v
                sources[k] = name
    cfg = ClusterConfig(kind=merged["kind"], sources=sources)
    for k, v in merged.items():
        if k != "kind":
            setattr(cfg, k, v)
    if cfg.kind == "tcp" and not cfg.address:
        raise UsageError(f"{sources['kind']}: kind = 'tcp' needs the scheduler's address = 'tcp://HOST:PORT'")
    if cfg.kind == "local" and cfg.workers is None:
        cfg.workers = os.cpu_count() or 1
    if not cfg.batch:
        # Given on the command line they would be silently ignored (a table
        # with its own non-batch kind refuses them itself, _table); a default
        # in another table (the user's file) is only unused here.
        for k in BATCH_ONLY:
            if sources.get(k) == "the command line":
                raise UsageError(f"--{k.replace('_', '-')}: only for batch clusters (slurm, pbs, sge), "
                                 f"not {cfg.named}")
    return cfg


def add_arguments(parser: Any) -> None:
    """The --cluster options of `ccbench run`."""
    g = parser.add_argument_group("cluster (needs: pip install 'ccbench[cluster]')")
    g.add_argument("--cluster", nargs="?", const="", metavar="SPEC",
                   help="run on Dask: local:N, tcp://HOST:PORT, slurm, pbs or sge "
                        "(no SPEC: kind from the study's [cluster] or ~/.config/ccbench/cluster.toml)")
    g.add_argument("--queue", help="batch queue (Slurm partition)")
    g.add_argument("--cores", help="cores per batch job (one worker process each)")
    g.add_argument("--memory", help="memory per batch job, e.g. 4GB")
    g.add_argument("--walltime", help="wall time per batch job, e.g. 01:00:00")
    g.add_argument("--retries", help=f"tries after a worker died mid-run (default {DEFAULT_RETRIES})")


def from_args(args: Any, study: Any) -> Optional[ClusterConfig]:
    """The ClusterConfig of `ccbench run`'s arguments, or None without --cluster."""
    doc = getattr(study, "document", None) or {}
    if getattr(args, "cluster", None) is None:
        for opt in ("queue", "cores", "memory", "walltime", "retries"):
            if getattr(args, opt, None) is not None:
                raise UsageError(f"--{opt} needs --cluster")
        if doc.get("cluster") is not None:  # checked on every run: a typo there is not left for the day it is used
            _table(doc["cluster"], f"{getattr(study, 'path', 'study')} [cluster]")
        return None
    cli = {k: getattr(args, k, None) for k in ("queue", "cores", "memory", "walltime", "retries")}
    cfg = resolve(args.cluster, doc.get("cluster"), str(getattr(study, "path", "study")), cli)
    if args.jobs != 1:
        if not cfg.batch:
            raise UsageError(f"--jobs with --cluster counts batch jobs (slurm, pbs, sge); with {cfg.named} "
                             "the cluster's workers run the runs"
                             + (" (local:N sets how many)" if cfg.kind == "local" else ""))
        cfg.jobs = _pos_int(args.jobs) if args.jobs > 0 else cfg.jobs
        cfg.sources["jobs"] = "the command line"
    return cfg
