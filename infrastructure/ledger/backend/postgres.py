"""The PostgreSQL backend: a server by URL, writers serialised by a table lock, NOTIFY.

Write transactions take the events table in EXCLUSIVE mode (readers still
read), so notification ids become visible in order and a reader never skips
one that commits late.  Every insert sends ``pg_notify`` in its transaction,
so followers in any process wake at the commit; polling is the safety net.
Connections carry the timeouts of :mod:`.connections` (connect, statement,
lock, and the client-side deadline of :mod:`.deadline`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import Connection, Engine, Table, inspect, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import URL, make_url

from pentrace.errors import NotFoundError
from pentrace.infrastructure.ledger.backend.connections import (
    listen_connection,
    postgres_engine,
    run_guarded,
    schema_lock,
    statement_deadline,
)
from pentrace.infrastructure.ledger.backend.dialect import BulkInserter, RowInserter
from pentrace.infrastructure.ledger.backend.errors import converted
from pentrace.infrastructure.ledger.settings import DatabaseTimeouts

if TYPE_CHECKING:
    from pentrace.infrastructure.ledger.backend.database import LedgerDatabase

__all__ = ["POSTGRES", "PostgresDialect"]


class PostgresDialect:
    """:class:`~.dialect.LedgerDialect` for ``postgresql://`` URLs (psycopg 3)."""

    name = "postgresql"
    file_based = False
    poll_seconds = 0.1
    notifies = True
    row_lock = " FOR UPDATE"
    placeholder = "%s"
    least = "LEAST"
    greatest = "GREATEST"
    write_options: Mapping[str, str] = MappingProxyType({})
    defers_indexes = False  # not measured there: every index is kept live

    def statement_deadline(self, timeouts: DatabaseTimeouts) -> float | None:
        """The server's ``statement_timeout`` plus a grace (see :mod:`.deadline`)."""
        return statement_deadline(timeouts)

    def engine(self, url: URL, timeouts: DatabaseTimeouts, **options: Any) -> Engine:
        """See :func:`.connections.postgres_engine`."""
        return postgres_engine(url, timeouts, **options)

    def open_writable(self, db: LedgerDatabase) -> Engine:
        """An engine with the timeouts; the schema is created by the caller."""
        return postgres_engine(make_url(db.url), db.timeouts)

    def open_read_only(self, db: LedgerDatabase) -> Engine:
        """An engine over a database whose events table must already exist."""
        engine = postgres_engine(make_url(db.url), db.timeouts)
        events = db.tables.events.name
        with converted("look for the ledger's tables", db.where), engine.connect() as conn:
            present = inspect(conn).has_table(events)
        if not present:
            engine.dispose()
            raise NotFoundError(
                f"no ledger in {db.where}: expected a {events} table, found none",
                hint="run `pentrace ledger sync` to build the ledger from the traces",
            )
        db.format = "pentrace"
        return engine

    def opened(self, db: LedgerDatabase) -> None:
        """Nothing to do: a server has no files of ours."""

    def schema_lock(self, engine: Engine, table: str) -> AbstractContextManager[None]:
        """A session advisory lock keyed by the table name (:func:`.connections.schema_lock`):
        parallel ``CREATE TABLE IF NOT EXISTS`` of a new table fail on ``pg_type``."""
        return schema_lock(engine, table)

    def write_lock(self, table: str) -> str | None:
        """``LOCK TABLE ... IN EXCLUSIVE MODE``: ids are handed out one writer at a time."""
        return f"LOCK TABLE {table} IN EXCLUSIVE MODE"

    def row_inserter(self, db: LedgerDatabase, channel: str) -> RowInserter:
        """One short statement with one array per column, then ``pg_notify``.

        A multi-row VALUES list (SQLAlchemy's insertmanyvalues) made psycopg
        parse a new, huge query string for every batch, about half the time
        of ``ledger sync`` into PostgreSQL.  The ids are drawn in unnest's
        order within one statement, so sorted they line up with the rows
        even while other transactions insert.
        """
        events = db.tables.events
        dialect = db.engine.dialect
        quote = dialect.identifier_preparer.quote
        columns = [c for c in events.columns if c.name != "notification_id"]
        arrays = ", ".join(
            f"%(c{i})b::{c.type.compile(dialect=dialect)}[]" for i, c in enumerate(columns)
        )
        names = ", ".join(quote(c.name) for c in columns)
        statement = (
            f"INSERT INTO {quote(events.name)} ({names}) SELECT * FROM unnest({arrays}) "
            f"RETURNING {quote('notification_id')}"
        )
        keys = [c.name for c in columns]
        notify = text("SELECT pg_notify(:channel, '')")

        def insert(conn: Connection, rows: list[dict[str, Any]]) -> list[int]:
            values = {f"c{i}": [r[c] for r in rows] for i, c in enumerate(keys)}
            ids = sorted(int(row[0]) for row in conn.exec_driver_sql(statement, values))
            conn.execute(notify, {"channel": channel})
            return ids

        return insert

    def bulk_insert(self, table: Table, columns: Sequence[str]) -> BulkInserter:
        """See :meth:`.dialect.LedgerDialect.bulk_insert`: the row inserter's ``unnest`` of
        one binary array per column, built straight from the tuples, and ``pg_notify`` on
        the row inserter's channel in the same statement (no ids read back)."""
        dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
        quote = dialect.identifier_preparer.quote
        arrays = ", ".join(
            f"%(c{i})b::{table.c[name].type.compile(dialect=dialect)}[]"
            for i, name in enumerate(columns)
        )
        statement = (
            f"WITH stored AS (INSERT INTO {quote(table.name)} "
            f"({', '.join(quote(name) for name in columns)}) SELECT * FROM unnest({arrays})) "
            f"SELECT pg_notify('{table.name}_appended', '')"
        )

        def insert(conn: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
            by_column = zip(*rows, strict=True)
            conn.exec_driver_sql(statement, {f"c{i}": list(c) for i, c in enumerate(by_column)})

        return insert

    def skip_ids(self, conn: Connection, table: str, count: int) -> int:
        """See :meth:`.dialect.LedgerDialect.skip_ids`: the serial sequence moves on (the
        write lock keeps every other writer from taking ids meanwhile)."""
        sequence = f"pg_get_serial_sequence('{table}', 'notification_id')"
        last = conn.execute(
            text(f"SELECT setval({sequence}, nextval({sequence}) + :count - 1)"),
            {"count": count},
        ).scalar_one()
        return int(last) - count

    def upsert(self, table: Table) -> Any:
        """PostgreSQL's ``INSERT ... ON CONFLICT``."""
        return pg_insert(table)

    def listen(
        self, db: LedgerDatabase, channel: str, wake: threading.Event, stopped: threading.Event
    ) -> None:
        """``LISTEN`` on a connection of its own and set ``wake`` per NOTIFY until stopped.

        ``wake`` is also set once as soon as the LISTEN holds: a commit between the
        reader's last look and that moment sent its NOTIFY to nobody.
        """
        with listen_connection(db.url, db.timeouts) as conn:
            run_guarded(conn, f'LISTEN "{channel}"', db.timeouts)
            wake.set()
            while not stopped.is_set():
                for _ in conn.notifies(timeout=0.2, stop_after=1):
                    wake.set()

    def size(self, db: LedgerDatabase, *, checkpoint: bool) -> int | None:
        """``pg_total_relation_size`` scaled by the live share of tuples (dead ones wait
        for autovacuum); ``checkpoint`` changes nothing here."""
        name = db.tables.events.name
        with db.reading("measure the ledger size") as conn:
            total = conn.execute(
                text("SELECT pg_total_relation_size(CAST(:name AS regclass))"), {"name": name}
            ).scalar_one()
            live, dead = conn.execute(
                text(
                    "SELECT coalesce(n_live_tup, 0), coalesce(n_dead_tup, 0) "
                    "FROM pg_stat_user_tables WHERE relid = CAST(:name AS regclass)"
                ),
                {"name": name},
            ).one_or_none() or (0, 0)
        share = live / (live + dead) if live + dead else 1.0
        return int(total * share)

    def after_size_prune(self, db: LedgerDatabase) -> None:
        """Nothing: autovacuum reclaims the space."""


POSTGRES: Final = PostgresDialect()
