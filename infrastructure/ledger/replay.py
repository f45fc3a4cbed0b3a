"""Replay after a cursor, in global (notification id) order, with honest gaps.

Filters keep Penguin's meaning: each given filter matches rows with that
value *or no value* (``session_id = ? OR session_id IS NULL``), so unscoped
events reach every scoped client.  The cursor is looked up by ``event_id``
without scope, as Penguin does (:func:`locate_cursor`; an id of the earlier
``evt:session:<sid>:<%08d>`` form, from a client that connected before the
ledger was upgraded, ADR 0023, is found by its session id and position when
exactly one retained session in the request's scope has them).

When the cursor is not retained, Penguin reports the oldest and newest ids of
the *whole* table and then replays nothing (W6).  Here the bounds are computed
within the filter scope, the gap says whether the cursor was evicted by
retention or never existed in this ledger (:func:`gap_reason`, through the
retention watermarks), and ``events`` holds the first page of retained events in
scope, so the caller can send a gap notice and carry on.

This is the SQL of :class:`~.reads.LedgerReader`'s pages; the types here are
what its replay and SSE pages return.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple

import msgspec
from sqlalchemy import ColumnElement, Connection, Select, bindparam, func, not_, or_, select, true

from pentrace.domain.json_codec import JsonDecoder
from pentrace.domain.session.key import (
    SESSION_STREAMS_LIKE,
    SessionKey,
    any_owner_streams_like,
    legacy_event_parts,
)
from pentrace.infrastructure.ledger.backend.codec import read_plain
from pentrace.infrastructure.ledger.backend.database import LedgerDatabase
from pentrace.infrastructure.ledger.backend.schema import (
    event_id_of,
    ids_match,
    key_equals,
    key_is_null,
)

__all__ = [
    "GapReason",
    "LedgerEntry",
    "Page",
    "ReplayGap",
    "ReplayResult",
    "Scope",
    "gap_reason",
    "locate_cursor",
    "replay_after",
    "scope_bounds",
    "scoped_page",
    "sse_page",
]

GapReason = Literal["evicted", "unknown_event_id"]
_decode: Final = JsonDecoder[Any]().decode


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


class Scope(NamedTuple):
    """Penguin's replay filters; each given value matches itself or an unscoped row.

    ``project_id`` is ours: with ``session_id`` and ``agent_id`` it names one
    session when its id exists under several owners (ADR 0023).
    """

    session_id: str | None = None
    agent_id: str | None = None
    directory: str | None = None
    project_id: str | None = None


@dataclass(frozen=True)
class ReplayGap:
    """Why the cursor could not be found, and the bounds of what is retained in scope."""

    last_event_id: str
    reason: GapReason
    oldest_event_id: str | None
    newest_event_id: str | None


@dataclass(frozen=True, slots=True)
class Page:
    """Rows in scope after a position, and how far the read looked (an SSE page).

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


def replay_after(
    db: LedgerDatabase, last_event_id: str | None, limit: int | None, scope: Scope
) -> ReplayResult:
    """Events after ``last_event_id`` (from the start when None); ``limit`` <= 0 means no limit."""
    with db.reading("replay the ledger") as conn:
        if last_event_id is None:
            return ReplayResult(True, scoped_page(db, conn, scope, limit=limit))
        cursor = locate_cursor(db, conn, last_event_id, scope)
        if cursor is not None:
            return ReplayResult(True, scoped_page(db, conn, scope, after=cursor, limit=limit))
        oldest, newest = _bounds(db, conn, scope)
        gap = ReplayGap(last_event_id, gap_reason(db, conn, last_event_id), oldest, newest)
        return ReplayResult(False, scoped_page(db, conn, scope, limit=limit), gap)


def scope_bounds(db: LedgerDatabase, scope: Scope) -> tuple[str | None, str | None]:
    """Oldest and newest retained event ids within the filter scope."""
    with db.reading("read the ledger bounds") as conn:
        return _bounds(db, conn, scope)


def sse_page(db: LedgerDatabase, after: int, scope: Scope, limit: int) -> Page:
    """Up to ``limit`` rows in scope with ``after < notification_id <= head``, in order, read
    against the head taken first (:meth:`.reads.LedgerReader.read_page`)."""
    marks = db.tables.watermarks
    with db.reading("read an SSE page from the ledger") as conn:
        head = db.head(conn)
        pruned = int(
            conn.execute(
                select(func.max(marks.c.max_notification_id)).where(_visible_streams(db, scope))
            ).scalar()
            or 0
        )
        if head <= after:
            return Page([], after, False, pruned, head)
        entries = scoped_page(db, conn, scope, after=after, through=head, limit=limit)
    full = len(entries) >= limit
    through = entries[-1].notification_id if full and entries[-1].notification_id else head
    return Page(entries, through, full, pruned, head)


