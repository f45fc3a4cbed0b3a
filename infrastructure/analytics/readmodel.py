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
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Final

from eventsourcing.persistence import Tracking, TrackingRecorder
from sqlalchemy import Connection, text

from pentrace.errors import AnalyticsError
from pentrace.infrastructure.analytics.database import (
    TRACKING_TABLE,
    AnalyticsDatabase,
    converted,
)

__all__ = ["ReadModel", "Transaction"]

_ADD: Final = "add"
_PUT: Final = "put"
_LEAST: Final = "least"
_GREATEST: Final = "greatest"
Key = tuple[Any, ...]


class Transaction:
    """The write side a handler gets: merged upserts plus raw SQL, all in one transaction."""

    def __init__(self, model: ReadModel) -> None:
        self._model = model
        # table -> (key names, key values) -> column -> [op, value]
        self._pending: dict[str, dict[tuple[tuple[str, ...], Key], dict[str, list[Any]]]] = {}
        self.count = 0

    def _merge(
        self, table: str, key: Mapping[str, Any], op: str, values: Mapping[str, Any]
    ) -> None:
        rows = self._pending.setdefault(table, {})
        slot = (tuple(key), tuple(key.values()))
        row = rows.get(slot)
        if row is None:
            rows[slot] = {column: [op, value] for column, value in values.items()}
            return
        for column, value in values.items():
            cell = row.get(column)
            if cell is None:
                row[column] = [op, value]
            elif op == _ADD and cell[0] in (_ADD, _PUT):
                cell[1] += value
            elif op == _PUT:
                row[column] = [_PUT, value]
            elif op == cell[0] == _LEAST:
                cell[1] = min(cell[1], value)
            elif op == cell[0] == _GREATEST:
                cell[1] = max(cell[1], value)
            else:
                # Different kinds of update on one cell: write what we have, then start over.
                self.flush()
                self._merge(table, key, op, values)
                return

    def add(self, table: str, key: Mapping[str, Any], **values: int | float) -> None:
        """Add ``values`` to the row's counters (a missing row starts at zero)."""
        self._merge(table, key, _ADD, values)

    def put(self, table: str, key: Mapping[str, Any], **values: Any) -> None:
        """Set the row's columns to ``values``."""
        self._merge(table, key, _PUT, values)

    def least(self, table: str, key: Mapping[str, Any], **values: Any) -> None:
        """Keep the smaller of the stored and the given value (None values are ignored)."""
        kept = {column: value for column, value in values.items() if value is not None}
        if kept:
            self._merge(table, key, _LEAST, kept)

    def greatest(self, table: str, key: Mapping[str, Any], **values: Any) -> None:
        """Keep the larger of the stored and the given value (None values are ignored)."""
        kept = {column: value for column, value in values.items() if value is not None}
        if kept:
            self._merge(table, key, _GREATEST, kept)

    def get(self, table: str, key: Mapping[str, Any]) -> dict[str, Any] | None:
        """The row with this key as this transaction sees it, or None."""
        if table in self._pending:
            self.flush()
        where = " AND ".join(f"{name} = :{name}" for name in key)
        row = self.connection.execute(text(f"SELECT * FROM {table} WHERE {where}"), dict(key))
        found = row.mappings().first()
        return dict(found) if found is not None else None

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> Any:
        """Run SQL (``:name`` parameters) in this transaction, after the merged writes."""
        self.flush()
        return self.connection.execute(text(sql), dict(params or {}))

    @property
    def connection(self) -> Connection:
        """The open SQLAlchemy connection of this transaction."""
        return self._model.open_connection()

    def flush(self) -> None:
        """Write the merged upserts now (still uncommitted)."""
        pending, self._pending = self._pending, {}
        if not pending:
            return
        conn = self.connection
        db = self._model.db
        for table, rows in pending.items():
            shapes: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
            for (names, values), cells in rows.items():
                columns = tuple(sorted(cells))
                shape = (names, columns, tuple(cells[c][0] for c in columns))
                params = values + tuple(cells[c][1] for c in columns)
                shapes.setdefault(shape, []).append(params)
            for (names, columns, ops), params_list in shapes.items():
                sql = _upsert_sql(table, names, columns, ops, db.placeholder, db.is_sqlite)
                conn.exec_driver_sql(sql, params_list)


def _upsert_sql(
    table: str,
    keys: tuple[str, ...],
    columns: tuple[str, ...],
    ops: tuple[str, ...],
    mark: str,
    sqlite: bool,
) -> str:
    names = (*keys, *columns)
    sets = []
    low, high = ("MIN", "MAX") if sqlite else ("LEAST", "GREATEST")
    for column, op in zip(columns, ops, strict=True):
        old, new = f"{table}.{column}", f"excluded.{column}"
        if op == _ADD:
            sets.append(f"{column} = COALESCE({old}, 0) + {new}")
        elif op == _PUT:
            sets.append(f"{column} = {new}")
        else:
            fn = low if op == _LEAST else high
            sets.append(f"{column} = {fn}(COALESCE({old}, {new}), {new})")
    action = f"DO UPDATE SET {', '.join(sets)}" if sets else "DO NOTHING"
    return (
        f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join([mark] * len(names))}) "
        f"ON CONFLICT ({', '.join(keys)}) {action}"
    )


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

    def commit(self) -> int:
        """Write the batch and its tracking position in one transaction; returns its events."""
        with self.lock:
            tx, position = self._tx, self._position
            if tx is None or position is None:
                return 0
            with converted("commit an analytics batch", self.db.where):
                tx.flush()
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

    def _track(self, conn: Connection, start: int | None, position: int) -> None:
        name = self.name
        current = conn.execute(
            text(f"SELECT notification_id FROM {TRACKING_TABLE} WHERE application_name = :n"),
            {"n": name},
        ).scalar_one_or_none()
        if (current or 0) != (start or 0):
            raise AnalyticsError(
                f"read model {name!r}: expected tracking position {start or 0}, found {current} "
                "(another runner advanced it)",
                hint="run one runner per projection; `pentrace projections status` shows them",
            )
        if current is None:
            sql = (
                f"INSERT INTO {TRACKING_TABLE} (notification_id, application_name) VALUES (:p, :n)"
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

    def forget(self) -> None:
        """Remove the tracking position (a rebuild starts from nothing)."""
        with self.db.writing("forget an analytics tracking position") as conn:
            conn.execute(
                text(f"DELETE FROM {TRACKING_TABLE} WHERE application_name = :n"),
                {"n": self.name},
            )
