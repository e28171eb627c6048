"""The ccbench command line.

    ccbench run STUDY [--backend sim|linux] [--out DIR] [--jobs N] [--profile NAME | --quick]
                      [--cluster local:N|tcp://HOST:PORT|slurm|pbs|sge [--queue Q --cores N ...]]
    ccbench ls [RESULTS]
    ccbench show RUN [--results DIR] [--format table|csv|json]
    ccbench show RESULTS [--format table|csv|json]   (statistics per configuration, flagged runs)
    ccbench report RESULTS [--out report.html]
    ccbench plot RESULTS --metric goodput --x loss [--group cca] [--format png|svg|pdf]
    ccbench compare A B [--format table|csv|json]
    ccbench summary RESULTS
    ccbench check RESULTS [--format table|json]     (the study's [[expect]] on its results)
    ccbench export RESULTS --format parquet|csv [--out DIR]
    ccbench doctor [--cleanup]
    ccbench validate [--grid quick|medium|full | --quick] [--reps N] [--duration T] [--out DIR]

Exit status: 0 success, 1 some runs failed, 2 a usage or study error (one
line on stderr, no traceback; also a malformed expectation), 3 an
expectation failed (``run``, ``check``), 4 `doctor` found what killed runs
left behind, 130 interrupted by Ctrl-C (143 by SIGTERM, 129 by SIGHUP: they
stop a study like Ctrl-C).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ccbench import __version__, backends, cli_analysis, console
from ccbench.executor import signals
from ccbench.errors import (
    EXIT_EXPECTATION, EXIT_FAILED_RUNS, EXIT_INTERRUPTED, EXIT_LEFTOVERS, EXIT_OK, EXIT_USAGE, StudyError,
    UsageError,
)

if TYPE_CHECKING:  # numpy and the analysis load only when a command needs them, not before a study's first run
    from ccbench.analysis import Analysis


class _Parser(argparse.ArgumentParser):
    """argparse, but a mistake is a UsageError (one line, exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


# -- summary ----------------------------------------------------------------


def summary_tables(a: Analysis) -> list[Table]:
    """One rich table per study of an analysis (the rows: analysis.summary_rows).

    Kept narrow enough for an 80-column terminal in the common case: units
    go in the headers, swept parameters are named by their shortest unique
    suffix (the full paths are in the caption).
    """
    from rich import box

    from ccbench.analysis import summary_rows

    rows = summary_rows(a)
    tables = []
    for study in dict.fromkeys(r.study for r in rows):
        srows = [r for r in rows if r.study == study]
        keys: list[str] = list(dict.fromkeys(k for r in srows for k in r.params))
        names = console.short_names(keys)
        several_backends = len({r.backend for r in srows}) > 1
        div, unit = console.scale("bps", [c.goodput_max_bps for r in srows for c in r.classes])
        renamed = [f"{names[k]} = {k}" for k in keys if names[k] != k]
        if any(r.identical for r in srows):
            from ccbench.analysis import IDENTICAL_NOTE

            renamed.append("same = " + IDENTICAL_NOTE)
        t = Table(
            title=f"{escape(study)}: median over repetitions",
            title_justify="left",
            caption=escape("; ".join(renamed)) if renamed else None,
            caption_justify="left",
            box=box.SIMPLE_HEAD,
            padding=0,
            show_edge=False,
        )
        t.add_column("config", no_wrap=True)
        if several_backends:
            t.add_column("backend")
        for k in keys:
            t.add_column(escape(names[k]))
        t.add_column("class")
        t.add_column("n", justify="right")
        t.add_column(f"goodput/flow\n{unit}", justify="right", no_wrap=True)
        t.add_column(f"min–max\n{unit}", justify="right", no_wrap=True)
        t.add_column("JFI", justify="right", no_wrap=True)
        t.add_column("retx\n%", justify="right", no_wrap=True)
        t.add_column("RTT\nms", justify="right", no_wrap=True)
        t.add_column("p99\nms", justify="right", no_wrap=True)
        t.add_column("reps", justify="right")

        def g(x: float | None) -> str:
            return console.NONE if x is None else console.num3(x / div)

        def ms(x: float | None) -> str:
            return console.NONE if x is None else f"{x / 1000:.1f}"

        for r in srows:
            reps = str(r.reps)
            notes = []
            if r.degenerate:
                notes.append(f"{r.degenerate} degenerate")
            if r.suspect > r.degenerate:
                notes.append(f"{r.suspect - r.degenerate} suspect")
            if r.failed:
                notes.append(f"{r.failed} failed")
            if r.identical:
                notes.append("same")  # short: the table keeps to 80 columns; the caption says what it means
            if notes:
                reps += f" ({', '.join(notes)})"
            classes = r.classes or [None]
            for i, c in enumerate(classes):
                first = i == 0
                t.add_row(
                    r.config_id[:8] if first else "",
                    *([str(r.backend) if first else ""] if several_backends else []),
                    *[escape(str(r.params.get(k, console.NONE))) if first else "" for k in keys],
                    escape(c.group) if c else console.NONE,
                    str(c.flows) if c else "",
                    g(c.goodput_bps) if c else "",
                    f"{g(c.goodput_min_bps)}–{g(c.goodput_max_bps)}" if c and c.goodput_min_bps is not None else "",
                    console.number(r.jfi) if first else "",
                    console.number(c.retrans_pct, "{:.2f}") if c else "",
                    ms(c.rtt_mean_us) if c else "",
                    ms(c.rtt_p99_us) if c else "",
                    reps if first else "",
                    end_section=i == len(classes) - 1,
                )
        tables.append(t)
    return tables


# -- commands ---------------------------------------------------------------


class _DropWhenClosed:
    """A stream of `run`. When its reader goes away (`ccbench run ... | head -1`,
    a pager quit) the study goes on and the rest of that output is dropped,
    with a note on stderr for stdout: hours of runs should not die of a closed
    pipe (Ctrl-C stops a study; the store has every run either way)."""

    def __init__(self, file: Any, note: str | None = None):
        self._file, self._note, self.closed_pipe = file, note, False

    def write(self, text: str) -> int:
        if not self.closed_pipe:
            try:
                return self._file.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self.closed_pipe:
            try:
                self._file.flush()
            except BrokenPipeError:
                self._drop()

    def _drop(self) -> None:
        self.closed_pipe = True
        try:  # what is still buffered, and the interpreter's last flush, go nowhere instead of failing
            os.dup2(os.open(os.devnull, os.O_WRONLY), self._file.fileno())
        except (OSError, ValueError):
            pass
        if self._note:
            try:
                print(f"note: {self._note}", file=sys.stderr, flush=True)
            except OSError:  # stderr went with it (2>&1)
                pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)


