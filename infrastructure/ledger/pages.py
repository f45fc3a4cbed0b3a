"""Reading the ledger by notification id, one bounded page at a time.

:func:`read_page` serves the SSE streams; :func:`entries_after` and
:func:`newest_entries` serve ``pentrace ledger tail``.

Each SSE client keeps only an integer position (the notification id of the
last row it has looked at) and reads the next page from the ledger when the
ledger's head moves past it.  Nothing un-persisted is ever delivered, and a
slow client costs one page of memory, never a growing queue.

A page is read in one read transaction against a *head* taken first: rows
``after < notification_id <= head`` in scope.  Writers hand out notification
ids in commit order (SQLite: one writer at a time; PostgreSQL: the table is
locked in EXCLUSIVE mode while ids are assigned), so once ``head`` is visible
every smaller id is either visible too or never will be.  That is what makes
the position safe to advance to ``head`` even when no row of the page is in
scope.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from sqlalchemy import ColumnElement, func, not_, or_, select, true

from pentrace.domain.session.key import (
    SESSION_STREAMS_LIKE,
    SessionKey,
    any_owner_streams_like,
    parse_session_stream,
)
from pentrace.infrastructure.ledger.backend.row_form import read_plain
from pentrace.infrastructure.ledger.backend.schema import event_id_of, key_equals, stream_equals
from pentrace.infrastructure.ledger.replay import LedgerEntry, Scope, locate_cursor, scoped_page

if TYPE_CHECKING:
    from pentrace.infrastructure.ledger.backend.database import LedgerDatabase


class _Ledger(Protocol):
    """What these reads need of a ledger object: its database."""

    db: LedgerDatabase


__all__ = [
    "Page",
    "Scope",
    "entries_after",
    "locate",
    "newest_entries",
    "read_page",
    "session_owners",
]


@dataclass(frozen=True, slots=True)
class Page:
    """Rows in scope after a position, and how far the read looked.

    ``through`` is the position to continue from; ``full`` says more rows may
    follow at once; ``pruned_through`` is the highest notification id that
    retention has deleted from streams this scope can see (0 when none);
    ``head`` is the newest notification id when the page was read.
    """

    entries: list[LedgerEntry]
    through: int
    full: bool
    pruned_through: int
    head: int


def locate(ledger: _Ledger, event_id: str, scope: Scope | None = None) -> int | None:
    """The notification id of a retained event, or None (an earlier-form id of a session is
    found too when it names one session in ``scope``: :func:`.replay.locate_cursor`)."""
    with ledger.db.reading("locate an SSE cursor") as conn:
        return locate_cursor(ledger.db, conn, event_id, scope or Scope())


def session_owners(ledger: _Ledger, session_id: str) -> list[SessionKey]:
    """Every (project, agent) the ledger holds a session ``session_id`` under, as keys.

    The usual answer, one owner, costs two index-only counts: the session's
    rows (``session_idx``) and its first row's stream (the unique key).  Only
    when they differ are the owners collected row by row.
    """
    events = ledger.db.tables.events
    c = events.c
    of_session = key_equals(ledger.db.session_column(), session_id, hashed=ledger.db.hashed_keys)
    with ledger.db.reading("find the owners of a session id") as conn:
        first = conn.execute(
            select(c.stream_id).where(of_session).order_by(c.notification_id).limit(1)
        ).scalar_one_or_none()
        if first is None:
            return []
        key = parse_session_stream(str(first))
        if key is not None:
            count = select(func.count()).select_from(events)
            rows = conn.execute(count.where(of_session)).scalar_one()
            own = conn.execute(
                count.where(stream_equals(events, first, digest=ledger.db.digest_streams))
            ).scalar_one()
            if rows == own:
                return [key]
        found = conn.execute(
            select(c.project_id, c.agent_id)
            .where(of_session)
            .where(c.stream_id.like(SESSION_STREAMS_LIKE))
            .distinct()
            .limit(50)
        ).all()
    return sorted(
        SessionKey(project, agent, session_id) for project, agent in found if project and agent
    )


def read_page(ledger: _Ledger, after: int, scope: Scope, limit: int) -> Page:
    """Up to ``limit`` rows in scope with ``after < notification_id <= head``, in order."""
    db = ledger.db
    marks = db.tables.watermarks
    with db.reading("read an SSE page from the ledger") as conn:
        head = db.head(conn)
        pruned = int(
            conn.execute(
                select(func.max(marks.c.max_notification_id)).where(_visible_streams(ledger, scope))
            ).scalar()
            or 0
        )
        if head <= after:
            return Page([], after, False, pruned, head)
        entries = scoped_page(db, conn, scope, after=after, through=head, limit=limit)
    full = len(entries) >= limit
    through = entries[-1].notification_id if full and entries[-1].notification_id else head
    return Page(entries, through, full, pruned, head)


def _visible_streams(ledger: _Ledger, scope: Scope) -> ColumnElement[bool]:
    """Watermark streams that can hold events in scope: the session's own, and unscoped ones."""
    if scope.session_id is None:
        return true()
    stream = ledger.db.tables.watermarks.c.stream_id
    if scope.project_id is not None and scope.agent_id is not None:
        own = stream == SessionKey(scope.project_id, scope.agent_id, scope.session_id).stream_id
    else:
        # Any owner's session of that id ('%' of an encoded name only widens the match).
        own = stream.like(any_owner_streams_like(scope.session_id))
    return or_(own, not_(stream.like(SESSION_STREAMS_LIKE)))


def entries_after(
    ledger: _Ledger,
    notification_id: int,
    *,
    session: SessionKey | str | None = None,
    limit: int = 1000,
) -> list[LedgerEntry]:
    """Rows after a notification id, oldest first (only one session's with ``session``)."""
    return _entries(ledger, session, after=notification_id, limit=limit, newest=False)


def newest_entries(
    ledger: _Ledger, count: int, *, session: SessionKey | str | None = None
) -> list[LedgerEntry]:
    """The last ``count`` rows (of one session with ``session``), oldest first."""
    return _entries(ledger, session, after=None, limit=max(0, count), newest=True)


def _entries(
    ledger: _Ledger,
    session: SessionKey | str | None,
    *,
    after: int | None,
    limit: int,
    newest: bool,
) -> list[LedgerEntry]:
    events = ledger.db.tables.events
    position = events.c.notification_id
    query = select(event_id_of(events), events.c.event_json, position)
    if after is not None:
        query = query.where(position > after)
    query = query.order_by(position.desc() if newest else position).limit(limit)
    if isinstance(session, SessionKey):
        query = query.where(
            stream_equals(events, session.stream_id, digest=ledger.db.digest_streams)
        )
    elif session is not None:  # a bare id: the session_id column (a Penguin-format ledger)
        query = query.where(
            key_equals(ledger.db.session_column(), session, hashed=ledger.db.hashed_keys)
        )
    operation = "read the newest ledger events" if newest else "read the ledger"
    with ledger.db.reading(operation) as conn:
        rows = conn.execute(query).all()
    ordered = list(reversed(rows)) if newest else rows
    plain = read_plain(ledger.db, ordered, 1, 2)
    return [LedgerEntry(row[0], data, row[2]) for row, data in zip(ordered, plain, strict=True)]
