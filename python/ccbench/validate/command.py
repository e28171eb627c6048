"""``ccbench validate``: how far is the simulator from the real Linux kernel?

    ccbench validate [--grid quick|medium|full | --quick] [--cca CCA ...] [--reps N] [--duration T]
                     [--out DIR] [--jobs N] [--retry-suspect N] [--retry-pause TIME] [--recheck N]
                     [--rerun-sim] [--no-run] [--sim-host-jitter TIME] [--sim-path-jitter TIME]
                     [--sim-read-latency MEDIAN,P90] [--sim-pacing-latency MEDIAN,P90]
                     [--sim-sender-pauses EVERY,LENGTH]
                     [--sim-return-stalls EVERY,LENGTH] [--format table|csv|json|markdown]

Runs the grid (validate/grid.py) on both backends (validate/running.py) into
one results store (default ``results/validate/``), compares them
(validate/comparison.py) and writes ``validation.csv``, ``validation.json``
and ``validation.html`` there (validate/output.py, validate/page.py).
``--recheck N`` then runs each scenario that disagrees N more times on both
backends and judges it again on all its runs: on a noisy machine three runs
a side can fall apart by chance (docs/validation/README.md, "Session 25").
Exit status: 0 every scenario agrees, 1 some scenario disagrees or has no
usable runs on a backend, 2 usage error, 130 interrupted.
"""

from __future__ import annotations

import json
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from ccbench import console
from ccbench.errors import EXIT_FAILED_RUNS, EXIT_INTERRUPTED, EXIT_OK, UsageError
from ccbench.executor.retry import retry_pause_s
from ccbench.validate.grid import DEFAULT_OUT, GRIDS, plan
from ccbench.validate.running import RunLog, execute_plan, set_aside, sim_settings_changed, unfinished

MAX_RECHECK = 100  # more runs a side than any noisy row has needed (ten settled them: docs/validation/)


def add_command(sub: Any) -> None:
    """Register `ccbench validate` on the CLI's subparsers."""
    v = sub.add_parser("validate", help="run a grid of scenarios on sim and linux and say how far apart they are")
    v.add_argument("--grid", choices=tuple(GRIDS), default=None,
                   help="; ".join(f"{g.name}: {g.size} scenarios, {g.reps} × {g.duration}" for g in GRIDS.values())
                   + " (default medium)")
    v.add_argument("--quick", action="store_true", help="the same as --grid quick (what `make test` runs)")
    v.add_argument("--cca", action="append", metavar="CCA",
                   help="run the grid with this algorithm instead of its own (repeat for several); e.g. "
                        "bpf:studies/bpf-cca/reno.bpf.c (a bpf: path is relative to the current directory)")
    v.add_argument("--reps", type=int, metavar="N", help="repetitions per scenario and backend (default: the grid's)")
    v.add_argument("--duration", metavar="TIME", help="length of each run, e.g. '15s' (default: the grid's)")
    v.add_argument("--out", metavar="DIR", help=f"results directory (default {DEFAULT_OUT}/)")
    v.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                   help="sim runs at the same time (default 1; 0 = one per CPU); linux runs are always serial")
    v.add_argument("--retry-suspect", type=int, default=1, metavar="N",
                   help="run a linux run that came back suspect again, up to N times (default 1)")
    v.add_argument("--retry-pause", metavar="TIME",
                   help="wait this long before the first retry of suspect linux runs, and k times "
                        "as long before the k-th, so that a burst of other work can pass (default 5s)")
    v.add_argument("--recheck", type=int, default=0, metavar="N",
                   help="run each scenario that disagrees N more times on both backends and judge it again on all "
                        "its runs (default 0: no re-check)")
    v.add_argument("--sim-host-jitter", metavar="TIME",
                   help="give the sim runs this seeded per-packet host jitter (tcp.host_jitter, e.g. 200us; "
                        "outside the run ids, so they still pair with the linux runs; finished sim runs made with "
                        "other settings run again)")
    v.add_argument("--sim-path-jitter", metavar="TIME",
                   help="give the sim runs' bottleneck and return link this seeded per-packet delay jitter "
                        "(topology jitter, e.g. 100us: the timing noise of the linux runs' emulator); outside the "
                        "run ids, as --sim-host-jitter")
    v.add_argument("--sim-read-latency", metavar="MEDIAN,P90",
                   help="give the sim runs' receiving applications this seeded log-normal read latency "
                        "([tcp] read_latency, e.g. 12us,60us); outside the run ids, as --sim-host-jitter")
    v.add_argument("--sim-pacing-latency", metavar="MEDIAN,P90",
                   help="give the sim runs' pacing timers this seeded log-normal lateness ([tcp] pacing_latency, "
                        "e.g. 25us,100us); outside the run ids, as --sim-host-jitter")
    v.add_argument("--sim-sender-pauses", metavar="EVERY,LENGTH",
                   help="give the sim runs' sending hosts these seeded pauses ([tcp] sender_pauses, e.g. "
                        "11ms,1ms); outside the run ids, as --sim-host-jitter. `bench/pcap_bursts.py analyse` of a "
                        "captured linux run measures all three (docs/validation/README.md, session 29)")
    v.add_argument("--sim-return-stalls", metavar="EVERY,LENGTH",
                   help="give the sim runs' return link (the ACK path) these seeded pauses (topology stalls, e.g. "
                        "169ms,2.47ms, as `bench/pcap_bursts.py analyse` fits them to a captured linux run); "
                        "outside the run ids, as --sim-host-jitter")
    v.add_argument("--rerun-sim", action="store_true",
                   help="run the sim half again even where it is finished (after a change to the simulator); "
                        "the linux runs are kept")
    v.add_argument("--no-run", action="store_true", help="only compare what the results directory holds")
    v.add_argument("--format", choices=("table", "csv", "json", "markdown"), default="table",
                   help="what to print (markdown: the table of docs/validation/README.md)")
    v.set_defaults(func=cmd_validate)


