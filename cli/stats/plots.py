"""What ``pentrace stats ... --plot`` draws: the same grouping as the table next to it.

``--by day`` is a time axis (tokens stacked by model); any other ``--by``
draws one bar per group of the table.  Titles name the measure, the grouping
and the days covered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pentrace.infrastructure.analytics import plots, queries
from pentrace.infrastructure.analytics.database import AnalyticsDatabase

__all__ = ["cost_plot", "tokens_plot", "tools_plot"]


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
        return plots.plot_daily(
            daily, path, title=f"Tokens per day by model, {when}", ylabel="total tokens"
        )
    return plots.plot_groups(
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
        return plots.plot_daily(
            [(row["key"], "all priced models", row["cost"]) for row in rows],
            path,
            title=f"Cost per day, {when}{note}",
            ylabel=f"cost ({currency})",
            series_label="",
        )
    return plots.plot_groups(
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
    return plots.plot_groups(
        [(row["tool"], row["calls"]) for row in tools],
        path,
        title=f"Tool calls by tool, {when}",
        xlabel="calls",
        group_label="tool",
        part={row["tool"]: row["failures"] for row in tools},
        part_label="failed",
    )
