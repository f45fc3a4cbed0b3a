"""The ledger's tables, in SQLAlchemy Core.

One ledger row is one redacted RuntimeEvent *and* one eventsourcing
``Notification``: ``notification_id`` is the global order (``Notification.id``),
``stream_id`` / ``sequence`` are ``originator_id`` / ``originator_version``,
``event_type`` is the ``topic`` and ``event_json`` (the whole envelope, bytes)
is the ``state``.  The other columns are Penguin's, kept for filtering.

The envelope is stored once, in ``event_json``: Penguin's ``payload_json`` and
``projection_json`` copies doubled every row for columns nothing reads (ADR
0009).  Ledgers created by earlier versions keep those columns, nullable and
left empty.

``runtime_event_meta`` holds the ledger's own versions, today the event id
scheme (``event_ids``, ADR 0023): a ledger written with session-id-only ids
is upgraded when it is opened (:mod:`.upgrade`), and the row form
(``row_form``, ADR 0058).

Row form 2 (ledgers created by this version) stores ``event_json`` as a zstd
frame made with a dictionary of ``runtime_event_dictionaries`` and leaves
``event_id`` NULL when the row's stream and sequence spell it
(:mod:`.codec`); :func:`event_id_of` is the id either way.  Earlier ledgers
keep every id (their column is NOT NULL) and compress the rows written once
they have a dictionary.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    and_,
    case,
    exc,
    false,
    func,
    literal,
    literal_column,
    null,
    or_,
    select,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.event import listen
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import DDL, CreateTable, SchemaItem
from sqlalchemy.sql.compiler import DDLCompiler
from sqlalchemy.sql.ddl import BaseDDLElement, DDLIfCallable
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import NullType

from pentrace.domain.json_codec import escape_surrogates
from pentrace.infrastructure.ledger.backend.codec import parse_derived

__all__ = [
    "ROW_FORM",
    "ROW_FORM_KEY",
    "LedgerTables",
    "digest_available",
    "digest_collisions",
    "event_id_of",
    "ids_match",
    "key_equals",
    "key_in",
    "key_is_null",
    "ledger_tables",
    "positions_match",
    "session_of",
    "stream_equals",
    "stream_in",
]

ROW_FORM_KEY = "row_form"
#: 1 (no row): every event id stored, plain envelopes; 2: see the module docstring.
ROW_FORM = "2"

# PostgreSQL's B-tree pages of the events table are filled (ADR 0068, _postgres_storage).
_FILLED: Final = {"fillfactor": 100}

_log = logging.getLogger(__name__)

# SQLite wants exactly INTEGER for an alias of rowid; PostgreSQL gets BIGINT.
_Id = BigInteger().with_variant(Integer(), "sqlite")


@dataclass(frozen=True)
class LedgerTables:
    """The tables of one ledger, named with a common prefix."""

    metadata: MetaData
    events: Table
    watermarks: Table
    tracking: Table
    meta: Table
    ingest_cursors: Table
    dictionaries: Table


def ledger_tables(prefix: str = "") -> LedgerTables:
    """Build the table objects; ``prefix`` keeps parallel ledgers in one database apart."""
    metadata = MetaData()
    name = f"{prefix}runtime_events"
    events = Table(
        name,
        metadata,
        Column("notification_id", _Id, primary_key=True, autoincrement=True),
        # NULL: the id derived from stream_id and sequence (event_id_of).
        Column("event_id", String),
        Column("stream_id", String, nullable=False),
        Column("sequence", BigInteger, nullable=False),
        Column("event_type", String, nullable=False),
        # NULL: the event type's own category (rows.type_category).
        Column("category", String),
        Column("event_time", BigInteger, nullable=False),
        Column("inserted_at", BigInteger, nullable=False),
        Column("session_id", String),
        # NULL: the session_id ('' when the envelope has none but a session id).
        Column("conversation_id", String),
        Column("agent_id", String),
        Column("task_id", String),
        Column("run_id", String),
        Column("project_id", String),
        Column("directory", String),
        # NULL: public, the default (no reader filters by it).
        Column("privacy_classification", String),
        Column("redacted", Boolean, nullable=False),
        Column("event_json", LargeBinary, nullable=False),
        # On a new PostgreSQL table the key is a unique index on md5(stream_id) instead
        # (ADR 0071, _stream_key); SQLite and earlier PostgreSQL tables keep this one.
        UniqueConstraint("stream_id", "sequence", name=f"{name}_stream_sequence_key").ddl_if(
            callable_=_stream_key(digest=False)
        ),
        # AUTOINCREMENT: a notification id is never reused after retention deletes rows.
        sqlite_autoincrement=True,
    )
    # Each index costs every insert; these serve replay filters, topics and retention.
    # (session_id, notification_id) serves a session's replay page as one range scan
    # in global order (and the unscoped rows, session_id IS NULL, as a second one);
    # (agent_id, ...) and (directory, ...) do the same for a page filtered by agent or
    # directory without a session.  Task, run, project and conversation have no
    # replay filter, so no index.
    # (event_type, notification_id): a projection's topics are range scans in order.
    # Only the ids stored (foreign ones) are indexed; derived ids are found through
    # the (stream_id, sequence) key.  No reader filters by category: no index.
    Index(
        f"{name}_event_id_idx",
        events.c.event_id,
        unique=True,
        sqlite_where=events.c.event_id.isnot(None),
        postgresql_where=events.c.event_id.isnot(None),
    )
    # On PostgreSQL the text of these four keys is a 64-bit hash in the index (ADR 0068):
    # (bigint, bigint) entries split where the rows go in and fill their pages, where
    # text-led ones split in halves that stay half empty; queries match them through
    # key_equals() / key_is_null() / key_in(), which also compare the text itself.
    position = events.c.notification_id
    Index(f"{name}_type_position_idx", _Key(events.c.event_type), position, postgresql_with=_FILLED)
    # inserted_at grows with the heap's order: a BRIN range index on PostgreSQL serves
    # retention's inserted_at < cutoff at a few pages for the whole table.
    Index(f"{name}_inserted_idx", events.c.inserted_at, postgresql_using="brin")
    # Row form 2 leaves a session stream's own session id out of the row: the index is on
    # session_of(), which reads it from the stream (earlier ledgers keep _session_idx).
    session = _SessionKey(session_of(events))
    Index(f"{name}_session_position_idx", session, position, postgresql_with=_FILLED)
    Index(f"{name}_agent_idx", _Key(events.c.agent_id), position, postgresql_with=_FILLED)
    Index(f"{name}_directory_idx", _Key(events.c.directory), position, postgresql_with=_FILLED)
    _postgres_storage(events)
    watermarks = Table(
        f"{prefix}runtime_event_watermarks",
        metadata,
        # What retention deleted, per stream: tells "evicted" from "never existed".
        Column("stream_id", String, primary_key=True),
        Column("id_prefix", String, nullable=False, index=True),
        Column("max_sequence", BigInteger, nullable=False),
        Column("max_notification_id", BigInteger, nullable=False),
        Column("pruned_rows", BigInteger, nullable=False),
    )
    tracking = Table(
        f"{prefix}runtime_event_tracking",
        metadata,
        Column("application_name", String, primary_key=True),
        Column("notification_id", BigInteger, nullable=False),
    )
    meta = Table(
        f"{prefix}runtime_event_meta",
        metadata,
        Column("key", String, primary_key=True),
        Column("value", String, nullable=False),
    )
    # The ingest follower's per-shard cursors (infrastructure/ingest, ADR 0028): here so
    # they commit with the rows they cover, and a clear or rebuild resets them too.
    ingest_cursors = Table(
        f"{prefix}ingest_cursors",
        metadata,
        # Which follower: host and data root, so agent hosts can share one ledger.
        Column("source", String, primary_key=True),
        Column("shard", String, primary_key=True),
        Column("project", String, nullable=False),
        Column("agent", String, nullable=False),
        Column("session_id", String, nullable=False),
        Column("shard_index", Integer, nullable=False),
        Column("device", BigInteger, nullable=False),
        Column("inode", BigInteger, nullable=False),
        Column("byte_offset", BigInteger, nullable=False),
        Column("line", BigInteger, nullable=False),
        Column("base", BigInteger, nullable=False),
        Column("position", BigInteger, nullable=False),
    )
    # The zstd dictionaries of the stored envelopes (ADR 0058); the id is the frames'
    # dictionary id.  Rows are only ever added, so a reader may cache them.
    dictionaries = Table(
        f"{prefix}runtime_event_dictionaries",
        metadata,
        Column("dictionary_id", Integer, primary_key=True, autoincrement=False),
        Column("content", LargeBinary, nullable=False),
        Column("created_at", BigInteger, nullable=False),
        Column("samples", Integer, nullable=False),
    )
    return LedgerTables(metadata, events, watermarks, tracking, meta, ingest_cursors, dictionaries)


# A new PostgreSQL events table (ADR 0068): the eight-byte columns first, then the flag,
# then the texts and the envelope, so that no bigint waits for alignment after a text
# (about 7 bytes a row); ledgers created earlier keep their order (every statement
# names its columns).
_POSTGRES_ORDER: Final = (
    "notification_id", "sequence", "event_time", "inserted_at", "redacted", "event_id",
    "stream_id", "event_type", "category", "session_id", "conversation_id", "agent_id",
    "task_id", "run_id", "project_id", "directory", "privacy_classification", "event_json",
)  # fmt: skip
_ORDER_KEY: Final = "pentrace_postgres_order"


@compiles(CreateTable, "postgresql")
def _create_table(element: CreateTable, compiler: Any, **kw: Any) -> str:
    order = element.element.info.get(_ORDER_KEY)
    if order is not None:
        element.columns.sort(key=lambda column: order.index(column.element.name))
    return str(compiler.visit_create_table(element, **kw))


def _postgres_storage(events: Table) -> None:
    """What a new PostgreSQL events table is created with besides its DDL (ADR 0068).

    Every index entry is added at the end of its key's range (notification ids grow),
    so their pages are filled (fillfactor 100) rather than left 10% free for entries
    that never come.  The envelope is a zstd frame already: PostgreSQL's pglz would
    only try and fail, so the column is ``EXTERNAL`` (never compressed), and a row
    is moved out of line only past 8160 bytes (``toast_tuple_target``).  A query
    compares a scoped key's hash and its text (:func:`key_equals`): statistics of
    their dependency (PostgreSQL 14 and later) keep the planner from counting the
    one condition twice, which made it expect a few rows and sort the whole scope.
    """
    events.info[_ORDER_KEY] = _POSTGRES_ORDER
    name = events.name
    listen(events, "before_create", _choose_stream_key)
    digest = _digest("stream_id")
    for statement, condition in (
        (
            f'CREATE UNIQUE INDEX "{name}_stream_sequence_key" ON "{name}" (({digest}), sequence)',
            _stream_key(digest=True),
        ),
        (
            f'CREATE STATISTICS "{name}_stream_stats" (dependencies) '
            f'ON ({digest}), stream_id FROM "{name}"',
            _stream_key(digest=True, statistics=True),
        ),
    ):
        ddl = DDL(statement).execute_if(  # type: ignore[no-untyped-call]
            dialect="postgresql", callable_=condition
        )
        listen(events, "after_create", ddl)
    for statement in (
        f'ALTER INDEX "{name}_pkey" SET (fillfactor = 100)',
        f'ALTER INDEX "{name}_stream_sequence_key" SET (fillfactor = 100)',
        f'ALTER TABLE "{name}" SET (toast_tuple_target = 8160)',
        f'ALTER TABLE "{name}" ALTER COLUMN event_json SET STORAGE EXTERNAL',
    ):
        ddl = DDL(statement).execute_if(dialect="postgresql")  # type: ignore[no-untyped-call]
        listen(events, "after_create", ddl)
    keys = (
        ("type", events.c.event_type),
        ("session", session_of(events)),
        ("agent", events.c.agent_id),
        ("directory", events.c.directory),
    )
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    options = {"include_table": False, "literal_binds": True}
    for label, key in keys:
        spelled = str(key.compile(dialect=dialect, compile_kwargs=options))
        statement = (
            f'CREATE STATISTICS "{name}_{label}_stats" (dependencies) '
            f'ON ({_hashed(spelled)}), ({spelled}) FROM "{name}"'
        )
        ddl = DDL(statement).execute_if(  # type: ignore[no-untyped-call]
            dialect="postgresql", callable_=_expression_statistics
        )
        listen(events, "after_create", ddl)


def _ddl_condition(test: Callable[[SchemaItem | str, Dialect], bool]) -> DDLIfCallable:
    """A condition of conditional DDL (``execute_if``, ``ddl_if``) that asks ``test`` of the
    DDL's target and the dialect."""

    def condition(
        ddl: BaseDDLElement,
        target: SchemaItem | str,
        bind: Connection | None,
        tables: list[Table] | None = None,
        state: Any | None = None,
        *,
        dialect: Dialect,
        compiler: DDLCompiler | None = None,
        checkfirst: bool = False,
    ) -> bool:
        return test(target, dialect)

    return condition


