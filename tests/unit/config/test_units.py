"""``blobstate.config.units``: sizes, durations and times in human units, parsed and printed; bad input is a
``ConfigurationError`` (exit 2) and nothing else."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blobstate.config.units import format_duration, format_size, iso_time, parse_duration_ms, parse_size
from blobstate.errors import ConfigurationError


@pytest.mark.parametrize("text, nbytes", [
    ("4096", 4096), ("4096B", 4096), ("64MiB", 64 << 20), ("1.5 GiB", 3 << 29), ("512kib", 512 << 10),
    ("64MB", 64_000_000), ("1GB", 10**9), ("96MiB", 96 << 20), (" 2 TiB ", 2 << 40), (7, 7),
])
def test_sizes_in_every_documented_form(text, nbytes):
    assert parse_size(text) == nbytes


@pytest.mark.parametrize("bad", ["", "MiB", "1.2.3MiB", "-1", "64 MiBs", "1e9", True, -5])
def test_a_size_that_is_not_one_is_a_usage_error(bad):
    with pytest.raises(ConfigurationError):
        parse_size(bad)


@pytest.mark.parametrize("text, ms", [
    ("1d", 86_400_000), ("12h", 43_200_000), ("1h30m", 5_400_000), ("90s", 90_000), ("500ms", 500),
    ("15min", 900_000), ("2w", 1_209_600_000), ("1h 30m", 5_400_000), ("86400000", 86_400_000), ("1.5s", 1500),
    (timedelta(minutes=2), 120_000), (250, 250), (2.5, 2),
])
def test_durations_in_every_documented_form(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("bad", ["", "1y", "h", "1h-30m", "abc", "1d2", False, -1])
def test_a_duration_that_is_not_one_is_a_usage_error(bad):
    with pytest.raises(ConfigurationError):
        parse_duration_ms(bad)


@settings(deadline=None)
@given(st.integers(0, 10**12))
def test_durations_printed_as_two_units_parse_back_within_their_precision(ms):
    printed = format_duration(ms)
    if ms < 1000:
        assert printed == f"{ms} ms"
        return
    if ms < 60_000:
        assert abs(parse_duration_ms(printed.replace(" ", "")) - ms) <= 50
        return
    back = parse_duration_ms(printed.replace(" ", ""))
    assert back <= ms  # the two largest units, truncated
    assert ms - back < 86_400_000 * 7  # never off by more than the unit below the second printed


@settings(deadline=None)
@given(st.integers(0, (1 << 60)))
def test_sizes_printed_in_iec_units_parse_back_within_their_precision(nbytes):
    printed = format_size(nbytes)
    back = parse_size(printed.replace(" ", ""))
    assert abs(back - nbytes) <= nbytes * 0.05 + 1  # one decimal of a unit the value holds at least once


@settings(deadline=None)
@given(st.text(max_size=20))
def test_parsers_raise_nothing_but_configuration_errors(text):
    for parse in (parse_size, parse_duration_ms):
        try:
            assert parse(text) >= 0
        except ConfigurationError:
            pass


def test_printing():
    assert (format_size(None), format_size(1023), format_size(1536), format_size(64 << 20)) == (
        "?", "1023 B", "1.5 KiB", "64.0 MiB")
    assert (format_duration(None), format_duration(850), format_duration(86_400_000),
            format_duration(9_000_000)) == ("?", "850 ms", "1d", "2h 30m")
    assert (iso_time(None), iso_time(1_714_564_800_123)) == (None, "2024-05-01T12:00:00.123Z")
