"""The SQLite backend: one file on this host, WAL mode, one writer at a time.

Connections run in driver autocommit and begin their own transactions, so a
writer starts with ``BEGIN IMMEDIATE`` and queues on the busy timeout instead
of failing on a read-to-write lock upgrade (the lock wait of
:class:`~pentrace.infrastructure.ledger.settings.DatabaseTimeouts`).  The
ledger file also gets ``auto_vacuum=INCREMENTAL`` (set before the first table
exists) so that a size prune can give space back.  The analytics database
shares :func:`sqlite_engine`.

There is no notification channel: another process's commit is seen at the
next poll (or when the file changes, for a follower that watches it), and an
empty poll costs about 0.1 ms, so 20 ms polling is cheap.

Everything SQLite-only about the ledger is here but reading foreign files
(:mod:`.formats`): the SQL spellings of the schema's functions, the partial
index, the catalog reads, the packed insert.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    Integer,
    Table,
    create_engine,
    event,
    exc,
    text,
)
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import URL
from sqlalchemy.pool import QueuePool
from sqlalchemy.schema import DDL, CreateIndex

from pentrace.errors import NotFoundError
from pentrace.infrastructure.ledger.backend import schema
from pentrace.infrastructure.ledger.backend.connections import lock_wait
from pentrace.infrastructure.ledger.backend.errors import converted
from pentrace.infrastructure.ledger.backend.formats import (
    connect_read_only,
    file_format,
    foreign_format_error,
    refuse_foreign_writes,
)
from pentrace.infrastructure.ledger.backend.schema import LedgerTables, spelled
from pentrace.infrastructure.ledger.settings import DatabaseTimeouts
from pentrace.infrastructure.storage.modes import prepare_sqlite_file, repair_modes, sqlite_files

if TYPE_CHECKING:
    from pentrace.infrastructure.ledger.backend.database import LedgerDatabase
    from pentrace.infrastructure.ledger.backend.dialect import (
        BulkInserter,
        PackedInserter,
        RowInserter,
    )
    from pentrace.infrastructure.ledger.bulk.build import PackedGroup, PackedRows

__all__ = ["BEGIN_OPTION", "SQLITE", "sqlite_engine"]

_NAME: Final = "sqlite"
# Rows of one multi-row INSERT of packed rows; a group's remainder goes in halving
# statements (32, 16, ... 1 rows), so each group shape needs at most seven statements.
_PACKED_ROWS: Final = 64
# The driver's prepared statements kept per connection (its default is 128): the packed
# inserts take up to seven per group shape.
_CACHED_STATEMENTS: Final = 512
#: The execution option naming the statement that begins a transaction.
BEGIN_OPTION: Final = "pentrace_begin"
# A watched ledger's changes are grouped for at most this long (ms), a group ends after
# _WATCH_STEP_MS of quiet (watchfiles also looks for a stop that often: about 0.6% of a
# core while idle, where 1 ms took 1%), and a reader woken by one is woken again after
# these seconds (see SQLiteDialect.listen).
_WATCH_DEBOUNCE_MS: Final = 5
_WATCH_STEP_MS: Final = 2
_WAKE_AGAIN: Final = (0.003, 0.012)


def _last_segment(value: str) -> str:
    """SQLite has no last-occurrence search: a text with exactly two '/' (every session
    stream ``session:<project>/<agent>/<id>``) is cut after its second by two instr(); any
    other by rtrim() of every character but '/', which leaves it up to its last '/' but
    costs a scan of the text per character trimmed (3-4 times the work of the first
    way, on every insert and in every index build: ADR 0066)."""
    first = f"instr({value}, '/')"
    second = f"{first} + instr(substr({value}, {first} + 1), '/')"
    return (
        f"CASE WHEN length({value}) - length(replace({value}, '/', '')) = 2 "
        f"THEN substr({value}, {second} + 1) "
        f"ELSE substr({value}, length(rtrim({value}, replace({value}, '/', ''))) + 1) END"
    )


spelled(schema.Sequence8, _NAME, lambda a: f"printf('%08d', {a[0]})")
spelled(schema.LastSegment, _NAME, lambda a: _last_segment(a[0]))


def sqlite_engine(
    url: URL | str, timeouts: DatabaseTimeouts, *, auto_vacuum: bool = False, **options: Any
) -> Engine:
    """An engine over a SQLite file: WAL, ``synchronous=NORMAL``, the lock wait as the busy
    timeout, and transactions begun by us (``BEGIN IMMEDIATE`` for writers)."""
    connect = {"timeout": lock_wait(timeouts), **options.pop("connect_args", {})}
    engine = create_engine(url, connect_args=connect, **options)
    event.listen(engine, "connect", _configure_vacuuming if auto_vacuum else _configure)
    event.listen(engine, "begin", begin)
    return engine


def begin(conn: Connection) -> None:
    """Begin a transaction with the statement the connection's options name."""
    conn.exec_driver_sql(conn.get_execution_options().get(BEGIN_OPTION, "BEGIN"))