# The sim half's settings outside the run ids (a results directory holds
# sim runs made with one set of them).
SIM_SETTINGS = ("--sim-host-jitter", "--sim-path-jitter", "--sim-read-latency", "--sim-pacing-latency",
                "--sim-sender-pauses", "--sim-return-stalls")


def _previous_log(out: Path) -> Optional[RunLog]:
    """The record of the invocation that last ran (--no-run keeps it in validation.json)."""
    try:
        old = json.loads((out / "validation.json").read_text())["invocation"]
        return RunLog(**{k: v for k, v in old.items() if k in RunLog.__dataclass_fields__})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _command(grid: str, args: Any, out: Path) -> str:
    """The command line that (re)produces this validation."""
    cmd = ["ccbench", "validate", "--grid", grid]
    for c in args.cca or []:
        cmd += ["--cca", c]
    if args.reps is not None:
        cmd += ["--reps", str(args.reps)]
    if args.duration:
        cmd += ["--duration", args.duration]
    if args.recheck:
        cmd += ["--recheck", str(args.recheck)]
    for option in SIM_SETTINGS:
        value = getattr(args, option[2:].replace("-", "_"))
        if value:
            cmd += [option, value]
    if args.out:
        cmd += ["--out", str(out)]
    return shlex.join(cmd)


