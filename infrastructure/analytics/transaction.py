"""The write side a projection handler gets: merged upserts plus raw SQL, in one transaction.

Upserts (``add``, ``put``, ``least``, ``greatest``) are merged in memory per
row and written with one ``executemany`` per statement shape when the batch
is flushed; ``get`` and ``execute`` flush first, so a handler always reads
its own writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import Connection, text

from pentrace.domain.json_codec import escape_surrogates

if TYPE_CHECKING:
    from pentrace.infrastructure.analytics.readmodel import ReadModel
    from pentrace.infrastructure.ledger.backend.dialect import LedgerDialect

__all__ = ["Transaction"]

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
        params = {name: _bindable(value) for name, value in key.items()}
        row = self.connection.execute(text(f"SELECT * FROM {table} WHERE {where}"), params)
        found = row.mappings().first()
        return dict(found) if found is not None else None

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> Any:
        """Run SQL (``:name`` parameters) in this transaction, after the merged writes."""
        self.flush()
        bound = {name: _bindable(value) for name, value in (params or {}).items()}
        return self.connection.execute(text(sql), bound)

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
