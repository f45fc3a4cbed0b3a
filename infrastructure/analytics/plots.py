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
:func:`tokens_plot`, :func:`cost_plot` and :func:`tools_plot` map each ``stats``
command and ``--by`` to one of the two.

The picture is SVG, with its text kept as text.  A ``.png`` name is converted
from that SVG by cairosvg (the ``plots`` extra, over the system's libcairo);
without it a :class:`~pentrace.errors.UsageError` says so.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Final

from pentrace.errors import UsageError
from pentrace.infrastructure.analytics import queries
from pentrace.infrastructure.analytics.charts import Chart, chart_svg, human
from pentrace.infrastructure.analytics.database import AnalyticsDatabase
from pentrace.infrastructure.storage.atomic import publish_file

__all__ = [
    "MAX_GROUPS",
    "cost_plot",
    "human",
    "plot_daily",
    "plot_groups",
    "tokens_plot",
    "tools_plot",
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


def _when(since: str | None, until: str | None, days: list[str]) -> str:
    """``2026-11-01 to 2026-11-30 (UTC)``: the asked range, else the days in the data."""
    first = since or (min(days) if days else None)
    last = until or (max(days) if days else None)
    if first is None and last is None:
        return "all days"
    if first == last:
        return f"{first} (UTC)"
    return f"{first or '…'} to {last or '…'} (UTC)"


def _days_of(db: AnalyticsDatabase, since: str | None, until: str | None) -> list[str]:
    return sorted({str(day) for day, _, _ in queries.tokens_by_day_and_model(db, since, until)})


def tokens_plot(
    db: AnalyticsDatabase,
    by: str,
    since: str | None,
    until: str | None,
    rows: list[dict[str, Any]],
    path: Path,
) -> Path:
    """Total tokens per day stacked by model, or per group of ``--by``."""
    daily = queries.tokens_by_day_and_model(db, since, until)
    when = _when(since, until, sorted({str(d) for d, _, _ in daily}))
    if by == "day":
        return plot_daily(
            daily, path, title=f"Tokens per day by model, {when}", ylabel="total tokens"
        )
    return plot_groups(
        [(row["key"], row["total"]) for row in rows],
        path,
        title=f"Total tokens by {by}, {when}",
        xlabel="total tokens",
        group_label=by,
    )


def cost_plot(
    db: AnalyticsDatabase,
    by: str,
    since: str | None,
    until: str | None,
    rows: list[dict[str, Any]],
    currency: str,
    path: Path,
) -> Path:
    """Cost per day on a time axis, or per group of ``--by``."""
    when = _when(since, until, _days_of(db, since, until))
    unpriced = sorted({model for row in rows for model in row["unpriced"]})
    note = f" (no price: {', '.join(unpriced)})" if unpriced else ""
    if by == "day":
        return plot_daily(
            [(row["key"], "all priced models", row["cost"]) for row in rows],
            path,
            title=f"Cost per day, {when}{note}",
            ylabel=f"cost ({currency})",
            unit=currency,
            series_label="",
        )
    return plot_groups(
        [(row["key"], row["cost"]) for row in rows],
        path,
        title=f"Cost by {by}, {when}{note}",
        xlabel=f"cost ({currency})",
        unit=currency,
        group_label=by,
    )


def tools_plot(
    db: AnalyticsDatabase,
    since: str | None,
    until: str | None,
    tools: list[dict[str, Any]],
    path: Path,
) -> Path:
    """Calls per tool, the failed ones named in the label (the table's main columns)."""
    when = _when(since, until, _days_of(db, since, until))
    return plot_groups(
        [(row["tool"], row["calls"]) for row in tools],
        path,
        title=f"Tool calls by tool, {when}",
        xlabel="calls",
        group_label="tool",
        part={row["tool"]: row["failures"] for row in tools},
        part_label="failed",
    )
