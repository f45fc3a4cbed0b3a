"""Each kind of value reads one way in text output (``pentrace.cli.output``, ADR 0093)."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pentrace.cli import output
from pentrace.cli.output import Cell, byte_size, count, duration, money, percent, text, utc_time
from pentrace.values import parse_size


def test_counts_money_and_percentages_read_with_separators_and_one_decimal() -> None:
    assert [count(0), count(7300), count(1234567)] == ["0", "7,300", "1,234,567"]
    assert [money(0.00112), money(1234.5), money(None)] == ["0.0011", "1,234.5000", "-"]
    assert [percent(0.1892), percent(0.0), percent(1.0)] == ["18.9%", "0.0%", "100.0%"]
    assert [percent(None), percent(math.nan)] == ["-", "-"]


def test_sizes_are_binary_units_that_the_size_options_read_back() -> None:
    assert [byte_size(0), byte_size(512), byte_size(8386)] == ["0 B", "512 B", "8.2 KiB"]
    assert byte_size(268435456) == "256.0 MiB"  # `ledger cleanup` printed `size 268435456`
    assert byte_size(None) == "-"
    assert parse_size(byte_size(268435456).replace(" ", ""), option="--max-size") == 268435456


def test_ages_and_durations_carry_units() -> None:
    assert duration(14 * 86400) == "14 d"  # `ledger cleanup` printed `age 14.0`
    assert [duration(19.25), duration(45), duration(65), duration(3700)] == [
        "19.2 s",
        "45 s",
        "1 min 5 s",
        "1 h 1 min",
    ]
    assert [duration(90061), duration(None), duration(math.inf)] == ["1 d 1 h", "-", "-"]


def test_times_are_utc_with_milliseconds_and_z_whatever_the_input() -> None:
    moment = datetime(2026, 12, 7, 15, 31, 1, 124567, tzinfo=UTC)
    assert utc_time(moment) == "2026-12-07T15:31:01.124Z"
    assert utc_time(moment.isoformat()) == "2026-12-07T15:31:01.124Z"  # was +00:00, µs
    shifted = moment.astimezone(timezone(timedelta(hours=2)))
    assert utc_time(shifted.isoformat()) == "2026-12-07T15:31:01.124Z"
    assert utc_time("2026-12-07T15:31:01.124Z", minutes=True) == "2026-12-07 15:31"
    assert utc_time("not a time") == "not a time"  # a trace may hold anything
    assert utc_time(None) == "-"


def test_a_piped_table_keeps_machine_forms_and_words_for_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    output.emit_table(
        ("n", "size", "ok", "none", "seen", "at"),
        [
            (
                7300,
                Cell.size(8386),
                True,
                None,
                {"allow": 5, "deny": 1},
                datetime(2026, 1, 1, tzinfo=UTC),
            )
        ],
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split("\t") == [
        "7300",
        "8386",
        "yes",
        "-",
        "allow 5, deny 1",
        "2026-01-01T00:00:00.000Z",
    ]


def test_a_terminal_table_right_aligns_numbers_and_separates_thousands(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(output, "stdout_is_tty", lambda: True)
    output.emit_table(("name", "tokens", "size"), [["a", 7300, Cell.size(8386)], ["bb", 12, None]])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("│")]
    assert rows[0].split("│")[2:4] == ["  7,300 ", " 8.2 KiB "]
    assert rows[1].split("│")[2:4] == ["     12 ", "       - "]


PYTHON = re.compile(r"\b(None|True|False)\b|\{'|\['|object at 0x")
# Keys a person could not tell from a Python value are left out of the keys drawn.
KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.datetimes(timezones=st.just(UTC)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)


@given(VALUES)
def test_no_value_a_table_holds_reads_as_python(value: Any) -> None:
    for shown in (text(value), output._cell(value, tty=False)):
        assert PYTHON.search(shown) is None, shown


def test_a_value_nested_thousands_deep_reads_with_an_ellipsis_not_a_recursion_error() -> None:
    deep: Any = "bottom"
    for _ in range(5000):
        deep = {"k": [deep]}

    shown = output.text(deep)

    assert shown.startswith("k k k")
    assert shown.endswith("…")
    assert "bottom" not in shown
