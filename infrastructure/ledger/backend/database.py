"""Connections to the ledger database: SQLite file or PostgreSQL URL.

What differs between the two is the :class:`~.dialect.LedgerDialect` the URL
picks (:mod:`.sqlite`, :mod:`.postgres`): engine setup, how writers are
serialised, the fastest insert, NOTIFY, the size query.  This class holds
what every backend shares: the table objects, read and write transactions,
compiled hot reads and the schema.

W13: before each operation a SQLite file's identity is compared with the one
we opened.  When the file vanished or was replaced, the pool is dropped and
the schema is created again in a fresh file.

A SQLite file is looked at before anything is created in it
(:mod:`.formats`): a Penguin-format ledger, or a ledger table of another
shape, is refused for writing.  ``read_only=True`` (the read commands and the
SSE service) creates and changes nothing: the file is opened ``mode=ro``, and
a Penguin-format file is read through TEMP views under pentrace's names.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypedDict, Unpack

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Select,
    bindparam,
    exc,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.sql.compiler import Compiled

from pentrace.errors import LedgerError, LedgerLockedError
from pentrace.infrastructure.ledger.backend.codec import RowCodec, mark_new_form, read_codec
from pentrace.infrastructure.ledger.backend.connections import DEADLINES, database_url, lock_wait
from pentrace.infrastructure.ledger.backend.dialect import (
    LedgerDialect,
    database_file,
    dialect_for,
    ledger_tables,
)
from pentrace.infrastructure.ledger.backend.errors import converted
from pentrace.infrastructure.ledger.backend.formats import FileFormat, penguin_format_error
from pentrace.infrastructure.ledger.backend.schema import LedgerTables, session_of
from pentrace.infrastructure.ledger.backend.upgrade import upgrade_event_ids, upgrade_indexes
from pentrace.infrastructure.ledger.settings import ENV_URL, DatabaseTimeouts, safe_url

__all__ = ["LedgerDatabase", "LedgerOptions", "file_identity"]


def file_identity(path: Path) -> tuple[int, int] | None:
    """The (device, inode) of a file, None when it is gone (W13 compares them)."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return (stat.st_dev, stat.st_ino)


class LedgerOptions(TypedDict, total=False):
    """The keyword options of :class:`LedgerDatabase`, for the openers that pass them on."""

    table_prefix: str
    busy_timeout_ms: int | None
    timeouts: DatabaseTimeouts | None
    read_only: bool


