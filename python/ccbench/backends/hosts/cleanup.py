"""``ccbench doctor [--cleanup] --inventory FILE``: the inventory's hosts, and
what killed controllers left on them.

Without ``--cleanup``, each host is checked as pre-flight checks it (without
a study's needs) and what killed controllers left is listed. With it, on
every host of the inventory: the run directories of its role in its work
directory (``ccb<8 hex>-<role>``, nothing else), each with its owner. A run
whose controller is still alive on this machine is left alone (listed);
every other one is removed as at the end of a run (remote.py): its
processes (pidfiles with start times, programs inside the directory), the
changes its manifest lists, the directory. On this machine: a killed
controller's ssh control sockets and its runs' local log directories.
"""

from __future__ import annotations

import os

from .inventory import Inventory
from .remote import list_runs, owner, owner_alive, read_owner, remove_dir
from .ssh import Connection, SshError


def runs_on(c: Connection) -> tuple[list[str], list[str]]:
    """On one open connection: (the run directories killed controllers
    left, a line per run in progress)."""
    dead, alive = [], []
    for d in list_runs(c):
        o = read_owner(c, d)
        if owner_alive(o):
            alive.append(f"host {c.host.label}: {d}: in progress (controller pid {o.get('pid')})")
        else:
            dead.append(d)
    return dead, alive


def cleanup(inv: Inventory) -> tuple[list[str], list[str], list[str]]:
    """(removed, left alone, problems), each a list of one-line texts."""
    removed, alive, problems = [], [], []
    for h in inv.hosts:
        c = Connection(h, accept_new=inv.accept_new_host_keys, connect_timeout_s=inv.connect_timeout_s)
        try:
            c.open()
            if c.run(["id", "-u"], sudo=False).stdout.strip() != "0":
                c.sudo = ["sudo", "-n", "--"]
            dead, live = runs_on(c)
            alive += live
            for d in dead:
                problems += remove_dir(c, d, None)
                removed.append(f"host {h.label}: removed {d}")
        except SshError as e:
            problems.append(str(e))
        finally:
            c.close()
    return removed, alive, problems


def survey(inv: Inventory) -> list[tuple[str, dict, list[str], list[str], list[str]]]:
    """Every host at once: (label, pre-flight facts, problems, run
    directories killed controllers left, runs in progress)."""
    from concurrent.futures import ThreadPoolExecutor

    from .preflight import check_host

    def one(h):
        c = Connection(h, accept_new=inv.accept_new_host_keys, connect_timeout_s=inv.connect_timeout_s)
        try:
            c.open()
            facts, problems = check_host(c, inv, ccas=set(), mtu_needed=0, iperf3=False, tc_qdiscs=set())
            dead, alive = runs_on(c) if "privileges" in facts else ([], [])
            return h.label, facts, problems, dead, alive
        except SshError as e:
            return h.label, {}, [str(e)], [], []
        finally:
            c.close()

    with ThreadPoolExecutor(max_workers=len(inv.hosts) or 1) as ex:
        return list(ex.map(one, inv.hosts))


__all__ = ["cleanup", "survey"]


def stale_control_dirs() -> list[str]:
    """This machine's /tmp/ccbh-* directories (ssh master sockets) that no live master listens on any more:
    a killed controller's. Removed."""
    import glob
    import shutil
    import socket

    removed = []
    for d in glob.glob("/tmp/ccbh-*"):
        live = False
        for f in glob.glob(os.path.join(d, "*")):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(f)
                live = True
            except OSError:
                pass
            finally:
                s.close()
        if not live:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


LOG_DIR_PREFIX = "ccbench-hosts-"


def log_dir_prefix(token: str) -> str:
    """The name of a run's local log directory (in the temporary directory) starts with its controller's pid
    and start time, so that a killed controller's can be told from a live one's."""
    o = owner()
    return f"{LOG_DIR_PREFIX}{o['pid']}-{o['start']}-{token}-"


def stale_log_dirs() -> list[str]:
    """This machine's run log directories whose controller is gone (killed: it removes its own). Removed."""
    import glob
    import re
    import shutil
    import socket
    import tempfile

    removed = []
    for d in glob.glob(os.path.join(tempfile.gettempdir(), LOG_DIR_PREFIX + "*")):
        m = re.match(re.escape(LOG_DIR_PREFIX) + r"(\d+)-(\d+)-", os.path.basename(d))
        if m and owner_alive({"controller": socket.gethostname(), "pid": int(m[1]), "start": int(m[2])}):
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def doctor_report(console, inventory: str) -> int:
    """The CLI's `doctor --inventory FILE`: a row per host; exit 1 when a
    host is not ready (what it holds is then unknown), else 4 when killed
    controllers left something."""
    from rich.markup import escape
    from rich.table import Table

    from ccbench.errors import EXIT_FAILED_RUNS, EXIT_LEFTOVERS, EXIT_OK

    from .inventory import parse, read_file

    inv = parse(read_file(inventory), source=inventory)
    t = Table(title=f"the inventory's hosts ({inventory})", title_justify="left")
    for col in ("host", "", "kernel", "details"):
        t.add_column(col)
    any_dead = any_problem = False
    for label, facts, problems, dead, alive in survey(inv):
        details = [p.removeprefix(f"host {label}: ") for p in problems]
        if dead:
            details.append(f"{len(dead)} run director{'ies' if len(dead) != 1 else 'y'} left by killed controllers "
                           f"({', '.join(dead)}): `ccbench doctor --cleanup --inventory {inventory}` removes them")
        details += [a.removeprefix(f"host {label}: ") for a in alive]
        if not details:
            details = [f"ready ({facts.get('privileges')}); nothing left behind"]
        any_dead |= bool(dead)
        any_problem |= bool(problems)
        ok = "[red]no[/]" if problems else "[yellow]leftovers[/]" if dead else "[green]ok[/]"
        t.add_row(escape(label), ok, escape(str(facts.get("kernel", "–"))), escape("; ".join(details)))
    console.print(t)
    return EXIT_FAILED_RUNS if any_problem else EXIT_LEFTOVERS if any_dead else EXIT_OK


def doctor_cleanup(console, inventory: str) -> int:
    """The CLI's `doctor --cleanup --inventory FILE`."""
    from rich.markup import escape

    from .inventory import parse, read_file

    inv = parse(read_file(inventory), source=inventory)
    removed, alive, problems = cleanup(inv)
    stale = stale_control_dirs()
    if stale:
        removed.append(f"this machine: removed {len(stale)} stale ssh control director{'ies' if len(stale) != 1 else 'y'} "
                       "(/tmp/ccbh-*)")
    logs = stale_log_dirs()
    if logs:
        whose = "run's log directory" if len(logs) == 1 else "runs' log directories"
        removed.append(f"this machine: removed {len(logs)} killed {whose} ({LOG_DIR_PREFIX}*)")
    if not removed and not problems:
        console.print("nothing left behind by ccbench runs on the inventory's hosts")
    for line in removed + alive:
        console.print(escape(line), soft_wrap=True)
    from ccbench import console as consoles

    err = consoles.stderr()
    for p in problems:
        err.print(f"ccbench: error: {escape(p)}", soft_wrap=True, highlight=False)
    if problems:
        err.print(f"ccbench: run `ccbench doctor --cleanup --inventory {escape(inventory)}` again once the hosts "
                  "above are back", soft_wrap=True, highlight=False)
    return 1 if problems else 0
