"""The Usage page's time axis: bucket sizes from the range, minute and hour buckets across day
boundaries in UTC, break marks where empty buckets are skipped, and no rate where a bucket
has nothing to divide."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

from pentrace.projections.analytics.events import minute_of
from pentrace.service.web.usage_axis import axis, bucket_of, label, size_for, window
from pentrace.service.web.usage_charts import UsageSeries, usage_charts


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
    one_day = window("custom", now, since=date(2026, 11, 3), until=date(2026, 11, 3))
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
    assert window("custom", now, since=date(2026, 12, 5), until=date(2026, 12, 1)) is None


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