def _has_expression_statistics(dialect: Dialect) -> bool:
    """Statistics on expressions came with PostgreSQL 14."""
    return (dialect.server_version_info or (0,)) >= (14,)


_expression_statistics = _ddl_condition(
    lambda _target, dialect: _has_expression_statistics(dialect)
)


# Whether a new PostgreSQL events table gets the digest stream key (ADR 0071): decided
# by _choose_stream_key when the table is created, read by the DDL conditions below.
_DIGEST_KEY: Final = "pentrace_digest_stream_key"


def _choose_stream_key(target: Table, connection: Connection, **_kw: Any) -> None:
    """Before a new events table is created: whether its ``(stream_id, sequence)`` key is
    a unique index on the first 64 bits of ``md5(stream_id)`` (8 bytes where the text
    key holds the 56-byte stream id, ADR 0071).  PostgreSQL only, and only where
    ``md5()`` answers: a server in FIPS mode refuses it, and the table then gets the
    text key of earlier versions (queried as those are)."""
    target.info[_DIGEST_KEY] = connection.dialect.name == "postgresql" and digest_available(
        connection
    )


def digest_available(connection: Connection) -> bool:
    """Whether the server computes the digest of ``md5(text)`` (not in FIPS mode, for one), tried
    in a savepoint so that a refusal leaves the transaction usable."""
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


