"""Reading the built-in read models: the one core behind ``pentrace stats`` and the HTTP routes.

Every function returns plain rows (lists of dicts) - the ``--json`` contract
of ``pentrace stats`` (``docs/projections.md``); fields are only ever added.
``since`` / ``until`` are inclusive UTC days (``YYYY-MM-DD``).
"""

from __future__ import annotations

from typing import Any, Final

from pentrace.infrastructure.analytics.database import AnalyticsDatabase
from pentrace.infrastructure.analytics.prices import PriceTable
from pentrace.infrastructure.analytics.query_rows import GROUPS
from pentrace.infrastructure.analytics.query_rows import column_of as _column
from pentrace.infrastructure.analytics.query_rows import days_clause as _days
from pentrace.infrastructure.analytics.query_rows import rows_of as _rows
from pentrace.infrastructure.analytics.session_queries import sessions, tree
from pentrace.projections.session_numbers import model_name

__all__ = [
    "GROUPS",
    "TOKEN_COLUMNS",
    "cost",
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


def tokens(
    db: AnalyticsDatabase,
    by: str = "model",
    since: str | None = None,
    until: str | None = None,
    *,
    agent: str | None = None,
) -> list[dict[str, Any]]:
    """Token counts (requests, input, output, cache_read, cache_write, total) per group;
    ``agent`` keeps one agent's rows."""
    column = _column(by)
    where, params = _days(since, until, agent=agent)
    sums = ", ".join(f"SUM({name}) AS {name}" for name in TOKEN_COLUMNS)
    if by == "model":
        # The model's name is provider/model_id (session_numbers.model_name).
        rows = _rows(
            db,
            f"SELECT provider, model, {sums} FROM tok_daily{where} GROUP BY provider, model",
            params,
        )
        merged: dict[str, dict[str, int]] = {}
        for row in rows:
            name = model_name(row["provider"], row["model"]) or "unknown"
            entry = merged.setdefault(name, dict.fromkeys(TOKEN_COLUMNS, 0))
            for n in TOKEN_COLUMNS:
                entry[n] += int(row[n] or 0)
        return [{"key": name, **merged[name]} for name in sorted(merged)]
    rows = _rows(
        db,
        f"SELECT {column} AS key, {sums} FROM tok_daily{where} GROUP BY {column} ORDER BY {column}",
        params,
    )
    return [{"key": row["key"], **{n: int(row[n] or 0) for n in TOKEN_COLUMNS}} for row in rows]


def cost(
    db: AnalyticsDatabase,
    prices: PriceTable,
    by: str = "model",
    since: str | None = None,
    until: str | None = None,
    *,
    agent: str | None = None,
) -> list[dict[str, Any]]:
    """Cost per group from the price table; models without a price are listed in ``unpriced``."""
    column = _column(by)
    where, params = _days(since, until, agent=agent)
    sums = ", ".join(f"SUM({name}) AS {name}" for name in TOKEN_COLUMNS)
    rows = _rows(
        db,
        f"SELECT {column} AS key, provider, model, {sums} FROM tok_daily{where} "
        f"GROUP BY {column}, provider, model",
        params,
    )
    out: dict[Any, dict[str, Any]] = {}
    for row in rows:
        if by == "model":
            row["key"] = model_name(row["provider"], row["model"]) or "unknown"
        entry = out.setdefault(
            row["key"],
            {
                "key": row["key"],
                "cost": 0.0,
                "currency": prices.currency,
                "total": 0,
                "unpriced": [],
            },
        )
        entry["total"] += int(row["total"] or 0)
        price = prices.price_for(row["model"])
        if price is None:
            if row["model"] not in entry["unpriced"]:
                entry["unpriced"].append(row["model"])
            continue
        entry["cost"] += price.cost(
            int(row["input"] or 0),
            int(row["output"] or 0),
            int(row["cache_read"] or 0),
            int(row["cache_write"] or 0),
        )
    return [out[key] for key in sorted(out, key=str)]


def tools(
    db: AnalyticsDatabase,
    since: str | None = None,
    until: str | None = None,
    *,
    agent: str | None = None,
) -> dict[str, Any]:
    """Per tool: calls, failures, aborts, timeouts, truncations, unanswered; and approvals."""
    where, params = _days(since, until, agent=agent)
    names = ("calls", "failures", "aborts", "timeouts", "truncations")
    sums = ", ".join(f"SUM({name}) AS {name}" for name in names)
    rows = _rows(db, f"SELECT tool, {sums} FROM tool_daily{where} GROUP BY tool", params)
    open_where = where + (" AND " if where else " WHERE ") + "answered IS NULL"
    unanswered = {
        row["tool"]: int(row["n"])
        for row in _rows(
            db, f"SELECT tool, COUNT(*) AS n FROM tool_open{open_where} GROUP BY tool", params
        )
    }
    result = []
    for row in sorted(rows, key=lambda r: str(r["tool"])):
        counts = {name: int(row[name] or 0) for name in names}
        counts["unanswered"] = unanswered.get(row["tool"], 0)
        rate = counts["failures"] / counts["calls"] if counts["calls"] else 0.0
        result.append({"tool": row["tool"], **counts, "failure_rate": round(rate, 4)})
    approvals = {
        row["decision"]: int(row["n"])
        for row in _rows(
            db,
            f"SELECT decision, SUM(count) AS n FROM tool_approvals{where} GROUP BY decision",
            params,
        )
    }
    return {"tools": result, "approvals": dict(sorted(approvals.items()))}


def requests(
    db: AnalyticsDatabase,
    since: str | None = None,
    until: str | None = None,
    *,
    agent: str | None = None,
) -> dict[str, Any]:
    """Requests by status with retries, compactions by mode and outcome, goal outcomes
    (``agent``: one agent's requests and goals; compactions are not kept per agent)."""
    where, params = _days(since, until, agent=agent)
    days_only, day_params = _days(since, until)
    statuses = _rows(
        db,
        f"SELECT status, SUM(count) AS n, SUM(retries) AS r FROM act_requests{where} "
        "GROUP BY status ORDER BY status",
        params,
    )
    compactions = _rows(
        db,
        "SELECT mode, outcome, COUNT(*) AS n, AVG(context) AS avg_context, "
        f"MAX(context) AS max_context FROM act_compactions{days_only} "
        "GROUP BY mode, outcome ORDER BY mode, outcome",
        day_params,
    )
    goals = _rows(
        db,
        f"SELECT outcome, SUM(count) AS n FROM act_goals{where} GROUP BY outcome ORDER BY outcome",
        params,
    )
    return {
        "requests": {row["status"]: int(row["n"]) for row in statuses},
        "retries": sum(int(row["r"] or 0) for row in statuses),
        "compactions": [
            {
                "mode": row["mode"],
                "outcome": row["outcome"],
                "count": int(row["n"]),
                "avg_context": None if row["avg_context"] is None else float(row["avg_context"]),
                "max_context": None if row["max_context"] is None else int(row["max_context"]),
            }
            for row in compactions
        ],
        "goals": {row["outcome"]: int(row["n"]) for row in goals},
    }


def tokens_by_day_and_model(
    db: AnalyticsDatabase, since: str | None = None, until: str | None = None
) -> list[tuple[str, str, float]]:
    """``(day, model, total tokens)`` rows, for the stacked picture."""
    where, params = _days(since, until)
    rows = _rows(
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
