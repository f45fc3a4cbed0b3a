"""Pictures of the read models: what ``pentrace stats ... --plot`` draws next to its table.

Two shapes, chosen by the grouping the table uses, both drawn by the one
chart engine (:mod:`.charts`, the viewer's too):

* per day (:func:`plot_daily`): bars on a real time axis (every day a column,
  so a gap of weeks is a gap), stacked by a series such as the model, with
  date ticks that never crowd and a legend;
* per anything else (:func:`plot_groups`): one horizontal bar per group (model,
  project, agent, tool ...), largest first, each labelled with its value.

Values are shown in human units (``12k``, ``3.4M``; money with its currency),
never with a ``1e7`` offset.  Titles say what is shown and for which days.
``pentrace stats`` maps each kind and ``--by`` to one of the two (its ``PLOTS`` table).

Both pictures and the viewer's Usage page put time on an axis: :func:`window` is
the Usage page's (which bucket size a range gets, the buckets, and which are
kept with a break mark where inactive ones were skipped; below).

The picture is SVG, with its text kept as text.  A ``.png`` name is converted
from that SVG by cairosvg (the ``plots`` extra, over the system's libcairo);
without it a :class:`~pentrace.errors.UsageError` says so.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Final

from pentrace.errors import UsageError
from pentrace.infrastructure.analytics.charts import Chart, chart_svg, human
from pentrace.infrastructure.storage.atomic import publish_file

__all__ = [
    "MAX_GROUPS",
    "QUERY_BY",
    "RANGES",
    "Window",
    "axis",
    "bucket_of",
    "custom_range",
    "human",
    "label",
    "moment",
    "plot_daily",
    "plot_groups",
    "size_for",
    "span_size",
    "window",
]

MAX_GROUPS: Final = 25  # more bars than this do not read; the title counts the rest


def _check(path: Path) -> None:
    if path.suffix.lower() not in {".png", ".svg"}:
        raise UsageError(
            f"--plot {path}: expected a .png or .svg file name, found {path.suffix or 'none'}",
            hint="for example --plot tokens.png",
        )


def _png(svg: str, path: Path) -> bytes:
    try:
        import cairosvg  # the plots extra; it loads the system's libcairo
    except (ImportError, OSError):
        raise UsageError(
            f"--plot {path.name}: a PNG needs cairosvg (and libcairo), found it not installed",
            hint="pip install 'pentrace[plots]', or name an .svg file",
        ) from None
    data: bytes = cairosvg.svg2png(bytestring=svg.encode("utf-8"))
    return data


def _save(chart: Chart, path: Path) -> Path:
    """Draw, convert for a .png name, then publish atomically at 0600 like every file
    pentrace writes."""
    svg = chart_svg(chart)
    data = _png(svg, path) if path.suffix.lower() == ".png" else svg.encode("utf-8")
    publish_file(path.absolute(), [data], overwrite=True)
    return path


def _day_ticks(days: list[date]) -> list[str]:
    """The text under each day: a few days get a tick each, more get months, years beyond."""
    span = (days[-1] - days[0]).days
    if span < 21:
        step = max(1, span // 7)
        return [d.strftime("%b %d") if n % step == 0 else "" for n, d in enumerate(days)]
    if span <= 800:
        return [
            (d.strftime("%b %Y") if d.month == 1 else d.strftime("%b")) if d.day == 1 else ""
            for d in days
        ]
    return [d.strftime("%Y") if (d.month, d.day) == (1, 1) else "" for d in days]


def plot_daily(
    rows: list[tuple[str, str, float]],
    path: Path,
    *,
    title: str,
    ylabel: str,
    unit: str = "",
    series_label: str = "model",
) -> Path:
    """Bars per UTC day on a time axis, stacked by series: ``(YYYY-MM-DD, series, value)`` rows."""
    _check(path)
    totals: dict[str, dict[date, float]] = defaultdict(lambda: defaultdict(float))
    for day, name, value in rows:
        totals[str(name)][date.fromisoformat(str(day))] += value
    found = sorted({d for per_day in totals.values() for d in per_day})
    days = (
        [found[0] + timedelta(n) for n in range((found[-1] - found[0]).days + 1)] if found else []
    )
    # The largest series at the bottom of each stack, where it is easiest to compare.
    order = sorted(totals, key=lambda n: (-sum(totals[n].values()), n))
    chart = Chart(
        title,
        [d.isoformat() for d in days],
        [(name, [totals[name].get(d, 0.0) for d in days]) for name in order],
        unit=unit,
        x_title="day (UTC)",
        y_title=ylabel,
        ticks=_day_ticks(days) if days else [],
        legend_title=series_label,
    )
    return _save(chart, path)


def plot_groups(
    rows: list[tuple[str, float]],
    path: Path,
    *,
    title: str,
    xlabel: str,
    unit: str = "",
    group_label: str = "",
    part: dict[str, float] | None = None,
    part_label: str = "",
) -> Path:
    """One horizontal bar per group, largest on top, each labelled with its value.

    ``part`` marks a share of some bars in red (failed calls of a tool), with a
    legend.  Past :data:`MAX_GROUPS` groups the smallest are left out and the
    title says how many and how much they hold.
    """
    _check(path)
    ranked = sorted(((str(k), float(v)) for k, v in rows), key=lambda kv: (-kv[1], kv[0]))
    if len(ranked) > MAX_GROUPS:
        rest = ranked[MAX_GROUPS:]
        ranked = ranked[:MAX_GROUPS]
        left_out = human(sum(v for _, v in rest), unit)
        title += f"\n(top {MAX_GROUPS}; {len(rest)} smaller left out, {left_out} in all)"
    values = [v for _, v in ranked]
    texts = [human(v, unit) for v in values]
    series = [(xlabel, values)]
    if part:
        shares = [min(part.get(k, 0.0), v) for k, v in ranked]
        series = [(xlabel, [v - s for v, s in zip(values, shares, strict=True)]),
                  (part_label, shares)]  # fmt: skip
        texts = [f"{t} ({human(p, unit)} {part_label})" for t, p in zip(texts, shares, strict=True)]
    chart = Chart(
        title,
        [_short(k) for k, _ in ranked],
        series,
        unit=unit,
        x_title=xlabel,
        y_title=group_label,
        horizontal=True,
        value_labels=texts,
    )
    return _save(chart, path)


def _short(label: str, width: int = 40) -> str:
    """A group label that fits beside its bar (ids keep their distinctive end)."""
    return label if len(label) <= width else "…" + label[-(width - 1) :]


# The Usage page's shared time axis: which bucket size a range gets, the buckets, and which
# of them are kept (active) with a break mark where inactive ones were skipped.
#
# A custom range runs from a start minute to an end minute (``since`` / ``until``:
# ``YYYY-MM-DDTHH:MM`` in UTC, or a day ``YYYY-MM-DD``: the start of that day, or
# as the end the whole day), and gets its bucket size from its length as the
# presets do (:func:`span_size`).
#
# Everything is in UTC, so there is no daylight-saving hour to skip or repeat.  A
# bucket is named by the key the read-model queries group by (``--by minute``:
# ``YYYY-MM-DDTHH:MM``, ``hour``: ``YYYY-MM-DDTHH``, ``day``: ``YYYY-MM-DD``); a
# week or a month is the day it starts on, clamped to the range's first day.

RANGES: Final = ("1h", "24h", "7d", "30d", "90d", "all", "custom")
# The grouping each bucket size is read with; weeks and months are folded from days.
QUERY_BY: Final = {"minute": "minute", "hour": "hour", "day": "day", "week": "day", "month": "day"}
_RANGE_DAYS: Final = {"7d": 7, "30d": 30, "90d": 90}
_MOMENT: Final = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})(?:[T ]([0-9]{2}:[0-9]{2})(:[0-9]{2})?)?")
_MINUTE: Final = timedelta(minutes=1)
_MINUTE_FORM: Final = "%Y-%m-%dT%H:%M"
_LONGEST: Final = timedelta(days=36_525)  # a hundred years: 1,200 month buckets at most


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


def span_size(span: timedelta) -> str:
    """The bucket size of a custom range as long as ``span``: minutes up to two hours,
    hours up to one day, then as :func:`size_for` its days (begun days count)."""
    if span <= timedelta(hours=2):
        return "minute"
    if span <= timedelta(days=1):
        return "hour"
    return size_for(-(-span // timedelta(days=1)))


def moment(raw: str | None, name: str, *, end: bool) -> datetime | None:
    """A custom range's bound as typed: ``YYYY-MM-DDTHH:MM`` (seconds, if any, dropped) or a
    day ``YYYY-MM-DD`` (its start; as the ``end``, the start of the next day, so the day is
    in the range), read as UTC; None when not given.  A bad value is a
    :class:`~pentrace.errors.UsageError` naming ``name``."""
    if raw is None:
        return None
    found = _MOMENT.fullmatch(raw)
    try:
        if found is None:
            raise ValueError(raw)
        day = date.fromisoformat(found[1])
        if found[2] is None:
            start = datetime(day.year, day.month, day.day, tzinfo=UTC)
            return start + timedelta(days=1) if end else start
        hour, minute = (int(part) for part in found[2].split(":"))
        return datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)
    except (ValueError, OverflowError):
        raise UsageError(
            f"{name}: expected a UTC time YYYY-MM-DDTHH:MM or a day YYYY-MM-DD, found {raw[:40]!r}",
            hint=f"for example {name}=2026-11-28T09:30",
        ) from None


def custom_range(
    since: str | None, until: str | None, now: datetime
) -> tuple[datetime | None, datetime | None]:
    """The start and end of a custom range as typed (:func:`moment`), checked: the end after
    the start, at most a hundred years between them (the end defaults to ``now``)."""
    start, end = moment(since, "since", end=False), moment(until, "until", end=True)
    if start is not None and end is not None and end <= start:
        raise UsageError(
            f"custom range: expected the end after the start, found the end {until!r} "
            f"not after the start {since!r}",
            hint="pick an end later than the start (a day as the end includes that day)",
        )
    if start is not None and (end or now) - start > _LONGEST:
        raise UsageError(
            f"custom range: expected at most a hundred years, found {since!r} to "
            f"{until or 'now'!r}",
            hint="pick a later start",
        )
    return start, end


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


def _custom(start: datetime, end: datetime) -> Window:
    """The window of ``start`` (inclusive) to ``end`` (exclusive), whole UTC minutes."""
    size = span_size(end - start)
    last = end - _MINUTE
    if size in ("minute", "hour"):
        step = _MINUTE if size == "minute" else timedelta(hours=1)
        first = start if size == "minute" else start.replace(minute=0)
        count = (last - first) // step + 1
        form = _MINUTE_FORM if size == "minute" else "%Y-%m-%dT%H"
        keys = tuple((first + step * n).strftime(form) for n in range(count))
        return Window(size, keys, start.strftime(_MINUTE_FORM), last.strftime(_MINUTE_FORM))
    days = _days(start.date(), last.date(), size)
    if start.time() == end.time() == datetime.min.time():
        return days  # whole days: the per-day read models answer
    return Window(size, days.keys, start.strftime(_MINUTE_FORM), last.strftime(_MINUTE_FORM))


def window(
    name: str,
    now: datetime,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    first_active: date | None = None,
) -> Window | None:
    """The window of a range preset at ``now`` (UTC): ``1h`` is the last 60 minutes by
    minute, ``24h`` the last 24 hours by hour; ``all`` runs from ``first_active`` (the first
    day with data) to today, and ``custom`` from ``start`` (default ``first_active``) to
    ``end`` (exclusive; default the end of the current minute).  None when the range holds
    nothing (no data at all, or ``start`` not before ``end``)."""
    today = now.date()
    if name in ("1h", "24h"):
        minutes = name == "1h"
        step = _MINUTE if minutes else timedelta(hours=1)
        latest = now.replace(second=0, microsecond=0)
        if not minutes:
            latest = latest.replace(minute=0)
        count = 60 if minutes else 24
        starts = [latest - step * (count - 1 - n) for n in range(count)]
        form = _MINUTE_FORM if minutes else "%Y-%m-%dT%H"
        keys = tuple(begin.strftime(form) for begin in starts)
        last = latest + step - _MINUTE
        return Window(
            "minute" if minutes else "hour",
            keys,
            starts[0].strftime(_MINUTE_FORM),
            last.strftime(_MINUTE_FORM),
        )
    if name in _RANGE_DAYS:
        first = today - timedelta(_RANGE_DAYS[name] - 1)
        return _days(first, today, size_for(_RANGE_DAYS[name]))
    if name == "custom":
        if start is None and first_active is not None:
            start = datetime(first_active.year, first_active.month, first_active.day, tzinfo=UTC)
        end = end or now.replace(second=0, microsecond=0) + _MINUTE
        return None if start is None or start >= end else _custom(start, end)
    if first_active is None or first_active > today:
        return None
    return _days(first_active, today, size_for((today - first_active).days + 1))


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
