"""Reading the requests and tools read models: request outcomes (success rate) and tool calls,
in total or per group, by day or (from the per-minute tables) by hour and minute.

Part of :mod:`pentrace.infrastructure.analytics.queries`, which re-exports it.
"""

from __future__ import annotations

from typing import Any, Final

from pentrace.infrastructure.analytics.database import AnalyticsDatabase
from pentrace.infrastructure.analytics.query_rows import column_of as _column
from pentrace.infrastructure.analytics.query_rows import days_clause as _days
from pentrace.infrastructure.analytics.query_rows import is_fine
from pentrace.infrastructure.analytics.query_rows import rows_of as _rows
from pentrace.projections.session_summary import model_name

__all__ = ["OUTCOME_GROUPS", "TOOL_COUNTS", "TOOL_GROUPS", "outcomes", "requests", "tools"]

OUTCOME_GROUPS: Final = ("model", "provider", "agent", "project", "day", "hour", "minute")
TOOL_GROUPS: Final = ("model", "agent", "project", "day", "hour", "minute")
TOOL_COUNTS: Final = ("calls", "failures", "aborts", "timeouts", "truncations")


def _rate(part: int, whole: int) -> float | None:
    """A share, or None when there is nothing to divide (never a false 0)."""
    return round(part / whole, 4) if whole else None


def outcomes(
    db: AnalyticsDatabase,
    by: str,
    since: str | None = None,
    until: str | None = None,
    *,
    agent: str | None = None,
    model: str | None = None,
) -> list[dict[str, Any]]:
    """Per group: requests ended, by status, retries, and the share that completed
    (``success_rate``), from ``act_minutes``; ``model`` is ``provider/model_id``."""
    column = _column(by, OUTCOME_GROUPS, minutes=True)
    where, params = _days(since, until, "minute", agent=agent)
    rows = _rows(
        db,
        f"SELECT {column} AS key, provider, model, status, SUM(count) AS n, "
        f"SUM(retries) AS r FROM act_minutes{where} GROUP BY {column}, provider, model, status",
        params,
    )
    groups: dict[Any, dict[str, Any]] = {}
    for row in rows:
        name = model_name(row["provider"], row["model"]) or "unknown"
        if model is not None and name != model:
            continue
        key = name if by == "model" else row["key"]
        entry = groups.setdefault(key, {"key": key, "requests": 0, "statuses": {}, "retries": 0})
        entry["requests"] += int(row["n"])
        entry["retries"] += int(row["r"] or 0)
        statuses = entry["statuses"]
        statuses[row["status"]] = statuses.get(row["status"], 0) + int(row["n"])
    result = []
    for key in sorted(groups, key=str):
        entry = groups[key]
        entry["statuses"] = dict(sorted(entry["statuses"].items()))
        entry["completed"] = entry["statuses"].get("completed", 0)
        entry["success_rate"] = _rate(entry["completed"], entry["requests"])
        result.append(entry)
    return result


