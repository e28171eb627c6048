"""Values with units, as a user types them in a study file.

Every parser takes the raw TOML value and returns an exact integer in SI base
units (bits/s, nanoseconds, bytes), or raises :class:`UnitError` carrying a
one-line ``problem`` and a description of what is ``allowed``.

Grammar (spaces between number and unit are allowed; numbers are decimal,
``12``, ``1.5``, ``.5``; no exponents):

rate     ``<number><prefix><bit|bits|bps|bit/s|b/s>``  e.g. ``100Mbit``,
         ``1.5Gbit``, ``800kbit``, ``10Gbps``, ``100Mbit/s``.  Prefixes
         k, M, G, T are SI (k = 1000) and case-insensitive (``mbit`` is a
         megabit, as in tc); Ki, Mi, Gi, Ti are binary (1024).  Note that
         ``bps`` means *bits* per second here (unlike tc, where it means
         bytes); any form with a capital ``B`` (``MB/s``, ``MBps``) is bytes
         per second and is rejected with the equivalent in bits.  Must be > 0
         and a whole number of bit/s.
time     ``<number><ns|us|µs|ms|s|min>``  e.g. ``20ms``, ``1.5s``, ``500us``,
         ``20µs``, ``1min``.  Must be >= 0 and a whole number of nanoseconds.
size     ``<number><B|kB|KB|MB|GB|TB|KiB|MiB|GiB|TiB>``  e.g. ``1448B``,
         ``10KB``, ``1MiB``.  SI like iperf/netperf documentation: KB = kB =
         1000 bytes, MB = 10^6; KiB = 1024, MiB = 2^20.  A lower-case ``b``
         means bits and is rejected.  Must be a whole number of bytes.
packets  ``<integer><pkt|pkts|packet|packets>``  e.g. ``420pkt`` (buffers only).
bdp      ``<number>bdp``  e.g. ``1bdp``, ``0.5bdp`` (buffers only): a multiple
         of the bandwidth-delay product.
percent  ``<number>%``  e.g. ``1%``, ``0.5%``; loss must be in [0%, 100%).

A bare TOML number where a unit is needed is an error that suggests the unit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any, Union

__all__ = [
    "UnitError",
    "Buffer",
    "parse_rate",
    "parse_time",
    "parse_size",
    "parse_percent",
    "parse_buffer",
    "format_rate",
    "format_time",
    "format_size",
    "RATE_ALLOWED",
    "TIME_ALLOWED",
    "SIZE_ALLOWED",
    "PERCENT_ALLOWED",
    "BUFFER_ALLOWED",
]

RATE_ALLOWED = "a rate in bit/s such as '100Mbit', '1.5Gbit', '800kbit', '10Gbps' (k=1000)"
TIME_ALLOWED = "a time such as '20ms', '1.5s', '500us', '20µs', '100ns', '1min'"
SIZE_ALLOWED = "a size such as '1448B', '64KB', '1MB', '1MiB' (KB=1000 bytes, KiB=1024 bytes)"
PERCENT_ALLOWED = "a percentage from '0%' to below '100%', such as '1%' or '0.5%'"
UTILISATION_ALLOWED = "a share of the link's rate from above '0%' to '100%', such as '90%'"
BUFFER_ALLOWED = (
    "bytes such as '64KB' or '1MiB' (KB=1000, KiB=1024), packets such as '420pkt', "
    "or a multiple of the BDP such as '1bdp' or '1.5bdp'"
)


class UnitError(ValueError):
    """A value with a unit could not be parsed; ``problem`` and ``allowed`` are one line each."""

    def __init__(self, problem: str, allowed: str):
        super().__init__(problem)
        self.problem = problem
        self.allowed = allowed


@dataclass(frozen=True)
class Buffer:
    """A queue limit as written: ``kind`` is "bytes", "pkts" or "bdp"."""

    kind: str
    amount: Union[int, Fraction]

    def __str__(self) -> str:
        if self.kind == "bytes":
            return format_size(int(self.amount))
        if self.kind == "pkts":
            return f"{self.amount}pkt"
        return f"{_fmt_num(Fraction(self.amount))}bdp"


# ASCII digits only: Python's \d would also read full-width '１００' or Arabic-Indic digits.
_NUMBER = re.compile(r"^\s*([+-]?)\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(.*?)\s*$", re.DOTALL)
_MAX_DIGITS = 30  # more is a typo (and would only overflow the simulator's 64-bit fields)
MAX_VALUE = 2**63 - 1  # every value in base units fits a signed 64-bit integer (ns, bit/s, bytes)

_SI = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BIN = {"ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}

_TIME_UNITS = {
    "ns": 1,
    "us": 10**3,
    "µs": 10**3,  # U+00B5 MICRO SIGN
    "μs": 10**3,  # U+03BC GREEK SMALL LETTER MU
    "ms": 10**6,
    "s": 10**9,
    "min": 60 * 10**9,
}

_RATE_SUFFIXES = ("bits/s", "bit/s", "bits", "bit", "bps", "b/s")  # longest first
_BYTE_RATE_SUFFIXES = ("B/s", "Bps", "Byte/s", "Bytes/s", "byte/s", "bytes/s", "B")
_PKT_SUFFIXES = ("pkt", "pkts", "packet", "packets")


_NOT_NEGATIVE = ", and a value here must not be negative"  # every quantity of a study is >= 0


def _split(value: Any, allowed: str, example_unit: str) -> tuple[str, Decimal, str]:
    """Return (sign, magnitude, unit) of a string like '1.5Gbit'."""
    if isinstance(value, bool):
        raise UnitError("expected a value with a unit, not true/false", allowed)
    if isinstance(value, (int, float)):
        raise UnitError(
            f"a bare number needs a unit{_NOT_NEGATIVE * (value < 0)}: write it as a string such as "
            f"'{_fmt_num(abs(value))}{example_unit}'",
            allowed,
        )
    if not isinstance(value, str):
        raise UnitError(f"expected a string with a unit, not {_toml_type(value)}", allowed)
    m = _NUMBER.match(value)
    if not m:
        if any(c.isdigit() and not c.isascii() for c in value):
            raise UnitError("write the number with ASCII digits 0-9 (it has other digits, e.g. full-width)",
                            allowed)
        raise UnitError("does not start with a number", allowed)
    sign, num, unit = m.groups()
    if len(num) > _MAX_DIGITS:
        raise UnitError(f"the number has more than {_MAX_DIGITS} digits", allowed)
    try:
        mag = Decimal(num)
    except InvalidOperation:  # pragma: no cover - the regex only admits decimals
        raise UnitError("not a number", allowed) from None
    if not unit:
        raise UnitError(f"missing unit{_NOT_NEGATIVE * (sign == '-')}: did you mean '{num}{example_unit}'?", allowed)
    return sign, mag, unit


def _unitless_rate(value: Any) -> None:
    """A number without a unit where a rate goes: an error whose example reads
    a large one in bit/s, as tc, iperf and ns-3 do (50000000 is '50Mbit', not
    '50000000Mbit'), and a small one in Mbit/s."""
    bare = isinstance(value, (int, float)) and not isinstance(value, bool)
    m = _NUMBER.match(value) if isinstance(value, str) else None
    if bare:
        num = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        negative, num = num < 0, abs(num)
    elif m and not m.group(3) and len(m.group(2)) <= _MAX_DIGITS:
        negative, num = m.group(1) == "-", Decimal(m.group(2))
    else:
        return
    mbit = f"'{_fmt_num(num)}Mbit'"
    if num >= 1000 and num == int(num):
        as_bits = f"'{format_rate(int(num))}' if it is in bit/s"
        hint = as_bits if num >= 10**6 else f"{mbit}, or {as_bits}"
    else:
        hint = mbit
    neg = _NOT_NEGATIVE * negative
    if bare:
        raise UnitError(f"a bare number needs a unit{neg}: write it as a string such as {hint}", RATE_ALLOWED)
    raise UnitError(f"missing unit{neg}: did you mean {hint}?", RATE_ALLOWED)


def _whole(x: Decimal | Fraction, what: str, allowed: str) -> int:
    f = Fraction(x)
    if f.denominator != 1:
        raise UnitError(f"not a whole number of {what}", allowed)
    if abs(f) > MAX_VALUE:
        raise UnitError(f"too large (more than 2^63-1 {what})", allowed)
    return int(f)


def _prefix(p: str) -> int | None:
    lp = p.lower()
    if lp in _SI:
        return _SI[lp]
    if lp in _BIN and p[-1] == "i":
        return _BIN[lp]
    return None


def parse_rate(value: Any) -> int:
    """A rate in bits per second, > 0."""
    _unitless_rate(value)
    sign, mag, unit = _split(value, RATE_ALLOWED, "Mbit")
    for suf in _BYTE_RATE_SUFFIXES:
        pre = unit[: -len(suf)]
        if unit.endswith(suf) and _prefix(pre) is not None:
            bits = f"'{_fmt_num(mag * 8)}{pre}bit'"
            if suf == "B":
                raise UnitError(
                    f"'{unit}' is bytes, and a rate is in bits per second: did you mean "
                    f"'{_fmt_num(mag)}{pre}bit' (or {bits} for {unit}/s)?",
                    RATE_ALLOWED,
                )
            raise UnitError(
                f"'{unit}' is bytes per second, which is easy to misread; write the rate in bits "
                f"per second, e.g. {bits}",
                RATE_ALLOWED,
            )
    mult = None
    for suf in _RATE_SUFFIXES:
        tail = unit[-len(suf):]
        # 'bit' forms in any case ('MBit'); 'bps' and 'b/s' only in lower case ('Bps' is bytes)
        if tail == suf or (suf.startswith("bit") and tail.lower() == suf):
            mult = _prefix(unit[: -len(suf)])
            if mult is not None:
                break
    if mult is None:
        if unit.endswith("b") and _prefix(unit[:-1]) is not None:
            raise UnitError(
                f"ambiguous unit '{unit}': did you mean '{_fmt_num(mag)}{unit[:-1]}bit'?", RATE_ALLOWED
            )
        if _prefix(unit) is not None:
            raise UnitError(f"missing unit: did you mean '{_fmt_num(mag)}{unit}bit'?", RATE_ALLOWED)
        raise UnitError(f"unknown rate unit '{unit}'", RATE_ALLOWED)
    if sign == "-" and mag != 0:
        raise UnitError("a rate must be positive", RATE_ALLOWED)
    bps = _whole(mag * mult, "bit/s", RATE_ALLOWED)
    if bps <= 0:
        raise UnitError("a rate must be positive", RATE_ALLOWED)
    return bps


def parse_time(value: Any, example_unit: str = "ms") -> int:
    """A time in nanoseconds, >= 0; ``example_unit`` is the one a bare number
    is guessed to have ('s' for a study's duration, 'ms' for a delay)."""
    sign, mag, unit = _split(value, TIME_ALLOWED, example_unit)
    mult = _TIME_UNITS.get(unit) or _TIME_UNITS.get(unit.lower())
    if mult is None:
        hint = {"sec": "s", "secs": "s", "second": "s", "seconds": "s", "msec": "ms", "usec": "us",
                "nsec": "ns", "m": "min", "mins": "min", "minute": "min", "minutes": "min"}.get(unit.lower())
        extra = f": did you mean '{_fmt_num(mag)}{hint}'?" if hint else ""
        raise UnitError(f"unknown time unit '{unit}'{extra}", TIME_ALLOWED)
    if sign == "-" and mag != 0:
        raise UnitError("a time must not be negative", TIME_ALLOWED)
    return _whole(mag * mult, "nanoseconds", TIME_ALLOWED)


def _size_mult(unit: str) -> int | None:
    if unit.lower() in ("byte", "bytes"):
        return 1
    if unit.endswith("B"):
        return _prefix(unit[:-1])
    return None


def _canon_prefix(pre: str) -> str:
    """'k' -> 'K', 'mi' -> 'Mi': how a prefix is written in a size."""
    if pre.lower() in _BIN:
        return pre[0].upper() + "i"
    return pre.upper()


def parse_size(value: Any) -> int:
    """A size in bytes, >= 0 (callers check positivity where needed)."""
    sign, mag, unit = _split(value, SIZE_ALLOWED, "B")
    mult = _size_mult(unit)
    if mult is None:
        n = _fmt_num(mag)
        if unit.lower().endswith("b") and _prefix(unit[:-1]) is not None:
            raise UnitError(
                f"'{unit}' would be bits; sizes are in bytes: did you mean '{n}{_canon_prefix(unit[:-1])}B'?",
                SIZE_ALLOWED,
            )
        if unit.lower() in _SI:
            p = unit.upper()
            raise UnitError(
                f"missing 'B': did you mean '{n}{p}B' (x1000) or '{n}{p}iB' (x1024)?", SIZE_ALLOWED
            )
        if unit.lower() in _BIN:
            raise UnitError(f"missing 'B': did you mean '{n}{_canon_prefix(unit)}B'?", SIZE_ALLOWED)
        if unit.lower() in _PKT_SUFFIXES or unit.lower() == "bdp":
            raise UnitError(f"'{unit}' is not allowed here; give a size in bytes", SIZE_ALLOWED)
        raise UnitError(f"unknown size unit '{unit}'", SIZE_ALLOWED)
    if sign == "-" and mag != 0:
        raise UnitError("a size must not be negative", SIZE_ALLOWED)
    return _whole(mag * mult, "bytes", SIZE_ALLOWED)


def parse_percent(value: Any) -> float:
    """A percentage in [0, 100), returned as a probability in [0, 1)."""
    mag = _percent(value, PERCENT_ALLOWED, "probability")
    if mag >= 100:
        raise UnitError("must be below 100%", PERCENT_ALLOWED)
    return float(mag / 100)


def parse_utilisation(value: Any) -> float:
    """A share of a link's rate in (0, 100] %, returned as a fraction in (0, 1]
    (a full link reads 100 %)."""
    mag = _percent(value, UTILISATION_ALLOWED, "fraction")
    if mag == 0:
        raise UnitError("must be above 0%", UTILISATION_ALLOWED)
    if mag > 100:
        raise UnitError("must be at most 100%", UTILISATION_ALLOWED)
    return float(mag / 100)


def _percent(value: Any, allowed: str, bare: str) -> Decimal:
    """A percentage's magnitude (not negative), its unit checked; ``bare``:
    what a bare number below 1 probably is."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if 0 < value < 1:
            raise UnitError(
                f"a bare number needs a unit: write '{_fmt_num(Decimal(repr(value)) * 100)}%' if {value!r} is a "
                f"{bare}, or '{_fmt_num(value)}%'",
                allowed,
            )
    m = _NUMBER.match(value) if isinstance(value, str) else None
    if m and not m.group(1) and not m.group(3) and len(m.group(2)) <= _MAX_DIGITS and 0 < Decimal(m.group(2)) < 1:
        num = Decimal(m.group(2))  # quoted, the same two readings as the bare number
        raise UnitError(f"missing unit: did you mean '{_fmt_num(num * 100)}%' (if {m.group(2)} is a {bare}) or "
                        f"'{_fmt_num(num)}%'?", allowed)
    sign, mag, unit = _split(value, allowed, "%")
    if unit != "%":
        raise UnitError(f"unknown unit '{unit}': a percentage ends in '%'", allowed)
    if sign == "-" and mag != 0:
        raise UnitError("must not be negative", allowed)
    return mag


def parse_buffer(value: Any) -> Buffer:
    """A queue limit: bytes, packets or a multiple of the BDP; must be positive."""
    sign, mag, unit = _split(value, BUFFER_ALLOWED, "pkt")
    low = unit.lower()
    if sign == "-" and mag != 0:
        raise UnitError("a buffer must not be negative", BUFFER_ALLOWED)
    if low in _PKT_SUFFIXES:
        n = _whole(mag, "packets", BUFFER_ALLOWED)
        if n <= 0:
            raise UnitError("a buffer must hold at least one packet", BUFFER_ALLOWED)
        return Buffer("pkts", n)
    if low == "bdp":
        if mag <= 0:
            raise UnitError("a buffer must be positive", BUFFER_ALLOWED)
        return Buffer("bdp", Fraction(mag))
    try:
        n = parse_size(value)
    except UnitError as e:
        raise UnitError(e.problem, BUFFER_ALLOWED) from None
    if n <= 0:
        raise UnitError("a buffer must be positive", BUFFER_ALLOWED)
    return Buffer("bytes", n)


# ---------------------------------------------------------------- formatting


def _fmt_num(x: Any) -> str:
    """A number without a trailing '.0' or exponent: 1.5 -> '1.5', 2.0 -> '2'."""
    if isinstance(x, Fraction):
        x = Decimal(x.numerator) / Decimal(x.denominator)
    if isinstance(x, float):
        x = Decimal(repr(x))
    if isinstance(x, int):
        return str(x)
    d = Decimal(x).normalize()
    s = format(d, "f")
    return s


def _largest(n: int, units: list[tuple[str, int]]) -> str:
    for name, mult in units:
        if n % mult == 0:
            return f"{n // mult}{name}"
    return f"{n}{units[-1][0]}"


def format_size(n: int) -> str:
    """Bytes as the shortest exact string: 10000 -> '10KB', 1048576 -> '1MiB', 1448 -> '1448B'."""
    if n == 0:
        return "0B"
    si = _largest(n, [("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("KB", 10**3), ("B", 1)])
    bi = _largest(n, [("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("B", 1)])
    return bi if len(bi) < len(si) else si


def format_rate(bps: int) -> str:
    """Bits/s as the shortest exact string: 100000000 -> '100Mbit', 1500000000 -> '1.5Gbit'."""
    for name, mult in (("Tbit", 10**12), ("Gbit", 10**9), ("Mbit", 10**6), ("kbit", 10**3)):
        if bps >= mult:
            return f"{_fmt_num(Decimal(bps) / mult)}{name}"
    return f"{bps}bit"


def format_time(ns: int) -> str:
    """Nanoseconds as the shortest exact string: 20000000 -> '20ms', 1500000000 -> '1.5s'."""
    for name, mult in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns >= mult:
            return f"{_fmt_num(Decimal(ns) / mult)}{name}"
    return f"{ns}ns"


def _toml_type(value: Any) -> str:
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return f"a {type(value).__name__}"
