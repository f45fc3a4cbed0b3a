"""A projection's read model: an eventsourcing ``TrackingRecorder`` that batches writes.

Handlers write through a :class:`Transaction` (``tx``):

* ``tx.add(table, {key...}, count=1)`` adds to counters,
* ``tx.put(table, {key...}, model="m")`` sets columns,
* ``tx.least`` / ``tx.greatest`` keep the smallest / largest value,
* ``tx.get(table, {key...})`` reads a row as the handler's own writes left it,
* ``tx.execute(sql, params)`` runs any SQL (``:name`` parameters).

Upserts are merged in memory and written with one ``executemany`` per shape
when the batch commits.  The batch and the projection's tracking position
commit in **one** transaction, so a crash at any moment loses either both or
neither: after a restart the runner re-reads from the committed position and
the read model ends up exactly as an uninterrupted run leaves it.

Events a handler failed on (ADR 0032) are recorded in ``analytics_failures``
in that same transaction: a failed event is neither retried for ever nor
applied twice.

The *trace marks* of a cold build (ADR 0050) live here too: per session, the
highest trace position it folded straight from the traces, written in the
build's transaction; the runner skips ledger events at or below them, so each
record counts once (:func:`read_marks`, :func:`write_marks`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from eventsourcing.persistence import Tracking, TrackingRecorder
from sqlalchemy import Connection, text

from pentrace.errors import AnalyticsError
from pentrace.infrastructure.analytics.database import (
    IDENTITY_TABLE,
    MARKS_TABLE,
    TRACKING_TABLE,
    AnalyticsDatabase,
    converted,
    scheme_of,
)
from pentrace.infrastructure.analytics.failures import (
    EventFailure,
    record_failures,
    stored_failures,
)
from pentrace.infrastructure.analytics.transaction import Transaction

__all__ = [
    "ReadModel",
    "TrackingConflictError",
    "Transaction",
    "forget_marks",
    "read_marks",
    "write_marks",
]


class TrackingConflictError(AnalyticsError):
    """Another runner committed the read model's tracking position first."""


