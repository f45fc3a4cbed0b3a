"""Reading the requests and tools read models: request outcomes (success rate) and tool calls,
in total or per group, by day or (from the per-minute tables) by hour and minute; and the
sessions read model: per-group durations, turns and requests, and subagent trees.

Part of :mod:`pentrace.infrastructure.analytics.queries`, which re-exports it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Final

from pentrace.infrastructure.analytics.database import (
    AnalyticsDatabase,
    column_of,
    days_clause,
    is_fine,
    rows_of,
)
from pentrace.projections.session_summary import model_name

__all__ = [
    "OUTCOME_GROUPS",
    "SESSION_GROUPS",
    "TOOL_COUNTS",
    "TOOL_GROUPS",
    "outcomes",
    "requests",
    "sessions",
    "tools",
    "tree",
]

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
    column = column_of(by, OUTCOME_GROUPS, minutes=True)
    where, params = days_clause(since, until, "minute", agent=agent)
    rows = rows_of(
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
    where, params = days_clause(since, until, agent=agent)
    days_only, day_params = days_clause(since, until)
    if model is not None or is_fine(None, since, until):
        found = outcomes(db, "agent", since, until, agent=agent, model=model)
        statuses: dict[str, int] = {}
        for entry in found:
            for status, n in entry["statuses"].items():
                statuses[status] = statuses.get(status, 0) + n
        counted = dict(sorted(statuses.items()))
        retries = sum(entry["retries"] for entry in found)
    else:
        rows = rows_of(
            db,
            f"SELECT status, SUM(count) AS n, SUM(retries) AS r FROM act_requests{where} "
            "GROUP BY status ORDER BY status",
            params,
        )
        counted = {row["status"]: int(row["n"]) for row in rows}
        retries = sum(int(row["r"] or 0) for row in rows)
    compactions = rows_of(
        db,
        "SELECT mode, outcome, COUNT(*) AS n, AVG(context) AS avg_context, "
        f"MAX(context) AS max_context FROM act_compactions{days_only} "
        "GROUP BY mode, outcome ORDER BY mode, outcome",
        day_params,
    )
    goals = rows_of(
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
    where, params = days_clause(since, until, "minute" if fine else "day", agent=agent)
    open_where = where + (" AND " if where else " WHERE ") + "answered IS NULL"
    unanswered: dict[str, int] = {}
    for row in rows_of(
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
    where, params = days_clause(since, until, agent=agent)
    approvals = {
        row["decision"]: int(row["n"])
        for row in rows_of(
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
        column = column_of(by, TOOL_GROUPS, minutes=fine)
        groups.insert(0, column)
        picked.insert(0, f"{column} AS key")
    where, params = days_clause(since, until, time, agent=agent)
    sums = ", ".join(f"SUM({name}) AS {name}" for name in TOOL_COUNTS)
    found = rows_of(
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


SESSION_GROUPS: Final = ("model", "provider", "agent", "project", "day", "session")


def _session_rows(
    db: AnalyticsDatabase, since: str | None, until: str | None
) -> list[dict[str, Any]]:
    rows = rows_of(db, "SELECT * FROM act_sessions", {})
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
    column = column_of(by, SESSION_GROUPS)
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
        for row in rows_of(
            db, "SELECT session_id, SUM(total) AS total FROM tok_daily GROUP BY session_id", {}
        )
    }
    children: dict[str, list[str]] = defaultdict(list)
    parents: dict[str, str] = {}
    for pointer in rows_of(db, "SELECT * FROM act_subagents", {}):
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
            "provider": row.get("provider"),
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
