"""Replay after a cursor, in global (notification id) order, with honest gaps.

Filters keep Penguin's meaning: each given filter matches rows with that
value *or no value* (``session_id = ? OR session_id IS NULL``), so unscoped
events reach every scoped client.  The cursor is looked up by ``event_id``
without scope, as Penguin does.

When the cursor is not retained, Penguin reports the oldest and newest ids of
the *whole* table and then replays nothing (W6).  Here the bounds are computed
within the filter scope, the gap says whether the cursor was evicted by
retention or never existed in this ledger, and ``events`` holds the first page
of retained events in scope, so the caller can send a gap notice and carry on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

import msgspec
from sqlalchemy import ColumnElement, Connection, Select, and_, or_, select, true

from pentrace.infrastructure.ledger.database import LedgerDatabase

__all__ = ["GapReason", "LedgerEntry", "ReplayGap", "ReplayResult", "replay_after", "scope_bounds"]

GapReason = Literal["evicted", "unknown_event_id"]
_decode: Final = msgspec.json.Decoder().decode


class LedgerEntry(msgspec.Struct, frozen=True):
    """One stored RuntimeEvent: its id, the redacted envelope as JSON bytes, its global position.

    ``notification_id`` is ``None`` for events published live before (or
    without) reaching the ledger.  A msgspec Struct: a page builds a thousand.
    """

    event_id: str
    event_json: bytes
    notification_id: int | None = None

    def envelope(self) -> dict[str, Any]:
        """The redacted envelope, decoded."""
        value = _decode(self.event_json)
        return value if isinstance(value, dict) else {"value": value}


@dataclass(frozen=True)
class ReplayGap:
    """Why the cursor could not be found, and the bounds of what is retained in scope."""

    last_event_id: str
    reason: GapReason
    oldest_event_id: str | None
    newest_event_id: str | None


@dataclass(frozen=True)
class ReplayResult:
    """Events after the cursor; on a gap, ``found`` is False and ``events`` starts at the oldest."""

    found: bool
    events: list[LedgerEntry] = field(default_factory=list)
    gap: ReplayGap | None = None

    @property
    def next_cursor(self) -> str | None:
        """The id to pass as ``last_event_id`` for the next page (None when no events)."""
        return self.events[-1].event_id if self.events else None


def scope_condition(
    db: LedgerDatabase,
    session_id: str | None = None,
    agent_id: str | None = None,
    directory: str | None = None,
) -> ColumnElement[bool]:
    """Penguin's filter: each given value matches itself or an unscoped row."""
    events = db.tables.events
    parts = [
        or_(column == value, column.is_(None))
        for column, value in (
            (events.c.session_id, session_id),
            (events.c.agent_id, agent_id),
            (events.c.directory, directory),
        )
        if value is not None
    ]
    return and_(*parts) if parts else true()


def replay_after(
    db: LedgerDatabase,
    last_event_id: str | None,
    limit: int | None = 1000,
    *,
    session_id: str | None = None,
    agent_id: str | None = None,
    directory: str | None = None,
) -> ReplayResult:
    """Events after ``last_event_id`` (from the start when None); ``limit`` <= 0 means no limit."""
    events = db.tables.events
    scope = scope_condition(db, session_id, agent_id, directory)
    with db.reading("replay the ledger") as conn:
        if last_event_id is None:
            return ReplayResult(True, _page(conn, _entries(db).where(scope), limit))
        cursor = conn.execute(
            select(events.c.notification_id).where(events.c.event_id == last_event_id)
        ).scalar_one_or_none()
        if cursor is not None:
            query = _entries(db).where(events.c.notification_id > cursor, scope)
            return ReplayResult(True, _page(conn, query, limit))
        oldest, newest = _bounds(db, conn, scope)
        gap = ReplayGap(last_event_id, _gap_reason(db, conn, last_event_id), oldest, newest)
        return ReplayResult(False, _page(conn, _entries(db).where(scope), limit), gap)


def scope_bounds(
    db: LedgerDatabase,
    session_id: str | None = None,
    agent_id: str | None = None,
    directory: str | None = None,
) -> tuple[str | None, str | None]:
    """Oldest and newest retained event ids within the filter scope."""
    with db.reading("read the ledger bounds") as conn:
        return _bounds(db, conn, scope_condition(db, session_id, agent_id, directory))


def _entries(db: LedgerDatabase) -> Select[tuple[str, bytes, int]]:
    events = db.tables.events
    return select(events.c.event_id, events.c.event_json, events.c.notification_id).order_by(
        events.c.notification_id
    )


def _page(
    conn: Connection, query: Select[tuple[str, bytes, int]], limit: int | None
) -> list[LedgerEntry]:
    if limit is not None and limit > 0:
        query = query.limit(limit)
    rows = conn.execute(query).fetchall()
    return [LedgerEntry(row[0], bytes(row[1]), row[2]) for row in rows]


def _bounds(
    db: LedgerDatabase, conn: Connection, scope: ColumnElement[bool]
) -> tuple[str | None, str | None]:
    events = db.tables.events
    base = select(events.c.event_id).where(scope).limit(1)
    oldest = conn.execute(base.order_by(events.c.notification_id)).scalar_one_or_none()
    newest = conn.execute(base.order_by(events.c.notification_id.desc())).scalar_one_or_none()
    return oldest, newest


def _gap_reason(db: LedgerDatabase, conn: Connection, event_id: str) -> GapReason:
    """``evicted`` when retention removed this stream position, else ``unknown_event_id``."""
    prefix, _, digits = event_id.rpartition(":")
    if not prefix or not digits.isdigit():
        return "unknown_event_id"
    marks = db.tables.watermarks
    pruned = conn.execute(select(marks.c.max_sequence).where(marks.c.id_prefix == prefix)).scalars()
    return "evicted" if any(int(digits) <= value for value in pruned) else "unknown_event_id"
