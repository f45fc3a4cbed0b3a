"""The ledger's tables and the SQL expressions its queries share, in portable SQLAlchemy Core.

One ledger row is one redacted RuntimeEvent *and* one eventsourcing
``Notification``: ``notification_id`` is the global order (``Notification.id``),
``stream_id`` / ``sequence`` are ``originator_id`` / ``originator_version``,
``event_type`` is the ``topic`` and ``event_json`` (the whole envelope, bytes)
is the ``state``.  The other columns are Penguin's, kept for filtering.

The envelope is stored once, in ``event_json``: Penguin's ``payload_json`` and
``projection_json`` copies doubled every row for columns nothing reads (ADR
0009).  Ledgers created by earlier versions keep those columns, nullable and
left empty.

``runtime_event_meta`` holds the ledger's own versions: the event id scheme
(``event_ids``, ADR 0023: a ledger written with session-id-only ids is
upgraded when it is opened, :mod:`.upgrade`), and the row form (``row_form``,
ADR 0058).  Row form 2 (ledgers created by this version) stores
``event_json`` as a zstd frame and leaves ``event_id`` NULL when the row's
stream and sequence spell it (:mod:`.codec`); :func:`event_id_of` is the id
either way.

Nothing here names a database.  The SQL functions below (a %08d sequence, the
last segment of a stream, a scoped key, the stream key's digest) are spelled
by each dialect's module, which also adds its own table options and DDL
(:meth:`~.dialect.LedgerDialect.adapt_tables`); :func:`.dialect.ledger_tables`
builds the tables with every dialect's additions.  A condition made here with
``hashed`` or ``digest`` (the layout a ledger's indexes have, read when it
opens) compares the plain text unless the dialect spells it otherwise.
"""

from __future__ import annotations

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
    cast,
    false,
    func,
    literal,
    literal_column,
    null,
    or_,
    select,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import SchemaItem
from sqlalchemy.sql import Select
from sqlalchemy.sql.compiler import DDLCompiler
from sqlalchemy.sql.ddl import BaseDDLElement, DDLIfCallable
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import NullType

from pentrace.domain.json_codec import escape_surrogates
from pentrace.infrastructure.ledger.backend.codec import parse_derived

__all__ = [
    "OTHER_STREAM_KEY",
    "LedgerTables",
    "ddl_condition",
    "event_id_of",
    "ids_match",
    "key_equals",
    "key_in",
    "key_is_null",
    "portable_tables",
    "positions_match",
    "session_of",
    "sql_function",
    "stream_equals",
    "stream_in",
    "view_name",
    "view_query",
]

#: A table's ``info`` key a dialect sets (True) before the events table is created when it
#: gives the table another ``(stream_id, sequence)`` key than the text constraint.
OTHER_STREAM_KEY: Final = "pentrace_other_stream_key"


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


def view_name(tables: LedgerTables) -> str:
    """The view that spells every row's derived values for SQL readers (:func:`view_query`)."""
    return tables.events.name.removesuffix("runtime_events") + "runtime_event_rows"


def view_query(events: Table) -> Select[Any]:
    """What the view of :func:`view_name` shows: every column of the events table as row
    form 1 stored it, the event id and the session id spelled out where a row of form 2
    leaves them NULL (the other values it leaves out are documented in docs/ledger.md)."""
    c = events.c
    columns: list[ColumnElement[Any]] = []
    for column in events.columns:
        if column.name == "event_id":
            columns.append(cast(event_id_of(events), String).label("event_id"))
        elif column.name == "session_id":
            columns.append(cast(session_of(events), String).label("session_id"))
        else:
            columns.append(c[column.name])
    return select(*columns)


def ddl_condition(test: Callable[[SchemaItem | str, Dialect], bool]) -> DDLIfCallable:
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


def _text_key(target: SchemaItem | str, _dialect: Dialect) -> bool:
    """The text ``UNIQUE (stream_id, sequence)`` is made unless a dialect chose another key."""
    table = target.table if isinstance(target, UniqueConstraint) else target
    return not (isinstance(table, Table) and table.info.get(OTHER_STREAM_KEY, False))


