"""The write side a projection handler gets: merged upserts plus raw SQL, in one transaction.

Upserts (``add``, ``put``, ``least``, ``greatest``) are merged in memory per
row and written with one ``executemany`` per statement shape when the batch
is flushed; ``get`` and ``execute`` flush first, so a handler always reads
its own writes.

Each event is isolated (ADR 0032): between :meth:`Transaction.begin_event`
and :meth:`Transaction.end_event` the handler's upserts wait in a list of
their own, merged into the batch only when the event succeeds.  A handler
that touches the database with its own writes pending or possible
(``execute``, ``connection``, ``flush``, or ``get`` of a table it has just
written) makes the batch's writes go to the database first and the event
continue inside a SAVEPOINT, so a failed event's writes are dropped or
rolled back either way while the batch's stay.  A ``get`` of other tables
needs no savepoint: it writes only the batch's pending rows, as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import Connection, NestedTransaction, exc, text

from pentrace.domain.json_codec import escape_surrogates
from pentrace.errors import AnalyticsError
from pentrace.infrastructure.ledger.backend.credentials import mask_text
from pentrace.infrastructure.ledger.backend.errors import driver_reason

if TYPE_CHECKING:
    from pentrace.infrastructure.analytics.readmodel import ReadModel
    from pentrace.infrastructure.ledger.backend.dialect import LedgerDialect

__all__ = ["BatchWriteError", "Transaction"]

_ADD: Final = "add"
_PUT: Final = "put"
_LEAST: Final = "least"
_GREATEST: Final = "greatest"
Key = tuple[Any, ...]
Slot = tuple[tuple[str, ...], Key]


class BatchWriteError(AnalyticsError):
    """The database refused a batch of merged writes: which event caused it is not known yet."""


class Transaction:
    """The write side a handler gets: merged upserts plus raw SQL, all in one transaction."""

    def __init__(self, model: ReadModel) -> None:
        self._model = model
        # table -> (key names, key values) -> column -> [op, value]
        self._pending: dict[str, dict[Slot, dict[str, list[Any]]]] = {}
        self.count = 0
        # The open event's upserts while it has not touched the database (else None).
        self._event: list[tuple[str, Slot, str, Mapping[str, Any]]] | None = None
        self._savepoint: NestedTransaction | None = None
        self._strict = False

    # -- one event at a time ----------------------------------------------------------
    def begin_event(self, strict: bool = False) -> None:
        """Start isolating one event's writes (``strict``: in a savepoint from the start)."""
        self._event = []
        self._savepoint = None
        self._strict = strict
        if strict:
            self._touch_database()

    def end_event(self, applied: bool) -> None:
        """Keep the event's writes in the batch (``applied``) or drop / roll them back.

        A ``strict`` event writes its upserts before its savepoint is released,
        so a database error of its own surfaces here, and the event stays open
        for ``end_event(False)``; otherwise they join the batch's.
        """
        savepoint = self._savepoint
        if savepoint is None:
            event, self._event = self._event, None
            if applied and event:
                for table, slot, op, values in event:
                    self._merge_slot(table, slot, op, values)
            return
        if applied:
            if self._strict:
                self._write_pending()
            savepoint.commit()
        else:
            self._pending = {}  # written since the savepoint: this event's only
            savepoint.rollback()
        self._savepoint = None
        self._event = None

    def _touch_database(self) -> None:
        """The event is about to read or write the database: write the batch, then SAVEPOINT."""
        event = self._event
        if event is None:
            return
        self._event = None
        self._write_pending()
        self._savepoint = self._model.open_connection().begin_nested()
        for table, slot, op, values in event:
            self._merge_slot(table, slot, op, values)

    # -- merged upserts -----------------------------------------------------------------
    def _merge(
        self, table: str, key: Mapping[str, Any], op: str, values: Mapping[str, Any]
    ) -> None:
        slot = (tuple(key), tuple(key.values()))
        if self._event is not None:
            self._event.append((table, slot, op, values))
        else:
            self._merge_slot(table, slot, op, values)

    def _merge_slot(self, table: str, slot: Slot, op: str, values: Mapping[str, Any]) -> None:
        rows = self._pending.setdefault(table, {})
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
                self._write_pending()
                self._merge_slot(table, slot, op, values)
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
        event = self._event
        if event is not None and any(op[0] == table for op in event):
            self._touch_database()  # the event reads its own writes: they go in a savepoint
        if table in self._pending:
            self._write_pending()  # the batch's (or, in a savepoint, the event's) writes
        where = " AND ".join(f"{name} = :{name}" for name in key)
        params = {name: _bindable(value) for name, value in key.items()}
        conn = self._model.open_connection()
        row = conn.execute(text(f"SELECT * FROM {table} WHERE {where}"), params)
        found = row.mappings().first()
        return dict(found) if found is not None else None

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> Any:
        """Run SQL (``:name`` parameters) in this transaction, after the merged writes."""
        self.flush()
        bound = {name: _bindable(value) for name, value in (params or {}).items()}
        return self._model.open_connection().execute(text(sql), bound)

    @property
    def connection(self) -> Connection:
        """The open SQLAlchemy connection of this transaction."""
        self._touch_database()
        return self._model.open_connection()

    def flush(self) -> None:
        """Write the merged upserts now (still uncommitted)."""
        self._touch_database()
        self._write_pending()

    def insert(self, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
        """Insert ``rows`` (values in ``columns`` order, None for NULL) with one
        ``executemany``, after the merged writes: for rows no other write in the transaction
        has touched (a bulk fold filling fresh tables, ADR 0062).  A refused write raises
        :class:`BatchWriteError`, as a refused merged batch does."""
        self.flush()
        if not rows:
            return
        marks = ", ".join([self._model.db.dialect.placeholder] * len(columns))
        sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
        conn = self._model.open_connection()
        with self._refused():
            conn.exec_driver_sql(sql, [tuple(map(_bindable, row)) for row in rows])

    def _write_pending(self) -> None:
        pending, self._pending = self._pending, {}
        if not pending:
            return
        with self._refused():
            self._write(pending)

    @contextmanager
    def _refused(self) -> Iterator[None]:
        """A write the database (or the driver binding it) refuses, as BatchWriteError."""
        try:
            yield
        except Exception as error:
            gone = isinstance(error, exc.DBAPIError) and error.connection_invalidated
            if self._savepoint is not None or gone:
                raise  # the open event's own write, or the database is gone
            # Which event's values the database (or the driver binding them) refused is not
            # known in a merged batch: the caller handles the batch again one event at a time.
            reason = driver_reason(error) if isinstance(error, exc.DBAPIError) else str(error)
            raise BatchWriteError(
                f"read model {self._model.name!r}: a batched write was refused "
                f"({type(error).__name__}: {mask_text(reason)[:200]}); "
                "expected the batch's events to be retried one by one",
                hint="an event whose writes the database refuses is recorded as failed",
            ) from error

    def _write(self, pending: dict[str, dict[Slot, dict[str, list[Any]]]]) -> None:
        conn = self._model.open_connection()
        db = self._model.db
        for table, rows in pending.items():
            shapes: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
            for (names, values), cells in rows.items():
                columns = tuple(sorted(cells))
                shape = (names, columns, tuple(cells[c][0] for c in columns))
                params = values + tuple(cells[c][1] for c in columns)
                shapes.setdefault(shape, []).append(tuple(map(_bindable, params)))
            for (names, columns, ops), params_list in shapes.items():
                sql = _upsert_sql(table, names, columns, ops, db.dialect)
                conn.exec_driver_sql(sql, params_list)


def _bindable(value: Any) -> Any:
    """Text is bound as UTF-8: lone surrogates go in as their JSON escapes (ADR 0015)."""
    if isinstance(value, str) and not value.isascii():
        return escape_surrogates(value)
    return value


def _upsert_sql(
    table: str,
    keys: tuple[str, ...],
    columns: tuple[str, ...],
    ops: tuple[str, ...],
    dialect: LedgerDialect,
) -> str:
    names = (*keys, *columns)
    sets = []
    low, high, mark = dialect.least, dialect.greatest, dialect.placeholder
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
