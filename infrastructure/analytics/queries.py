"""Reading the built-in read models: the one core behind ``pentrace stats`` and the HTTP routes.

Every function returns plain rows (lists of dicts) - the ``--json`` contract
of ``pentrace stats`` (``docs/projections.md``); fields are only ever added.
``since`` / ``until`` are inclusive UTC days (``YYYY-MM-DD``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Final

from sqlalchemy import text

from pentrace.errors import UsageError
from pentrace.infrastructure.analytics.database import AnalyticsDatabase
from pentrace.infrastructure.analytics.prices import PriceTable
from pentrace.projections.session_numbers import model_name

__all__ = [
    "GROUPS",
    "cost",
    "requests",
    "sessions",
    "tokens",
    "tokens_by_day_and_model",
    "tools",
    "tree",
]

GROUPS: Final = {
    "model": "model",
    "provider": "provider",
    "agent": "agent",
    "project": "project",
    "day": "day",
    "session": "session_id",
}
# requests: requests begun; usage_records: token_usage records (session_numbers).
_TOKENS: Final = (
    "requests",
    "usage_records",
    "input",
    "output",
    "cache_read",
    "cache_write",
    "total",
)


def _column(by: str, allowed: tuple[str, ...] = tuple(GROUPS)) -> str:
    if by not in allowed:
        raise UsageError(
            f"--by: expected one of {', '.join(allowed)}, found {by!r}",
            hint="for example --by model",
        )
    return GROUPS[by]


def _days(since: str | None, until: str | None, column: str = "day") -> tuple[str, dict[str, Any]]:
    clauses, params = [], {}
    if since:
        clauses.append(f"{column} >= :since")
        params["since"] = since
    if until:
        clauses.append(f"{column} <= :until")
        params["until"] = until
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def _rows(db: AnalyticsDatabase, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    with db.reading("read analytics") as conn:
        return [dict(row) for row in conn.execute(text(sql), params).mappings()]


def tokens(
    db: AnalyticsDatabase, by: str = "model", since: str | None = None, until: str | None = None
) -> list[dict[str, Any]]:
    """Token counts (requests, input, output, cache_read, cache_write, total) per group."""
    column = _column(by)
    where, params = _days(since, until)
    sums = ", ".join(f"SUM({name}) AS {name}" for name in _TOKENS)
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
            entry = merged.setdefault(name, dict.fromkeys(_TOKENS, 0))
            for n in _TOKENS:
                entry[n] += int(row[n] or 0)
        return [{"key": name, **merged[name]} for name in sorted(merged)]
    rows = _rows(
        db,
        f"SELECT {column} AS key, {sums} FROM tok_daily{where} GROUP BY {column} ORDER BY {column}",
        params,
    )
    return [{"key": row["key"], **{n: int(row[n] or 0) for n in _TOKENS}} for row in rows]


def cost(
    db: AnalyticsDatabase,
    prices: PriceTable,
    by: str = "model",
    since: str | None = None,
    until: str | None = None,
) -> list[dict[str, Any]]:
    """Cost per group from the price table; models without a price are listed in ``unpriced``."""
    column = _column(by)
    where, params = _days(since, until)
    sums = ", ".join(f"SUM({name}) AS {name}" for name in _TOKENS)
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
    db: AnalyticsDatabase, since: str | None = None, until: str | None = None
) -> dict[str, Any]:
    """Per tool: calls, failures, aborts, timeouts, truncations, unanswered; and approvals."""
    where, params = _days(since, until)
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
    db: AnalyticsDatabase, since: str | None = None, until: str | None = None
) -> dict[str, Any]:
    """Requests by status with retries, compactions by mode and outcome, goal outcomes."""
    where, params = _days(since, until)
    statuses = _rows(
        db,
        f"SELECT status, SUM(count) AS n, SUM(retries) AS r FROM act_requests{where} "
        "GROUP BY status ORDER BY status",
        params,
    )
    compactions = _rows(
        db,
        "SELECT mode, outcome, COUNT(*) AS n, AVG(context) AS avg_context, "
        f"MAX(context) AS max_context FROM act_compactions{where} "
        "GROUP BY mode, outcome ORDER BY mode, outcome",
        params,
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


def _session_rows(
    db: AnalyticsDatabase, since: str | None, until: str | None
) -> list[dict[str, Any]]:
    rows = _rows(db, "SELECT * FROM act_sessions", {})
    from pentrace.projections.analytics.events import day_of

    kept = []
    for row in rows:
        day = day_of(int(row["started_ms"] or 0))
        if (since and day < since) or (until and day > until):
            continue
        kept.append({**row, "day": day})
    return kept


def sessions(
    db: AnalyticsDatabase, by: str = "day", since: str | None = None, until: str | None = None
) -> list[dict[str, Any]]:
    """Per group: sessions, turns, requests, model switches, mean and longest duration (s)."""
    column = _column(by, ("model", "provider", "agent", "project", "day", "session"))
    groups: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for row in _session_rows(db, since, until):
        key = row[column]
        if by == "model":
            key = model_name(row.get("provider"), row.get("model")) or "unknown"
        groups[key].append(row)
    result = []
    for key in sorted(groups, key=str):
        members = groups[key]
        spans = [(int(r["ended_ms"] or 0) - int(r["started_ms"] or 0)) / 1000 for r in members]
        result.append(
            {
                "key": key,
                "sessions": len(members),
                "turns": sum(int(r["turns"] or 0) for r in members),
                "requests": sum(int(r["requests"] or 0) for r in members),
                "model_switches": sum(int(r["model_switches"] or 0) for r in members),
                "mean_duration_s": round(sum(spans) / len(spans), 3),
                "max_duration_s": round(max(spans), 3),
            }
        )
    return result


def tree(
    db: AnalyticsDatabase, since: str | None = None, until: str | None = None
) -> list[dict[str, Any]]:
    """Parent/child session trees (roots first) with own and subtree token totals."""
    rows = {row["session_id"]: row for row in _session_rows(db, since, until)}
    own = {
        row["session_id"]: int(row["total"] or 0)
        for row in _rows(
            db, "SELECT session_id, SUM(total) AS total FROM tok_daily GROUP BY session_id", {}
        )
    }
    children: dict[str, list[str]] = defaultdict(list)
    parents: dict[str, str] = {}
    for pointer in _rows(db, "SELECT * FROM act_subagents", {}):
        child = _child_of(rows, pointer)
        if child is not None and child != pointer["parent"]:
            children[pointer["parent"]].append(child)
            parents.setdefault(child, pointer["parent"])

    def node(session_id: str, seen: frozenset[str]) -> dict[str, Any]:
        row = rows.get(session_id, {})
        kids = [
            node(child, seen | {child})
            for child in sorted(children[session_id])
            if child not in seen
        ]
        tokens_own = own.get(session_id, 0)
        return {
            "session_id": session_id,
            "model": row.get("model"),
            "model_switches": int(row.get("model_switches") or 0),
            "tokens": tokens_own,
            "subtree_tokens": tokens_own + sum(kid["subtree_tokens"] for kid in kids),
            "children": kids,
        }

    roots = [sid for sid in rows if parents.get(sid) not in rows]
    return [node(sid, frozenset({sid})) for sid in sorted(roots)]


def _child_of(rows: dict[str, dict[str, Any]], pointer: dict[str, Any]) -> str | None:
    """The session a subagent pointer names: the id under the parent's agent, else the one
    session of that id in the parent's project (a pointer names the child's id only)."""
    child_id, project, agent = pointer["child_id"], pointer["project"], pointer["agent"]
    own = f"{project}/{agent}/{child_id}"
    if own in rows:
        return own
    found = [
        key
        for key, row in rows.items()
        if row.get("bare_id") == child_id and row["project"] == project
    ]
    return found[0] if len(found) == 1 else None


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
