"""The ledger as an eventsourcing ProcessRecorder.

A ledger row *is* a ``Notification``: ``id`` = ``notification_id`` (global
order), ``originator_id`` = ``stream_id`` (``session:<id>`` for session
events), ``originator_version`` = ``sequence`` (the record's position in its
trace), ``topic`` = ``event_type`` and ``state`` = ``event_json``.  So the
library's ``Projection`` and ``ProjectionRunner`` read RuntimeEvents straight
from the ledger, and track their position in the ledger's tracking table.

Originator ids are strings (the ledger's streams); a UUID given to
``insert_events`` is stored as its hex string and read back as a string.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    Notification,
    ProcessRecorder,
    StoredEvent,
    Subscription,
    Tracking,
)
from sqlalchemy import Connection, Select, bindparam, func, insert, select, text, update

from pentrace.infrastructure.ledger.backend.database import LedgerDatabase
from pentrace.infrastructure.ledger.backend.errors import LedgerIntegrityError
from pentrace.infrastructure.ledger.backend.row_form import read_plain
from pentrace.infrastructure.ledger.backend.schema import (
    digest_collisions,
    key_equals,
    stream_equals,
)
from pentrace.infrastructure.ledger.live.subscription import LedgerSubscription, waker_for
from pentrace.infrastructure.ledger.rows import stored_event_row, stored_row

__all__ = ["LedgerRecorder"]


class LedgerRecorder(ProcessRecorder):
    """Application and tracking recorder over the ledger's tables."""

    def __init__(self, db: LedgerDatabase, *, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock
        database = str(db.path.resolve()) if db.path is not None else db.where
        self.waker = waker_for(database, db.tables.events.name)
        # Without a notification channel (SQLite) another process's commit is seen at
        # the next poll; with one (PostgreSQL NOTIFY) polling is the safety net.
        self.poll_interval = db.dialect.poll_seconds
        self._notify_channel = f"{db.tables.events.name}_appended"
        self._insert = db.dialect.row_inserter(db, self._notify_channel)

    @property
    def notify_channel(self) -> str:
        """The PostgreSQL channel every committed write is NOTIFYed on."""
        return self._notify_channel

    def now_ms(self) -> int:
        """The ledger clock in milliseconds (``inserted_at``, retention)."""
        return int(self.clock() * 1000)

    # -- writing -----------------------------------------------------------------
    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert stored events (and an optional ``tracking=``) atomically.

        A (stream, version) the ledger already holds raises IntegrityError.
        """
        if not stored_events:
            return None
        now = self.now_ms()
        rows = [stored_event_row(stored, now) for stored in stored_events]
        tracking = kwargs.get("tracking")
        with (
            self.digest_collisions_named(rows),
            self.db.writing("insert events into the ledger") as conn,
        ):
            ids = self._insert_rows(conn, rows)
            if isinstance(tracking, Tracking):
                self._insert_tracking(conn, tracking)
        self.waker.wake()
        return ids

    def _insert_rows(self, conn: Connection, rows: list[dict[str, Any]]) -> list[int]:
        """Insert plain rows inside a write transaction, in the ledger's stored form (ADR
        0058); returns their notification ids in order (the backend's fastest insert, which
        also announces the commit)."""
        codec = self.db.codec
        return self._insert(conn, [stored_row(row, codec) for row in rows])

    @contextmanager
    def digest_collisions_named(self, rows: Sequence[Mapping[str, Any]]) -> Iterator[None]:
        """Around a write transaction of ``rows``: when the stream key refused one for a row
        of another stream with the same md5 digest (ADR 0071), say so, naming both
        streams, instead of the bare unique violation.  Looked up only after a violation
        (the transaction is rolled back by then), so a write that succeeds pays nothing."""
        try:
            yield
        except LedgerIntegrityError as error:
            if not self.db.digest_streams or not rows:
                raise
            positions = [(str(row["stream_id"]), int(row["sequence"])) for row in rows]
            events = self.db.tables.events
            with self.db.reading("look for streams of one md5 digest") as conn:
                held = conn.execute(
                    select(events.c.stream_id, events.c.sequence, func.md5(events.c.stream_id))
                    .where(digest_collisions(events, positions))
                    .limit(1)
                ).first()
                if held is None:
                    raise
                other, sequence, digest = str(held[0]), int(held[1]), str(held[2])
                offered = sorted({s for s, q in positions if q == sequence and s != other})
                stream = conn.execute(
                    text(
                        "SELECT s FROM unnest(CAST(:streams AS text[])) AS s "
                        "WHERE left(md5(s), 16) = left(:d, 16)"
                    ),
                    {"streams": offered, "d": digest},
                ).scalar()
            raise LedgerIntegrityError(
                f"stream {stream!r} has the digest of stream {other!r} (the first 64 bits of "
                f"md5, {digest[:16]}), which holds position {sequence} in {self.db.where}: "
                "the ledger's (stream, sequence) key is on that digest (ADR 0071), so the "
                "two streams cannot both be stored",
                hint="two ids of one digest are made on purpose, not met by chance: give one "
                "of the sessions another id, or index them into a SQLite ledger",
            ) from error

    # -- reading -----------------------------------------------------------------
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
        projection that wants a tenth of the ledger reads that tenth.  (With
        ``event_type IN (...)`` the database collected and sorted every later
        row of those types for each page.)  The scans are bounded by ``stop``,
        or by the head read first, so that all of them see the same rows.
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
                id=row[0],
                originator_id=row[1],
                originator_version=row[2],
                topic=row[3],
                state=data,
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
        shape = (
            "notifications",
            after is not None,
            stop is not None,
            topic is not None,
            limit is not None,
            full,
        )
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

    def subscribe(
        self, gt: int | None = None, topics: Sequence[str] = ()
    ) -> Subscription[LedgerRecorder]:
        """Follow the ledger: catch up after ``gt``, then block for new rows."""
        return LedgerSubscription(self, gt=gt, topics=topics)

    # -- tracking ----------------------------------------------------------------
    def insert_tracking(self, tracking: Tracking) -> None:
        """Record how far an application has processed; never moves backwards."""
        with self.db.writing("record a ledger tracking position") as conn:
            self._insert_tracking(conn, tracking)

    def _insert_tracking(self, conn: Connection, tracking: Tracking) -> None:
        table = self.db.tables.tracking
        current = conn.execute(
            select(table.c.notification_id).where(
                table.c.application_name == tracking.application_name
            )
        ).scalar_one_or_none()
        if current is None:
            conn.execute(
                insert(table).values(
                    application_name=tracking.application_name,
                    notification_id=tracking.notification_id,
                )
            )
            return
        if current >= tracking.notification_id:
            raise LedgerIntegrityError(
                f"tracking for application {tracking.application_name!r}: expected a notification "
                f"id above {current}, found {tracking.notification_id}",
                hint="a projection may not record a position it has already passed",
            )
        conn.execute(
            update(table)
            .where(table.c.application_name == tracking.application_name)
            .values(notification_id=tracking.notification_id)
        )

    def max_tracking_id(self, application_name: str) -> int | None:
        """The highest notification id recorded for an application, or None."""
        table = self.db.tables.tracking
        with self.db.reading("read a ledger tracking position") as conn:
            value = conn.execute(
                select(table.c.notification_id).where(table.c.application_name == application_name)
            ).scalar_one_or_none()
        return None if value is None else int(value)


def _first(row: Any) -> int:
    return int(row[0])