def cmd_run(args: argparse.Namespace) -> int:
    from ccbench.executor import execute, worker_count
    from ccbench.executor.progress import make_progress
    from ccbench.executor.retry import pause_before_retry, retriable_suspect, retry_pause_s, set_aside_suspect
    from ccbench.spec import load_study
    from ccbench.store import default_results_dir

    # Everything that can be wrong is checked before the results directory exists.
    profile = "quick" if args.quick else args.profile
    if args.retry_suspect < 0:
        raise UsageError(f"--retry-suspect: got {args.retry_suspect}; allowed: a number >= 0")
    pause_s = retry_pause_s(args.retry_pause)
    if args.quick and args.profile not in (None, "quick"):
        raise UsageError(f"--quick is --profile quick; it cannot be combined with --profile {args.profile}")
    if args.out is not None and not args.out.strip():
        raise UsageError("--out: empty path; give a results directory, or leave --out out for results/<study name>/")
    if args.inventory is not None and not Path(args.inventory).is_file():
        # checked whatever the backend: a misspelt name is a mistake even where no inventory is read
        inv = Path(args.inventory)
        what = "is a directory" if inv.is_dir() else "not a regular file" if inv.exists() else "no such file"
        raise UsageError(f"--inventory {args.inventory}: {what}; give the hosts inventory file (.toml)")
    from ccbench.spec.cost import DEFAULT_LIMITS

    study = load_study(args.study, backend=args.backend, profile=profile,
                       limits=None if args.allow_large else DEFAULT_LIMITS)
    expects, plan = cli_analysis.study_expectations(study)
    runs = study.runs()
    if args.inventory is not None and study.backend != "hosts":
        # an inventory means the lab: results of another backend would come back without a word
        raise UsageError(f"--inventory is for the hosts backend (--backend hosts); this study runs on "
                         f"'{study.backend}'")
    if args.cluster is not None and study.backend == "hosts":
        # one inventory is one set of machines: two runs at once would set up on, and measure, each other
        raise UsageError("--cluster: hosts runs go one at a time on the inventory's machines; run without "
                         "--cluster (the controller needs little: a laptop will do)")
    backend = backends.get(study.backend)
    backend.check()
    if hasattr(backend, "preflight"):  # e.g. the kernel's verdict on BPF CCAs (linux)
        try:
            backend.preflight(runs)
        except UsageError as e:
            raise UsageError(f"{args.study}: {e.message}", e.detail) from None
    if hasattr(backend, "prepare"):  # hosts: the inventory and every host's pre-flight, before any run
        backend = backend.prepare(study, getattr(args, "inventory", None))
    from ccbench.executor.cluster_config import from_args as cluster_from_args

    cluster = cluster_from_args(args, study)
    jobs = worker_count(args.jobs) if cluster is None else 1
    out = Path(args.out) if args.out is not None else default_results_dir(study.results_name)

    out_c, err_c = console.stdout(), console.stderr()
    out_c.file = _DropWhenClosed(out_c.file, "standard output was closed; the study goes on without printing "
                                              "its progress (Ctrl-C stops it)")
    err_c.file = _DropWhenClosed(err_c.file)
    if cluster is None and study.backend in ("linux", "hosts") and jobs > 1:
        # Each linux run is real time and takes a CPU for its emulator (and the
        # rest for its hosts): two at once would disturb each other.
        err_c.print(f"note: --jobs {args.jobs} ignored: {study.backend} runs are real time and run one at a time",
                    soft_wrap=True)
        jobs = 1

    def execute_unfinished():
        if cluster is not None:
            from ccbench.executor.cluster import execute_on_cluster

            return execute_on_cluster(study, runs, backend, out, cluster, progress=make_progress(out_c),
                                      status=lambda s: err_c.print(s, soft_wrap=True, highlight=False),
                                      new_version=args.new_version)
        return execute(study, runs, backend, out, jobs=jobs, progress=make_progress(out_c),
                       new_version=args.new_version)

    summary = execute_unfinished()
    for attempt in range(1, args.retry_suspect + 1):
        if summary.interrupted:
            break
        # Suspect runs of this invocation or an earlier one: the testbed, not the network, may have shaped them.
        again = set_aside_suspect(out, [r.run_id for r in runs], "ccbench run --retry-suspect")
        if not again:
            break
        err_c.print(f"{len(again)} runs are suspect; running them again (retry {attempt} of {args.retry_suspect})",
                    soft_wrap=True)
        pause_before_retry(pause_s, attempt, lambda s: err_c.print(s, soft_wrap=True))
        summary = execute_unfinished()
    left_on_hosts = backend.finish() if hasattr(backend, "finish") else []  # hosts: cleanups that failed
    if left_on_hosts:
        inv = f" --inventory {shlex.quote(str(args.inventory))}" if getattr(args, "inventory", None) else ""
        n = len(left_on_hosts)
        err_c.print(f"could not clean up {n} run director{'ies' if n != 1 else 'y'} on unreachable hosts; run "
                    f"`ccbench doctor --cleanup{inv}` once they are back:", soft_wrap=True, highlight=False,
                    markup=False)
        for line in left_on_hosts:
            err_c.print(f"  {line}", soft_wrap=True, highlight=False, markup=False)
    if summary.interrupted:
        resume = ["ccbench", "run", str(args.study), "--out", str(out)]
        if args.backend:
            resume += ["--backend", args.backend]
        if getattr(args, "inventory", None):
            resume += ["--inventory", str(args.inventory)]
        if profile:
            resume += ["--profile", profile]
        if args.jobs != 1:
            resume += ["--jobs", str(args.jobs)]
        if args.allow_large:
            resume += ["--allow-large"]
        if args.new_version:
            resume += ["--new-version"]
        if args.retry_suspect:
            resume += ["--retry-suspect", str(args.retry_suspect)]
            if args.retry_pause is not None:
                resume += ["--retry-pause", args.retry_pause]
        if args.cluster is not None:
            resume += ["--cluster"] + ([args.cluster] if args.cluster else [])
            for opt in ("queue", "cores", "memory", "walltime", "retries"):  # what shaped the jobs and retries
                if getattr(args, opt, None) is not None:
                    resume += [f"--{opt}", str(getattr(args, opt))]
        done = summary.skipped + summary.ok + summary.suspect
        err_c.print(
            f"interrupted: {done} of {summary.total} runs are finished and saved in {out}; "
            f"resume with: {shlex.join(resume)}",  # quoted: a path may hold spaces or $(...)
            soft_wrap=True,
        )
        return 128 + summary.signal if summary.signal else EXIT_INTERRUPTED
    from ccbench.analysis.study import analyze_store  # numpy: after the runs, not before the first

    a = analyze_store(out, run_ids=[r.run_id for r in runs], series=bool(expects))
    for t in summary_tables(a):
        out_c.print(t)
    out_c.print(f"results: {out}", soft_wrap=True)
    # the runs are stored under summary.study: 'NAME v2' for a --new-version
    failed_expectations = (cli_analysis.print_expectations(expects, a, summary.study or study.name, str(args.study),
                                                           plan) if expects else 0)
    if summary.failed:
        err_c.print(f"{summary.failed} of {summary.total} runs failed (see `ccbench ls {out}`); "
                    + _failed_advice(summary.failed, summary.failed_repeating), soft_wrap=True)
    suspect = retriable_suspect(out, [r.run_id for r in runs])
    if suspect:
        err_c.print(f"{len(suspect)} of {len(runs)} runs are suspect (see `ccbench ls {out}`); "
                    "`--retry-suspect N` runs them again", soft_wrap=True)
    if failed_expectations:
        return EXIT_EXPECTATION
    return EXIT_FAILED_RUNS if summary.failed else EXIT_OK