def portable_tables(prefix: str = "") -> LedgerTables:
    """The table objects without any dialect's additions (see :func:`.dialect.ledger_tables`);
    ``prefix`` keeps parallel ledgers in one database apart."""
    metadata = MetaData()
    name = f"{prefix}runtime_events"
    events = Table(
        name,
        metadata,
        # A dialect may want another integer type for its autoincrement key (adapt_tables).
        Column("notification_id", BigInteger, primary_key=True, autoincrement=True),
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
        # A dialect may key (stream_id, sequence) otherwise (OTHER_STREAM_KEY).
        UniqueConstraint("stream_id", "sequence", name=f"{name}_stream_sequence_key").ddl_if(
            callable_=ddl_condition(_text_key)
        ),
    )
    # Each index costs every insert; these serve replay filters, topics and retention.
    # (session, notification_id) serves a session's replay page as one range scan in
    # global order (and the unscoped rows, session IS NULL, as a second one); (agent_id,
    # ...) and (directory, ...) do the same for a page filtered by agent or directory
    # without a session.  Task, run, project and conversation have no replay filter, so
    # no index.  (event_type, notification_id): a projection's topics are range scans in
    # order.  Only the ids stored (foreign ones) are indexed; derived ids are found
    # through the (stream_id, sequence) key.  No reader filters by category: no index.
    # Partial (event_id IS NOT NULL) where the dialect can say so (adapt_tables).
    Index(f"{name}_event_id_idx", events.c.event_id, unique=True)
    # A dialect may keep the text of the four scoped keys as something else in the index
    # (PostgreSQL: a hash, ADR 0068); queries match it through key_equals() and friends.
    position = events.c.notification_id
    Index(f"{name}_type_position_idx", ScopedKey(events.c.event_type), position)
    Index(f"{name}_inserted_idx", events.c.inserted_at)
    # Row form 2 leaves a session stream's own session id out of the row: the index is on
    # session_of(), which reads it from the stream (earlier ledgers keep _session_idx).
    Index(f"{name}_session_position_idx", ScopedExpression(session_of(events)), position)
    Index(f"{name}_agent_idx", ScopedKey(events.c.agent_id), position)
    Index(f"{name}_directory_idx", ScopedKey(events.c.directory), position)
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


def sql_function(
    doc: str, type_: Any, default: Callable[[list[str]], str] | None = None
) -> type[FunctionElement[Any]]:
    """A SQL function of its arguments, spelled ``default(args)`` where a dialect spells it no
    other way (:func:`spelled` registers a dialect's spelling); without ``default``, every
    dialect must spell it."""
    function = type("_Function", (FunctionElement,), {
        "__doc__": doc, "inherit_cache": True, "type": type_,
    })  # fmt: skip
    if default is not None:
        spelled(function, None, default)
    return function


def spelled(
    function: type[FunctionElement[Any]], dialect: str | None, spelling: Callable[[list[str]], str]
) -> None:
    """Spell ``function`` as ``spelling(compiled args)`` on ``dialect`` (None: everywhere else)."""

    def compile_(element: Any, compiler: Any, **kw: Any) -> str:
        return spelling([compiler.process(clause, **kw) for clause in element.clauses])

    if dialect is None:
        compiles(function)(compile_)
    else:
        compiles(function, dialect)(compile_)


# The conditions' type: not Boolean, which SQLAlchemy would compare with 1 on SQLite
# (``(a = ?) = 1``, which no index serves).
CONDITION: Final = NullType()

#: A sequence as %08d text (derived ids have sequences below 10**8: it never cuts).
Sequence8 = sql_function("A sequence as %08d text.", String())
#: What follows the last / of a text (all of it without one).
LastSegment = sql_function("What follows the last / of a text.", String())
#: A scoped index's key: the text itself unless a dialect keys it otherwise.
ScopedKey = sql_function("A scoped index's key.", String(), lambda a: a[0])
#: The same for an expression (in parentheses in an index, as SQLite wants it).
ScopedExpression = sql_function("A scoped index's key of an expression.", String(),
                                lambda a: f"({a[0]})")  # fmt: skip
#: ``key = value`` / ``key IN (values)`` / ``key IS NULL`` for a scoped key of a ledger
#: whose indexes a dialect keys otherwise (``hashed``); plain comparisons by default.
KeyEquals = sql_function("A scoped key equal to a value.", CONDITION, lambda a: f"{a[0]} = {a[1]}")
KeyIn = sql_function("A scoped key equal to one of the values.", CONDITION,
                     lambda a: f"{a[0]} IN ({', '.join(a[1:])})")  # fmt: skip
