"""Every read of the ledger: one class, :class:`LedgerReader`, for every reader.

The CLI (``ledger stats``, ``tail``, ``replay``, ``forget``), ``pentrace
audit``, the SSE service's pages and the analytics runner all read through
these methods; :class:`~.store.RuntimeEventLedger`, the ledger itself, is a
reader that also writes.  The eventsourcing reads (``select_notifications``,
``select_events``, ``max_tracking_id``; ``subscribe`` follows them from the
store) are here too, so the library's projection runner reads the same rows.
The SQL of replay and SSE pages, with their gaps and cursors, is in
:mod:`.replay`.

SSE pages: each client keeps only an integer position (the notification id
of the last row it has looked at) and reads the next page when the head moves
past it.  A page is read in one read transaction against a *head* taken
first: rows ``after < notification_id <= head`` in scope.  Writers hand out
notification ids in commit order (one writer at a time), so once ``head`` is
visible every smaller id is either visible too or never will be: the position
may advance to ``head`` even when no row of the page is in scope.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Notification, StoredEvent
from sqlalchemy import Connection, Select, bindparam, func, literal, select

from pentrace.domain.json_codec import escape_surrogates
from pentrace.domain.session.key import (
    SESSION_STREAMS_LIKE,
    SessionKey,
    parse_session_stream,
    split_reference,
)
from pentrace.errors import NoMatchError, UsageError
from pentrace.infrastructure.ledger.backend.codec import read_plain
from pentrace.infrastructure.ledger.backend.database import LedgerDatabase
from pentrace.infrastructure.ledger.backend.schema import (
    event_id_of,
    ids_match,
    key_equals,
    key_in,
    stream_equals,
)
from pentrace.infrastructure.ledger.live.follower import waker_for
from pentrace.infrastructure.ledger.replay import (
    LedgerEntry,
    Page,
    ReplayResult,
    Scope,
    locate_cursor,
    replay_after,
    scope_bounds,
    sse_page,
)
from pentrace.infrastructure.ledger.retention import (
    RetentionPlan,
    RetentionPolicy,
    plan_retention,
)
from pentrace.infrastructure.ledger.rows import type_category
from pentrace.infrastructure.ledger.settings import LedgerSettings
from pentrace.infrastructure.sessions.refs import ambiguous, match_sessions
from pentrace.infrastructure.storage.layout import DataRoot

__all__ = ["LedgerReader", "LedgerStats"]


@dataclass(frozen=True)
class LedgerStats:
    """Rows, bytes, the oldest and newest rows, streams and rows per category."""

    where: str
    rows: int
    bytes: int | None
    oldest_event_id: str | None
    newest_event_id: str | None
    oldest_inserted_ms: int | None
    newest_inserted_ms: int | None
    streams: int
    pruned_rows: int
    by_category: dict[str, int] = field(default_factory=dict)
    format: str = "pentrace"


class LedgerReader:
    """The reads of one ledger database (see the module docstring)."""

    def __init__(
        self,
        db: LedgerDatabase,
        settings: LedgerSettings | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db
        self.clock = clock
        self.settings = settings if settings is not None else LedgerSettings()
        self.policy = RetentionPolicy(
            max_events=self.settings.max_events,
            max_age_days=self.settings.max_age_days,
            max_bytes=self.settings.max_bytes,
        )
        database = str(db.path.resolve()) if db.path is not None else db.where
        #: Wakes this process's followers of the same ledger at every commit.
        self.waker = waker_for(database, db.tables.events.name)
        # Without a notification channel (SQLite) another process's commit is seen at
        # the next poll; with one (PostgreSQL NOTIFY) polling is the safety net.
        self.poll_interval = db.dialect.poll_seconds
        self._notify_channel = f"{db.tables.events.name}_appended"

    @property
    def notify_channel(self) -> str:
        """The channel every committed write is announced on (where the backend announces)."""
        return self._notify_channel

    def now_ms(self) -> int:
        """The ledger clock in milliseconds (``inserted_at``, retention)."""
        return int(self.clock() * 1000)

    # -- replay and pages ----------------------------------------------------------
    def replay_after(
        self,
        last_event_id: str | None,
        limit: int | None = 1000,
        session_id: str | None = None,
        agent_id: str | None = None,
        directory: str | None = None,
        project_id: str | None = None,
    ) -> ReplayResult:
        """Retained events after a cursor in global order; see :mod:`.replay` for gaps."""
        scope = Scope(session_id, agent_id, directory, project_id)
        return replay_after(self.db, last_event_id, limit, scope)

    def bounds(
        self,
        session_id: str | None = None,
        agent_id: str | None = None,
        directory: str | None = None,
        project_id: str | None = None,
    ) -> tuple[str | None, str | None]:
        """Oldest and newest retained event ids within the filter scope."""
        return scope_bounds(self.db, Scope(session_id, agent_id, directory, project_id))

    def locate(self, event_id: str, scope: Scope | None = None) -> int | None:
        """The notification id of a retained event, or None (an earlier-form id of a session
        is found too when it names one session in ``scope``: :func:`.replay.locate_cursor`)."""
        with self.db.reading("locate an SSE cursor") as conn:
            return locate_cursor(self.db, conn, event_id, scope or Scope())

    def read_page(self, after: int, scope: Scope, limit: int) -> Page:
        """Up to ``limit`` rows in scope with ``after < notification_id <= head``, in order
        (an SSE page; see the module docstring and :func:`.replay.sse_page`)."""
        return sse_page(self.db, after, scope, limit)

    def entries_after(
        self, notification_id: int, *, session: SessionKey | str | None = None, limit: int = 1000
    ) -> list[LedgerEntry]:
        """Rows after a notification id, oldest first (only one session's with ``session``)."""
        return self._entries(session, after=notification_id, limit=limit, newest=False)

    def newest_entries(
        self, count: int, *, session: SessionKey | str | None = None
    ) -> list[LedgerEntry]:
        """The last ``count`` rows (of one session with ``session``), oldest first."""
        return self._entries(session, after=None, limit=max(0, count), newest=True)

    def newest(self, limit: int = 100) -> list[LedgerEntry]:
        """The last ``limit`` retained events, oldest first."""
        return self.newest_entries(limit)

    def _entries(
        self, session: SessionKey | str | None, *, after: int | None, limit: int, newest: bool
    ) -> list[LedgerEntry]:
        db = self.db
        events = db.tables.events
        position = events.c.notification_id
        query = select(event_id_of(events), events.c.event_json, position)
        if after is not None:
            query = query.where(position > after)
        query = query.order_by(position.desc() if newest else position).limit(limit)
        if isinstance(session, SessionKey):
            query = query.where(stream_equals(events, session.stream_id, digest=db.digest_streams))
        elif session is not None:  # a bare id: the session_id column (a Penguin-format ledger)
            query = query.where(key_equals(db.session_column(), session, hashed=db.hashed_keys))
        with db.reading("read the newest ledger events" if newest else "read the ledger") as conn:
            rows = conn.execute(query).all()
        ordered = list(reversed(rows)) if newest else rows
        plain = read_plain(db, ordered, 1, 2)
        return [LedgerEntry(row[0], data, row[2]) for row, data in zip(ordered, plain, strict=True)]

    # -- the eventsourcing recorder's reads ----------------------------------------
    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """Stored events of one stream, by sequence."""
        events = self.db.tables.events
        stream = originator_id.hex if isinstance(originator_id, UUID) else originator_id
        query = select(
            events.c.stream_id, events.c.sequence, events.c.event_type, events.c.event_json
        ).where(stream_equals(events, stream, digest=self.db.digest_streams))
        if gt is not None:
            query = query.where(events.c.sequence > gt)
        if lte is not None:
            query = query.where(events.c.sequence <= lte)
        query = query.order_by(events.c.sequence.desc() if desc else events.c.sequence)
        if limit is not None:
            query = query.limit(limit)
        with self.db.reading("select ledger events") as conn:
            rows = conn.execute(query.add_columns(events.c.notification_id)).all()
        plain = read_plain(self.db, rows, 3, 4)
        return [
            StoredEvent(row[0], row[1], row[2], data) for row, data in zip(rows, plain, strict=True)
        ]

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        """Rows in notification-id order, as eventsourcing Notifications.

        With ``topics``, each topic is one range scan of the ``(event_type,
        notification_id)`` index, cut at ``limit`` and merged by position: a
        projection that wants a tenth of the ledger reads that tenth.  The scans
        are bounded by ``stop``, or by the head read first, so that all of them
        see the same rows.
        """
        after = None if start is None else (start - 1 if inclusive_of_start else start)
        wanted: list[str | None] = [*sorted(set(topics))] or [None]
        with self.db.reading("select ledger notifications") as conn:
            if len(wanted) == 1:
                rows = self._notification_rows(conn, after, stop, wanted[0], limit, full=True)
            else:
                if stop is None:
                    stop = self.db.head(conn)
                # Positions first (index-only scans), so that a thin topic does not
                # fetch ``limit`` whole rows the page then drops; then each topic's
                # rows up to the page's last position, merged.
                positions = [
                    self._notification_rows(conn, after, stop, topic, limit, full=False)
                    for topic in wanted
                ]
                page = list(itertools.islice(heapq.merge(*positions, key=_first), limit))
                if not page:
                    return []
                last = int(page[-1][0])
                rows = list(
                    heapq.merge(
                        *(
                            self._notification_rows(conn, after, last, topic, None, full=True)
                            for topic, found in zip(wanted, positions, strict=True)
                            if found and int(found[0][0]) <= last
                        ),
                        key=_first,
                    )
                )
        plain = read_plain(self.db, rows, 4, 0)
        return [
            Notification(
                id=row[0], originator_id=row[1], originator_version=row[2], topic=row[3], state=data
            )
            for row, data in zip(rows, plain, strict=True)
        ]

    def _notification_rows(
        self,
        conn: Connection,
        after: int | None,
        stop: int | None,
        topic: str | None,
        limit: int | None,
        *,
        full: bool,
    ) -> list[Any]:
        shape = ("notifications", after is not None, stop is not None, topic is not None,
                 limit is not None, full)  # fmt: skip
        return self.db.fetch(
            conn,
            shape,
            lambda: self._notifications_statement(*shape[1:]),
            {"after": after, "through": stop, "topic": topic, "limit": limit},
        )

    def _notifications_statement(
        self, after: object, stop: object, topic: object, limit: object, full: object
    ) -> Select[Any]:
        events = self.db.tables.events
        position = events.c.notification_id
        columns = (events.c.stream_id, events.c.sequence, events.c.event_type, events.c.event_json)
        query = select(position, *columns) if full else select(position)
        if topic:
            query = query.where(
                key_equals(events.c.event_type, bindparam("topic"), hashed=self.db.hashed_keys)
            )
        return self.db.window(query, after=bool(after), through=bool(stop), limit=bool(limit))

    def head(self) -> int:
        """The newest notification id handed out, 0 for an empty ledger (one index probe)."""
        with self.db.reading("read the newest ledger notification id") as conn:
            return self.db.head(conn)

    def max_notification_id(self) -> int | None:
        """:meth:`head`, as eventsourcing asks for it: None for an empty ledger."""
        return self.head() or None

    def max_tracking_id(self, application_name: str) -> int | None:
        """The highest notification id recorded for an application, or None."""
        table = self.db.tables.tracking
        with self.db.reading("read a ledger tracking position") as conn:
            value = conn.execute(
                select(table.c.notification_id).where(table.c.application_name == application_name)
            ).scalar_one_or_none()
        return None if value is None else int(value)

    # -- lookups ---------------------------------------------------------------------
    def contains(self, event_id: str) -> bool:
        """Whether the event is currently retained."""
        events = self.db.tables.events
        with self.db.reading("look up a ledger event") as conn:
            found = conn.execute(
                select(event_id_of(events)).where(
                    ids_match(events, [event_id], digest=self.db.digest_streams)
                )
            ).scalars()
            return event_id in found

    def count(self) -> int:
        """Retained rows."""
        with self.db.reading("count ledger events") as conn:
            return int(
                conn.execute(select(func.count()).select_from(self.db.tables.events)).scalar_one()
            )

    def holds_nothing(self) -> bool:
        """Whether the ledger has no row and no retention watermark (a new ledger)."""
        events, marks = self.db.tables.events, self.db.tables.watermarks
        with self.db.reading("look for rows in the ledger") as conn:
            return all(
                conn.execute(select(literal(1)).select_from(table).limit(1)).first() is None
                for table in (events, marks)
            )

    def held_sequences(self, stream_id: str) -> tuple[set[int], int]:
        """Sequences of a stream the ledger holds, and the highest one retention pruned (0)
        (the sequences alone: an index-only read of the stream key)."""
        stream_id = escape_surrogates(stream_id)  # as the rows hold it (ADR 0015)
        events = self.db.tables.events
        with self.db.reading("read a stream's ledger positions") as conn:
            held = conn.execute(
                select(events.c.sequence).where(
                    stream_equals(events, stream_id, digest=self.db.digest_streams)
                )
            ).scalars()
            sequences = {int(value) for value in held}
            pruned = self._pruned_sequence(conn, stream_id)
        return sequences, pruned

    def _pruned_sequence(self, conn: Connection, stream_id: str) -> int:
        marks = self.db.tables.watermarks
        value = conn.execute(
            select(marks.c.max_sequence).where(marks.c.stream_id == stream_id)
        ).scalar_one_or_none()
        return int(value or 0)

    def stream_rows(self, stream_id: str) -> tuple[dict[int, tuple[str, int]], int]:
        """A stream's rows as ``sequence -> (event_type, event_time)``, and the highest
        sequence retention pruned from it (0: none); ``pentrace audit`` compares them with
        the trace."""
        stream_id = escape_surrogates(stream_id)  # as the rows hold it (ADR 0015)
        db = self.db
        events = db.tables.events
        with db.reading("read a stream's ledger rows") as conn:
            # The driver's rows, without SQLAlchemy's per-row processing: an audit of
            # every session reads every ledger row once.
            rows = db.fetch(
                conn,
                ("stream rows",),
                lambda: select(events.c.sequence, events.c.event_type, events.c.event_time).where(
                    stream_equals(events, bindparam("stream"), digest=db.digest_streams)
                ),
                {"stream": stream_id},
            )
            pruned = self._pruned_sequence(conn, stream_id)
        held = {int(row[0]): (str(row[1]), int(row[2])) for row in rows}
        return held, pruned

    def rows_at(self, positions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], LedgerEntry]:
        """The retained rows at ``(stream_id, sequence)`` positions, plain (a pruned one is
        absent); the analytics runner reads the events a projection failed on back."""
        events = self.db.tables.events
        found: dict[tuple[str, int], tuple[str, bytes, int]] = {}
        with self.db.reading("read ledger rows by position") as conn:
            for stream, sequence in positions:
                row = conn.execute(
                    select(event_id_of(events), events.c.event_json, events.c.notification_id)
                    .where(stream_equals(events, stream, digest=self.db.digest_streams))
                    .where(events.c.sequence == sequence)
                ).first()
                if row is not None:
                    found[stream, sequence] = (str(row[0]), row[1], int(row[2]))
        plain = read_plain(self.db, list(found.values()), 1, 2)
        return {
            key: LedgerEntry(event_id, data, position)
            for (key, (event_id, _, position)), data in zip(found.items(), plain, strict=True)
        }

    def stream_limits(self, upto: int) -> dict[str, int]:
        """Per stream, the highest sequence held at or below notification ``upto`` or pruned
        by retention (what the ledger has passed of each stream)."""
        events, marks = self.db.tables.events, self.db.tables.watermarks
        with self.db.reading("read the ledger's positions per stream") as conn:
            held = conn.execute(
                select(events.c.stream_id, func.max(events.c.sequence))
                .where(events.c.notification_id <= upto)
                .group_by(events.c.stream_id)
            ).all()
            pruned = conn.execute(select(marks.c.stream_id, marks.c.max_sequence)).all()
        limits = {str(stream): int(top) for stream, top in held}
        for stream, top in pruned:
            limits[str(stream)] = max(limits.get(str(stream), 0), int(top))
        return limits

    def pruned_through(self) -> int:
        """The highest notification id retention has deleted (0 when none)."""
        marks = self.db.tables.watermarks
        with self.db.reading("read the ledger retention watermark") as conn:
            value = conn.execute(select(func.max(marks.c.max_notification_id))).scalar()
        return int(value or 0)

    def newest_of_types(self, topics: Collection[str], upto: int) -> int:
        """The newest notification id at or below ``upto`` of one of the event types
        ``topics`` (all types when empty); 0 when there is none."""
        events = self.db.tables.events
        query = select(func.max(events.c.notification_id)).where(events.c.notification_id <= upto)
        if topics:
            query = query.where(key_in(events.c.event_type, topics, hashed=self.db.hashed_keys))
        with self.db.reading("read the newest relevant ledger event") as conn:
            value = conn.execute(query).scalar()
        return int(value or 0)

    def session_streams(self) -> dict[SessionKey, int]:
        """Every session the ledger holds rows of, with its row count."""
        events = self.db.tables.events
        query = (
            select(events.c.stream_id, func.count())
            .where(events.c.stream_id.like(SESSION_STREAMS_LIKE))
            .group_by(events.c.stream_id)
        )
        with self.db.reading("list the ledger's session streams") as conn:
            rows = conn.execute(query).all()
        held = {}
        for stream, count in rows:
            key = parse_session_stream(str(stream))
            if key is not None:
                held[key] = int(count)
        return held

    def session_owners(self, session_id: str) -> list[SessionKey]:
        """Every (project, agent) the ledger holds a session ``session_id`` under, as keys.

        The usual answer, one owner, costs two index-only counts: the session's rows
        and its first row's stream.  Only when they differ are the owners collected
        row by row.
        """
        db = self.db
        events = db.tables.events
        c = events.c
        of_session = key_equals(db.session_column(), session_id, hashed=db.hashed_keys)
        with db.reading("find the owners of a session id") as conn:
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
                    count.where(stream_equals(events, first, digest=db.digest_streams))
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

    def session_named(self, reference: str) -> SessionKey | str:
        """The one session the ledger holds that ``reference`` names (``ledger tail/replay``).

        A full ``project/agent/session-id`` that the ledger does not hold yet is
        taken as given (``tail -f`` may wait for a session about to start).  A
        bare id that names no session key (a Penguin-format ledger, whose streams
        are ``session:<id>``) is returned as the id itself: a filter on the
        ``session_id`` column, as Penguin filters.
        """
        held = self.session_streams()
        if not match_sessions(held, reference):
            project, agent, session_id = split_reference(reference)
            if project and agent and session_id:
                return SessionKey(project, agent, session_id)
            if project is None and agent is None and session_id:
                return session_id
        return self._held_session(held, reference.strip())

    def untraced_sessions(self, root: DataRoot, wanted: Sequence[str]) -> dict[SessionKey, int]:
        """The rows held per named session, after checking none has a trace under ``root``
        (``pentrace ledger forget``).

        Each of ``wanted`` is a session reference naming exactly one session the
        ledger holds.  Raises unless every name resolves and none has traces (a
        traced session's events would only come back on the next ``ledger sync``).
        """
        held = self.session_streams()
        chosen: dict[SessionKey, int] = {}
        for name in wanted:
            key = self._held_session(held, name.strip())
            chosen[key] = held[key]
        present = {ref.key for ref in root.iter_sessions()} if root.path.is_dir() else set()
        traced = [key for key in chosen if key in present]
        if traced:
            raise UsageError(
                f"session {traced[0]} still has traces under {root.path}: expected only "
                "sessions whose traces are gone; its events would come back on the next "
                "`ledger sync`",
                hint=f"delete the session itself: `pentrace delete {traced[0]}`",
            )
        return chosen

    def _held_session(self, held: dict[SessionKey, int], name: str) -> SessionKey:
        matches = match_sessions(held, name)
        if len(matches) > 1:
            raise ambiguous(name, matches)
        if not matches:
            raise NoMatchError(
                f"the ledger at {self.db.where} holds no events of a session {name!r}: expected "
                "a session id, a unique prefix of one, or project/agent/session-id",
                hint="`pentrace audit` lists the ledger's sessions that have no trace",
            )
        return matches[0]

    # -- figures ---------------------------------------------------------------------
    def stats(self) -> LedgerStats:
        """Figures for ``pentrace ledger stats`` (read-only: no WAL checkpoint)."""
        db = self.db
        events, marks = db.tables.events, db.tables.watermarks
        with db.reading("read ledger statistics") as conn:
            rows, first, last, streams = conn.execute(
                select(
                    func.count(),
                    func.min(events.c.notification_id),
                    func.max(events.c.notification_id),
                    func.count(events.c.stream_id.distinct()),
                )
            ).one()
            ends = {
                int(row[0]): (row[1], int(row[2]))
                for row in conn.execute(
                    select(
                        events.c.notification_id, event_id_of(events), events.c.inserted_at
                    ).where(events.c.notification_id.in_([first or 0, last or 0]))
                )
            }
            by_type = conn.execute(
                select(events.c.event_type, events.c.category, func.count()).group_by(
                    events.c.event_type, events.c.category
                )
            ).all()
            pruned = conn.execute(select(func.coalesce(func.sum(marks.c.pruned_rows), 0))).scalar()
        oldest, newest = ends.get(first or -1), ends.get(last or -1)
        return LedgerStats(
            where=db.where,
            rows=int(rows),
            bytes=db.dialect.size(db, checkpoint=False),
            oldest_event_id=oldest[0] if oldest else None,
            newest_event_id=newest[0] if newest else None,
            oldest_inserted_ms=oldest[1] if oldest else None,
            newest_inserted_ms=newest[1] if newest else None,
            streams=int(streams),
            pruned_rows=int(pruned or 0),
            by_category=_categories(by_type),
            format=db.format or "pentrace",
        )

    def retention_plan(self) -> RetentionPlan:
        """What :meth:`~.store.RuntimeEventLedger.cleanup` would delete now, rule by rule,
        without deleting (:func:`.retention.plan_retention`)."""
        return plan_retention(self.db, self.policy, self.now_ms())

    def close(self) -> None:
        """Close the database connections."""
        self.db.close()


def _categories(by_type: Sequence[Any]) -> dict[str, int]:
    """Rows per category from rows per (type, category); NULL is the type's own (ADR 0058)."""
    counts: dict[str, int] = {}
    for event_type, category, count in by_type:
        name = str(category) if category is not None else type_category(str(event_type))
        counts[name] = counts.get(name, 0) + int(count)
    return dict(sorted(counts.items()))


def _first(row: Any) -> int:
    return int(row[0])