def _failed_advice(failed: int, repeating: int) -> str:
    """What running the study again does for its failed runs: a fault the
    simulator met (deterministic) comes back the same, anything else may not."""
    if not repeating:
        return "running the study again retries them"
    if repeating == failed:
        return ("the simulator is deterministic, so they fail the same way when run again: "
                "change the study or its CCA first")
    return (f"running the study again retries them; {repeating} of them fail the same way again "
            "(the simulator is deterministic)")


def _results_dirs(parent: Path) -> list[Path]:
    from ccbench.store import DB_FILENAME

    return sorted(p.parent for p in parent.glob(f"*/{DB_FILENAME}"))


def cmd_ls(args: argparse.Namespace) -> int:
    from ccbench.store import DB_FILENAME, Store

    target = Path(args.results) if args.results else Path("results")
    single = target.is_file() or (target / DB_FILENAME).is_file()
    c = console.stdout()
    if not single:
        dirs = _results_dirs(target) if target.is_dir() else []
        if not dirs:
            if args.results:
                raise UsageError(f"{target}: not a results directory (no {DB_FILENAME} in it or its subdirectories)")
            raise UsageError("no results in ./results; give a results directory: ccbench ls RESULTS")
        t = Table(title=f"results in {target}", title_justify="left")
        for col in ("results", "studies", "runs", "ok", "suspect", "failed", "last run"):
            t.add_column(col, justify="left" if col in ("results", "studies", "last run") else "right")
        for d in dirs:
            with Store.snapshot(d) as s:
                st = s.studies()
            last = max((x["last_run_at"] for x in st if x["last_run_at"]), default=None)
            t.add_row(
                console.escape_text(str(d)),
                console.escape_text(", ".join(x["study"] for x in st)),
                *(str(sum(x[k] for x in st)) for k in ("runs", "ok", "suspect", "failed")),
                last.isoformat(sep=" ", timespec="seconds") if last else "–",
            )
        c.print(t)
        return EXIT_OK

    with Store.snapshot(target) as store:
        studies = store.studies()
        runs = store.runs()
    if not studies:
        c.print(f"{target}: no studies yet")
        return EXIT_OK
    for s in studies:
        title = f"{s['study']}: {s['runs']} runs ({s['ok']} ok, {s['suspect']} suspect, {s['failed']} failed)"
        t = Table(title=console.escape_text(title), title_justify="left",
                  caption=console.escape_text(f"study file: {s['path']}") if s["path"] else None, caption_justify="left")
        t.add_column("run id")
        t.add_column("params")
        t.add_column("rep", justify="right")
        t.add_column("status")
        t.add_column("wall time", justify="right")
        t.add_column("finished (UTC)")
        t.add_column("error")
        colour = {"ok": "green", "suspect": "yellow", "failed": "red"}
        for r in (r for r in runs if r.study == s["study"]):
            t.add_row(
                r.run_id,
                console.escape_text(console.params(r.params)),
                "–" if r.repetition is None else str(r.repetition),
                f"[{colour.get(r.status, 'white')}]{r.status}[/]",
                "–" if r.wall_time_s is None else f"{r.wall_time_s:.2f} s",
                r.finished_at.isoformat(sep=" ", timespec="seconds") if r.finished_at else "–",
                console.escape_text(console.first_line(r.error)),
            )
        c.print(t)
    return EXIT_OK


