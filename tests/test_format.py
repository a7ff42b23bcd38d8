"""The one formatting family of model.units (format_time, format_bytes, ...), against hand-written text."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from model.units import (
    Kind,
    format_bandwidth,
    format_bytes,
    format_count,
    format_money,
    format_rate,
    format_si,
    format_time,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0 s"),
        (8.5e-4, "850 µs"),
        (0.0123, "12.3 ms"),
        (0.05, "50 ms"),
        (0.0999996, "100 ms"),  # rounding reaches the next decade: no "1e+02 ms"
        (0.15, "150 ms"),
        (0.9996, "1 s"),  # ... nor "1e+03 ms"
        (1.5, "1.5 s"),
        (999.4, "999 s"),
        (1000.0, "16.7 min"),
        (7200.0, "2 h"),
        (-0.05, "-50 ms"),
        (math.inf, "unbounded"),
        (math.nan, "n/a"),
    ],
)
def test_format_time(seconds, text):
    assert format_time(seconds) == text


@pytest.mark.parametrize(
    ("n_bytes", "text"),
    [
        (100.0, "100 B"),
        (12_345.0, "12.3 kB"),
        (164e6, "164 MB"),
        (654e6, "654 MB"),
        (140e9, "140 GB"),
        (1.13e12, "1.13 TB"),  # the "1.13e+03 GB"
        (999.6e9, "1 TB"),
        (1e21, "1e+03 EB"),  # beyond the last prefix: an exponent, still correct
    ],
)
def test_format_bytes(n_bytes, text):
    assert format_bytes(n_bytes) == text


def test_format_bandwidth_is_in_bits():
    assert format_bandwidth(25e9 / 8) == "25 Gbit/s"
    assert format_bandwidth(5e14) == "4 Pbit/s"  # the "4e+06 Gbit/s"
    assert format_bandwidth(5e6) == "40 Mbit/s"


def test_format_rate():
    assert format_rate(0.05) == "0.05 req/s"
    assert format_rate(12.345) == "12.3 req/s"
    assert format_rate(0.0341) == "0.0341 req/s"
    assert format_rate(1500.0, "tok/s") == "1.5k tok/s"
    assert format_rate(math.inf) == "unbounded"


def test_format_count_agrees_in_number():
    assert format_count(1, "GPU") == "1 GPU"  # the "1 GPUs"
    assert format_count(2, "GPU") == "2 GPUs"
    assert format_count(0, "GPU") == "0 GPUs"
    assert format_count(1024, "token") == "1,024 tokens"
    assert format_count(1.5, "copy", "copies") == "1.5 copies"
    assert format_count(1, "copy", "copies") == "1 copy"
    assert format_count(1234.5, "token") == "1,234 tokens"  # not "1.23e+03 tokens"


def test_format_money_never_prints_inf():
    assert format_money(2.5) == "$2.50"
    assert format_money(0.8, "h") == "$0.80/h"
    assert format_money(40.0, "h") == "$40.00/h"
    assert format_money(0.0123) == "$0.0123"
    assert format_money(1250.0) == "$1,250"
    assert format_money(2.5e6) == "$2.5M"
    assert format_money(0.0) == "$0.00"
    assert format_money(-3.0) == "-$3.00"
    assert format_money(math.inf) == "n/a"  # the "$inf"
    assert format_money(math.nan) == "n/a"
    assert format_money(None) == "n/a"


@given(st.floats(min_value=1.0, max_value=1e20))
def test_si_text_reads_back_within_rounding(x):
    """Invariant: format_si writes a mantissa in [1, 1000) without an exponent, and parse_quantity
    reads the text back to the value within 3-digit rounding."""
    text = format_si(x, "B")
    assert "e" not in text
    assert 1.0 <= float(text.split()[0]) < 1000.0
    assert parse_quantity(text, Kind.BYTES, "x") == pytest.approx(x, rel=5e-3)


@given(st.floats(min_value=1e-9, max_value=1e5))
def test_time_text_reads_back_within_rounding(seconds):
    text = format_time(seconds).replace("µs", "us")
    assert "e" not in text
    assert parse_quantity(text, Kind.TIME, "t") == pytest.approx(seconds, rel=5e-3)