def _stream_key(*, digest: bool, statistics: bool = False) -> DDLIfCallable:
    """The condition of a stream key's DDL: ``digest`` the unique index on the digest
    (and with ``statistics`` its dependency statistics, PostgreSQL 14 and later), made
    for a PostgreSQL table :func:`_choose_stream_key` gave the digest key; else the text
    ``UNIQUE (stream_id, sequence)`` constraint, made for every other table."""

    def test(target: SchemaItem | str, dialect: Dialect) -> bool:
        table = target.table if isinstance(target, UniqueConstraint) else target
        keyed = isinstance(table, Table) and bool(table.info.get(_DIGEST_KEY, False))
        if not digest:
            return not keyed
        return keyed and (not statistics or _has_expression_statistics(dialect))

    return _ddl_condition(test)


def _function(
    doc: str,
    type_: Any,
    default: Callable[[list[str]], str],
    postgres: Callable[[list[str]], str] | None = None,
) -> type[FunctionElement[Any]]:
    """A SQL function of its arguments, spelled ``default(args)`` (and on PostgreSQL
    ``postgres(args)``), for the derived values of row form 2 and the scoped keys."""
    function = type("_Function", (FunctionElement,), {
        "__doc__": doc, "inherit_cache": True, "type": type_,
    })  # fmt: skip

    def spell(spelling: Callable[[list[str]], str]) -> Callable[..., str]:
        def compile_(element: Any, compiler: Any, **kw: Any) -> str:
            return spelling([compiler.process(clause, **kw) for clause in element.clauses])

        return compile_

    compiles(function)(spell(default))
    if postgres is not None:
        compiles(function, "postgresql")(spell(postgres))
    return function


