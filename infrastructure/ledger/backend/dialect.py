"""The backend seam: what differs between the databases the ledger runs on.

Everything above this package talks to a :class:`~.database.LedgerDatabase`
and never asks which database it is; the few decisions that do depend on the
backend are the methods of a :class:`LedgerDialect`, one module per backend
(:mod:`.sqlite`, :mod:`.postgres`).  A database URL picks its dialect through
:func:`dialect_for`.

Adding a backend is one new module that implements this protocol (its SQL
spellings and DDL included), one entry in :data:`DIALECTS` (and its URL scheme
in :func:`.connections.database_url`, its driver's errors in :mod:`.errors`),
and a run of the shared contract suite (``tests/integration/ledger_backends.py``
lists the backends the suite is parametrised over).  docs/architecture.md walks
through it.  No module outside this package asks which database it runs on
(``tests/unit/test_ledger_seam.py`` checks it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from sqlalchemy import Connection, Engine, Table
from sqlalchemy.engine import URL

from pentrace.errors import ConfigError
from pentrace.infrastructure.ledger.backend.schema import LedgerTables, portable_tables
from pentrace.infrastructure.ledger.settings import DatabaseTimeouts

if TYPE_CHECKING:
    from pentrace.infrastructure.ledger.backend.database import LedgerDatabase
    from pentrace.infrastructure.ledger.bulk.build import PackedRows

__all__ = [
    "DIALECTS",
    "BulkInserter",
    "LedgerDialect",
    "PackedInsert",
    "PackedInserter",
    "RowInserter",
    "database_file",
    "dialect_for",
    "ledger_tables",
]

#: Inserts ledger rows inside a write transaction; returns their notification ids in order.
RowInserter = Callable[[Connection, list[dict[str, Any]]], list[int]]
#: Inserts positional rows (a bulk sync's batch) inside a write transaction.
BulkInserter = Callable[[Connection, Sequence[tuple[Any, ...]]], None]
#: Inserts runs of packed rows (:mod:`..bulk.build`), in order, inside a write transaction.
PackedInserter: TypeAlias = "Callable[[Connection, Sequence[PackedRows]], None]"


class LedgerDialect(Protocol):
    """The backend-specific half of the ledger (and of the analytics database)."""

    #: The SQLAlchemy backend name this dialect serves (``sqlite``, ``postgresql``).
    name: str
    #: Whether the URL names a file on this host (so the database has a ``path``).
    file_based: bool
    #: Seconds between a subscription's polls when nothing woke it.
    poll_seconds: float
    #: Whether commits in other processes are announced (NOTIFY) to every listener, so that
    #: polling is only a safety net (a follower may still :meth:`listen` where it is not).
    notifies: bool
    #: What a ``SELECT`` ends with to lock the rows it reads until the transaction
    #: ends ('' where a write transaction already excludes other writers).
    row_lock: str
    #: The positional parameter marker of the driver (``?`` or ``%s``).
    placeholder: str
    #: SQL names of the two-argument minimum and maximum.
    least: str
    greatest: str
    #: Execution options that make a transaction take the write lock at its start.
    write_options: Mapping[str, str]
    #: Whether a bulk load into an empty events table makes its scoped indexes after the
    #: rows instead of with each insert (:mod:`..bulk.deferred`, ADR 0073).
    defers_indexes: bool

    def adapt_tables(self, tables: LedgerTables) -> None:
        """Add this backend's table options and DDL to the portable tables (each applies
        only when the tables are created on this backend; :func:`ledger_tables`)."""
        ...

    def statement_deadline(self, timeouts: DatabaseTimeouts) -> float | None:
        """Seconds after which the client gives up on one statement (None: no deadline)."""
        ...

    def engine(self, url: URL, timeouts: DatabaseTimeouts, **options: Any) -> Engine:
        """An engine with the backend's connection setup (pragmas, timeouts, begin)."""
        ...

    def open_writable(self, db: LedgerDatabase) -> Engine:
        """The ledger's read-write engine (before its schema is created)."""
        ...

    def open_read_only(self, db: LedgerDatabase) -> Engine:
        """An engine that changes nothing; sets ``db.format``."""
        ...

    def opened(self, db: LedgerDatabase) -> None:
        """After the engine is ready (files' modes, the file identity of W13)."""
        ...

    def schema_lock(self, engine: Engine, table: str) -> AbstractContextManager[None]:
        """Held while the schema named after ``table`` is created or upgraded, so that
        processes opening a new database at once take turns."""
        ...

    def write_lock(self, table: str) -> str | None:
        """The statement a write transaction runs first to serialise writers, if any."""
        ...

    def row_inserter(self, db: LedgerDatabase, channel: str) -> RowInserter:
        """The fastest insert of envelope rows; announces the commit on ``channel``."""
        ...

    def bulk_insert(self, table: Table, columns: Sequence[str]) -> BulkInserter:
        """The backend's cheapest insert of positional rows (``columns`` in order) inside
        the caller's write transaction, announcing the commit as the row inserter does; a
        unique key already held raises (the caller then takes the exact path)."""
        ...

    def skip_ids(self, conn: Connection, table: str, count: int) -> int:
        """Hand ``count`` notification ids of ``table`` to no row, inside a write
        transaction; returns the id before them (rows a sync leaves out because
        retention would delete them keep their place in the order)."""
        ...

    def upsert(self, table: Table) -> Any:
        """An ``INSERT`` of ``table`` that supports ``on_conflict_do_update``."""
        ...

    def listen(
        self, db: LedgerDatabase, channel: str, wake: threading.Event, stopped: threading.Event
    ) -> None:
        """Set ``wake`` on every announced commit (NOTIFY, a change of the ledger's file)
        until ``stopped``, and once when listening starts (a commit just before it is
        announced to nobody); raises the error of the failure."""
        ...

    def size(self, db: LedgerDatabase, *, checkpoint: bool) -> int | None:
        """Bytes the ledger takes (None when it cannot be measured now); ``checkpoint``
        may move data first (SQLite's WAL) for a truer figure."""
        ...

    def after_size_prune(self, db: LedgerDatabase) -> None:
        """Give back the space a size prune freed, when the backend needs asking."""
        ...

    def index_names(self, conn: Connection, table: str) -> set[str]:
        """The names of ``table``'s indexes (of the ledger's own schema), expression
        indexes included."""
        ...

    def stale_indexes(self, conn: Connection, events: Table) -> set[str]:
        """Indexes of the events table made by an earlier version with another spelling of
        their expression (queries would not use them): :mod:`.upgrade` makes them again."""
        ...

    def layout(self, conn: Connection, tables: LedgerTables) -> tuple[bool, bool]:
        """How an existing events table keys its scoped indexes and its stream key: whether
        :func:`~.schema.key_equals` and friends take ``hashed=True``, and
        :func:`~.schema.stream_equals` and friends ``digest=True``."""
        ...

    def digest_clash(
        self, conn: Connection, events: Table, positions: Iterable[tuple[str, int]]
    ) -> tuple[str, str, int, str] | None:
        """After a unique violation of a ledger whose stream key is a digest: a row of
        another stream of the same digest at one of the ``(stream, sequence)`` positions,
        as (the stream offered, the stream held, the sequence, the digest); else None."""
        ...

    def create_view(self, conn: Connection, tables: LedgerTables) -> None:
        """Make (or bring up to date) the view of :func:`~.schema.view_query` for SQL readers,
        so that dropping the events table is never refused for its sake."""
        ...