KeyIsNull = sql_function("A scoped key that is NULL.", CONDITION, lambda a: f"{a[0]} IS NULL")
#: The same for the stream key of a ledger whose dialect keys it otherwise (``digest``).
StreamEquals = sql_function("A stream id equal to a value.", CONDITION,
                            lambda a: f"{a[0]} = {a[1]}")  # fmt: skip
StreamIn = sql_function("A stream id equal to one of the values.", CONDITION,
                        lambda a: f"{a[0]} IN ({', '.join(a[1:])})")  # fmt: skip


def key_equals(key: ColumnElement[Any], value: object, *, hashed: bool) -> ColumnElement[bool]:
    """``key = value`` spelled so that a scoped index (type, session, agent, directory)
    serves it: ``hashed`` when the ledger's indexes are keyed otherwise
    (``LedgerDatabase.hashed_keys``); ``value`` is a bind parameter or a plain value."""
    if not hashed:
        return key == value
    bound = value if isinstance(value, ColumnElement) else literal(value, String)
    return KeyEquals(key, bound)


def key_is_null(key: ColumnElement[Any], *, hashed: bool) -> ColumnElement[bool]:
    """``key IS NULL`` spelled so that a scoped index serves it (see :func:`key_equals`)."""
    return KeyIsNull(key) if hashed else key.is_(None)


def key_in(
    key: ColumnElement[Any], values: Collection[str], *, hashed: bool
) -> ColumnElement[bool]:
    """``key IN values`` (at least one) spelled so that a scoped index serves it."""
    if not values:
        raise ValueError("key_in() needs at least one value")
    if not hashed:
        return key.in_(list(values))
    return KeyIn(key, *(literal(value, String) for value in values))


def stream_equals(events: Table, value: object, *, digest: bool) -> ColumnElement[bool]:
    """``stream_id = value`` spelled so that the ``(stream_id, sequence)`` key serves it:
    ``digest`` when a dialect keys it otherwise (``LedgerDatabase.digest_streams``, ADR
    0071); ``value`` is a bind parameter or a plain value."""
    column = events.c.stream_id
    if isinstance(value, str):  # as the rows hold it: lone surrogates escaped (ADR 0015)
        value = escape_surrogates(value)
    if not digest:
        return column == value
    bound = value if isinstance(value, ColumnElement) else literal(value, String)
    return StreamEquals(column, bound)


def stream_in(events: Table, values: Collection[str], *, digest: bool) -> ColumnElement[bool]:
    """``stream_id IN values`` (at least one) spelled so that the stream key serves it."""
    if not values:
        raise ValueError("stream_in() needs at least one value")
    column = events.c.stream_id
    held = [escape_surrogates(value) for value in values]  # as the rows hold them
    if not digest:
        return column.in_(held)
    return StreamIn(column, *(literal(value, String) for value in held))


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
            LastSegment(c.stream_id),
        ),
        else_=null(),
    )


def event_id_of(events: Table) -> ColumnElement[str]:
    """A row's event id: ``event_id``, or when NULL ``evt:<stream_id>:<%08d sequence>``."""
    c = events.c
    derived = literal("evt:", String) + c.stream_id + literal(":", String) + Sequence8(c.sequence)
    return func.coalesce(c.event_id, derived, type_=String)


def _by_stream(positions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    by_stream: dict[str, list[int]] = {}
    for stream, sequence in positions:
        by_stream.setdefault(stream, []).append(sequence)
    return by_stream


def positions_match(
    events: Table, positions: Iterable[tuple[str, int]], *, digest: bool
) -> ColumnElement[bool]:
    """Rows at one of the ``(stream_id, sequence)`` positions, as probes of the stream key
    (``digest``: see :func:`stream_equals`).  One term per stream, ``stream = ? AND
    sequence IN (...)``: a ``(stream_id, sequence) IN`` list made SQLite scan the stream."""
    by_stream = _by_stream(positions)
    if not by_stream:
        return false()
    return or_(
        *(
            and_(stream_equals(events, stream, digest=digest), events.c.sequence.in_(sequences))
            for stream, sequences in by_stream.items()
        )
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
