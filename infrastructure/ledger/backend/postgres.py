"""The PostgreSQL backend: a server by URL, writers serialised by a table lock, NOTIFY.

Write transactions take the events table in EXCLUSIVE mode (readers still
read), so notification ids become visible in order and a reader never skips
one that commits late.  Every insert sends ``pg_notify`` in its transaction,
so followers in any process wake at the commit; polling is the safety net.
Connections carry the timeouts of :mod:`.connections` (connect, statement,
lock, and the client-side deadline).

Everything PostgreSQL-only about the ledger is here: the SQL spellings of the
schema's functions, the layout of a new events table (ADR 0068, 0071) and
the catalog reads.  A ledger lives in the connection's ``current_schema()``
(the first schema of its ``search_path``, which a URL sets with
``?options=-csearch_path%3Dname``), and every catalog lookup is scoped to it,
so ledgers in several schemas of one database stay apart.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import (
    Connection,
    Engine,
    Index,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    and_,
    exc,
    false,
    inspect,
    literal,
    or_,
    select,
    text,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import URL, Dialect, make_url
from sqlalchemy.event import listen
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import DDL, CreateTable, SchemaItem

from pentrace.errors import ConfigError, NotFoundError
from pentrace.infrastructure.ledger.backend import schema
from pentrace.infrastructure.ledger.backend.connections import (
    listen_connection,
    postgres_engine,
    run_guarded,
    statement_deadline,
)
from pentrace.infrastructure.ledger.backend.errors import converted
from pentrace.infrastructure.ledger.backend.schema import (
    CONDITION,
    OTHER_STREAM_KEY,
    LedgerTables,
    ddl_condition,
    spelled,
    sql_function,
)
from pentrace.infrastructure.ledger.settings import DatabaseTimeouts

if TYPE_CHECKING:
    from pentrace.infrastructure.ledger.backend.database import LedgerDatabase
    from pentrace.infrastructure.ledger.backend.dialect import BulkInserter, RowInserter

__all__ = ["POSTGRES", "PostgresDialect", "digest_available"]

_NAME: Final = "postgresql"
_log = logging.getLogger(__name__)

# -- spellings of the schema's functions ----------------------------------------------


def _hashed(value: str) -> str:
    return f"hashtextextended({value}, 0)"


def _digest(value: str) -> str:
    return f"CAST(CAST('x' || left(md5({value}), 16) AS BIT(64)) AS BIGINT)"


def _text_and(hashed: Any) -> tuple[Any, Any]:
    """``key = value`` and ``key IN (values)`` comparing the text and ``hashed(text)`` both:
    the hash finds the index range, the text is the answer (a hash collision costs a row
    read, never a wrong row).  The text comes first: a row a scan filters is rejected by
    it without hashing (PostgreSQL keeps the order of equal costs)."""

    def equals(a: list[str]) -> str:
        return f"({a[0]} = {a[1]} AND {hashed(a[0])} = {hashed(a[1])})"

    def within(a: list[str]) -> str:
        values, hashes = ", ".join(a[1:]), ", ".join(hashed(v) for v in a[1:])
        return f"({a[0]} IN ({values}) AND {hashed(a[0])} IN ({hashes}))"

    return equals, within


# Derived ids have sequences below 10**8 (codec.derived_event_id): lpad never cuts.
spelled(schema.Sequence8, _NAME, lambda a: f"lpad(CAST({a[0]} AS TEXT), 8, '0')")
spelled(schema.LastSegment, _NAME, lambda a: f"regexp_replace({a[0]}, '^.*/', '')")
# A scoped index's key is the 64-bit hash of its text, seed 0 (ADR 0068); queries spell the
# same expression, so that the planner matches it.
spelled(schema.ScopedKey, _NAME, lambda a: _hashed(a[0]))
spelled(schema.ScopedExpression, _NAME, lambda a: _hashed(a[0]))
_key_equals, _key_in = _text_and(_hashed)
spelled(schema.KeyEquals, _NAME, _key_equals)
spelled(schema.KeyIn, _NAME, _key_in)
# hashtextextended() is strict: its NULL is the text's.
spelled(schema.KeyIsNull, _NAME, lambda a: f"({a[0]} IS NULL AND {_hashed(a[0])} IS NULL)")
# The stream key of ADR 0071: the digest finds the index entry, the text decides (two
# streams of one digest cost a row read, never a wrong row; the second one's rows are
# refused, naming both: PostgresDialect.digest_clash).
_stream_equals, _stream_in = _text_and(_digest)
spelled(schema.StreamEquals, _NAME, _stream_equals)
spelled(schema.StreamIn, _NAME, _stream_in)
# The first 64 bits of md5(text), as a bigint: md5(), left() and the casts of its hex digits
# are immutable, so an index may hold them; the cast parses md5's 16 hex digits only, never
# the stream's text.  Eight bytes, not md5's sixteen: a (bigint, bigint) entry is one that
# PostgreSQL's B-tree splits where it goes in.
_Digest = sql_function("The first 64 bits of md5 of a text, as a bigint.", CONDITION)
spelled(_Digest, _NAME, lambda a: _digest(a[0]))

# -- the layout of a new events table (ADR 0068, 0071) --------------------------------

# B-tree pages of the events table are filled: every entry is added at the end of its key's
# range (notification ids grow), so 10% left free is for entries that never come.
_FILLED: Final = {"fillfactor": 100}
# The eight-byte columns first, then the flag, then the texts and the envelope, so that no
# bigint waits for alignment after a text (about 7 bytes a row); ledgers created earlier
# keep their order (every statement names its columns).
_ORDER: Final = (
    "notification_id", "sequence", "event_time", "inserted_at", "redacted", "event_id",
    "stream_id", "event_type", "category", "session_id", "conversation_id", "agent_id",
    "task_id", "run_id", "project_id", "directory", "privacy_classification", "event_json",
)  # fmt: skip
_ORDER_KEY: Final = "pentrace_postgres_order"


@compiles(CreateTable, _NAME)
def _create_table(element: CreateTable, compiler: Any, **kw: Any) -> str:
    order = element.element.info.get(_ORDER_KEY)
    if order is not None:
        element.columns.sort(key=lambda column: order.index(column.element.name))
    return str(compiler.visit_create_table(element, **kw))


def _expression_statistics(dialect: Dialect) -> bool:
    """Statistics on expressions came with PostgreSQL 14."""
    return (dialect.server_version_info or (0,)) >= (14,)


def _choose_stream_key(target: Table, connection: Connection, **_kw: Any) -> None:
    """Before a new events table is created: whether its ``(stream_id, sequence)`` key is a
    unique index on the first 64 bits of ``md5(stream_id)`` (8 bytes where the text key
    holds the 56-byte stream id, ADR 0071).  Only where ``md5()`` answers: a server in FIPS
    mode refuses it, and the table then gets the text key of earlier versions."""
    target.info[OTHER_STREAM_KEY] = connection.dialect.name == _NAME and digest_available(
        connection
    )


def digest_available(connection: Connection) -> bool:
    """Whether the server computes ``md5(text)``, tried in a savepoint so that a refusal
    leaves the transaction usable."""
    try:
        with connection.begin_nested():
            connection.execute(select(_Digest(literal("pentrace", String))))
    except exc.DBAPIError as error:
        _log.warning(
            "md5() is not available on this PostgreSQL server (%s): the new events table "
            "keeps the text (stream_id, sequence) key (ADR 0071)",
            str(error.orig).splitlines()[0] if error.orig is not None else type(error).__name__,
        )
        return False
    return True


def _digest_key(*, statistics: bool = False) -> Any:
    """The condition of the digest key's DDL (and with ``statistics`` its dependency
    statistics, PostgreSQL 14 and later): a table :func:`_choose_stream_key` keyed so."""

    def test(target: SchemaItem | str, dialect: Dialect) -> bool:
        table = target.table if isinstance(target, UniqueConstraint) else target
        keyed = isinstance(table, Table) and bool(table.info.get(OTHER_STREAM_KEY, False))
        return keyed and (not statistics or _expression_statistics(dialect))

    return ddl_condition(test)


def _after_create(table: Table, statement: str, condition: Any = None) -> None:
    ddl = DDL(statement).execute_if(dialect=_NAME, callable_=condition)  # type: ignore[no-untyped-call]
    listen(table, "after_create", ddl)


def _adapt(tables: LedgerTables) -> None:
    """What a new PostgreSQL events table is created with besides its portable DDL.

    The scoped indexes fill their pages; ``inserted_at`` grows with the heap's
    order, so a BRIN range index serves retention's ``inserted_at < cutoff`` at a
    few pages for the whole table.  The envelope is a zstd frame already:
    PostgreSQL's pglz would only try and fail, so the column is ``EXTERNAL``
    (never compressed), and a row is moved out of line only past 8160 bytes.  A
    query compares a scoped key's hash and its text (``key_equals``): statistics
    of their dependency keep the planner from counting the one condition twice,
    which made it expect a few rows and sort the whole scope.
    """
    events = tables.events
    name = events.name
    indexes: dict[str, Index] = {str(index.name): index for index in events.indexes}
    indexes[f"{name}_event_id_idx"].dialect_kwargs["postgresql_where"] = events.c.event_id.isnot(
        None
    )
    for suffix in ("type_position_idx", "session_position_idx", "agent_idx", "directory_idx"):
        indexes[f"{name}_{suffix}"].dialect_kwargs["postgresql_with"] = _FILLED
    indexes[f"{name}_inserted_idx"].dialect_kwargs["postgresql_using"] = "brin"
    events.info[_ORDER_KEY] = _ORDER
    listen(events, "before_create", _choose_stream_key)
    digest = _digest("stream_id")
    _after_create(
        events,
        f'CREATE UNIQUE INDEX "{name}_stream_sequence_key" ON "{name}" (({digest}), sequence)',
        _digest_key(),
    )
    _after_create(
        events,
        f'CREATE STATISTICS "{name}_stream_stats" (dependencies) '
        f'ON ({digest}), stream_id FROM "{name}"',
        _digest_key(statistics=True),
    )
    for statement in (
        f'ALTER INDEX "{name}_pkey" SET (fillfactor = 100)',
        f'ALTER INDEX "{name}_stream_sequence_key" SET (fillfactor = 100)',
        f'ALTER TABLE "{name}" SET (toast_tuple_target = 8160)',
        f'ALTER TABLE "{name}" ALTER COLUMN event_json SET STORAGE EXTERNAL',
    ):
        _after_create(events, statement)
    keys = (
        ("type", events.c.event_type),
        ("session", schema.session_of(events)),
        ("agent", events.c.agent_id),
        ("directory", events.c.directory),
    )
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    options = {"include_table": False, "literal_binds": True}
    statistics = ddl_condition(lambda _target, dialect: _expression_statistics(dialect))
    for label, key in keys:
        spelled_key = str(key.compile(dialect=dialect, compile_kwargs=options))
        _after_create(
            events,
            f'CREATE STATISTICS "{name}_{label}_stats" (dependencies) '
            f'ON ({_hashed(spelled_key)}), ({spelled_key}) FROM "{name}"',
            statistics,
        )
    view = schema.view_name(tables)
    for statement in (
        f'DROP VIEW IF EXISTS "{view}"',
        f'DROP FUNCTION IF EXISTS "{view}_select"()',
    ):
        drop = DDL(statement)  # type: ignore[no-untyped-call]
        listen(events, "before_drop", drop.execute_if(dialect=_NAME))


# -- the dialect ---------------------------------------------------------------------


class PostgresDialect:
    """:class:`~.dialect.LedgerDialect` for ``postgresql://`` URLs (psycopg 3)."""

    name = _NAME
    file_based = False
    poll_seconds = 0.1
    notifies = True
    row_lock = " FOR UPDATE"
    placeholder = "%s"
    least = "LEAST"
    greatest = "GREATEST"
    write_options: Mapping[str, str] = MappingProxyType({})
    defers_indexes = False  # not measured there: every index is kept live

    def adapt_tables(self, tables: LedgerTables) -> None:
        """See :func:`_adapt`."""
        _adapt(tables)

    def statement_deadline(self, timeouts: DatabaseTimeouts) -> float | None:
        """The server's ``statement_timeout`` plus a grace (see :mod:`.connections`)."""
        return statement_deadline(timeouts)

    def engine(self, url: URL, timeouts: DatabaseTimeouts, **options: Any) -> Engine:
        """See :func:`.connections.postgres_engine`."""
        return postgres_engine(url, timeouts, **options)

    def open_writable(self, db: LedgerDatabase) -> Engine:
        """An engine with the timeouts; the schema is created by the caller, in the
        connection's ``current_schema()`` (see :meth:`schema_lock`)."""
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

    @contextmanager
    def schema_lock(self, engine: Engine, table: str) -> Iterator[None]:
        """One process at a time creates or upgrades the tables called ``table`` in the
        connection's schema: two ``CREATE TABLE IF NOT EXISTS`` of one new table in
        parallel (several agent hosts' followers starting against a fresh database) make
        one of them fail on ``pg_type``'s unique index.  A session advisory lock keyed by
        the schema and the name serializes them; the second then finds the tables."""
        key = {"key": f"pentrace schema {table}"}
        spelled_key = "hashtext(:key || '/' || current_schema())"
        with engine.connect() as conn:
            if conn.execute(text("SELECT current_schema()")).scalar() is None:
                raise ConfigError(
                    f"create the ledger's tables: expected the connection's search_path to name "
                    f"an existing schema to create {table} in, found none",
                    hint="create the schema first (CREATE SCHEMA name), or fix "
                    "?options=-csearch_path%3Dname in the ledger URL",
                )
            conn.execute(text(f"SELECT pg_advisory_lock({spelled_key})"), key)
            conn.commit()
            try:
                yield
            finally:
                conn.execute(text(f"SELECT pg_advisory_unlock({spelled_key})"), key)
                conn.commit()

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
        table_name = "format('%I.%I', current_schema(), CAST(:t AS text))"
        sequence = f"pg_get_serial_sequence({table_name}, 'notification_id')"
        last = conn.execute(
            text(f"SELECT setval({sequence}, nextval({sequence}) + :count - 1)"),
            {"count": count, "t": table},
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
        name = {"name": db.tables.events.name}
        relation = "CAST(format('%I.%I', current_schema(), CAST(:name AS text)) AS regclass)"
        with db.reading("measure the ledger size") as conn:
            total = conn.execute(
                text(f"SELECT pg_total_relation_size({relation})"), name
            ).scalar_one()
            live, dead = conn.execute(
                text(
                    "SELECT coalesce(n_live_tup, 0), coalesce(n_dead_tup, 0) "
                    f"FROM pg_stat_user_tables WHERE relid = {relation}"
                ),
                name,
            ).one_or_none() or (0, 0)
        share = live / (live + dead) if live + dead else 1.0
        return int(total * share)

    def after_size_prune(self, db: LedgerDatabase) -> None:
        """Nothing: autovacuum reclaims the space."""

    def index_names(self, conn: Connection, table: str) -> set[str]:
        """The indexes of ``table`` in the connection's schema."""
        rows = conn.execute(
            text(
                "SELECT indexname FROM pg_indexes "
                "WHERE schemaname = current_schema() AND tablename = :table"
            ),
            {"table": table},
        ).scalars()
        return {str(name) for name in rows}

    def stale_indexes(self, conn: Connection, events: Table) -> set[str]:
        """None: PostgreSQL's expression indexes were only ever spelled one way."""
        return set()

    def layout(self, conn: Connection, tables: LedgerTables) -> tuple[bool, bool]:
        """Whether the scoped indexes are keyed by a hash of the text (ADR 0068) and the
        stream key by md5's digest (ADR 0071): read from the index definitions."""
        name = tables.events.name
        keys = {
            "type_key": f"{name}_type_position_idx",
            "stream_key": f"{name}_stream_sequence_key",
        }
        query = text(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() "
            "AND indexname IN (:type_key, :stream_key)"
        )
        found = {str(index): str(definition) for index, definition in conn.execute(query, keys)}
        hashed = "hashtextextended(" in str(found.get(f"{name}_type_position_idx", ""))
        return hashed, "md5(" in str(found.get(f"{name}_stream_sequence_key", ""))

    def digest_clash(
        self, conn: Connection, events: Table, positions: Iterable[tuple[str, int]]
    ) -> tuple[str, str, int, str] | None:
        """A row of *another* stream of the same digest at one of the ``(stream, sequence)``
        positions (what the digest key refused them for): the stream offered, the stream
        held, the sequence and the digest; None when there is none."""
        by_stream: dict[str, list[int]] = {}
        for stream, sequence in positions:
            by_stream.setdefault(stream, []).append(sequence)
        c = events.c
        clash = or_(
            false(),
            *(
                and_(
                    _Digest(c.stream_id) == _Digest(literal(stream, String)),
                    c.stream_id != stream,
                    c.sequence.in_(sequences),
                )
                for stream, sequences in by_stream.items()
            ),
        )
        held = conn.execute(
            select(c.stream_id, c.sequence, text("md5(stream_id)")).where(clash).limit(1)
        ).first()
        if held is None:
            return None
        other, sequence, digest = str(held[0]), int(held[1]), str(held[2])
        offered = sorted({s for s, q in by_stream.items() if sequence in q and s != other})
        named = conn.execute(
            text(
                "SELECT s FROM unnest(CAST(:streams AS text[])) AS s "
                "WHERE left(md5(s), 16) = left(:d, 16)"
            ),
            {"streams": offered, "d": digest},
        ).scalar()
        return str(named), other, sequence, digest[:16]

    def create_view(self, conn: Connection, tables: LedgerTables) -> None:
        """The view of :func:`.schema.view_query`, through a SQL function whose body names
        the table in its text: PostgreSQL records no dependency of the view on the events
        table then, so dropping or replacing the table (a rebuild, a test) is never refused
        for the view's sake; the function is inlined into queries, so a filter on the view
        uses the table's indexes.  Made again only when it is missing or differs."""
        current = str(conn.execute(text("SELECT current_schema()")).scalar())
        name = schema.view_name(tables)
        qualified = tables.events.to_metadata(MetaData(), schema=current)
        query = schema.view_query(qualified)
        body = str(query.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
        columns = ", ".join(
            f'"{column.name}" {column.type.compile(dialect=conn.dialect)}'
            for column in query.selected_columns
        )
        held = conn.execute(
            text(
                "SELECT p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname = current_schema() AND p.proname = :f"
            ),
            {"f": f"{name}_select"},
        ).scalar()
        view = conn.execute(
            text("SELECT 1 FROM pg_views WHERE schemaname = current_schema() AND viewname = :v"),
            {"v": name},
        ).scalar()
        if view is not None and held is not None and str(held).strip() == body.strip():
            return
        # Driver SQL: the body's literals hold colons, which text() would read as parameters.
        conn.exec_driver_sql(
            f'CREATE OR REPLACE FUNCTION "{name}_select"() RETURNS TABLE ({columns}) '
            f"LANGUAGE sql STABLE AS $pentrace$ {body} $pentrace$"
        )
        conn.exec_driver_sql(f'CREATE OR REPLACE VIEW "{name}" AS SELECT * FROM "{name}_select"()')


POSTGRES: Final = PostgresDialect()
