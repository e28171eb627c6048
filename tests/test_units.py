"""Parsing values with units (ccbench.spec.units)."""

from fractions import Fraction

import pytest

from ccbench.spec.units import (
    Buffer,
    UnitError,
    format_rate,
    format_size,
    format_time,
    parse_buffer,
    parse_percent,
    parse_rate,
    parse_size,
    parse_time,
)


@pytest.mark.parametrize(
    "text, bps",
    [
        ("100Mbit", 100_000_000),
        ("1Gbit", 1_000_000_000),
        ("1.5Gbit", 1_500_000_000),
        ("800kbit", 800_000),
        ("800Kbit", 800_000),
        ("10Gbps", 10_000_000_000),
        ("100Mbps", 100_000_000),
        ("100Mbit/s", 100_000_000),
        ("100Mb/s", 100_000_000),
        ("100mbit", 100_000_000),  # tc spelling: mbit is a megabit
        ("100MBit", 100_000_000),
        ("100 Mbit", 100_000_000),
        ("1Tbit", 10**12),
        ("9600bit", 9600),
        ("1Kibit", 1024),
        ("1Mibit", 2**20),
        (".5Gbit", 500_000_000),
    ],
)
def test_rate_good(text, bps):
    assert parse_rate(text) == bps
    assert isinstance(parse_rate(text), int)


@pytest.mark.parametrize(
    "value, fragment",
    [
        ("100MB/s", "bytes per second"),
        ("100MBps", "bytes per second"),
        ("100MB", "is bytes"),
        ("100Mb", "did you mean '100Mbit'"),
        ("100M", "did you mean '100Mbit'"),
        ("100", "did you mean '100Mbit'"),
        (100, "bare number needs a unit: write it as a string such as '100Mbit'"),
        (1.5, "bare number needs a unit"),
        # a large one is read in bit/s, as tc and iperf do: not '50000000Mbit' (50 Tbit/s)
        (50000000, "such as '50Mbit' if it is in bit/s"),
        ("2500000", "did you mean '2.5Mbit' if it is in bit/s?"),
        (10000, "such as '10000Mbit', or '10kbit' if it is in bit/s"),
        ("-100Mbit", "positive"),
        ("0Mbit", "positive"),
        ("0bit", "positive"),
        ("1.5bit", "whole number"),
        ("100Mfoo", "unknown rate unit"),
        ("fast", "does not start with a number"),
        (True, "true/false"),
        ([1], "not a list"),
    ],
)
def test_rate_bad(value, fragment):
    with pytest.raises(UnitError) as ei:
        parse_rate(value)
    msg = ei.value.problem
    if fragment == "not a list":
        assert "expected a string" in msg
    else:
        assert fragment in msg
    assert "\n" not in msg
    assert "Mbit" in ei.value.allowed


def test_rate_bytes_suggests_bits():
    with pytest.raises(UnitError) as ei:
        parse_rate("100MB/s")
    assert "'800Mbit'" in ei.value.problem


@pytest.mark.parametrize(
    "text, ns",
    [
        ("20ms", 20_000_000),
        ("1.5s", 1_500_000_000),
        ("500us", 500_000),
        ("20µs", 20_000),  # micro sign
        ("20μs", 20_000),  # greek mu
        ("100ns", 100),
        ("1min", 60_000_000_000),
        ("0s", 0),
        ("0ms", 0),
        ("0.25ms", 250_000),
    ],
)
def test_time_good(text, ns):
    assert parse_time(text) == ns


@pytest.mark.parametrize(
    "value, fragment",
    [
        (20, "'20ms'"),
        ("20", "'20ms'"),
        ("-1ms", "negative"),
        ("0.5ns", "whole number of nanoseconds"),
        ("3sec", "did you mean '3s'"),
        ("3h", "unknown time unit"),
        ("ms", "does not start with a number"),
    ],
)
def test_time_bad(value, fragment):
    with pytest.raises(UnitError) as ei:
        parse_time(value)
    assert fragment in ei.value.problem


@pytest.mark.parametrize(
    "text, n",
    [
        ("1448B", 1448),
        ("10KB", 10_000),  # SI: K = 1000
        ("10kB", 10_000),
        ("1MB", 1_000_000),
        ("1GB", 10**9),
        ("1KiB", 1024),  # binary: Ki = 1024
        ("1MiB", 1_048_576),
        ("6MiB", 6_291_456),
        ("1.5KB", 1500),
        ("0.5MiB", 524_288),
        ("100 bytes", 100),
    ],
)
def test_size_good(text, n):
    assert parse_size(text) == n