FLOW_COLUMNS = (
    "flow_id", "group_name", "cca", "kind", "sender", "start_us", "stop_us", "bytes_delivered",
    "goodput_bps", "sent_segs", "retrans_segs", "rtt_min_us", "rtt_mean_us", "rtt_p99_us",
)


def _find_run(prefix: str, results: str | None):
    """(store, run_id) for a run-id prefix, searching ./results/* if no DIR is given."""
    from ccbench.store import Store

    if results:
        store = Store.snapshot(results)
        try:
            return store, store.resolve_run(prefix)
        except BaseException:
            store.close()
            raise
    candidates = _results_dirs(Path("results"))
    if not candidates:
        raise UsageError("no results in ./results; say where the run is: --results DIR")
    matches = []
    for d in candidates:
        store = Store.snapshot(d)
        n = store.con.execute("SELECT run_id FROM runs WHERE starts_with(run_id, ?) LIMIT 2", [prefix]).fetchall()
        matches += [(d, r[0]) for r in n]
        store.close()
    if not matches:
        raise UsageError(f"no run '{prefix}' in ./results/*; say where the run is: --results DIR")
    if len(matches) > 1:
        raise UsageError(
            f"run id prefix '{prefix}' is ambiguous ("
            + ", ".join(f"{rid} in {d}" for d, rid in matches[:4]) + "); give more of it or --results DIR"
        )
    d, run_id = matches[0]
    return Store.snapshot(d), run_id