def cmd_validate(args: Any) -> int:
    from ccbench.executor import worker_count

    if args.quick and args.grid not in (None, "quick"):
        raise UsageError(f"--quick is --grid quick; it cannot be combined with --grid {args.grid}")
    grid = "quick" if args.quick else (args.grid or "medium")
    if args.retry_suspect < 0:
        raise UsageError(f"--retry-suspect: got {args.retry_suspect}; allowed: a number >= 0")
    pause_s = retry_pause_s(args.retry_pause)
    if not 0 <= args.recheck <= MAX_RECHECK:
        raise UsageError(f"--recheck: got {args.recheck}; allowed: a number of more runs from 0 to {MAX_RECHECK}")
    jobs = worker_count(args.jobs)
    p = plan(grid, args.duration, args.reps, args.cca, args.sim_host_jitter, args.sim_path_jitter,
             args.sim_read_latency, args.sim_pacing_latency, args.sim_sender_pauses, args.sim_return_stalls)
    # Every sim run this command may use: a re-check's too, whichever
    # scenarios it turns out to need.
    widest = p.rechecked(list(dict.fromkeys(r.config_id for r in p.runs("sim"))), args.recheck) if args.recheck else p
    out = Path(args.out) if args.out else DEFAULT_OUT
    show = args.format == "table"
    con = console.stdout()
    info = con if show else console.stderr()
    log = RunLog(command=_command(grid, args, out),
                 started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    if args.no_run:
        log = _previous_log(out) or log
    if args.rerun_sim and args.no_run:
        raise UsageError("--rerun-sim runs the simulator; it cannot be combined with --no-run")
    if args.rerun_sim:
        n = len(set_aside(out, [r.run_id for r in widest.runs("sim")], "--rerun-sim"))
        info.print(f"--rerun-sim: {n} finished sim runs will run again", soft_wrap=True)
    changed = sim_settings_changed(out, widest.runs("sim"))
    if changed and args.no_run:
        raise UsageError(f"--no-run: {len(changed)} sim runs in {out} were run with other simulator settings than "
                         f"this command gives ({', '.join(SIM_SETTINGS)}); give the ones they were run "
                         "with, or leave out --no-run to run them again")
    if changed:
        set_aside(out, changed, "other simulator settings")
        info.print(f"{len(changed)} finished sim runs were run with other simulator settings "
                   f"({', '.join(SIM_SETTINGS)}); they will run again", soft_wrap=True)
    if not args.no_run:
        todo = len(unfinished(out, [r.run_id for r in p.runs("linux")]))
        info.print(f"validate grid {p.grid.name}: {p.grid.size} scenarios × {p.reps} repetitions × {p.duration} on "
                   f"sim and linux → {out}; {todo} linux runs to do, about "
                   f"{todo * (p.duration_us / 1e6 + 1.6) / 60:.0f} min", soft_wrap=True)
        execute_plan(p, out, jobs=jobs, retry_suspect=args.retry_suspect, retry_pause_s=pause_s, console=info, log=log)
    # The analysis stack (numpy) only here: registering the command must not load it.
    from ccbench.store import find_db
    from ccbench.validate.comparison import analyse, summary_line
    from ccbench.validate.output import csv_text, json_text, markdown_summary, markdown_table, table, write_outputs

    find_db(out)  # a clear message when --no-run finds nothing
    v = analyse(p, out, log)
    again = v.disagreeing() if args.recheck and not log.interrupted else []
    if again:
        first = set(p.run_ids())
        p = p.rechecked(again, args.recheck)
        if not args.no_run:
            new = set(p.run_ids()) - first
            todo = len(unfinished(out, [r.run_id for r in p.runs("linux") if r.run_id in new]))
            info.print(f"--recheck: {len(again)} scenario{'s' if len(again) != 1 else ''} disagree"
                       f"{'s' if len(again) == 1 else ''} at {p.reps} runs a side; each runs "
                       f"{args.recheck} more times on both backends ({todo} linux runs to do, about "
                       f"{todo * (p.duration_us / 1e6 + 1.6) / 60:.0f} min)", soft_wrap=True)
            execute_plan(p, out, jobs=jobs, retry_suspect=args.retry_suspect, retry_pause_s=pause_s, console=info, log=log, only=new)
        v = analyse(p, out, log)
    log.finished_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    paths = write_outputs(v)
    if args.format == "csv":
        sys.stdout.write(csv_text(v))
    elif args.format == "json":
        sys.stdout.write(json_text(v))
    elif args.format == "markdown":
        sys.stdout.write(markdown_summary(v) + "\n" + markdown_table(v))
    else:
        con.print(table(v))
        con.print(summary_line(v), soft_wrap=True)
        con.print(f"written: {paths['csv']}, {paths['json']}, {paths['html']}", soft_wrap=True)
    if log.interrupted:
        console.stderr().print(f"interrupted: what finished is saved in {out}; run the same command again to resume",
                        soft_wrap=True)
        return EXIT_INTERRUPTED
    return EXIT_OK if all(s.verdict == "agree" for s in v.scenarios) else EXIT_FAILED_RUNS