def _text_function(
    doc: str, default: Callable[[str], str], postgres: Callable[[str], str] | None = None
) -> type[FunctionElement[str]]:
    """A SQL text function of one argument (see :func:`_function`)."""
    on_postgres = None if postgres is None else (lambda args: postgres(args[0]))
    return _function(doc, String(), lambda args: default(args[0]), on_postgres)


# Derived ids have sequences below 10**8 (codec.derived_event_id): lpad never cuts.
_Sequence8 = _text_function(
    "A sequence as %08d text.",
    lambda value: f"printf('%08d', {value})",
    lambda value: f"lpad(CAST({value} AS TEXT), 8, '0')",
)
# A scoped index's key: the text itself, or on PostgreSQL its 64-bit hash (seed 0, as
# _hashed() spells it in queries: the planner matches the same expression).
_Key = _text_function("A scoped index's key.", lambda value: value, lambda value: _hashed(value))
# The same for an expression (in parentheses in an index, as SQLite wants it).
_SessionKey = _text_function(
    "A scoped index's key of an expression.", lambda value: f"({value})", lambda v: _hashed(v)
)


def _hashed(value: str) -> str:
    return f"hashtextextended({value}, 0)"


# The conditions' type: not Boolean, which SQLAlchemy would compare with 1 on SQLite
# (``(a = ?) = 1``, which no index serves).
_CONDITION: Final = NullType()