class LedgerDatabase:
    """An engine, the table objects and the transactions of one ledger."""

    def __init__(
        self,
        url: str,
        *,
        table_prefix: str = "",
        busy_timeout_ms: int | None = None,
        timeouts: DatabaseTimeouts | None = None,
        read_only: bool = False,
    ) -> None:
        """``timeouts`` default to the environment's (:meth:`DatabaseTimeouts.from_env`);
        ``busy_timeout_ms`` overrides their lock wait."""
        timeouts = timeouts if timeouts is not None else DatabaseTimeouts.from_env()
        if busy_timeout_ms is not None:
            timeouts = timeouts.with_lock_wait(busy_timeout_ms / 1000)
        self.timeouts = timeouts
        self.busy_timeout_ms = int(lock_wait(timeouts) * 1000)
        self.read_only = read_only
        #: What the SQLite file held when opened (``pentrace`` or ``penguin`` once open).
        self.format: FileFormat | None = None
        self.tables: LedgerTables = ledger_tables(table_prefix)
        parsed = database_url(url, setting=ENV_URL)
        self.url = parsed.render_as_string(hide_password=False)
        #: What differs between backends (:mod:`.dialect`).
        self.dialect: LedgerDialect = dialect_for(parsed)
        # The client-side deadline of statements (see .connections); a local file has none.
        self._deadline = self.dialect.statement_deadline(timeouts)
        self.path: Path | None = database_file(
            parsed,
            self.dialect,
            what="the SQLite ledger",
            hint="set PENGUIN_RUNTIME_EVENT_LEDGER_PATH to a file",
        )
        self.where = safe_url(url) if self.path is None else str(self.path)
        self._write_lock = threading.Lock()
        #: The file's (device, inode) when opened (W13); None for a server.
        self.identity: tuple[int, int] | None = None
        self._reopen_lock = threading.Lock()
        self._compiled: dict[Hashable, Compiled] = {}
        #: How rows are stored (dictionaries, derived ids: ADR 0058), read when opened.
        self.codec = RowCodec()
        #: Whether the scoped indexes are keyed by a hash of the text (a PostgreSQL events
        #: table created with ADR 0068's layout); queries spell their keys to match.
        self.hashed_keys = False
        #: Whether the (stream_id, sequence) key is on md5(stream_id) (a PostgreSQL events
        #: table created with ADR 0071's layout): stream_equals() and ids_match() take it.
        self.digest_streams = False
        self.engine: Engine = self._open()

    @classmethod
    def for_path(cls, path: Path, **options: Unpack[LedgerOptions]) -> LedgerDatabase:
        """A SQLite ledger in ``path``; parent folders are created (unless ``read_only``)."""
        return cls(f"sqlite:///{path}", **options)

    def _open(self) -> Engine:
        if self.read_only:
            engine = self.dialect.open_read_only(self)
        else:
            engine = self.dialect.open_writable(self)
        try:
            if not self.read_only:
                self._create_schema(engine)
                self.format = "pentrace"
            if self.path is not None:
                self.dialect.opened(self)
                self.identity = file_identity(self.path)
            with converted("read the ledger's row form", self.where):
                self.codec = read_codec(engine, self.tables)
                with engine.connect() as conn:
                    self.hashed_keys, self.digest_streams = self.dialect.layout(conn, self.tables)
        except BaseException:
            engine.dispose()  # no pooled connection is left to the garbage collector
            raise
        self._compiled.clear()  # a replaced file (W13) may be of another row form
        return engine

    def session_column(self) -> ColumnElement[Any]:
        """The rows' session id as queries must spell it to use its index (ADR 0058)."""
        events = self.tables.events
        return session_of(events) if self.codec.derived_ids else events.c.session_id

    def reload_codec(self) -> RowCodec:
        """Read the dictionaries again (another writer may have stored one since)."""
        with converted("read the ledger's row form", self.where):
            self.codec = read_codec(self.engine, self.tables)
        return self.codec

    def _create_schema(self, engine: Engine) -> None:
        # Two processes creating a new SQLite file at once (a first start, or W13's
        # replaced file) can get SQLITE_BUSY at once, without the busy handler, when
        # a schema read must upgrade to a write: try again until the busy timeout.
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            try:
                with (
                    converted("create the ledger schema", self.where),
                    self.dialect.schema_lock(engine, self.tables.events.name),
                ):
                    with engine.connect() as conn:
                        fresh = not inspect(conn).has_table(self.tables.events.name)
                    self.tables.metadata.create_all(engine)
                    if fresh:  # today's row form: derived ids, compressed envelopes
                        with engine.begin() as conn:
                            mark_new_form(conn, self)
                    upgrade_indexes(engine, self.tables, self.dialect)
                    # Session-id-only event ids of an earlier ledger (ADR 0023, .upgrade).
                    writer = engine.execution_options(**self.dialect.write_options)
                    lock = self.dialect.write_lock(self.tables.events.name)
                    upgrade_event_ids(writer, self.tables, lock=lock)
                return
            except LedgerLockedError:
                if self.path is None or time.monotonic() >= deadline:
                    raise
                time.sleep(0.02)

    def check_file(self) -> bool:
        """Reopen when the SQLite file vanished or was replaced (W13); True when it did."""
        if self.path is None:
            return False
        if file_identity(self.path) == self.identity:
            return False
        with self._reopen_lock:
            if file_identity(self.path) == self.identity:
                return False
            self.engine.dispose()
            self.engine = self._open()
            return True

    @contextmanager
    def reading(self, operation: str) -> Iterator[Connection]:
        """A read transaction (a consistent snapshot on both backends)."""
        self.check_file()
        with converted(operation, self.where), self.engine.connect() as conn:
            yield conn
            conn.rollback()

    @contextmanager
    def writing(self, operation: str) -> Iterator[Connection]:
        """A write transaction that commits when the block ends, and rolls back on any error."""
        if self.read_only:
            if self.format == "penguin" and self.path is not None:
                raise penguin_format_error(self.path, operation)
            raise LedgerError(
                f"{operation} on {self.where}: the ledger is open read-only",
                hint="this command only reads the ledger; use `pentrace ledger sync` to write",
            )
        self.check_file()
        lock = self.dialect.write_lock(self.tables.events.name)
        with self._write_lock, converted(operation, self.where):
            engine = self.engine.execution_options(**self.dialect.write_options)
            with engine.begin() as conn:
                if lock is not None:
                    conn.execute(text(lock))
                yield conn

    def fetch(
        self,
        conn: Connection,
        shape: Hashable,
        build: Callable[[], Select[Any]],
        values: Mapping[str, Any],
    ) -> list[Any]:
        """Rows of a hot read as plain driver tuples, skipping SQLAlchemy's row objects.

        ``build`` makes the statement (with named ``bindparam`` for every
        value) the first time ``shape`` is seen; it is compiled once per
        database and run on the driver cursor of ``conn``'s transaction.  A
        replay page of a thousand events spends a third of its time building
        result rows otherwise.  Driver errors are wrapped as SQLAlchemy would,
        so :func:`converted` still turns them into ledger errors.
        """
        compiled = self._compiled.get(shape)
        if compiled is None:
            compiled = self._compiled[shape] = build().compile(dialect=self.engine.dialect)
        params = compiled.construct_params(dict(values)) or {}
        positions = getattr(compiled, "positiontup", None)
        args: Any = tuple(params[name] for name in positions) if positions else params
        driver = conn.connection.dbapi_connection
        if self._deadline is not None:
            DEADLINES.arm(driver, self._deadline)
        cursor = conn.connection.cursor()
        try:
            cursor.execute(compiled.string, args)
            return list(cursor.fetchall())
        except conn.dialect.loaded_dbapi.Error as error:
            raise exc.DBAPIError.instance(
                compiled.string, None, error, conn.dialect.loaded_dbapi.Error
            ) from error
        finally:
            if self._deadline is not None:
                DEADLINES.disarm(driver)
            cursor.close()

    def head(self, conn: Connection) -> int:
        """The newest notification id visible to ``conn`` (0 for an empty ledger).

        Readers that take a page in several statements bound every statement by
        the head read first: writers hand ids out one transaction at a time, so
        every id at or below a visible head is visible too, or never will be.
        """
        rows = self.fetch(conn, ("head",), self._head_statement, {})
        return int(rows[0][0] or 0) if rows else 0

    def _head_statement(self) -> Select[Any]:
        return select(func.max(self.tables.events.c.notification_id))

    def window(
        self,
        query: Select[Any],
        *,
        after: bool,
        through: bool,
        limit: bool,
        newest_first: bool = False,
    ) -> Select[Any]:
        """``query`` cut to ``:after < notification_id <= :through``, in position order,
        at most ``:limit`` rows; each flag says whether that bound is given."""
        position = self.tables.events.c.notification_id
        if after:
            query = query.where(position > bindparam("after"))
        if through:
            query = query.where(position <= bindparam("through"))
        query = query.order_by(position.desc() if newest_first else position)
        return query.limit(bindparam("limit")) if limit else query

    @contextmanager
    def raw_sqlite(self, operation: str) -> Iterator[sqlite3.Connection]:
        """The driver connection of a SQLite ledger, outside any transaction (PRAGMAs such
        as wal_checkpoint)."""
        self.check_file()
        with converted(operation, self.where), self.engine.connect() as conn:
            driver = conn.connection.driver_connection
            if not isinstance(driver, sqlite3.Connection):
                raise TypeError("raw_sqlite() is for SQLite ledgers")
            yield driver

    def drop_all(self) -> None:
        """Drop the ledger's tables (tests and rebuilds)."""
        with converted("drop the ledger tables", self.where):
            self.tables.metadata.drop_all(self.engine)

    def close(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()
