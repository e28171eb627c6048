"""Degenerate runs: a run that finished but measured nothing worth a number.

A bottleneck of "1bit" or a one-way delay of "1000000s" is valid input, and
the run "succeeds" with zero goodput for every flow. Its numbers would sit in
a summary as if they meant something. :func:`reason` says why such a run is
degenerate (or None); the executor marks it ``suspect`` with the reason as
its note (``degenerate run: ...``), which every view shows with the run.

Call it from any view that wants to say so itself (the summary table):
``reason(run.config, flows)`` with the run's resolved config and its flow
rows (dicts with ``bytes_delivered``); or :func:`is_degenerate_note` on a
stored run's error/note text.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

PREFIX = "degenerate run: "


def _fmt_s(ns: float) -> str:
    s = ns / 1e9
    return f"{s:,.0f} s" if s >= 100 else f"{s:g} s" if s >= 1 else f"{s * 1e3:g} ms"


def reason(config: dict, flows: Sequence[dict]) -> Optional[str]:
    """Why the run is degenerate, on one line starting with ``degenerate run:``; None if it is not.

    A run is degenerate when no flow delivered a byte; the reason names the
    cause found in the config where there is one (the bottleneck cannot carry
    one packet in the run, or the base RTT is longer than the run).
    """
    if not flows or any((f.get("bytes_delivered") or 0) > 0 for f in flows):
        return None
    causes = []
    try:
        duration = config["duration_ns"]
        tcp = config.get("tcp", {})
        packet_bits = 8 * (tcp.get("mss", 1448) + tcp.get("header_bytes", 52))
        rate = config["bottleneck"]["rate_bps"]
        if packet_bits * 1e9 / rate >= duration:
            causes.append(f"the bottleneck ({rate:,} bit/s) needs {_fmt_s(packet_bits * 1e9 / rate)} for one "
                          f"packet, longer than the run ({_fmt_s(duration)})")
        rev = config.get("reverse") or {}
        senders = config.get("senders") or [{"delay_ns": 0}]
        rtt = (2 * max(s.get("delay_ns", 0) for s in senders) + config["bottleneck"]["delay_ns"]
               + rev.get("delay_ns", config["bottleneck"]["delay_ns"]))
        if rtt >= duration:
            causes.append(f"the base RTT ({_fmt_s(rtt)}) is longer than the run ({_fmt_s(duration)})")
    except (KeyError, TypeError, ZeroDivisionError):
        pass
    cause = "; ".join(causes) if causes else "check the bottleneck rate, the delays and the flows' start times"
    return f"{PREFIX}no flow delivered any data ({cause})"


def is_degenerate_note(text: Optional[str]) -> bool:
    """Whether a stored run's note (runs.error) marks it degenerate."""
    return bool(text) and text.startswith(PREFIX)  # type: ignore[union-attr]


def mark(result: Any, config: dict) -> Any:
    """A RunResult marked ``suspect`` with the degenerate reason (first in its note), if it is degenerate."""
    why = reason(config, result.flows)
    if why is None:
        return result
    result.status = "suspect"
    result.note = why if not result.note else f"{why}\n{result.note}"
    return result