def _pragmas(dbapi_connection: Any, *, vacuum: bool) -> None:
    # Driver autocommit: we emit BEGIN ourselves (see begin()).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    if vacuum:  # auto_vacuum only takes effect before the first table is created
        cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _configure(dbapi_connection: Any, _record: Any) -> None:
    _pragmas(dbapi_connection, vacuum=False)


def _configure_vacuuming(dbapi_connection: Any, _record: Any) -> None:
    _pragmas(dbapi_connection, vacuum=True)


class SQLiteDialect:
    """:class:`~.dialect.LedgerDialect` for ``sqlite:///PATH``."""

    name = _NAME
    file_based = True
    poll_seconds = 0.02
    notifies = False
    row_lock = ""  # BEGIN IMMEDIATE already holds the only write lock
    placeholder = "?"
    least = "MIN"
    greatest = "MAX"
    write_options: Mapping[str, str] = MappingProxyType({BEGIN_OPTION: "BEGIN IMMEDIATE"})
    defers_indexes = True

    def adapt_tables(self, tables: LedgerTables) -> None:
        """The notification id is an alias of the rowid (exactly INTEGER) with AUTOINCREMENT,
        so that an id is never reused after retention deletes rows; only the stored ids
        are indexed (a partial index); a drop takes the view along."""
        events = tables.events
        key = events.c.notification_id
        key.type = BigInteger().with_variant(Integer(), _NAME)
        events.dialect_kwargs["sqlite_autoincrement"] = True
        (stored,) = (i for i in events.indexes if i.name == f"{events.name}_event_id_idx")
        stored.dialect_kwargs["sqlite_where"] = events.c.event_id.isnot(None)
        drop = DDL(f'DROP VIEW IF EXISTS "{schema.view_name(tables)}"')  # type: ignore[no-untyped-call]
        event.listen(events, "before_drop", drop.execute_if(dialect=_NAME))

    def statement_deadline(self, timeouts: DatabaseTimeouts) -> float | None:
        """None: a local file does not stop answering."""
        return None

    def engine(self, url: URL, timeouts: DatabaseTimeouts, **options: Any) -> Engine:
        """See :func:`sqlite_engine`."""
        return sqlite_engine(url, timeouts, **options)

    def open_writable(self, db: LedgerDatabase) -> Engine:
        """Refuse a foreign file, create the folder, then the engine (8 pooled connections)."""
        assert db.path is not None
        refuse_foreign_writes(db.path, db.tables.events.name, db.busy_timeout_ms / 1000)
        with converted("create the ledger's folder", db.where):
            prepare_sqlite_file(db.path)
        return sqlite_engine(
            db.url,
            db.timeouts,
            auto_vacuum=True,
            pool_size=8,
            connect_args={"cached_statements": _CACHED_STATEMENTS},
        )

    def open_read_only(self, db: LedgerDatabase) -> Engine:
        """The file opened ``mode=ro``; a Penguin-format file through TEMP views."""
        path, names = db.path, db.tables
        assert path is not None
        if not path.is_file():
            raise NotFoundError(
                f"no ledger at {path}: expected a SQLite ledger file, found none",
                hint="run `pentrace ledger sync` to build it from the traces",
            )
        seconds = db.busy_timeout_ms / 1000
        found = file_format(path, names.events.name, seconds)
        if found == "foreign":
            raise foreign_format_error(path)
        if found in ("empty", "other"):
            raise NotFoundError(
                f"no ledger in {path}: expected a runtime_events table, found none",
                hint="run `pentrace ledger sync` to build the ledger from the traces",
            )
        shadow = (names.events.name, names.watermarks.name, names.tracking.name)
        engine = create_engine(
            "sqlite://",
            creator=lambda: connect_read_only(
                path, seconds, penguin=found == "penguin", names=shadow
            ),
            poolclass=QueuePool,
            pool_size=8,
        )
        event.listen(engine, "begin", begin)
        db.format = found
        return engine

    def opened(self, db: LedgerDatabase) -> None:
        """Repair the side files' modes (a writer made them) and note the file's identity."""
        assert db.path is not None
        if not db.read_only:
            repair_modes(sqlite_files(db.path), where=db.path)

    def schema_lock(self, engine: Engine, table: str) -> AbstractContextManager[None]:
        """Nothing to hold: creating the schema retries on SQLITE_BUSY instead."""
        return nullcontext()

    def write_lock(self, table: str) -> str | None:
        """None: ``BEGIN IMMEDIATE`` already admits one writer at a time."""
        return None

    def row_inserter(self, db: LedgerDatabase, channel: str) -> RowInserter:
        """``executemany`` of plain tuples straight to the driver.

        Under BEGIN IMMEDIATE no other writer runs, so AUTOINCREMENT hands the
        batch a contiguous block of ids ending at ``last_insert_rowid()``.
        Per-row parameter processing in SQLAlchemy cost as much as SQLite's
        own insert work (benchmarks/ledger.py).  ``channel`` is unused: the
        in-process waker and polling stand for NOTIFY.
        """
        columns = [c.name for c in db.tables.events.columns if c.name != "notification_id"]
        statement = (
            f"INSERT INTO {db.tables.events.name} ({', '.join(columns)}) "
            f"VALUES ({', '.join('?' * len(columns))})"
        )

        def insert(conn: Connection, rows: list[dict[str, Any]]) -> list[int]:
            conn.exec_driver_sql(statement, [tuple(r[c] for c in columns) for r in rows])
            last = conn.exec_driver_sql("SELECT last_insert_rowid()").scalar_one()
            return list(range(last - len(rows) + 1, last + 1))

        return insert

    def listen(
        self, db: LedgerDatabase, channel: str, wake: threading.Event, stopped: threading.Event
    ) -> None:
        """Set ``wake`` whenever the ledger's file or its WAL changes (a commit in another
        process writes the WAL), until ``stopped``, and once when watching starts;
        ``channel`` is unused.  The folder is watched, not recursively (through
        ``watchfiles``, inotify on Linux), so a replaced file (W13) is seen too.

        A commit's last WAL write comes a moment before the commit is visible to readers:
        each change wakes the reader again a little later, so that one that looked too
        early looks again before its poll interval."""
        import watchfiles  # only a follower that listens needs it

        assert db.path is not None
        names = {db.path.name, f"{db.path.name}-wal"}
        wake.set()
        for _ in watchfiles.watch(
            db.path.parent,
            watch_filter=lambda _change, changed: os.path.basename(changed) in names,
            stop_event=stopped,
            debounce=_WATCH_DEBOUNCE_MS,
            step=_WATCH_STEP_MS,
            rust_timeout=500,
            recursive=False,
            raise_interrupt=False,
            ignore_permission_denied=True,
        ):
            wake.set()
            for delay in _WAKE_AGAIN:
                if stopped.wait(delay):
                    return
                wake.set()

    def bulk_insert(self, table: Table, columns: Sequence[str]) -> BulkInserter:
        """See :meth:`.dialect.LedgerDialect.bulk_insert`: one ``executemany`` of a prepared
        INSERT, with no per-row work but the driver's (polling stands for a notification)."""
        statement = (
            f"INSERT INTO {table.name} ({', '.join(columns)}) "
            f"VALUES ({', '.join('?' * len(columns))})"
        )

        def insert(conn: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
            conn.exec_driver_sql(statement, rows)

        return insert

    def packed_insert(self, table: Table, columns: Sequence[str]) -> PackedInserter:
        """Insert runs of :func:`.packed.pack` (rows of ``columns``) in order, inside the
        caller's write transaction, with multi-row statements that bind only what each
        group holds (ADR 0066).

        The ids are given here: the first free one (after the highest row and
        AUTOINCREMENT's counter, which ``skip_ids`` may have moved on) plus the row's
        place among all the runs; SQLite's counter then follows the highest.  BEGIN IMMEDIATE
        holds the only write lock, so no other writer can take one of them meanwhile.
        """
        name = table.name
        statements: dict[tuple[tuple[int, ...], int], str] = {}

        def statement(present: tuple[int, ...], rows: int) -> str:
            found = statements.get((present, rows))
            if found is None:
                step = len(present) + 1
                names = ", ".join(["notification_id", *(columns[i] for i in present)])
                values = ", ".join(
                    "(?1 + " + ", ".join(f"?{first + j}" for j in range(step)) + ")"
                    for first in range(2, 2 + rows * step, step)
                )
                found = f"INSERT INTO {name} ({names}) VALUES {values}"
                statements[(present, rows)] = found
            return found

        def insert_group(cursor: sqlite3.Cursor, base: int, group: PackedGroup) -> None:
            step = len(group.present) + 1
            values, count, done = group.values, group.rows, 0
            while done < count:
                rows = min(_PACKED_ROWS, count - done)
                rows = 1 << (rows.bit_length() - 1)  # 64, or the largest power of 2 left
                sql = statement(group.present, rows)
                params = [base, *values[done * step : (done + rows) * step]]
                try:
                    cursor.execute(sql, params)
                except sqlite3.Error as error:  # as SQLAlchemy would wrap it: see converted()
                    raise exc.DBAPIError.instance(sql, None, error, sqlite3.Error) from error
                done += rows

        def insert(conn: Connection, runs: Sequence[PackedRows]) -> None:
            driver = conn.connection.driver_connection
            assert isinstance(driver, sqlite3.Connection)
            cursor = driver.cursor()
            try:
                base = _last_id(cursor, name) + 1  # the first row's id
                for run in runs:
                    for group in run.groups:
                        insert_group(cursor, base, group)
                    base += run.count
            finally:
                cursor.close()

        return insert

    def skip_ids(self, conn: Connection, table: str, count: int) -> int:
        """See :meth:`.dialect.LedgerDialect.skip_ids`: AUTOINCREMENT's counter moves on."""
        seq = conn.exec_driver_sql(
            "SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)
        ).scalar_one_or_none()
        highest = conn.exec_driver_sql(f"SELECT MAX(rowid) FROM {table}").scalar_one_or_none()
        last = max(int(seq or 0), int(highest or 0))
        if seq is None:
            conn.exec_driver_sql(
                "INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", (table, last + count)
            )
        else:
            conn.exec_driver_sql(
                "UPDATE sqlite_sequence SET seq = ? WHERE name = ?", (last + count, table)
            )
        return last

    def upsert(self, table: Table) -> Any:
        """SQLite's ``INSERT ... ON CONFLICT``."""
        return sqlite_insert(table)

    def size(self, db: LedgerDatabase, *, checkpoint: bool) -> int | None:
        """Pages in use plus the WAL; with ``checkpoint``, after ``wal_checkpoint(TRUNCATE)``
        (None when it could not finish) and never below the file's own size."""
        path = db.path
        assert path is not None
        with db.raw_sqlite("measure the ledger size") as raw:
            if checkpoint:
                busy = raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                if busy is None or busy[0] != 0:
                    return None
            pages = raw.execute("PRAGMA page_count").fetchone()[0]
            page_size = raw.execute("PRAGMA page_size").fetchone()[0]
        wal = path.with_name(path.name + "-wal")
        wal_size = wal.stat().st_size if wal.exists() else 0
        if not checkpoint:
            return int(pages * page_size + wal_size)
        file_size = path.stat().st_size if path.exists() else 0
        return int(max(pages * page_size, file_size) + wal_size)

    def after_size_prune(self, db: LedgerDatabase) -> None:
        """``PRAGMA incremental_vacuum``: the freed pages go back to the file system."""
        with db.raw_sqlite("vacuum the ledger") as raw:
            raw.execute("PRAGMA incremental_vacuum").fetchall()

    def index_names(self, conn: Connection, table: str) -> set[str]:
        """The names of a table's indexes, those on expressions included (which SQLAlchemy's
        inspector skips on SQLite)."""
        query = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = :table"
        return {str(name) for name in conn.execute(text(query), {"table": table}).scalars()}

    def stale_indexes(self, conn: Connection, events: Table) -> set[str]:
        """The indexes on an expression whose stored statement is not today's: an earlier
        version spelled the expression otherwise (ADR 0066), so that queries, which spell
        today's, would not use them."""
        stored: dict[str, str] = {
            str(name): str(sql or "")
            for name, sql in conn.execute(
                text("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = :t"),
                {"t": events.name},
            ).all()
        }
        stale: set[str] = set()
        for index in events.indexes:
            if index.name not in stored or all(isinstance(e, Column) for e in index.expressions):
                continue
            today = str(CreateIndex(index).compile(dialect=conn.dialect))
            if " ".join(stored[index.name].split()) != " ".join(today.split()):
                stale.add(str(index.name))
        return stale

    def layout(self, conn: Connection, tables: LedgerTables) -> tuple[bool, bool]:
        """(False, False): the scoped and stream keys are the plain text."""
        return False, False

    def digest_clash(
        self, conn: Connection, events: Table, positions: Iterable[tuple[str, int]]
    ) -> tuple[str, str, int, str] | None:
        """None: the stream key is the text itself."""
        return None

    def create_view(self, conn: Connection, tables: LedgerTables) -> None:
        """``CREATE VIEW`` of :func:`.schema.view_query` when missing or spelled otherwise
        (SQLite resolves a view's tables when it is read: dropping the table is allowed)."""
        name = schema.view_name(tables)
        query = schema.view_query(tables.events)
        spelled_query = query.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True})
        statement = f'CREATE VIEW "{name}" AS {spelled_query}'
        held = conn.execute(
            text("SELECT sql FROM sqlite_master WHERE type = 'view' AND name = :v"), {"v": name}
        ).scalar()
        if held is not None and " ".join(str(held).split()) == " ".join(statement.split()):
            return
        conn.exec_driver_sql(f'DROP VIEW IF EXISTS "{name}"')
        conn.exec_driver_sql(statement)


def _last_id(cursor: sqlite3.Cursor, table: str) -> int:
    """The id before the one AUTOINCREMENT would hand out next (in a write transaction)."""
    cursor.execute(
        f"SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = ?), 0), "
        f"COALESCE((SELECT MAX(rowid) FROM {table}), 0))",
        (table,),
    )
    return int(cursor.fetchone()[0])


SQLITE: Final = SQLiteDialect()