def test_size_si_vs_binary():
    assert parse_size("1MB") != parse_size("1MiB")
    assert parse_size("64KB") == 64 * 1000
    assert parse_size("64KiB") == 64 * 1024


@pytest.mark.parametrize(
    "value, fragment",
    [
        ("10kb", "bits"),
        ("10Kb", "did you mean '10KB'"),
        ("64K", "'64KB' (x1000) or '64KiB' (x1024)"),
        ("1.0001KB", "whole number of bytes"),
        ("-1KB", "negative"),
        (1448, "'1448B'"),
        ("420pkt", "not allowed here"),
    ],
)
def test_size_bad(value, fragment):
    with pytest.raises(UnitError) as ei:
        parse_size(value)
    assert fragment in ei.value.problem
    assert "KB=1000" in ei.value.allowed and "KiB=1024" in ei.value.allowed


@pytest.mark.parametrize("text, p", [("1%", 0.01), ("0.5%", 0.005), ("0%", 0.0), ("10%", 0.1), ("99.9%", 0.999)])
def test_percent_good(text, p):
    assert parse_percent(text) == pytest.approx(p)
    assert isinstance(parse_percent(text), float)


@pytest.mark.parametrize(
    "value, fragment",
    [
        ("100%", "below 100%"),
        ("150%", "below 100%"),
        ("-1%", "negative"),
        ("1", "'1%'"),
        (0.01, "'1%' if 0.01 is a probability"),
        ("0.01", "did you mean '1%' (if 0.01 is a probability) or '0.01%'?"),  # quoted: the same two readings
        (1, "bare number"),
        ("1pct", "ends in '%'"),
    ],
)
def test_percent_bad(value, fragment):
    with pytest.raises(UnitError) as ei:
        parse_percent(value)
    assert fragment in ei.value.problem


def test_buffer_kinds():
    assert parse_buffer("420pkt") == Buffer("pkts", 420)
    assert parse_buffer("420pkts") == Buffer("pkts", 420)
    assert parse_buffer("64KB") == Buffer("bytes", 64_000)
    assert parse_buffer("1MiB") == Buffer("bytes", 1_048_576)
    assert parse_buffer("1.5bdp") == Buffer("bdp", Fraction(3, 2))
    assert parse_buffer("1BDP") == Buffer("bdp", Fraction(1))
    assert str(parse_buffer("1.5bdp")) == "1.5bdp"
    assert str(parse_buffer("64KB")) == "64KB"


@pytest.mark.parametrize(
    "value, fragment",
    [
        ("0pkt", "at least one packet"),
        ("1.5pkt", "whole number of packets"),
        ("0bdp", "positive"),
        ("-1bdp", "negative"),
        ("0KB", "positive"),
        (420, "'420pkt'"),
        ("10kb", "bits"),
    ],
)
def test_buffer_bad(value, fragment):
    with pytest.raises(UnitError) as ei:
        parse_buffer(value)
    assert fragment in ei.value.problem
    assert "bdp" in ei.value.allowed and "pkt" in ei.value.allowed


def test_format_roundtrip():
    for n in (1448, 10_000, 1_000_000, 1_048_576, 6_291_456, 0):
        assert parse_size(format_size(n)) == n
    assert format_size(10_000) == "10KB"
    assert format_size(1_048_576) == "1MiB"
    for bps in (100_000_000, 1_500_000_000, 800_000, 9600):
        assert parse_rate(format_rate(bps)) == bps
    assert format_rate(1_500_000_000) == "1.5Gbit"
    for ns in (20_000_000, 1_500_000_000, 500_000, 7):
        assert parse_time(format_time(ns)) == ns
    assert format_time(20_000_000) == "20ms"


@pytest.mark.parametrize("parse, value, hint", [
    (parse_time, "-5", "'5ms'"), (parse_time, -5, "'5ms'"), (parse_rate, "-5", "'5Mbit'"),
    (parse_rate, -50_000_000, "'50Mbit' if it is in bit/s"), (parse_size, "-3", "'3B'"), (parse_buffer, -3, "'3pkt'"),
])
def test_a_negative_number_without_a_unit_is_not_suggested_back_negative(parse, value, hint):
    """The hint for a missing unit keeps the number's size but not its sign, and
    says why: every quantity of a study is at least 0 (it suggested '-5ms',
    refused in turn as negative)."""
    with pytest.raises(UnitError) as ei:
        parse(value)
    assert "must not be negative" in ei.value.problem and hint in ei.value.problem, ei.value.problem
    assert "'-" not in ei.value.problem, ei.value.problem
