"""Connections to the ledger database: SQLite file or PostgreSQL URL.

SQLite is opened in WAL mode with ``auto_vacuum=INCREMENTAL`` (set before the
first table exists) and a busy timeout.  Write transactions start with
``BEGIN IMMEDIATE`` so that two writers queue on the busy timeout instead of
failing on a read-to-write lock upgrade.  PostgreSQL write transactions take
the events table in EXCLUSIVE mode (readers still read), so notification ids
become visible in order and a reader never skips one that commits late.

W13: before each operation the SQLite file's inode is compared with the one
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
from typing import Any, Final

from sqlalchemy import (
    Connection,
    Engine,
    Select,
    bindparam,
    create_engine,
    event,
    exc,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import make_url
from sqlalchemy.sql.compiler import Compiled

from pentrace.errors import ConfigError, LedgerError, LedgerLockedError
from pentrace.infrastructure.ledger.backend.connections import (
    database_url,
    postgres_engine,
    schema_lock,
    statement_deadline,
)
from pentrace.infrastructure.ledger.backend.deadline import DEADLINES
from pentrace.infrastructure.ledger.backend.errors import converted
from pentrace.infrastructure.ledger.backend.formats import (
    FileFormat,
    penguin_format_error,
    read_only_engine,
    refuse_foreign_writes,
)
from pentrace.infrastructure.ledger.backend.schema import LedgerTables, ledger_tables
from pentrace.infrastructure.ledger.backend.upgrade import upgrade_event_ids
from pentrace.infrastructure.ledger.settings import ENV_URL, DatabaseTimeouts, safe_url
from pentrace.infrastructure.storage.modes import prepare_sqlite_file, repair_modes, sqlite_files

__all__ = ["LedgerDatabase"]

# SQLite has no "wait for ever"; a day stands for it when the lock wait is off.
_NO_LIMIT_MS: Final = 86_400_000
_BEGIN: Final = "pentrace_begin"


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
        lock = timeouts.lock_seconds
        self.busy_timeout_ms = _NO_LIMIT_MS if lock is None else max(1, int(lock * 1000))
        self.read_only = read_only
        #: What the SQLite file held when opened (``pentrace`` or ``penguin`` once open).
        self.format: FileFormat | None = None
        self.tables: LedgerTables = ledger_tables(table_prefix)
        parsed = database_url(url, setting=ENV_URL)
        self.url = parsed.render_as_string(hide_password=False)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        # The client-side deadline of PostgreSQL statements (see .deadline); SQLite has none.
        self._deadline = None if self.is_sqlite else statement_deadline(timeouts)
        self.where = safe_url(url)
        self.path: Path | None = None
        if self.is_sqlite:
            if not parsed.database or parsed.database == ":memory:":
                raise ConfigError(
                    "the SQLite ledger needs a file path, found an in-memory database URL",
                    hint="set PENGUIN_RUNTIME_EVENT_LEDGER_PATH to a file",
                )
            self.path = Path(parsed.database)
            self.where = str(self.path)
        self._write_lock = threading.Lock()
        self._inode: tuple[int, int] | None = None
        self._reopen_lock = threading.Lock()
        self._compiled: dict[Hashable, Compiled] = {}
        self.engine: Engine = self._open()

    @classmethod
    def for_path(
        cls,
        path: Path,
        *,
        table_prefix: str = "",
        busy_timeout_ms: int | None = None,
        timeouts: DatabaseTimeouts | None = None,
        read_only: bool = False,
    ) -> LedgerDatabase:
        """A SQLite ledger in ``path``; parent folders are created (unless ``read_only``)."""
        return cls(
            f"sqlite:///{path}",
            table_prefix=table_prefix,
            busy_timeout_ms=busy_timeout_ms,
            timeouts=timeouts,
            read_only=read_only,
        )

    def _open(self) -> Engine:
        if self.read_only:
            return self._open_read_only()
        if self.path is None:
            engine = postgres_engine(make_url(self.url), self.timeouts)
        else:
            refuse_foreign_writes(self.path, self.tables.events.name, self.busy_timeout_ms / 1000)
            with converted("create the ledger's folder", self.where):
                prepare_sqlite_file(self.path)
            engine = create_engine(
                self.url, connect_args={"timeout": self.busy_timeout_ms / 1000}, pool_size=8
            )
            event.listen(engine, "connect", _configure_sqlite)
            event.listen(engine, "begin", _begin_sqlite)
        self._create_schema(engine)
        self.format = "pentrace"
        if self.path is not None:
            repair_modes(sqlite_files(self.path), where=self.path)  # the side files SQLite made
            self._inode = _inode(self.path)
        return engine

    def _open_read_only(self) -> Engine:
        names = self.tables
        shadow = (names.events.name, names.watermarks.name, names.tracking.name)
        engine, self.format = read_only_engine(
            self.url, self.path, shadow, self.busy_timeout_ms / 1000, self.timeouts
        )
        if self.path is not None:
            event.listen(engine, "begin", _begin_sqlite)
            self._inode = _inode(self.path)
        return engine

    def _create_schema(self, engine: Engine) -> None:
        # Two processes creating a new SQLite file at once (a first start, or W13's
        # replaced file) can get SQLITE_BUSY at once, without the busy handler, when
        # a schema read must upgrade to a write: try again until the busy timeout.
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            try:
                with (
                    converted("create the ledger schema", self.where),
                    schema_lock(engine, self.tables.events.name),
                ):
                    self.tables.metadata.create_all(engine)
                    self._upgrade_indexes(engine)
                    self._upgrade_ids(engine)
                return
            except LedgerLockedError:
                if self.path is None or time.monotonic() >= deadline:
                    raise
                time.sleep(0.02)

    def _upgrade_indexes(self, engine: Engine) -> None:
        """Bring a ledger made by an earlier version to today's indexes.

        ``create_all`` adds indexes only together with a new table.  The old
        ``scope_idx`` (session, agent, directory) goes: the planner preferred
        it and then sorted a whole session for every replay page.
        """
        events = self.tables.events
        with engine.connect() as conn:
            present = {index["name"] for index in inspect(conn).get_indexes(events.name)}
        missing = [index for index in events.indexes if index.name not in present]
        # Replaced by (session_id, notification_id) and (event_type, notification_id).
        obsolete = [
            name
            for name in (f"{events.name}_scope_idx", f"{events.name}_type_idx")
            if name in present
        ]
        if not missing and not obsolete:
            return
        with engine.begin() as conn:
            for index in missing:
                index.create(conn, checkfirst=True)
            for name in obsolete:
                conn.execute(text(f"DROP INDEX IF EXISTS {name}"))

    def _upgrade_ids(self, engine: Engine) -> None:
        """Rewrite session-id-only event ids of an earlier ledger (ADR 0023, :mod:`.upgrade`)."""
        lock = None if self.is_sqlite else f"LOCK TABLE {self.tables.events.name} IN EXCLUSIVE MODE"
        writer = engine.execution_options(**{_BEGIN: "BEGIN IMMEDIATE"})
        upgrade_event_ids(writer, self.tables, lock=lock)

    def check_file(self) -> bool:
        """Reopen when the SQLite file vanished or was replaced (W13); True when it did."""
        if self.path is None:
            return False
        if _inode(self.path) == self._inode:
            return False
        with self._reopen_lock:
            if _inode(self.path) == self._inode:
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
        with self._write_lock, converted(operation, self.where):
            engine = self.engine.execution_options(**{_BEGIN: "BEGIN IMMEDIATE"})
            with engine.begin() as conn:
                if not self.is_sqlite:
                    conn.execute(text(f"LOCK TABLE {self.tables.events.name} IN EXCLUSIVE MODE"))
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
        """The driver connection, outside any transaction (PRAGMAs such as wal_checkpoint)."""
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


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return (stat.st_dev, stat.st_ino)


def _configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    # Driver autocommit: we emit BEGIN ourselves (see _begin_sqlite).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    # auto_vacuum only takes effect before the first table is created.
    cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _begin_sqlite(conn: Connection) -> None:
    conn.exec_driver_sql(conn.get_execution_options().get(_BEGIN, "BEGIN"))
