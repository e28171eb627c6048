"""Numbers for people: the one place where rates, times and metric values are
formatted, and where the terminal consoles are made. Every output (tables,
reports, messages, validate) formats through here, so a number reads the
same everywhere.

Two styles: ``rate(x)`` keeps three significant digits with trailing zeros
(8.00, 16.5, 950 — columns line up); ``rate(x, short=True)`` drops them
(8, 16.5, 950 — for sentences such as anomaly reasons).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

from rich.console import Console

NONE = "–"  # a missing value
RATE_UNITS = ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s"))


def stdout() -> Console:
    """The console for results. Off a terminal rich would wrap tables at 80
    columns; tables only take the width they need, so a wide limit is harmless."""
    c = Console(highlight=False)
    if not c.is_terminal:
        c = Console(highlight=False, width=max(c.width, 200))
    return c


def stderr() -> Console:
    """The console for notes and progress."""
    return Console(stderr=True, highlight=False)


def rate_unit(bps: float) -> tuple[float, str]:
    """(divisor, unit) that shows ``bps`` with 1 to 3 digits before the point."""
    for div, unit in RATE_UNITS:
        if abs(bps) >= div:
            return div, unit
    return 1.0, "bit/s"


def num3(x: float) -> str:
    """About three significant digits, trailing zeros kept: 8.00, 16.5, 950;
    below 0.01 three significant digits (0.00154), so that nothing but 0
    reads as 0.00 (a column scaled to its largest value may hold tiny ones)."""
    if x != 0 and abs(x) < 0.01:
        return f"{x:.{2 - math.floor(math.log10(abs(x)))}f}"
    return f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}" if abs(x) < 100 else f"{x:.0f}"


def sig3(x: float) -> str:
    """Three significant digits, trailing zeros dropped: 8, 16.5, 950; whole
    numbers from 1000 on (1234)."""
    return f"{x:.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def rate(bps: Optional[float], short: bool = False) -> str:
    """A rate in bits/s with its unit: '8.00 Mbit/s' ('8 Mbit/s' when short)."""
    if bps is None:
        return NONE
    div, unit = rate_unit(bps)
    return f"{(sig3 if short else num3)(bps / div)} {unit}"


def seconds_or_ms(us: Optional[float]) -> str:
    """A time in µs: '1.500 s' from a second on, else '20.00 ms'."""
    if us is None:
        return NONE
    return f"{us / 1e6:.3f} s" if abs(us) >= 1e6 else f"{us / 1000:.2f} ms"


def ms(us: Optional[float], short: bool = False) -> str:
    """A time in µs as milliseconds: '20.00 ms' ('20 ms' when short)."""
    if us is None:
        return NONE
    return f"{sig3(us / 1000)} ms" if short else f"{us / 1000:.2f} ms"


def number(x: Optional[float], fmt: str = "{:.3f}") -> str:
    return NONE if x is None else fmt.format(x)


def size(b: Optional[float]) -> str:
    """Bytes: '812 KB', '1.93 MB' (SI)."""
    if b is None:
        return NONE
    return f"{b / 1e6:.3g} MB" if abs(b) >= 1e6 else f"{b / 1e3:.3g} KB"


def unit_of(key: str) -> str:
    """The unit of a metric key by its name's suffix: 'bps', 'us', '%' or ''
    ('goodput_mean_bps[cubic]' → 'bps', 'retrans_pct[...]' → '%')."""
    name = key.split("[")[0]
    for suffix, unit in (("_bps", "bps"), ("_us", "us"), ("_pct", "%")):
        if name.endswith(suffix):
            return unit
    return ""


def value(v: Optional[float], unit: str, short: bool = True) -> str:
    """A metric value in its unit ('bps', 'us', '%' or '' for a plain number)."""
    if v is None:
        return NONE
    if unit == "bps":
        return rate(v, short)
    if unit == "us":
        return ms(v, short)
    if unit == "%":
        return f"{sig3(v)} %"
    # plain numbers (Jain's index, ratios) are judged near 1: 0.9996 must not read as 1
    return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def metric(key: str, v: Optional[float], short: bool = True) -> str:
    """A value of the metric ``key`` (unit from its name, see unit_of)."""
    return value(v, unit_of(key), short)


def scale(unit: str, values: Sequence[Optional[float]]) -> tuple[float, str]:
    """Divisor and display unit for an axis or a column of values of ``unit``."""
    if unit == "bps":
        top = max((abs(v) for v in values if v is not None), default=1e6)
        return rate_unit(top) if top else (1e6, "Mbit/s")
    if unit == "us":
        return 1000.0, "ms"
    return 1.0, unit


def params(p: dict) -> str:
    """Swept parameters as 'k=v k=v' ('–' for none)."""
    return plain(" ".join(f"{k}={v}" for k, v in p.items())) or NONE


def first_line(text: Optional[str]) -> str:
    if not text or not text.strip():
        return ""
    return plain(text.strip().splitlines()[0])


def short_names(keys: Sequence[str]) -> dict[str, str]:
    """The shortest dotted suffix of each key that is still unique:
    topology.bottleneck.loss → loss; flows.0.cca, flows.1.cca → 0.cca, 1.cca."""
    out = {}
    for k in keys:
        parts = k.split(".")
        for n in range(1, len(parts) + 1):
            suffix = ".".join(parts[-n:])
            if sum(1 for o in keys if o == suffix or o.endswith("." + suffix)) == 1:
                out[k] = suffix
                break
        else:
            out[k] = k
    return out


def plain(text: str) -> str:
    """``text`` safe to print: control characters (newline, ESC...) shown as
    ``\\xNN`` escapes instead of acting on the terminal."""
    return "".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] for ch in str(text))


def escape_text(text: str) -> str:
    """``text`` for a rich console: control characters escaped and rich markup
    (``[red]``) shown as written."""
    from rich.markup import escape

    return escape(plain(text))