class ReadModel(TrackingRecorder):
    """The read model of one projection and its tracking position, in the analytics database.

    A read model follows one application (the ledger), so its tracking row is
    keyed by the *projection's* name: several projections share one database.
    """

    def __init__(self, db: AnalyticsDatabase, name: str) -> None:
        self.db = db
        self.name = name
        self.lock = threading.RLock()
        self._conn: Connection | None = None
        self._tx: Transaction | None = None
        self._position: int | None = None
        self._start: int | None = None
        self.seen: list[int] = []
        self.failures: list[EventFailure] = []  # recorded when the batch commits
        self._failed_before: int | None = None
        #: What a commit from nothing records as the read model's build (key scheme and
        #: projection version); the projection sets it from its ``version``.
        self.scheme = scheme_of(1)

    # -- the open batch -------------------------------------------------------------
    def open_connection(self) -> Connection:
        """The batch's connection, beginning the write transaction on first use."""
        if self._conn is None:
            conn = self.db.connect_for_writing()
            with converted("begin an analytics transaction", self.db.where):
                conn.begin()
            self._conn = conn
        return self._conn

    def transaction(self) -> Transaction:
        """The open batch (one is started when none is open)."""
        if self._tx is None:
            self._tx = Transaction(self)
        return self._tx

    @property
    def pending(self) -> int:
        """Events handled in the open batch."""
        return 0 if self._tx is None else self._tx.count

    def advance(self, tracking: Tracking) -> None:
        """Note that the open batch now covers the event at ``tracking``."""
        if self._start is None:
            self._start = self.max_tracking_id(self.name)
        self._position = tracking.notification_id
        self.seen.append(tracking.notification_id)
        self.transaction().count += 1

    def restart_from(self, start: int | None, position: int) -> None:
        """Let the open batch replace tracking ``start`` with ``position`` (rebuilds)."""
        self._start, self._position = start, position

    @property
    def start(self) -> int | None:
        """The committed position the open batch started from."""
        return self._start

    @property
    def position(self) -> int | None:
        """The position the open batch has reached."""
        return self._position

    def failed_events(self) -> int:
        """Failed events recorded so far: committed ones (as this batch sees them) and its own."""
        if self._failed_before is None:
            with converted("count a projection's failed events", self.db.where):
                self._failed_before = stored_failures(self.open_connection(), self.name)
        return self._failed_before + len(self.failures)

    def commit(self, track: bool = True) -> int:
        """Write the batch, its failures and (``track``) its tracking position in one
        transaction; returns its events."""
        with self.lock:
            tx, position = self._tx, self._position
            if tx is None or (track and position is None):
                return 0
            with converted("commit an analytics batch", self.db.where):
                tx.flush()  # a refused write raises BatchWriteError: retried one by one
                record_failures(self.open_connection(), self.failures)
                if track and position is not None:
                    self._track(self.open_connection(), self._start, position)
                assert self._conn is not None
                self._conn.commit()
            count = tx.count
            self._reset()
            return count

    def rollback(self) -> None:
        """Drop the open batch (nothing of it was committed)."""
        with self.lock:
            if self._conn is not None:
                with converted("roll back an analytics batch", self.db.where):
                    self._conn.rollback()
            self._reset()

    def _reset(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self._tx = None
        self._position = None
        self._start = None
        self.seen = []
        self.failures = []
        self._failed_before = None

    def _track(self, conn: Connection, start: int | None, position: int) -> None:
        name = self.name
        current = conn.execute(
            text(f"SELECT notification_id FROM {TRACKING_TABLE} WHERE application_name = :n"),
            {"n": name},
        ).scalar_one_or_none()
        if (current or 0) != (start or 0):
            raise TrackingConflictError(
                f"read model {name!r}: expected tracking position {start or 0}, found {current} "
                "(another runner advanced it)",
                hint="run one runner per projection; `pentrace projections status` shows them",
            )
        if current is None:
            sql = (
                f"INSERT INTO {TRACKING_TABLE} (notification_id, application_name) VALUES (:p, :n)"
            )
            # A first commit (or a rebuild's) writes the read model with today's session keys
            # and the projection's version.
            conn.execute(
                text(f"DELETE FROM {IDENTITY_TABLE} WHERE application_name = :n"), {"n": name}
            )
            conn.execute(
                text(f"INSERT INTO {IDENTITY_TABLE} (application_name, scheme) VALUES (:n, :s)"),
                {"n": name, "s": self.scheme},
            )
        else:
            sql = f"UPDATE {TRACKING_TABLE} SET notification_id = :p WHERE application_name = :n"
        conn.execute(text(sql), {"p": position, "n": name})

    # -- eventsourcing's TrackingRecorder --------------------------------------------
    def insert_tracking(self, tracking: Tracking) -> None:
        """Record a position on its own (no read-model writes)."""
        name = self.name
        with self.lock, self.db.writing("record an analytics tracking position") as conn:
            start = conn.execute(
                text(f"SELECT notification_id FROM {TRACKING_TABLE} WHERE application_name = :n"),
                {"n": name},
            ).scalar_one_or_none()
            if start is not None and start >= tracking.notification_id:
                raise AnalyticsError(
                    f"read model {name!r}: expected a position above "
                    f"{start}, found {tracking.notification_id}",
                    hint="a tracking position never moves backwards",
                )
            self._track(conn, start, tracking.notification_id)

    def max_tracking_id(self, application_name: str) -> int | None:
        """The committed position of this projection (None before its first commit)."""
        del application_name  # one application per read model; the row is the projection's
        with self.db.reading("read an analytics tracking position") as conn:
            value = conn.execute(
                text(f"SELECT notification_id FROM {TRACKING_TABLE} WHERE application_name = :n"),
                {"n": self.name},
            ).scalar_one_or_none()
        return None if value is None else int(value)

    def stale_identity(self) -> bool:
        """True when the read model must be rebuilt before it is extended (:meth:`stale_reason`)."""
        return self.stale_reason() is not None

    def stale_reason(self) -> str | None:
        """Why the read model was built unlike this code builds it, or None when it was not:
        sessions keyed by their id alone (ADR 0023), or another version of the projection
        (its tables differ; ADR 0054)."""
        with self.db.reading("read an analytics read model's session key scheme") as conn:
            tracked = conn.execute(
                text(f"SELECT 1 FROM {TRACKING_TABLE} WHERE application_name = :n"),
                {"n": self.name},
            ).first()
            scheme = conn.execute(
                text(f"SELECT scheme FROM {IDENTITY_TABLE} WHERE application_name = :n"),
                {"n": self.name},
            ).scalar_one_or_none()
        if tracked is None or scheme == self.scheme:
            return None
        if scheme is None:
            return (
                "keys sessions by their id alone (built before ADR 0023); "
                "expected (project, agent, session id) keys"
            )
        return (
            f"was built by another version of its projection (scheme {scheme!r}); "
            f"expected {self.scheme!r}, whose tables differ"
        )

    def forget(self) -> None:
        """Remove the tracking position (a rebuild starts from nothing)."""
        with self.db.writing("forget an analytics tracking position") as conn:
            conn.execute(
                text(f"DELETE FROM {TRACKING_TABLE} WHERE application_name = :n"),
                {"n": self.name},
            )


def read_marks(db: AnalyticsDatabase, name: str) -> dict[str, int]:
    """The committed marks of projection ``name``: stream id -> highest folded position."""
    with db.reading(f"read the trace marks of {name}") as conn:
        rows = conn.execute(
            text(f"SELECT stream_id, position FROM {MARKS_TABLE} WHERE application_name = :n"),
            {"n": name},
        ).all()
    return {str(stream): int(position) for stream, position in rows}


def write_marks(conn: Connection, name: str, marks: Mapping[str, int]) -> None:
    """Replace the marks of ``name`` with ``marks``, in the caller's transaction."""
    forget_marks(conn, name)
    rows = [{"n": name, "s": stream, "p": position} for stream, position in marks.items()]
    if rows:
        conn.execute(
            text(
                f"INSERT INTO {MARKS_TABLE} (application_name, stream_id, position) "
                "VALUES (:n, :s, :p)"
            ),
            rows,
        )


def forget_marks(conn: Connection, name: str) -> None:
    """Drop the marks of ``name``, in the caller's transaction."""
    conn.execute(text(f"DELETE FROM {MARKS_TABLE} WHERE application_name = :n"), {"n": name})
