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
is upgraded when it is opened (:mod:`.upgrade`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    UniqueConstraint,
)

__all__ = ["LedgerTables", "ledger_tables"]

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


def ledger_tables(prefix: str = "") -> LedgerTables:
    """Build the table objects; ``prefix`` keeps parallel ledgers in one database apart."""
    metadata = MetaData()
    name = f"{prefix}runtime_events"
    events = Table(
        name,
        metadata,
        Column("notification_id", _Id, primary_key=True, autoincrement=True),
        Column("event_id", String, nullable=False),
        Column("stream_id", String, nullable=False),
        Column("sequence", BigInteger, nullable=False),
        Column("event_type", String, nullable=False),
        Column("category", String, nullable=False),
        Column("event_time", BigInteger, nullable=False),
        Column("inserted_at", BigInteger, nullable=False),
        Column("session_id", String),
        Column("conversation_id", String),
        Column("agent_id", String),
        Column("task_id", String),
        Column("run_id", String),
        Column("project_id", String),
        Column("directory", String),
        Column("privacy_classification", String, nullable=False),
        Column("redacted", Boolean, nullable=False),
        Column("event_json", LargeBinary, nullable=False),
        UniqueConstraint("event_id", name=f"{name}_event_id_key"),
        UniqueConstraint("stream_id", "sequence", name=f"{name}_stream_sequence_key"),
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
    Index(f"{name}_type_position_idx", events.c.event_type, events.c.notification_id)
    Index(f"{name}_category_idx", events.c.category)
    Index(f"{name}_inserted_idx", events.c.inserted_at)
    Index(f"{name}_session_idx", events.c.session_id, events.c.notification_id)
    Index(f"{name}_agent_idx", events.c.agent_id, events.c.notification_id)
    Index(f"{name}_directory_idx", events.c.directory, events.c.notification_id)
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
    return LedgerTables(metadata, events, watermarks, tracking, meta, ingest_cursors)
