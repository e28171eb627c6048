"""Steal time: how much of a virtual machine's CPUs its hypervisor took.

A virtual CPU that wants to run but whose host runs something else
instead accrues *steal* time (the eighth value of a ``cpuN`` line of
/proc/stat). While that happens nothing in the guest runs on that CPU, not
even a real-time emulator: a packet due then goes out late, and a run
comes back suspect. On this project's 2-CPU VM, eight 10 s runs of one
CUBIC flow at 100 Mbit/s in a row (session 54) had 1.8-22 % steal on the
emulator's CPU and 350-6,128 of about 120,000 packets more than 1 ms late,
the more the more steal (6 of 8 suspect; bench/steal_lateness.py). The
steal comes with wake-ups of halted CPUs: both CPUs spinning saw almost
none, a cross-CPU pipe ping-pong 6 %.
The linux and hosts backends read /proc/stat as a run starts and ends and
store each CPU's steal fraction, and a run suspect for its emulator says
how much of the emulator's CPU the hypervisor took.
"""

from __future__ import annotations

from typing import Optional

#: /proc/stat's ``cpuN`` fields, in order (USER_HZ ticks); guest time is already in user.
FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")

#: Steal on the emulator's CPU worth naming in a suspect run's note.
NOTEWORTHY = 0.005


def parse(text: str) -> dict[int, tuple[int, int]]:
    """Each CPU's (all time, steal time) in ticks, from /proc/stat's text."""
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not (name.startswith("cpu") and name[3:].isdigit()):
            continue
        values = [int(x) for x in rest.split()[:len(FIELDS)]]
        values += [0] * (len(FIELDS) - len(values))  # kernels before 2.6.11 had no steal column
        out[int(name[3:])] = (sum(values), values[FIELDS.index("steal")])
    return out


def read() -> dict[int, tuple[int, int]]:
    """This machine's :func:`parse`; empty if /proc/stat cannot be read."""
    try:
        with open("/proc/stat") as f:
            return parse(f.read())
    except OSError:
        return {}


def fractions(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]]) -> dict[str, float]:
    """Each CPU's share of the time between two readings that was stolen,
    keyed by the CPU's number as a string (as JSON stores it)."""
    out = {}
    for cpu, (total, steal) in sorted(after.items()):
        if cpu not in before:
            continue
        elapsed = total - before[cpu][0]
        if elapsed > 0:
            out[str(cpu)] = round(max(0, steal - before[cpu][1]) / elapsed, 4)
    return out


def note(per_cpu: dict[str, float], emu_cpu: Optional[int]) -> Optional[str]:
    """What a suspect run's note says about steal on the emulator's CPU
    (or, unpinned, on the most stolen-from CPU), if it is noteworthy."""
    if not per_cpu:
        return None
    if emu_cpu is not None and str(emu_cpu) in per_cpu:
        share, where = per_cpu[str(emu_cpu)], f"the emulator's CPU ({emu_cpu})"
    else:
        cpu = max(per_cpu, key=lambda c: per_cpu[c])
        share, where = per_cpu[cpu], f"CPU {cpu}"
    if share < NOTEWORTHY:
        return None
    return (f"the hypervisor took {100 * share:.1f}% of {where} during the run (steal time; "
            "the emulator cannot run while it does)")
