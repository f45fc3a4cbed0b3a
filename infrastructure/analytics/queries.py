"""Reading the built-in read models: the one core behind ``pentrace stats`` and the HTTP routes.

Every function returns plain rows (lists of dicts) - the ``--json`` contract
of ``pentrace stats`` (``docs/projections.md``); fields are only ever added.
``since`` / ``until`` are inclusive UTC days (``YYYY-MM-DD``), or minutes
(``YYYY-MM-DDTHH:MM``) where a per-minute table is read (``--by hour`` / ``minute``).
"""

from __future__ import annotations

from typing import Any, Final

from pentrace.errors import UsageError
from pentrace.infrastructure.analytics.activity_queries import (
    outcomes,
    requests,
    sessions,
    tools,
    tree,
)
from pentrace.infrastructure.analytics.database import (
    GROUPS,
    AnalyticsDatabase,
    column_of,
    days_clause,
    is_fine,
    rows_of,
)
from pentrace.infrastructure.analytics.prices import CostTally, PriceTable
from pentrace.projections.session_summary import model_name

__all__ = [
    "GROUPS",
    "TOKEN_COLUMNS",
    "cost",
    "outcomes",
    "requests",
    "sessions",
    "tokens",
    "tokens_by_day_and_model",
    "tools",
    "tree",
]

TOKEN_COLUMNS: Final = (
    "requests",
    "usage_records",
    "input",
    "output",
    "cache_read",
    "cache_write",
    "total",
)


def _token_rows(
    db: AnalyticsDatabase,
    by: str,
    since: str | None,
    until: str | None,
    agent: str | None,
    model: str | None,
) -> list[dict[str, Any]]:
    """Summed token rows per (group, provider, model), from ``tok_minutes`` when the grouping
    or a bound is finer than a day, else ``tok_daily``; ``model`` keeps one model's rows."""
    fine = is_fine(by, since, until)
    if fine and by == "session":
        raise UsageError(
            "--by session: token use per session is kept per UTC day only",
            hint="give --since/--until as days, or group by model, agent or time",
        )
    column = column_of(by, minutes=fine)
    table, time = ("tok_minutes", "minute") if fine else ("tok_daily", "day")
    where, params = days_clause(since, until, time, agent=agent)
    sums = ", ".join(f"SUM({name}) AS {name}" for name in TOKEN_COLUMNS)
    rows = rows_of(
        db,
        f"SELECT {column} AS key, provider, model, {sums} FROM {table}{where} "
        f"GROUP BY {column}, provider, model",
        params,
    )
    out = []
    for row in rows:
        # The model's name is provider/model_id (session_numbers.model_name).
        name = model_name(row["provider"], row["model"]) or "unknown"
        if model is not None and name != model:
            continue
        key = name if by == "model" else row["key"]
        out.append({**row, "key": key, **{n: int(row[n] or 0) for n in TOKEN_COLUMNS}})
    return out


def tokens(
    db: AnalyticsDatabase,
    by: str = "model",
    since: str | None = None,
    until: str | None = None,
    *,
    agent: str | None = None,
    model: str | None = None,
) -> list[dict[str, Any]]:
    """Token counts (requests, input, output, cache_read, cache_write, total) per group;
    ``agent`` / ``model`` (``provider/model_id``) keep one agent's / model's rows."""
    merged: dict[Any, dict[str, int]] = {}
    for row in _token_rows(db, by, since, until, agent, model):
        entry = merged.setdefault(row["key"], dict.fromkeys(TOKEN_COLUMNS, 0))
        for n in TOKEN_COLUMNS:
            entry[n] += row[n]
    return [{"key": key, **merged[key]} for key in sorted(merged, key=str)]


def cost(
    db: AnalyticsDatabase,
    prices: PriceTable,
    by: str = "model",
    since: str | None = None,
    until: str | None = None,
    *,
    agent: str | None = None,
    model: str | None = None,
) -> list[dict[str, Any]]:
    """Cost per group through :class:`CostTally` (each model priced on its own): the models
    nobody prices are listed in ``unpriced``, the ones a fallback rate priced in ``fallback``."""
    tallies: dict[Any, CostTally] = {}
    totals: dict[Any, int] = {}
    for row in _token_rows(db, by, since, until, agent, model):
        key = row["key"]
        tally = tallies.get(key) or tallies.setdefault(key, CostTally(prices))
        totals[key] = totals.get(key, 0) + row["total"]
        name = model_name(row["provider"], row["model"]) or "unknown"
        tally.add(name, row["input"], row["output"], row["cache_read"], row["cache_write"])
    return [
        {
            "key": key,
            "cost": tallies[key].amount(),  # null when no model of the group has a price
            "currency": prices.currency,
            "total": totals[key],
            **tallies[key].flags(),
        }
        for key in sorted(tallies, key=str)
    ]


def tokens_by_day_and_model(
    db: AnalyticsDatabase, since: str | None = None, until: str | None = None
) -> list[tuple[str, str, float]]:
    """``(day, model, total tokens)`` rows, for the stacked picture."""
    where, params = days_clause(since, until)
    rows = rows_of(
        db,
        f"SELECT day, provider, model, SUM(total) AS total FROM tok_daily{where} "
        "GROUP BY day, provider, model",
        params,
    )
    return [
        (
            row["day"],
            model_name(row["provider"], row["model"]) or "unknown",
            float(row["total"] or 0),
        )
        for row in rows
    ]
