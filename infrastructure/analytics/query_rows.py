"""What the read-model queries share: the groupings, time bounds and plain rows."""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy import text

from pentrace.errors import UsageError
from pentrace.infrastructure.analytics.database import AnalyticsDatabase

__all__ = ["FINE", "GROUPS", "column_of", "days_clause", "is_fine", "rows_of"]

GROUPS: Final = {
    "model": "model",
    "provider": "provider",
    "agent": "agent",
    "project": "project",
    "day": "day",
    "session": "session_id",
    "hour": "substr(minute, 1, 13)",
    "minute": "minute",
}
# Groupings finer than a day: read from the per-minute tables (``*_minutes``), whose
# ``minute`` (``YYYY-MM-DDTHH:MM``) begins with the hour and the day.
FINE: Final = ("hour", "minute")
_IN_MINUTES: Final = {"day": "substr(minute, 1, 10)"}


# requests: requests begun; usage_records: token_usage records (session_numbers).
def column_of(by: str, allowed: tuple[str, ...] = tuple(GROUPS), *, minutes: bool = False) -> str:
    """The SQL expression of a grouping (``minutes``: in a per-minute table)."""
    if by not in allowed:
        raise UsageError(
            f"--by: expected one of {', '.join(allowed)}, found {by!r}",
            hint=f"for example --by {allowed[0]}",
        )
    if not minutes and by in FINE:
        raise UsageError(
            f"--by {by}: this figure is kept per UTC day only",
            hint="group by day, or by another field",
        )
    return _IN_MINUTES.get(by, GROUPS[by]) if minutes else GROUPS[by]


def is_fine(by: str | None, since: str | None, until: str | None) -> bool:
    """Whether a query needs the per-minute tables: a grouping or a bound finer than a day."""
    return by in FINE or any(bound and len(bound) > 10 for bound in (since, until))


def days_clause(
    since: str | None, until: str | None, column: str = "day", agent: str | None = None
) -> tuple[str, dict[str, Any]]:
    """A WHERE clause for the inclusive bounds ``since``..``until`` (and one agent, if given).

    Bounds are UTC days (``YYYY-MM-DD``) or, on a ``minute`` column, minutes
    (``YYYY-MM-DDTHH:MM``); a day as the upper bound of minutes includes its last minute.
    """
    clauses, params = [], {}
    if agent is not None:
        clauses.append("agent = :agent")
        params["agent"] = agent
    if column != "minute":
        since, until = since and since[:10], until and until[:10]
    elif until and len(until) == 10:
        until += "T23:59"
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
