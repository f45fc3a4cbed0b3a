"""What the read-model queries share: the groupings, day bounds and plain rows."""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy import text

from pentrace.errors import UsageError
from pentrace.infrastructure.analytics.database import AnalyticsDatabase

__all__ = ["GROUPS", "column_of", "days_clause", "rows_of"]

GROUPS: Final = {
    "model": "model",
    "provider": "provider",
    "agent": "agent",
    "project": "project",
    "day": "day",
    "session": "session_id",
}


# requests: requests begun; usage_records: token_usage records (session_numbers).
def column_of(by: str, allowed: tuple[str, ...] = tuple(GROUPS)) -> str:
    if by not in allowed:
        raise UsageError(
            f"--by: expected one of {', '.join(allowed)}, found {by!r}",
            hint="for example --by model",
        )
    return GROUPS[by]


def days_clause(
    since: str | None, until: str | None, column: str = "day", agent: str | None = None
) -> tuple[str, dict[str, Any]]:
    """A WHERE clause for the inclusive days ``since``..``until`` (and one agent, if given)."""
    clauses, params = [], {}
    if agent is not None:
        clauses.append("agent = :agent")
        params["agent"] = agent
    if since:
        clauses.append(f"{column} >= :since")
        params["since"] = since
    if until:
        clauses.append(f"{column} <= :until")
        params["until"] = until
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def rows_of(db: AnalyticsDatabase, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    with db.reading("read analytics") as conn:
        return [dict(row) for row in conn.execute(text(sql), params).mappings()]