def _text_and_hash(
    what: str, hashed: Callable[[str], str]
) -> tuple[type[FunctionElement[Any]], type[FunctionElement[Any]]]:
    """Conditions ``key = value`` and ``key IN (values)`` that compare the text and, where
    the index holds it, ``hashed(text)`` too (the plain text alone on SQLite)."""
    equals = _function(
        f"{what} equal to a value.",
        _CONDITION,
        lambda args: f"{args[0]} = {args[1]}",
        lambda args: f"({args[0]} = {args[1]} AND {hashed(args[0])} = {hashed(args[1])})",
    )
    within = _function(
        f"{what} equal to one of the values.",
        _CONDITION,
        lambda args: f"{args[0]} IN ({', '.join(args[1:])})",
        lambda args: (
            f"({args[0]} IN ({', '.join(args[1:])}) "
            f"AND {hashed(args[0])} IN ({', '.join(hashed(a) for a in args[1:])}))"
        ),
    )
    return equals, within


# Text and hash both: the hash finds the index range, the text is the answer (a hash
# collision costs a row read, never a wrong row).  The text comes first: a row a scan
# filters is rejected by it without hashing (PostgreSQL keeps the order of equal costs).
# Earlier PostgreSQL ledgers are queried with the text alone (LedgerDatabase.hashed_keys).
_KeyEquals, _KeyIn = _text_and_hash("A scoped key", _hashed)
# hashtextextended() is strict: its NULL is the text's.
_KeyIsNull = _function(
    "A scoped key that is NULL.",
    _CONDITION,
    lambda args: f"{args[0]} IS NULL",
    lambda args: f"({args[0]} IS NULL AND {_hashed(args[0])} IS NULL)",
)


def key_equals(key: ColumnElement[Any], value: object, *, hashed: bool) -> ColumnElement[bool]:
    """``key = value`` spelled so that a scoped index (type, session, agent, directory)
    serves it: ``hashed`` when the ledger's indexes are keyed by the hash
    (``LedgerDatabase.hashed_keys``); ``value`` is a bind parameter or a plain value."""
    if not hashed:
        return key == value
    bound = value if isinstance(value, ColumnElement) else literal(value, String)
    return _KeyEquals(key, bound)


def key_is_null(key: ColumnElement[Any], *, hashed: bool) -> ColumnElement[bool]:
    """``key IS NULL`` spelled so that a scoped index serves it (see :func:`key_equals`)."""
    return _KeyIsNull(key) if hashed else key.is_(None)


def key_in(
    key: ColumnElement[Any], values: Collection[str], *, hashed: bool
) -> ColumnElement[bool]:
    """``key IN values`` (at least one) spelled so that a scoped index serves it."""
    if not values:
        raise ValueError("key_in() needs at least one value")
    if not hashed:
        return key.in_(list(values))
    return _KeyIn(key, *(literal(value, String) for value in values))


def _digest(value: str) -> str:
    return f"CAST(CAST('x' || left(md5({value}), 16) AS BIT(64)) AS BIGINT)"


# The first 64 bits of md5(text), as a bigint (ADR 0071): md5(), left() and the casts of
# its hex digits are immutable, so an index may hold them; the cast parses md5's 16 hex
# digits only, never the stream's text (stream_id::bytea would parse its backslashes;
# convert_to() and textsend() are only stable).  Eight bytes, not md5's sixteen: a
# (bigint, bigint) entry is one that PostgreSQL's B-tree splits where it goes in.
_Digest = _function(
    "The first 64 bits of md5 of a text, as a bigint.", _CONDITION, lambda a: _digest(a[0])
)
# The stream key of ADR 0071: the digest finds the index entry, the text decides (two
# streams of one digest cost a row read, never a wrong row; the second one's rows are
# refused, naming both: LedgerRecorder.digest_collisions_named).
_StreamEquals, _StreamIn = _text_and_hash("A stream id", _digest)


