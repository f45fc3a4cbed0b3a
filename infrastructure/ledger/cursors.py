"""Finding a replay cursor: today's event ids, and those of the earlier form (ADR 0023).

A cursor is looked up by ``event_id`` without scope, as Penguin does.  An id
of the earlier ``evt:session:<sid>:<%08d>`` form - a client that connected
before the ledger was upgraded - is found by its session id and position when
exactly one retained session in the request's scope has them.  When a cursor
is gone, :func:`gap_reason` tells retention's evictions from ids that never
existed, through the retention watermarks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Connection, or_, select

from pentrace.domain.session.key import (
    SESSION_STREAMS_LIKE,
    any_owner_streams_like,
    legacy_event_parts,
)
from pentrace.infrastructure.ledger.backend.schema import event_id_of, ids_match, key_equals

if TYPE_CHECKING:
    from pentrace.infrastructure.ledger.backend.database import LedgerDatabase
    from pentrace.infrastructure.ledger.replay import GapReason, Scope

__all__ = ["gap_reason", "locate_cursor"]


def locate_cursor(db: LedgerDatabase, conn: Connection, event_id: str, scope: Scope) -> int | None:
    """The notification id of the retained event a cursor names, or None.

    A cursor of the earlier ``evt:session:<sid>:<%08d>`` form (ADR 0023: a
    client that connected before the upgrade) still resumes when exactly one
    retained session in scope has that id and position; when several do, it
    is ambiguous and reported as a gap like any unknown id.
    """
    events = db.tables.events
    for position, held_id in conn.execute(
        select(events.c.notification_id, event_id_of(events)).where(
            ids_match(events, [event_id], digest=db.digest_streams)
        )
    ):
        if held_id == event_id:
            return int(position)
    legacy = legacy_event_parts(event_id)
    if legacy is None:
        return None
    query = select(events.c.notification_id).where(
        key_equals(db.session_column(), legacy[0], hashed=db.hashed_keys),
        events.c.sequence == legacy[1],
        events.c.stream_id.like(SESSION_STREAMS_LIKE),
    )
    for column in ("agent_id", "project_id"):
        value = getattr(scope, column)
        if value is not None:
            query = query.where(events.c[column] == value)
    matches = conn.execute(query.limit(2)).scalars().all()
    return int(matches[0]) if len(matches) == 1 else None


def gap_reason(db: LedgerDatabase, conn: Connection, event_id: str) -> GapReason:
    """``evicted`` when retention removed this stream position, else ``unknown_event_id``."""
    prefix, _, digits = event_id.rpartition(":")
    if not prefix or not digits.isdigit():
        return "unknown_event_id"
    marks = db.tables.watermarks
    where = marks.c.id_prefix == prefix
    legacy = legacy_event_parts(event_id)
    if legacy is not None:
        # An earlier-form id: its session's stream under any owner (ADR 0023).
        where = or_(where, marks.c.stream_id.like(any_owner_streams_like(legacy[0])))
    pruned = conn.execute(select(marks.c.max_sequence).where(where)).scalars()
    return "evicted" if any(int(digits) <= value for value in pruned) else "unknown_event_id"