def _visible_streams(db: LedgerDatabase, scope: Scope) -> ColumnElement[bool]:
    """Watermark streams that can hold events in scope: the session's own, and unscoped."""
    if scope.session_id is None:
        return true()
    stream = db.tables.watermarks.c.stream_id
    if scope.project_id is not None and scope.agent_id is not None:
        own = stream == SessionKey(scope.project_id, scope.agent_id, scope.session_id).stream_id
    else:
        # Any owner's session of that id ('%' of an encoded name only widens the match).
        own = stream.like(any_owner_streams_like(scope.session_id))
    return or_(own, not_(stream.like(SESSION_STREAMS_LIKE)))


def scoped_page(
    db: LedgerDatabase,
    conn: Connection,
    scope: Scope,
    *,
    after: int | None = None,
    through: int | None = None,
    limit: int | None = None,
    newest_first: bool = False,
) -> list[LedgerEntry]:
    """Entries in scope with ``after < notification_id <= through``, in global order.

    Penguin's filter, ``session_id = ? OR session_id IS NULL``, is read as
    two index range scans on ``(session_id, notification_id)`` -- the
    session's rows and the unscoped rows -- merged by notification id, so a
    page costs the same whether the session holds a tenth or a millionth of
    the ledger.  Without a session filter the agent filter leads the same way
    (its own index), else the directory filter; the other filters are checked
    on the rows the scans visit.  ``limit`` <= 0 or None means no limit.
    """
    cap = limit if limit is not None and limit > 0 else None
    lead = _lead(scope)
    branches: tuple[str, ...] = ("all",) if lead is None else ("own", "unscoped")
    if len(branches) == 2 and through is None:
        # The two scans are two statements (two snapshots on PostgreSQL's READ
        # COMMITTED, or on SQLite outside a transaction): bound both by the head
        # read first, so a row committed in between cannot reach one scan and not
        # the other.  Ids at or below a visible head are all visible (one writer
        # at a time hands them out), so nothing below it is skipped.
        through = db.head(conn)
    parts = [
        _branch_rows(db, conn, lead, branch, scope, after, through, cap, newest_first)
        for branch in branches
    ]
    if len(parts) == 1:
        rows = parts[0]
    else:
        rows = list(heapq.merge(*parts, key=_position, reverse=newest_first))[:cap]
    plain = read_plain(db, rows, 1, 2)
    return [LedgerEntry(row[0], data, row[2]) for row, data in zip(rows, plain, strict=True)]


def _position(row: tuple[str, bytes, int]) -> int:
    return row[2]


def _lead(scope: Scope) -> str | None:
    """The filter read by index range scans: the first given of session, agent, directory."""
    for name in ("session_id", "agent_id", "directory"):
        if getattr(scope, name) is not None:
            return name
    return None


def _branch_rows(
    db: LedgerDatabase,
    conn: Connection,
    lead: str | None,
    branch: str,
    scope: Scope,
    after: int | None,
    through: int | None,
    limit: int | None,
    newest_first: bool,
) -> list[Any]:
    shape = (
        "page",
        lead,
        branch,
        after is not None,
        through is not None,
        lead != "agent_id" and scope.agent_id is not None,
        lead != "directory" and scope.directory is not None,
        scope.project_id is not None,
        limit is not None,
        newest_first,
    )
    values = {
        "session_id": scope.session_id,
        "agent_id": scope.agent_id,
        "directory": scope.directory,
        "project_id": scope.project_id,
        "after": after,
        "through": through,
        "limit": limit,
    }
    return db.fetch(conn, shape, lambda: _page_statement(db, *shape[1:]), values)


def _page_statement(
    db: LedgerDatabase,
    lead: str | None,
    branch: str,
    has_after: bool,
    has_through: bool,
    has_agent: bool,
    has_directory: bool,
    has_project: bool,
    has_limit: bool,
    newest_first: bool,
) -> Select[tuple[str, bytes, int]]:
    events = db.tables.events
    query = select(event_id_of(events), events.c.event_json, events.c.notification_id)
    led = None if lead is None else db.session_column() if lead == "session_id" else events.c[lead]
    if led is not None and branch == "own":
        query = query.where(key_equals(led, bindparam(lead), hashed=db.hashed_keys))
    elif led is not None and branch == "unscoped":
        query = query.where(key_is_null(led, hashed=db.hashed_keys))
    # ``coalesce(col, v) = v`` is Penguin's ``col = v OR col IS NULL``.
    if has_agent:
        query = query.where(
            func.coalesce(events.c.agent_id, bindparam("agent_id")) == bindparam("agent_id")
        )
    if has_directory:
        query = query.where(
            func.coalesce(events.c.directory, bindparam("directory")) == bindparam("directory")
        )
    if has_project:
        query = query.where(
            func.coalesce(events.c.project_id, bindparam("project_id")) == bindparam("project_id")
        )
    return db.window(
        query, after=has_after, through=has_through, limit=has_limit, newest_first=newest_first
    )


def _bounds(db: LedgerDatabase, conn: Connection, scope: Scope) -> tuple[str | None, str | None]:
    oldest = scoped_page(db, conn, scope, limit=1)
    newest = scoped_page(db, conn, scope, limit=1, newest_first=True)
    return (
        oldest[0].event_id if oldest else None,
        newest[0].event_id if newest else None,
    )


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
