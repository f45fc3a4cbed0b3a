"""The durable RuntimeEvent ledger: every write, and retention (the reads are :mod:`.reads`).

``append`` and ``extend`` are each one transaction that rolls back on any
error.  An event id the ledger already holds is a no-op when the envelope is
byte-identical and a :class:`~pentrace.errors.LedgerConflictError` when it is
not: Penguin's ``INSERT OR IGNORE`` silently dropped the new content (W1).
Because ids come from trace positions, a restart or a rebuild produces the
same ids for the same events, and new events get new ids.

Retention runs after a write commits, at most once per cleanup interval; a
retention error is raised to the caller, but the committed write stands (and
writing it again is a harmless no-op).

Every path into the ledger writes through :class:`RuntimeEventLedger`: the
live path, the ingest follower and ``index_records`` with :meth:`append_rows`,
the bulk sync with :meth:`append_bulk` and :meth:`skip_rows`, a rebuild with
:meth:`replace_stream`, eventsourcing with :meth:`insert_events` and
:meth:`insert_tracking`.  It is also an eventsourcing ``ProcessRecorder``: a
ledger row *is* a ``Notification`` (``id`` = ``notification_id``,
``originator_id`` = ``stream_id``, ``originator_version`` = ``sequence``,
``topic`` = ``event_type``, ``state`` = ``event_json``), so the library's
``Projection`` and ``ProjectionRunner`` read RuntimeEvents straight from the
ledger and track their position in its tracking table.  Originator ids are
strings (the ledger's streams); a UUID given to ``insert_events`` is stored as
its hex string.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from eventsourcing.persistence import ProcessRecorder, StoredEvent, Subscription, Tracking
from sqlalchemy import Connection, delete, func, insert, select, update

from pentrace.domain.json_codec import escape_surrogates
from pentrace.infrastructure.ledger.backend.codec import (
    MIN_SAMPLES,
    RowCodec,
    add_dictionary,
    read_plain,
)
from pentrace.infrastructure.ledger.backend.database import LedgerDatabase
from pentrace.infrastructure.ledger.backend.errors import LedgerIntegrityError
from pentrace.infrastructure.ledger.backend.schema import (
    event_id_of,
    ids_match,
    stream_equals,
    stream_in,
)
from pentrace.infrastructure.ledger.live.follower import LedgerSubscription
from pentrace.infrastructure.ledger.reads import LedgerReader
from pentrace.infrastructure.ledger.retention import (
    RetentionReport,
    Watermark,
    apply_retention,
    raise_watermark,
)
from pentrace.infrastructure.ledger.rows import (
    event_row,
    plain_values,
    stored_event_row,
    stored_row,
)
from pentrace.infrastructure.ledger.settings import LedgerSettings

__all__ = ["SAMPLES", "TRAIN_AFTER", "RuntimeEventLedger"]

_CHUNK: Final = 500
#: Envelopes a dictionary is trained on (ADR 0058).
SAMPLES: Final = 2000
#: Plain rows a ledger without a dictionary takes before it trains one from them.
TRAIN_AFTER: Final = 1000
_log = logging.getLogger(__name__)


class RuntimeEventLedger(LedgerReader, ProcessRecorder):
    """Redacted RuntimeEvents in SQLite or PostgreSQL: a :class:`~.reads.LedgerReader` that
    writes, and an eventsourcing ProcessRecorder."""

    def __init__(
        self,
        db: LedgerDatabase,
        settings: LedgerSettings | None = None,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(db, settings, clock=clock)
        self._insert = db.dialect.row_inserter(db, self.notify_channel)
        self._monotonic = monotonic
        self._last_cleanup: float | None = None
        self._retention_held = 0
        self._plain_written = 0

    @classmethod
    def open(
        cls,
        data_root: Path | None = None,
        settings: LedgerSettings | None = None,
        *,
        table_prefix: str | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        read_only: bool = False,
        penguin_read_only: bool = False,
    ) -> RuntimeEventLedger:
        """:func:`.opener.open_ledger`, the one opener, with the settings (default: the
        environment's); ``table_prefix``, when given, replaces theirs."""
        from pentrace.infrastructure.ledger.opener import open_ledger

        settings = settings if settings is not None else LedgerSettings.from_env()
        if table_prefix is not None:
            settings = settings.model_copy(update={"table_prefix": table_prefix})
        return open_ledger(
            settings,
            data_root,
            read_only=read_only,
            penguin_read_only=penguin_read_only,
            clock=clock,
            monotonic=monotonic,
        )

    # -- eventsourcing's writes ---------------------------------------------------
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
            with self.db.reading("look for streams of one digest") as conn:
                clash = self.db.dialect.digest_clash(conn, self.db.tables.events, positions)
            if clash is None:
                raise
            stream, other, sequence, digest = clash
            raise LedgerIntegrityError(
                f"stream {stream!r} has the digest of stream {other!r} (the first 64 bits of "
                f"md5, {digest}), which holds position {sequence} in {self.db.where}: "
                "the ledger's (stream, sequence) key is on that digest (ADR 0071), so the "
                "two streams cannot both be stored",
                hint="two ids of one digest are made on purpose, not met by chance: give one "
                "of the sessions another id, or index them into a SQLite ledger",
            ) from error

    def subscribe(
        self, gt: int | None = None, topics: Sequence[str] = ()
    ) -> Subscription[RuntimeEventLedger]:
        """Follow the ledger: catch up after ``gt``, then block for new rows
        (:class:`~.live.follower.LedgerSubscription`)."""
        return LedgerSubscription(self, gt=gt, topics=topics)

    # -- writing -----------------------------------------------------------------
    def append(self, event: object) -> bool:
        """Store one envelope; True when stored, False when an identical copy was already there."""
        return self.extend([event]) == 1

    def extend(
        self,
        events: Iterable[object],
        *,
        before_commit: Callable[[Connection], None] | None = None,
    ) -> int:
        """Store envelopes in one transaction; returns how many were new.

        ``before_commit`` runs inside the transaction after the rows are
        written; when it raises, nothing is stored (Penguin's compat ledger
        runs its cleanup hook there, the ingest follower writes its cursor).
        With no rows it still runs, in a transaction of its own.
        """
        now = self.now_ms()
        rows = [event_row(event, now) for event in events]
        return self.append_rows(rows, before_commit=before_commit)

    def append_rows(
        self,
        rows: list[dict[str, Any]],
        *,
        before_commit: Callable[[Connection], None] | None = None,
    ) -> int:
        """:meth:`extend` for rows :func:`~.rows.envelope_row` made (validated and
        redaction-checked already: the live path checks them in the saving thread and
        writes them in another), retention included."""
        if not rows and before_commit is None:
            return 0
        with (
            self.digest_collisions_named(rows),
            self.db.writing("append to the ledger") as conn,
        ):
            fresh = self._without_duplicates(conn, rows) if rows else []
            if fresh:
                self._number_unsequenced(conn, fresh)
                self._insert_rows(conn, fresh)
            if before_commit is not None:
                before_commit(conn)
        if fresh:
            self.waker.wake()
            self._train_if_due(len(fresh))
        self.cleanup_if_due()
        return len(fresh)

    def _train_if_due(self, written: int) -> None:
        """Count plain rows written; at :data:`TRAIN_AFTER` try training the ledger's first
        dictionary from its newest rows (ADR 0058): a ledger only the live path or an
        ingest follower writes compresses its rows from then on (those before stay plain)."""
        if self.db.codec.current is not None:
            return
        self._plain_written += written
        if self._plain_written < TRAIN_AFTER:
            return
        self._plain_written = 0
        events = self.db.tables.events
        with self.db.reading("sample the ledger's envelopes") as conn:
            rows = conn.execute(
                select(events.c.event_json).order_by(events.c.notification_id.desc()).limit(SAMPLES)
            ).all()
        if len(rows) >= TRAIN_AFTER:
            plain = read_plain(self.db, rows, 0, None)
            self.train_dictionary([sample for sample in plain if sample[:1] == b"{"])

    def train_dictionary(self, samples: list[bytes]) -> RowCodec:
        """The codec every writer uses after training the ledger's next dictionary on
        ``samples`` (plain envelopes), when they are enough to train a useful one."""
        if len(samples) < MIN_SAMPLES or self.db.read_only:
            return self.db.codec
        codec = add_dictionary(self.db, samples[:SAMPLES], self.now_ms())
        _log.info("ledger %s: dictionary %s trained on %d envelopes", self.db.where,
                  codec.current, len(samples))  # fmt: skip
        return codec

    def append_stored(self, rows: list[tuple[Any, ...]], codec: RowCodec) -> int:
        """:meth:`append_rows` for rows ``encoded_values(..., codec)`` built (the sync's
        batches that met a held key): made plain again, so that held copies are told by
        their ids and envelopes."""
        return self.append_rows([plain_values(row, codec) for row in rows])

    def append_bulk(
        self,
        write: Callable[[Connection], None],
        rows: Callable[[], list[tuple[Any, ...]]],
        count: int,
    ) -> int:
        """Store a bulk sync's batch of ``count`` rows in one transaction with ``write`` (the
        backend's bulk insert, :mod:`.bulk`); returns how many were new.

        A unique key another writer filled first (the live path, a second sync)
        rolls the batch back and sends its ``rows()`` (in ``encoded_values(...,
        codec)`` form) to the exact path, which skips identical copies and refuses
        different content (:class:`~pentrace.errors.LedgerConflictError`).
        """
        if not count:
            return 0
        try:
            with self.db.writing("append to the ledger") as conn:
                write(conn)
        except LedgerIntegrityError:
            # Rolled back: the exact path sorts the held ids out.
            return self.append_stored(rows(), self.db.codec)
        self.waker.wake()
        self.cleanup_if_due()
        return count

    def skip_rows(self, marks: Sequence[Watermark]) -> None:
        """Hand the notification ids of rows a sync leaves out (retention would delete them
        at once) to no row, and raise their streams' watermarks as that deletion would,
        in one transaction (``Watermark.rows`` each; ADR 0047)."""
        db = self.db
        with db.writing("record the rows retention would drop") as conn:
            last = db.dialect.skip_ids(conn, db.tables.events.name, sum(m.rows for m in marks))
            for mark in marks:
                last += mark.rows
                raise_watermark(db, conn, replace(mark, max_notification_id=last))

    def extend_rows(self, rows: list[dict[str, Any]]) -> int:
        """Store rows made by :func:`.rows.envelope_row` (each with its own ``inserted_at``),
        in one transaction; identical copies are skipped, and the count of new ones returned."""
        if not rows:
            return 0
        with (
            self.digest_collisions_named(rows),
            self.db.writing("import into the ledger") as conn,
        ):
            fresh = self._without_duplicates(conn, rows)
            if fresh:
                self._insert_rows(conn, fresh)
        if fresh:
            self.waker.wake()
        return len(fresh)

    def _without_duplicates(
        self, conn: Connection, rows: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Drop rows already stored byte-identically; refuse different content under a held id."""
        unique: dict[str, dict[str, Any]] = {}
        for row in rows:
            prior = unique.setdefault(row["event_id"], row)
            if prior is not row and prior["event_json"] != row["event_json"]:
                raise _conflict(row["event_id"], "twice in one batch")
        events = self.db.tables.events
        ids = list(unique)
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            held = conn.execute(
                select(event_id_of(events), events.c.event_json).where(
                    ids_match(events, chunk, digest=self.db.digest_streams)
                )
            ).all()
            plain_list = read_plain(self.db, held, 1, None)
            for (event_id, _), plain in zip(held, plain_list, strict=True):
                if event_id not in unique:
                    continue  # its position's row, under a foreign id
                if plain != unique[event_id]["event_json"]:
                    raise _conflict(event_id, "already in the ledger")
                del unique[event_id]
        return list(unique.values())

    def _number_unsequenced(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        """Give rows without a sequence (foreign envelopes) the next free one of their stream.

        Such an event has no trace position; numbering it inside the write
        transaction (one writer at a time) keeps ``(stream_id, sequence)``
        unique without a counter in process memory.  Its envelope is stored
        as sent.
        """
        events, marks = self.db.tables.events, self.db.tables.watermarks
        following: dict[str, int] = {}
        for row in rows:
            if row["sequence"] > 0:
                continue
            stream = row["stream_id"]
            if stream not in following:
                held = conn.execute(
                    select(func.max(events.c.sequence)).where(
                        stream_equals(events, stream, digest=self.db.digest_streams)
                    )
                ).scalar_one_or_none()
                pruned = conn.execute(
                    select(marks.c.max_sequence).where(marks.c.stream_id == stream)
                ).scalar_one_or_none()
                batch = max((r["sequence"] for r in rows if r["stream_id"] == stream), default=0)
                following[stream] = max(int(held or 0), int(pruned or 0), batch)
            following[stream] += 1
            row["sequence"] = following[stream]

    def forget_stream(self, stream_id: str) -> int:
        """Delete a stream's rows and its retention watermark (a deleted session); returns
        the rows deleted.  Its ids become unknown: a later cursor on one is a gap."""
        stream_id = escape_surrogates(stream_id)  # as the rows hold it (ADR 0015)
        events, marks = self.db.tables.events, self.db.tables.watermarks
        with self.db.writing("remove a stream from the ledger") as conn:
            deleted = conn.execute(
                delete(events).where(
                    stream_equals(events, stream_id, digest=self.db.digest_streams)
                )
            )
            conn.execute(delete(marks).where(marks.c.stream_id == stream_id))
        return int(deleted.rowcount or 0)

    # -- retention ---------------------------------------------------------------
    def cleanup(self) -> RetentionReport:
        """Apply retention now (age, count, size)."""
        self._last_cleanup = self._monotonic()
        return apply_retention(self.db, self.policy, self.now_ms())

    def cleanup_if_due(self) -> RetentionReport | None:
        """Apply retention when the cleanup interval has passed (never when it is 0/None).

        Inside :meth:`retention_held` it waits: a command that indexes and then
        reads what it indexed must not have retention prune under it.
        """
        interval = self.settings.cleanup_interval_seconds
        if not interval or self._retention_held:
            return None
        last = self._last_cleanup
        if last is not None and self._monotonic() - last < interval:
            return None
        return self.cleanup()

    def replace_stream(
        self,
        stream_id: str,
        events: Iterable[object],
        row_of: Callable[[object, int], dict[str, Any] | None] = event_row,
    ) -> int:
        """Replace a stream's rows and watermark with ``events``, in one transaction.

        Until it commits, readers see the old rows; if building or storing any
        event fails, the old rows stay.  ``row_of`` builds each event's row (None:
        the event is left out; ``ledger rebuild`` leaves out a record it cannot take).
        Returns how many rows were stored.
        """
        stream_id = escape_surrogates(stream_id)  # as the rows hold it (ADR 0015)
        tables = self.db.tables
        now = self.now_ms()
        stored = 0
        built: list[dict[str, Any]] = []  # what a digest collision is looked up for
        with (
            self.digest_collisions_named(built),
            self.db.writing("replace a stream in the ledger") as conn,
        ):
            conn.execute(
                delete(tables.events).where(
                    stream_equals(tables.events, stream_id, digest=self.db.digest_streams)
                )
            )
            conn.execute(
                delete(tables.watermarks).where(tables.watermarks.c.stream_id == stream_id)
            )
            batch: list[dict[str, Any]] = []
            for event in events:
                row = row_of(event, now)
                if row is None:
                    continue
                batch.append(row)
                built.append(row)
                if len(batch) >= _CHUNK:
                    stored += self._insert_fresh(conn, batch)
                    batch = []
            stored += self._insert_fresh(conn, batch)
        self.waker.wake()
        self._train_if_due(stored)
        self.cleanup_if_due()
        return stored

    def _insert_fresh(self, conn: Connection, rows: list[dict[str, Any]]) -> int:
        fresh = self._without_duplicates(conn, rows) if rows else []
        if fresh:
            self._insert_rows(conn, fresh)
        return len(fresh)

    def keep_streams(self, stream_ids: Iterable[str]) -> int:
        """Delete the rows and watermarks of every stream not in ``stream_ids``; returns rows."""
        events, marks = self.db.tables.events, self.db.tables.watermarks
        keep = set(stream_ids)
        deleted = 0
        with self.db.writing("drop streams no trace holds") as conn:
            held = {str(s) for s in conn.execute(select(events.c.stream_id).distinct()).scalars()}
            marked = {str(s) for s in conn.execute(select(marks.c.stream_id)).scalars()}
            gone = sorted((held | marked) - keep)
            for start in range(0, len(gone), _CHUNK):
                chunk = gone[start : start + _CHUNK]
                result = conn.execute(
                    delete(events).where(stream_in(events, chunk, digest=self.db.digest_streams))
                )
                deleted += int(result.rowcount or 0)
                conn.execute(delete(marks).where(marks.c.stream_id.in_(chunk)))
        return deleted

    @property
    def retention_is_held(self) -> bool:
        """Inside :meth:`retention_held`: someone reads what is indexed before retention runs."""
        return self._retention_held > 0

    @contextmanager
    def retention_held(self) -> Iterator[None]:
        """Hold automatic retention in the block, then apply it if it is due.

        ``stats --sync`` indexes the traces, then catches the projections up
        from the rows it just wrote; pruning between the two would be a gap
        of the command's own making.  The ledger may exceed its limits until
        the block ends.
        """
        self._retention_held += 1
        try:
            yield
        finally:
            self._retention_held -= 1
        self.cleanup_if_due()

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

    def clear(self) -> None:
        """Delete every event, watermark and ingest cursor; notification ids keep counting up."""
        with self.db.writing("clear the ledger") as conn:
            conn.execute(delete(self.db.tables.events))
            conn.execute(delete(self.db.tables.watermarks))
            conn.execute(delete(self.db.tables.ingest_cursors))


def _conflict(event_id: str, where: str) -> LedgerIntegrityError:
    return LedgerIntegrityError(
        f"event {event_id}: different content under an id {where}; "
        "expected identical content for a repeated id",
        hint="ids come from trace positions; if the traces changed, run `pentrace ledger rebuild`",
    )
