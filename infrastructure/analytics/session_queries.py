"""Reading the sessions read model: per-group durations, turns and requests, and subagent trees.

Part of :mod:`pentrace.infrastructure.analytics.queries`, which re-exports it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Final

from pentrace.infrastructure.analytics.database import AnalyticsDatabase
from pentrace.infrastructure.analytics.query_rows import column_of as _column
from pentrace.infrastructure.analytics.query_rows import rows_of as _rows
from pentrace.projections.session_summary import model_name

__all__ = ["SESSION_GROUPS", "sessions", "tree"]

SESSION_GROUPS: Final = ("model", "provider", "agent", "project", "day", "session")


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
    column = _column(by, SESSION_GROUPS)
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