@runtime_checkable
class PackedInsert(Protocol):
    """A dialect that also inserts packed rows (SQLite, ADR 0066): a bulk sync then packs
    its rows in the workers and writes them through :meth:`packed_insert`."""

    def packed_insert(self, table: Table, columns: Sequence[str]) -> PackedInserter:
        """Insert runs of :func:`..bulk.build.pack` (rows of ``columns``) in order, giving them
        the next notification ids in that order; a unique key already held raises."""
        ...


def database_file(url: URL, dialect: LedgerDialect, *, what: str, hint: str) -> Path | None:
    """The file a file-based backend's URL names (None for a server); an in-memory
    database is refused, as ``what`` would lose everything at exit."""
    if not dialect.file_based:
        return None
    if not url.database or url.database == ":memory:":
        raise ConfigError(f"{what} needs a file path, found an in-memory database URL", hint=hint)
    return Path(url.database)


def ledger_tables(prefix: str = "") -> LedgerTables:
    """The ledger's table objects, with every backend's additions (``prefix`` keeps parallel
    ledgers in one database apart)."""
    tables = portable_tables(prefix)
    for dialect in DIALECTS.values():
        dialect().adapt_tables(tables)
    return tables


def dialect_for(url: URL) -> LedgerDialect:
    """The dialect of a URL :func:`.connections.database_url` accepted."""
    return DIALECTS[url.get_backend_name()]()


def _sqlite() -> LedgerDialect:
    from pentrace.infrastructure.ledger.backend.sqlite import SQLITE

    return SQLITE


def _postgres() -> LedgerDialect:
    from pentrace.infrastructure.ledger.backend.postgres import POSTGRES

    return POSTGRES


#: Backend name -> its dialect (imported on first use; neither module imports its driver).
DIALECTS: dict[str, Callable[[], LedgerDialect]] = {"sqlite": _sqlite, "postgresql": _postgres}