def requests(
    db: AnalyticsDatabase,
    since: str | None = None,
    until: str | None = None,
    *,
    agent: str | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """Requests by status with retries, compactions by mode and outcome, goal outcomes
    (``agent``: one agent's requests and goals; compactions are not kept per agent;
    ``model``: one model's requests, from the per-minute table; goals and compactions are
    not kept per model)."""
    where, params = _days(since, until, agent=agent)
    days_only, day_params = _days(since, until)
    if model is not None or is_fine(None, since, until):
        found = outcomes(db, "agent", since, until, agent=agent, model=model)
        statuses: dict[str, int] = {}
        for entry in found:
            for status, n in entry["statuses"].items():
                statuses[status] = statuses.get(status, 0) + n
        counted = dict(sorted(statuses.items()))
        retries = sum(entry["retries"] for entry in found)
    else:
        rows = _rows(
            db,
            f"SELECT status, SUM(count) AS n, SUM(retries) AS r FROM act_requests{where} "
            "GROUP BY status ORDER BY status",
            params,
        )
        counted = {row["status"]: int(row["n"]) for row in rows}
        retries = sum(int(row["r"] or 0) for row in rows)
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
        "requests": counted,
        "retries": retries,
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


def tools(
    db: AnalyticsDatabase,
    since: str | None = None,
    until: str | None = None,
    *,
    agent: str | None = None,
    model: str | None = None,
    by: str | None = None,
) -> dict[str, Any]:
    """Per tool: calls, failures, aborts, timeouts, truncations, unanswered; and approvals
    (``model``: one model's calls, from ``tool_minutes``; approvals are not kept per model).

    ``by`` adds ``rows``: the counts per group and tool, with ``failure_rate`` None
    where a group had no call (hour, minute and model from ``tool_minutes``).
    """
    fine = model is not None or is_fine(None, since, until)
    where, params = _days(since, until, "minute" if fine else "day", agent=agent)
    open_where = where + (" AND " if where else " WHERE ") + "answered IS NULL"
    unanswered: dict[str, int] = {}
    for row in _rows(
        db,
        f"SELECT tool, provider, model, COUNT(*) AS n FROM tool_open{open_where} "
        "GROUP BY tool, provider, model",
        params,
    ):
        if model in (None, model_name(row["provider"], row["model"]) or "unknown"):
            unanswered[row["tool"]] = unanswered.get(row["tool"], 0) + int(row["n"])
    result = []
    for row in _tool_counts(db, None, since, until, agent, model):
        counts = {name: row[name] for name in TOOL_COUNTS}
        counts["unanswered"] = unanswered.get(row["tool"], 0)
        rate = counts["failures"] / counts["calls"] if counts["calls"] else 0.0
        result.append({"tool": row["tool"], **counts, "failure_rate": round(rate, 4)})
    where, params = _days(since, until, agent=agent)
    approvals = {
        row["decision"]: int(row["n"])
        for row in _rows(
            db,
            f"SELECT decision, SUM(count) AS n FROM tool_approvals{where} GROUP BY decision",
            params,
        )
    }
    document: dict[str, Any] = {"tools": result, "approvals": dict(sorted(approvals.items()))}
    if by is not None:
        document["by"] = by
        document["rows"] = [
            {**row, "failure_rate": _rate(row["failures"], row["calls"])}
            for row in _tool_counts(db, by, since, until, agent, model)
        ]
    return document


def _tool_counts(
    db: AnalyticsDatabase,
    by: str | None,
    since: str | None,
    until: str | None,
    agent: str | None,
    model: str | None,
) -> list[dict[str, Any]]:
    """The summed counts per tool (and group, as ``key``, when ``by`` is given), in order;
    from ``tool_minutes`` when the grouping, a bound or ``model`` needs it, else
    ``tool_daily``."""
    fine = model is not None or by == "model" or is_fine(by, since, until)
    table, time = ("tool_minutes", "minute") if fine else ("tool_daily", "day")
    groups = ["tool", "provider", "model"] if fine else ["tool"]
    picked = list(groups)
    if by is not None:
        column = _column(by, TOOL_GROUPS, minutes=fine)
        groups.insert(0, column)
        picked.insert(0, f"{column} AS key")
    where, params = _days(since, until, time, agent=agent)
    sums = ", ".join(f"SUM({name}) AS {name}" for name in TOOL_COUNTS)
    found = _rows(
        db,
        f"SELECT {', '.join(picked)}, {sums} FROM {table}{where} GROUP BY {', '.join(groups)}",
        params,
    )
    merged: dict[tuple[str, str], dict[str, int]] = {}
    for row in found:
        name = (model_name(row["provider"], row["model"]) or "unknown") if fine else ""
        if model is not None and name != model:
            continue
        key = name if by == "model" else str(row.get("key", ""))
        entry = merged.setdefault((key, str(row["tool"])), dict.fromkeys(TOOL_COUNTS, 0))
        for count in TOOL_COUNTS:
            entry[count] += int(row[count] or 0)
    return [
        {**({"key": key} if by is not None else {}), "tool": tool, **counts}
        for (key, tool), counts in sorted(merged.items())
    ]
