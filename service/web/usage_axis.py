"""The Usage page's shared time axis: which bucket size a range gets, the buckets, and which
of them are kept (active) with a break mark where inactive ones were skipped.

Everything is in UTC, so there is no daylight-saving hour to skip or repeat.  A
bucket is named by the key the read-model queries group by (``--by minute``:
``YYYY-MM-DDTHH:MM``, ``hour``: ``YYYY-MM-DDTHH``, ``day``: ``YYYY-MM-DD``); a
week or a month is the day it starts on, clamped to the range's first day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Final

__all__ = ["QUERY_BY", "RANGES", "Window", "axis", "bucket_of", "label", "size_for", "window"]

RANGES: Final = ("1h", "24h", "7d", "30d", "90d", "all", "custom")
# The grouping each bucket size is read with; weeks and months are folded from days.
QUERY_BY: Final = {"minute": "minute", "hour": "hour", "day": "day", "week": "day", "month": "day"}
_RANGE_DAYS: Final = {"7d": 7, "30d": 30, "90d": 90}


@dataclass(frozen=True, slots=True)
class Window:
    """A range on the axis: the bucket size, every bucket's key in order, and the inclusive
    bounds to query with (days, or minutes for the minute and hour ranges)."""

    size: str
    keys: tuple[str, ...]
    since: str
    until: str


def size_for(days: int) -> str:
    """The bucket size of a range of whole UTC days: hours for one day, then days, weeks
    and months as the range grows."""
    if days <= 1:
        return "hour"
    if days <= 31:
        return "day"
    return "week" if days <= 200 else "month"


def bucket_of(size: str, key: str, first: date) -> str:
    """The bucket a query row's key (a minute, hour or day) belongs to."""
    if size not in ("week", "month"):
        return key
    day = date.fromisoformat(key[:10])
    start = day - timedelta(day.weekday()) if size == "week" else day.replace(day=1)
    return max(start, first).isoformat()


def _days(first: date, last: date, size: str) -> Window:
    count = (last - first).days + 1
    if size == "hour":
        keys = tuple(
            f"{(first + timedelta(d)).isoformat()}T{h:02d}" for d in range(count) for h in range(24)
        )
    else:
        keys = tuple(
            dict.fromkeys(
                bucket_of(size, (first + timedelta(n)).isoformat(), first) for n in range(count)
            )
        )
    return Window(size, keys, first.isoformat(), last.isoformat())


def window(
    name: str,
    now: datetime,
    *,
    since: date | None = None,
    until: date | None = None,
    first_active: date | None = None,
) -> Window | None:
    """The window of a range preset at ``now`` (UTC): ``1h`` is the last 60 minutes by
    minute, ``24h`` the last 24 hours by hour; ``all`` runs from ``first_active`` (the first
    day with data) and ``custom`` from ``since`` to ``until`` (default today).  None when the
    range holds no day (no data at all, or ``since`` after ``until``)."""
    today = now.date()
    if name in ("1h", "24h"):
        minutes = name == "1h"
        step = timedelta(minutes=1) if minutes else timedelta(hours=1)
        end = now.replace(second=0, microsecond=0)
        if not minutes:
            end = end.replace(minute=0)
        count = 60 if minutes else 24
        starts = [end - step * (count - 1 - n) for n in range(count)]
        form = "%Y-%m-%dT%H:%M" if minutes else "%Y-%m-%dT%H"
        keys = tuple(start.strftime(form) for start in starts)
        last = end + step - timedelta(minutes=1)
        return Window(
            "minute" if minutes else "hour",
            keys,
            starts[0].strftime("%Y-%m-%dT%H:%M"),
            last.strftime("%Y-%m-%dT%H:%M"),
        )
    if name in _RANGE_DAYS:
        first = today - timedelta(_RANGE_DAYS[name] - 1)
        return _days(first, today, size_for(_RANGE_DAYS[name]))
    first_day = since if name == "custom" and since is not None else first_active
    last_day = until if name == "custom" and until is not None else today
    if first_day is None or first_day > last_day:
        return None
    return _days(first_day, last_day, size_for((last_day - first_day).days + 1))


def axis(keys: tuple[str, ...], active: set[str]) -> tuple[list[str], list[bool]]:
    """The active buckets in order, and for each whether inactive ones were skipped just
    before it (a break mark); the first bucket never carries one."""
    kept: list[str] = []
    breaks: list[bool] = []
    previous = -1
    for index, key in enumerate(keys):
        if key not in active:
            continue
        breaks.append(bool(kept) and index != previous + 1)
        kept.append(key)
        previous = index
    return kept, breaks


def label(size: str, key: str, previous: str | None) -> str:
    """What the axis shows for a bucket: the time of day for minutes and hours (with the
    day when it differs from the previous kept bucket's), else the day or month."""
    if size in ("minute", "hour"):
        clock = key[11:16] if size == "minute" else f"{key[11:13]}:00"
        same_day = previous is not None and previous[:10] == key[:10]
        return clock if same_day else f"{key[:10]} {clock}"
    if size == "month":
        return key[:7]
    return key if size == "day" else f"week of {key}"