def cmd_show(args: argparse.Namespace) -> int:
    if Path(args.run).exists():  # a path is results, also one that holds none (say so, not "no run")
        if args.results:
            raise UsageError(f"show {args.run}: a results directory, and --results {args.results} too; --results "
                             f"says where a run id is: give a run id with --results, or a results directory alone")
        return cli_analysis.show_results(args)
    store, run_id = _find_run(args.run, args.results)
    with store:
        run = store.runs(run_ids=[run_id], with_config=True)[0]
        flows = store.flows([run_id])
        counts = {t: store.count(t, run_id) for t in ("samples", "queue", "rpcs")}
        results_dir = store.source_dir
    if args.format == "json":
        json.dump({"run": run.as_dict(), "flows": flows, "rows": counts}, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return EXIT_OK
    if args.format == "csv":
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(("run_id",) + FLOW_COLUMNS)
        for f in flows:
            w.writerow([run_id] + ["" if f[k] is None else f[k] for k in FLOW_COLUMNS])
        return EXIT_OK
    c = console.stdout()
    meta = Table.grid(padding=(0, 2))
    meta.add_column(style="bold")
    meta.add_column()
    items = [
        ("run", run.run_id),
        ("study", run.study),
        ("results", str(results_dir)),
        ("config", run.config_id),
        *((f"  {k}", str(v)) for k, v in run.params.items()),
        ("repetition", str(run.repetition)),
        ("seed", str(run.seed)),
        ("backend", run.backend),
        ("status", run.status),
        ("wall time", "–" if run.wall_time_s is None else f"{run.wall_time_s:.2f} s"),
        ("finished", run.finished_at.isoformat(sep=" ", timespec="seconds") + " UTC" if run.finished_at else "–"),
        ("ccbench", run.tool_version or "–"),
        ("rows", ", ".join(f"{n} {t}" for t, n in counts.items())),
    ]
    if not run.params:
        items.insert(4, ("  params", "none (no sweep)"))
    for k, v in items:
        meta.add_row(k, escape(v))
    if run.error:
        meta.add_row("error" if run.status == "failed" else "note", escape(run.error.strip()))
    c.print(meta)
    if flows:
        t = Table(title="flows", title_justify="left")
        for col in ("flow", "class", "cca", "kind", "sender", "start", "stop", "delivered", "goodput",
                    "sent", "retrans", "RTT min", "RTT mean", "RTT p99"):
            t.add_column(col, justify="left" if col in ("class", "cca", "kind") else "right")
        for f in flows:
            t.add_row(
                str(f["flow_id"]), escape(str(f["group_name"])), escape(str(f["cca"])), str(f["kind"]),
                str(f["sender"]),
                console.seconds_or_ms(f["start_us"]), console.seconds_or_ms(f["stop_us"]),
                "–" if f["bytes_delivered"] is None else f"{f['bytes_delivered']:,} B",
                console.rate(f["goodput_bps"]), "–" if f["sent_segs"] is None else str(f["sent_segs"]),
                str(f["retrans_segs"]),
                console.ms(f["rtt_min_us"]), console.ms(f["rtt_mean_us"]), console.ms(f["rtt_p99_us"]),
            )
        c.print(t)
    return EXIT_OK


def cmd_summary(args: argparse.Namespace) -> int:
    from ccbench.analysis.study import analyze_store

    c = console.stdout()
    tables = summary_tables(analyze_store(args.results, series=False))
    if not tables:
        c.print(f"{args.results}: no runs yet")
    for t in tables:
        c.print(t)
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from ccbench.store import Store

    with Store.snapshot(args.results) as store:
        out = Path(args.out) if args.out else store.source_dir / "export"
        written = store.export(out, args.format)
    c = console.stdout()
    for p in written:
        c.print(str(p), soft_wrap=True)
    return EXIT_OK


def cmd_repair(args: argparse.Namespace) -> int:
    from ccbench.repair import salvage
    from ccbench.store import find_db

    report = salvage(args.results, args.out)
    console.stdout().print(console.escape_text(report.line(find_db(args.results))), soft_wrap=True)
    return EXIT_OK if not report.lost else EXIT_FAILED_RUNS


def cmd_doctor(args: argparse.Namespace) -> int:
    c = console.stdout()
    if args.cleanup and getattr(args, "inventory", None):
        from ccbench.backends.hosts.cleanup import doctor_cleanup

        return doctor_cleanup(c, args.inventory)
    if args.cleanup:
        return _doctor_cleanup(c)
    if getattr(args, "inventory", None):
        from ccbench.backends.hosts.cleanup import doctor_report

        return doctor_report(c, args.inventory)
    c.print(f"ccbench {__version__}, Python {sys.version.split()[0]}")
    t = Table(title="backends", title_justify="left")
    t.add_column("backend")
    t.add_column("status")
    for name, problem in backends.availability().items():
        if problem is not None:
            problem = problem.removeprefix(f"backend '{name}' is not available: ")
        t.add_row(name, "[green]available[/]" if problem is None else f"[red]unavailable[/]: {escape(problem)}")
    c.print(t)
    if sys.platform.startswith("linux"):
        from ccbench.backends.linux.probe import probe

        t = Table(title="this machine, for the linux backend", title_justify="left")
        t.add_column("check")
        t.add_column("")
        t.add_column("details")
        mark = {True: "[green]ok[/]", False: "[red]no[/]", None: "–"}
        checks = probe()
        for ch in checks:
            t.add_row(ch.name, mark[ch.ok], escape(ch.detail))
        c.print(t)
        if any(ch.name == "leftovers" and ch.ok is False for ch in checks):
            return EXIT_LEFTOVERS  # documented: scripts can act on it (doctor --cleanup)
    return EXIT_OK


def _doctor_cleanup(c: Console) -> int:
    from ccbench.backends.linux import cleanup
    from ccbench.backends.linux.backend import remove_dead_runs

    if os.geteuid() != 0:
        raise UsageError("doctor --cleanup needs root (it deletes network namespaces and stops processes): "
                         "run it as root, e.g. sudo ccbench doctor --cleanup")
    in_progress = [r for r in cleanup.find(include_live=True) if r.owner is not None]
    removed, problems = remove_dead_runs()
    for line in removed:
        c.print(escape(line), soft_wrap=True)
    if not removed:
        c.print("nothing left behind by ccbench runs")
    for r in in_progress:
        c.print(f"left alone run ccb{r.token}: in progress (pid {r.owner})", soft_wrap=True)
    if problems:
        for p in problems:
            console.stderr().print(f"ccbench: error: {escape(p)}", soft_wrap=True)
        return EXIT_FAILED_RUNS
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ccbench", description="Controlled, repeated experiments on TCP congestion control.")
    p.add_argument("--version", action="version", version=f"ccbench {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    r = sub.add_parser("run", help="run a study (resumes where it stopped)")
    r.add_argument("study", metavar="STUDY", help="the study file (.toml)")
    r.add_argument("--backend", help="sim, linux or hosts (default: the study's, else sim)")
    r.add_argument("--out", metavar="DIR", help="results directory (default: results/<study name>/)")
    r.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                   help="runs at the same time in worker processes (default 1; 0 = one per CPU)")
    r.add_argument("--profile", metavar="NAME",
                   help="apply the study's [profiles.NAME] (results default to results/<study name>-NAME/)")
    r.add_argument("--quick", action="store_true", help="the same as --profile quick")
    r.add_argument("--new-version", action="store_true",
                   help="the results directory holds runs of an earlier version of this study: keep them, and "
                        "store this one's runs as a new study version (NAME v2) summarised apart")
    r.add_argument("--allow-large", action="store_true",
                   help="run a study beyond the size limits (runs, packets, rows, disk, memory; see README)")
    r.add_argument("--inventory", metavar="FILE", help="backend hosts: the machines of each role ([hosts] table)")
    r.add_argument("--retry-suspect", type=int, default=0, metavar="N",
                   help="run again, up to N times, runs that came back suspect (linux, hosts: the testbed may "
                        "have shaped them), from this invocation or an earlier one (default 0)")
    r.add_argument("--retry-pause", metavar="TIME",
                   help="wait this long before the first retry of suspect runs, and k times "
                        "as long before the k-th, so that a burst of other work can pass (default 5s)")
    from ccbench.executor import cluster_config

    cluster_config.add_arguments(r)
    r.set_defaults(func=cmd_run)

    ls = sub.add_parser("ls", help="list studies and runs in a results directory")
    ls.add_argument("results", metavar="RESULTS", nargs="?", help="results directory (default: list ./results/*)")
    ls.set_defaults(func=cmd_ls)

    sh = sub.add_parser("show", help="one run's parameters and flows, or a results directory's statistics")
    sh.add_argument("run", metavar="RUN", help="a run id or a unique prefix of one, or a results directory")
    sh.add_argument("--results", metavar="DIR", help="results directory (default: search ./results/*)")
    sh.add_argument("--format", choices=("table", "csv", "json"), default="table")
    cli_analysis.add_analysis_options(sh)
    sh.set_defaults(func=cmd_show)

    sm = sub.add_parser("summary", help="the summary table of a results directory")
    sm.add_argument("results", metavar="RESULTS")
    sm.set_defaults(func=cmd_summary)

    ex = sub.add_parser("export", help="write every table to parquet or csv files")
    ex.add_argument("results", metavar="RESULTS")
    ex.add_argument("--format", choices=("parquet", "csv"), required=True)
    ex.add_argument("--out", metavar="DIR", help="output directory (default: RESULTS/export/)")
    ex.set_defaults(func=cmd_export)

    rp = sub.add_parser("repair", help="copy the runs of a damaged results database that still read back into a new one")
    rp.add_argument("results", metavar="RESULTS")
    rp.add_argument("--out", metavar="NEW_DIR", required=True, help="a new results directory for the recovered runs")
    rp.set_defaults(func=cmd_repair)

    dr = sub.add_parser("doctor", help="check what this machine can run")
    dr.add_argument("--cleanup", action="store_true",
                    help="remove what killed linux-backend runs left behind (namespaces, links, processes)")
    dr.add_argument("--inventory", metavar="FILE",
                    help="check these machines (hosts backend) and list what killed runs left on them; with "
                         "--cleanup: remove it")
    dr.set_defaults(func=cmd_doctor)

    cli_analysis.add_commands(sub)
    return p


def _error(message: str, detail: str | None = None) -> int:
    line = "; ".join(part.strip() for part in str(message).splitlines() if part.strip())
    print(f"ccbench: error: {line}", file=sys.stderr)
    for part in (detail or "").splitlines():  # another tool's own lines, kept as they are
        print(f"    {part}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    # SIGTERM and SIGHUP end every command as Ctrl-C does, so that what it
    # made (a snapshot of the store, an export's part files) is removed on
    # the way out; `run` also says how to resume (executor/signals.py).
    with signals.terminate_as_interrupt() as term:
        try:
            return _main(argv)
        except KeyboardInterrupt:
            return _interrupted(term.signum)
        except RuntimeError as e:
            # DuckDB turns a Ctrl-C during a query into this error
            if "duckdb" in sys.modules and str(e) == "Query interrupted":
                return _interrupted(term.signum)
            raise


def _interrupted(signum: int | None) -> int:
    print("ccbench: interrupted", file=sys.stderr)
    return signals.exit_status(signum)


def _main(argv: Sequence[str] | None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            return _error("missing command (one of: run, ls, show, summary, check, export, report, plot, compare, "
                          "validate, doctor, repair; see ccbench --help)")
        return args.func(args)
    except (StudyError, UsageError) as e:
        return _error(e.message, e.detail)
    except BrokenPipeError:  # e.g. `ccbench ls | head`
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_OK
    except Exception as e:
        if "duckdb" not in sys.modules:  # no results database was opened
            raise
        from ccbench.store_errors import DATABASE_ERRORS, explain

        if not isinstance(e, DATABASE_ERRORS):
            raise
        return _error(str(explain(e)))  # a damaged results database, a full disk...: one line, not a traceback
