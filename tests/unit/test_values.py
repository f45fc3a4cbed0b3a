"""The one parser of times, ages and sizes: every form it takes, and the error for the rest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from pentrace.errors import UsageError
from pentrace.values import parse_age, parse_day, parse_size, parse_time

NOW = datetime(2026, 11, 20, 15, 30, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-01", datetime(2026, 11, 1, tzinfo=UTC)),
        ("2026-11-01T09:30", datetime(2026, 11, 1, 9, 30, tzinfo=UTC)),
        ("2026-11-01 09:30:15", datetime(2026, 11, 1, 9, 30, 15, tzinfo=UTC)),
        ("2026-11-01T09:30:00Z", datetime(2026, 11, 1, 9, 30, tzinfo=UTC)),
        ("2026-11-01T11:30:00+02:00", datetime(2026, 11, 1, 9, 30, tzinfo=UTC)),
        ("45s", NOW - timedelta(seconds=45)),
        ("30m", NOW - timedelta(minutes=30)),
        ("12h", NOW - timedelta(hours=12)),
        ("7d", NOW - timedelta(days=7)),
        ("2w", NOW - timedelta(weeks=2)),
        (" 7D ", NOW - timedelta(days=7)),
        ("today", datetime(2026, 11, 20, tzinfo=UTC)),
        ("Yesterday", datetime(2026, 11, 19, tzinfo=UTC)),
        ("now", NOW),
    ],
)
def test_every_time_form(text: str, expected: datetime) -> None:
    assert parse_time(text, NOW) == expected


def test_the_clock_is_the_callers_and_its_zone_does_not_matter() -> None:
    elsewhere = NOW.astimezone(timezone(timedelta(hours=-8)))
    assert parse_time("today", elsewhere) == datetime(2026, 11, 20, tzinfo=UTC)
    assert parse_day("7d", NOW) == "2026-11-13"


@pytest.mark.parametrize(
    "text", ["banana", "2026-13-45", "2026-02-30", "7", "d", "7 days", "2026-W47", "20261101", ""]
)
def test_anything_else_names_the_option_the_value_and_the_forms(text: str) -> None:
    with pytest.raises(UsageError) as error:
        parse_time(text, NOW, option="--until")
    assert error.value.exit_code == 2
    assert error.value.message.startswith(f"--until {text!r}: expected a date (2026-11-01)")
    assert "7d" in error.value.message
    assert "yesterday" in error.value.message
    assert error.value.hint == "for example --until 7d or --until 2026-11-01"


def test_ages() -> None:
    assert parse_age("30d") == timedelta(days=30)
    assert parse_age("90m") == timedelta(minutes=90)
    with pytest.raises(UsageError, match=r"^--older-than '1\.5d': expected a whole number"):
        parse_age("1.5d")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4096", 4096),
        ("4096B", 4096),
        ("500K", 500 * 1024),
        ("1G", 1 << 30),
        ("2GiB", 2 << 30),
        ("1.5GiB", 3 << 29),
        ("1.5 gib", 3 << 29),
        ("10MB", 10_000_000),
        ("10mb", 10_000_000),
        ("3MiB", 3 << 20),
        ("1T", 1 << 40),
    ],
)
def test_sizes(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["lots", "1.5.1G", "1GG", "G", "-1G", "1 PB"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(UsageError) as error:
        parse_size(text, option="--max-size")
    assert error.value.message.startswith(f"--max-size {text!r}: expected bytes (4096)")


@pytest.mark.parametrize(
    "text",
    ["99999999999d", "999999999999w", "1000000d", "9" * 5000 + "d", "²d", "٣d", "1" * 13 + "s"],
)
def test_ages_out_of_range_or_not_ascii_are_usage_errors_not_crashes(text: str) -> None:
    with pytest.raises(UsageError, match="--since") as caught:
        parse_time(text, NOW, option="--since")
    assert len(str(caught.value)) < 300  # a huge value is cut in the message


@pytest.mark.parametrize("text", ["9" * 400, "9" * 31 + "K", "²K"])
def test_sizes_too_long_or_not_ascii_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError, match="--max-size"):
        parse_size(text, option="--max-size")
