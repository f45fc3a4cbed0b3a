"""The Usage page's time axis: bucket sizes from the range, minute and hour buckets across day
boundaries in UTC, break marks where empty buckets are skipped, and no rate where a bucket
has nothing to divide."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

import pytest

from pentrace.errors import UsageError
from pentrace.infrastructure.analytics.plots import (
    axis,
    bucket_of,
    custom_range,
    label,
    moment,
    size_for,
    span_size,
    window,
)
from pentrace.projections.analytics.events import minute_of
from pentrace.service.web.usage import UsageSeries, usage_charts


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def test_the_last_hour_is_sixty_minute_buckets_that_cross_midnight() -> None:
    win = window("1h", datetime(2026, 11, 29, 0, 30, 42, tzinfo=UTC))
    assert win is not None
    assert win.size == "minute"
    assert len(win.keys) == 60
    assert win.keys[0] == "2026-11-28T23:31"
    assert win.keys[28:30] == ("2026-11-28T23:59", "2026-11-29T00:00")
    assert win.keys[-1] == "2026-11-29T00:30"
    assert (win.since, win.until) == ("2026-11-28T23:31", "2026-11-29T00:30")


def test_the_last_24_hours_are_hour_buckets_that_cross_midnight() -> None:
    win = window("24h", datetime(2026, 11, 29, 5, 10, tzinfo=UTC))
    assert win is not None
    assert win.size == "hour"
    assert len(win.keys) == 24
    assert (win.keys[0], win.keys[17], win.keys[18], win.keys[-1]) == (
        "2026-11-28T06",
        "2026-11-28T23",
        "2026-11-29T00",
        "2026-11-29T05",
    )
    # The bounds are minutes: the whole first and last hour.
    assert (win.since, win.until) == ("2026-11-28T06:00", "2026-11-29T05:59")


def test_minute_keys_are_utc_with_no_daylight_saving_gap_or_repeat() -> None:
    # 2026-03-29 and 2026-10-25 are when European clocks move; UTC minutes run on evenly.
    for start in (
        datetime(2026, 3, 29, 0, 0, tzinfo=UTC),
        datetime(2026, 10, 25, 0, 0, tzinfo=UTC),
    ):
        keys = [minute_of(_ms(start + timedelta(minutes=n))) for n in range(240)]
        assert len(set(keys)) == 240
        assert keys == sorted(keys)
        assert keys[60] == start.strftime("%Y-%m-%dT01:00")
    assert minute_of(_ms(datetime(2026, 11, 28, 23, 59, 59, 999_000, tzinfo=UTC))) == (
        "2026-11-28T23:59"
    )
    assert minute_of(_ms(datetime(2026, 11, 29, tzinfo=UTC))) == "2026-11-29T00:00"


def test_the_bucket_size_grows_with_the_range() -> None:
    now = datetime(2026, 11, 29, 12, tzinfo=UTC)
    sizes = {name: window(name, now) for name in ("7d", "30d", "90d")}
    assert {name: win.size for name, win in sizes.items() if win} == {
        "7d": "day",
        "30d": "day",
        "90d": "week",
    }
    one_day = window("custom", now, start=_at("2026-11-03T00:00"), end=_at("2026-11-04T00:00"))
    assert one_day is not None
    assert (one_day.size, len(one_day.keys), one_day.keys[0]) == ("hour", 24, "2026-11-03T00")
    assert [size_for(n) for n in (1, 2, 31, 32, 200, 201)] == [
        "hour",
        "day",
        "day",
        "week",
        "week",
        "month",
    ]
    assert window("all", now, first_active=None) is None  # no data at all
    later, earlier = datetime(2026, 12, 5, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC)
    assert window("custom", now, start=later, end=earlier) is None


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_a_custom_bound_is_a_utc_minute_or_a_day() -> None:
    assert moment("2026-11-28T09:30", "since", end=False) == _at("2026-11-28T09:30")
    assert moment("2026-11-28 09:30:45", "since", end=False) == _at("2026-11-28T09:30")
    # A day starts the range at its midnight; as the end it takes the whole day in.
    assert moment("2026-11-28", "since", end=False) == _at("2026-11-28T00:00")
    assert moment("2026-11-28", "until", end=True) == _at("2026-11-29T00:00")
    assert moment("2026-12-31", "until", end=True) == _at("2027-01-01T00:00")
    assert moment(None, "since", end=False) is None
    for bad in ("yesterday", "2026-02-30", "2026-11-28T24:00", "2026-11-28T09:30Z", "9999-12-31"):
        with pytest.raises(UsageError) as refused:
            moment(bad, "until", end=True)
        assert refused.value.message.startswith("until: expected a UTC time YYYY-MM-DDTHH:MM")
        assert repr(bad) in refused.value.message
        assert refused.value.hint == "for example until=2026-11-28T09:30"


def test_a_custom_range_needs_its_end_after_its_start_and_at_most_a_century() -> None:
    now = _at("2026-11-29T12:00")
    assert custom_range("2026-11-28T09:30", "2026-11-28T09:31", now) == (
        _at("2026-11-28T09:30"),
        _at("2026-11-28T09:31"),
    )
    assert custom_range(None, None, now) == (None, None)
    assert custom_range("2026-11-28", "2026-11-28", now) == (
        _at("2026-11-28T00:00"),
        _at("2026-11-29T00:00"),
    )
    for since, until in (("2026-11-28T09:30", "2026-11-28T09:30"), ("2026-11-28", "2026-11-27")):
        with pytest.raises(UsageError, match="expected the end after the start") as refused:
            custom_range(since, until, now)
        assert f"the end {until!r} not after the start {since!r}" in refused.value.message
    with pytest.raises(UsageError, match="at most a hundred years"):
        custom_range("1900-01-01", None, now)
    with pytest.raises(UsageError, match="until: expected a UTC time"):
        custom_range("2026-11-28", "soon", now)


def test_a_custom_range_gets_its_bucket_size_from_its_length() -> None:
    minutes = [1, 120, 121, 1440, 1441, 31 * 1440, 31 * 1440 + 1, 200 * 1440, 200 * 1440 + 1]
    assert [span_size(timedelta(minutes=n)) for n in minutes] == [
        "minute",
        "minute",
        "hour",
        "hour",
        "day",
        "day",
        "week",
        "week",
        "month",
    ]
    now = _at("2026-11-29T12:00")
    cases = {
        # Half an hour across midnight: 30 minute buckets, the end minute left out.
        ("2026-11-28T23:45", "2026-11-29T00:15"): (
            ("minute", 30, "2026-11-28T23:45", "2026-11-29T00:14"),
            ("2026-11-28T23:45", "2026-11-29T00:14"),
        ),
        # Five and a half hours: hours from the start's hour; the bounds stay minutes.
        ("2026-11-28T09:30", "2026-11-28T15:00"): (
            ("hour", 6, "2026-11-28T09", "2026-11-28T14"),
            ("2026-11-28T09:30", "2026-11-28T14:59"),
        ),
        # Days cut at a minute keep minute bounds; whole days are read as days.
        ("2026-11-01T09:30", "2026-11-05T08:00"): (
            ("day", 5, "2026-11-01", "2026-11-05"),
            ("2026-11-01T09:30", "2026-11-05T07:59"),
        ),
        ("2026-11-01T00:00", "2026-11-05T00:00"): (
            ("day", 4, "2026-11-01", "2026-11-04"),
            ("2026-11-01", "2026-11-04"),
        ),
    }
    for (since, until), (buckets, bounds) in cases.items():
        win = window("custom", now, start=_at(since), end=_at(until))
        assert win is not None
        assert (win.size, len(win.keys), win.keys[0], win.keys[-1]) == buckets, since
        assert (win.since, win.until) == bounds, since
    across = window("custom", now, start=_at("2026-11-28T23:45"), end=_at("2026-11-29T00:15"))
    assert across is not None
    assert across.keys[14:16] == ("2026-11-28T23:59", "2026-11-29T00:00")
    # No start: from the first day with data; no end: to the end of the current minute.
    win = window("custom", now, first_active=date(2026, 11, 29))
    assert win is not None
    assert (win.size, win.since, win.until) == ("hour", "2026-11-29T00:00", "2026-11-29T12:00")


def test_weeks_and_months_start_on_their_first_day_clamped_to_the_range() -> None:
    first = date(2026, 11, 4)  # a Wednesday
    assert bucket_of("week", "2026-11-06", first) == "2026-11-04"
    assert bucket_of("week", "2026-11-09", first) == "2026-11-09"  # the next Monday
    assert bucket_of("month", "2026-12-30", first) == "2026-12-01"
    assert bucket_of("month", "2026-11-30", first) == "2026-11-04"
    assert bucket_of("minute", "2026-11-06T10:11", first) == "2026-11-06T10:11"


def test_skipped_buckets_leave_a_break_before_the_next_kept_one_only() -> None:
    keys = ("a", "b", "c", "d", "e", "f")
    assert axis(keys, {"b", "c", "e"}) == (["b", "c", "e"], [False, False, True])
    assert axis(keys, {"a", "f"}) == (["a", "f"], [False, True])
    assert axis(keys, set()) == ([], [])


def test_minute_labels_name_the_day_where_it_changes() -> None:
    kept = ["2026-11-28T23:58", "2026-11-28T23:59", "2026-11-29T00:03"]
    labels = [label("minute", k, kept[n - 1] if n else None) for n, k in enumerate(kept)]
    assert labels == ["2026-11-28 23:58", "23:59", "2026-11-29 00:03"]
    assert label("hour", "2026-11-29T07", "2026-11-29T05") == "07:00"
    assert label("month", "2026-11-01", None) == "2026-11"


def _series() -> UsageSeries:
    win = window("1h", datetime(2026, 11, 29, 0, 30, tzinfo=UTC))
    assert win is not None
    data = UsageSeries(win)
    # 23:40 has two requests, one completed; 00:10 only began a request (tokens, no
    # request_end yet): it has activity but no success rate; 00:11 has tool calls only.
    data.requests = {"2026-11-28T23:40": [2.0, 1.0]}
    zero = dict.fromkeys(("input", "output", "cache_read", "cache_write"), 0.0)
    data.tokens = {
        "2026-11-28T23:40": {
            **zero,
            "input": 30.0,
            "cache_read": 10.0,
            "total": 40.0,
            "requests": 2,
        },
        "2026-11-29T00:10": {**zero, "input": 5.0, "total": 5.0, "requests": 1.0},
    }
    data.tools = {"2026-11-29T00:11": {"exec_command": [2.0, 1.0]}}
    return data


def test_a_bucket_with_nothing_to_divide_shows_no_rate_never_zero() -> None:
    html = "".join(usage_charts(_series(), "last hour", "USD"))
    assert 'data-size="minute" data-buckets="60" data-active="3"' in html
    # Three kept minutes on one axis; a gap before 00:10 only (00:11 follows it).
    assert html.count('<g class="break">') == 5
    success = re.findall(r"<title>([^<]*): completed \(share of requests\) ([^<]*)</title>", html)
    assert success == [("2026-11-28 23:40", "50.0%")] * 2  # two request charts, one point each
    hits = re.findall(r"<title>([^<]*): cache hit rate ([^<]*)</title>", html)
    assert hits == [("2026-11-28 23:40", "25.0%"), ("2026-11-29 00:10", "0.0%")]
    failures = re.findall(r"<title>([^<]*): tool failure rate ([^<]*)</title>", html)
    assert failures == [("00:11", "50.0%")]
    assert "<title>00:11: exec_command 2, 50.0% failed</title>" in html  # per tool, on hover
    assert re.search(r"[^\d.]0\.0% completed", html) is None
    assert '<tr data-bucket="2026-11-29T00:10" data-requests="0" data-completed="0"' in html
    row = html[html.index('data-bucket="2026-11-29T00:10"') :].split("</tr>")[0]
    assert "<td>-</td>" in row  # its success rate: none, not 0 %


def test_a_range_without_any_day_says_so() -> None:
    assert usage_charts(None, "all time", "USD") == [
        '<p class="meta" data-size="">No data in this range.</p>'
    ]