def stream_equals(events: Table, value: object, *, digest: bool) -> ColumnElement[bool]:
    """``stream_id = value`` spelled so that the ``(stream_id, sequence)`` key serves it:
    ``digest`` when the key is on ``md5(stream_id)`` (``LedgerDatabase.digest_streams``,
    ADR 0071); ``value`` is a bind parameter or a plain value."""
    column = events.c.stream_id
    if isinstance(value, str):  # as the rows hold it: lone surrogates escaped (ADR 0015)
        value = escape_surrogates(value)
    if not digest:
        return column == value
    bound = value if isinstance(value, ColumnElement) else literal(value, String)
    return _StreamEquals(column, bound)


def stream_in(events: Table, values: Collection[str], *, digest: bool) -> ColumnElement[bool]:
    """``stream_id IN values`` (at least one) spelled so that the stream key serves it."""
    if not values:
        raise ValueError("stream_in() needs at least one value")
    column = events.c.stream_id
    held = [escape_surrogates(value) for value in values]  # as the rows hold them
    if not digest:
        return column.in_(held)
    return _StreamIn(column, *(literal(value, String) for value in held))


def _last_segment_sqlite(value: str) -> str:
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


_LastSegment = _text_function(
    "What follows the last / of a text (all of it without one).",
    _last_segment_sqlite,
    lambda value: f"regexp_replace({value}, '^.*/', '')",
)


def session_of(events: Table) -> ColumnElement[str]:
    """A row of form 2's session id: ``session_id`` ('' for none), or when NULL the last
    segment of its session stream (``codec.derived_session``).  All literals are inline,
    so that the expression in a query is the indexed one."""
    c = events.c
    return case(
        (c.session_id.isnot(None), func.nullif(c.session_id, literal_column("''"))),
        (
            func.substr(c.stream_id, literal_column("1"), literal_column("8"))
            == literal_column("'session:'"),
            _LastSegment(c.stream_id),
        ),
        else_=null(),
    )


def event_id_of(events: Table) -> ColumnElement[str]:
    """A row's event id: ``event_id``, or when NULL ``evt:<stream_id>:<%08d sequence>``."""
    c = events.c
    derived = literal("evt:", String) + c.stream_id + literal(":", String) + _Sequence8(c.sequence)
    return func.coalesce(c.event_id, derived, type_=String)


def positions_match(
    events: Table, positions: Iterable[tuple[str, int]], *, digest: bool
) -> ColumnElement[bool]:
    """Rows at one of the ``(stream_id, sequence)`` positions, as probes of the stream key
    (``digest``: see :func:`stream_equals`).  One term per stream, ``stream = ? AND
    sequence IN (...)``: a ``(stream_id, sequence) IN`` list made SQLite scan the stream."""
    by_stream: dict[str, list[int]] = {}
    for stream, sequence in positions:
        by_stream.setdefault(stream, []).append(sequence)
    if not by_stream:
        return false()
    return or_(
        *(
            and_(stream_equals(events, stream, digest=digest), events.c.sequence.in_(sequences))
            for stream, sequences in by_stream.items()
        )
    )


def digest_collisions(events: Table, positions: Iterable[tuple[str, int]]) -> ColumnElement[bool]:
    """Rows of *another* stream, of the same md5 digest, at one of the ``(stream_id,
    sequence)`` positions: what a digest stream key (ADR 0071) refuses them for."""
    by_stream: dict[str, list[int]] = {}
    for stream, sequence in positions:
        by_stream.setdefault(stream, []).append(sequence)
    c = events.c
    return or_(
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


def ids_match(events: Table, event_ids: Collection[str], *, digest: bool) -> ColumnElement[bool]:
    """Rows that may hold one of ``event_ids``: stored under it, or at the (stream,
    sequence) it derives from.  Both are index probes (``digest``: see
    :func:`stream_equals`); compare :func:`event_id_of` of the rows found with the ids
    (a stored foreign id can differ from its position's)."""
    c = events.c
    derived = [parsed for event_id in event_ids if (parsed := parse_derived(event_id))]
    stored = c.event_id.in_(list(event_ids))
    if not derived:
        return stored
    return or_(stored, and_(c.event_id.is_(None), positions_match(events, derived, digest=digest)))
