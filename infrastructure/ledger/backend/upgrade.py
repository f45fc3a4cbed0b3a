"""Bring a ledger made by an earlier version to today's: indexes, the view, and event ids.

:func:`upgrade_indexes` adds the indexes ``create_all`` only creates with a
new table, and drops the ones they replaced; the view that spells each row's
derived values for SQL readers is made (:meth:`~.dialect.LedgerDialect.create_view`)
when it is missing or out of date.  :func:`upgrade_event_ids`
brings a ledger written with session-id-only event ids to the (project,
agent, id) scheme.

Before ADR 0023 a session's stream was ``session:<session-id>`` and its
events ``evt:session:<session-id>:<%08d>``, so two sessions sharing an id
(under two agents or projects) collided.  Every row of such a stream still
names its owner in its ``project_id`` / ``agent_id`` / ``session_id``
columns, so the upgrade rewrites each row in place, in one transaction, when
the ledger is opened: new ``event_id`` and ``stream_id``, and the same two
fields inside ``event_json`` (nothing else in the envelope depends on them).
Notification ids stay, so analytics tracking positions stay valid.

A row whose owner cannot be told (a foreign envelope on a ``session:``
stream without project or agent) is deleted: ``ledger sync`` indexes it
again from the trace if there is one.  A retention watermark moves to the
new stream when exactly one session holds that id, and is dropped otherwise
(those positions are then indexed again by the next sync, and pruned again
by retention).  The scheme is recorded in ``runtime_event_meta`` so the work
is done once; a ledger never holds both forms.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec
from sqlalchemy import Connection, Engine, Index, bindparam, delete, select, text, update
from sqlalchemy.schema import CreateIndex

from pentrace.domain.json_codec import JsonEncoder
from pentrace.domain.session.key import (
    SESSION_STREAMS_LIKE,
    SessionKey,
    legacy_session_of,
    legacy_stream_id,
    parse_session_stream,
)
from pentrace.infrastructure.ledger.backend.codec import ROW_FORM, row_form
from pentrace.infrastructure.ledger.backend.schema import LedgerTables

if TYPE_CHECKING:
    from pentrace.infrastructure.ledger.backend.dialect import LedgerDialect

__all__ = [
    "EVENT_IDS_KEY",
    "EVENT_IDS_VERSION",
    "UpgradeReport",
    "restore_indexes",
    "upgrade_event_ids",
    "upgrade_indexes",
]

EVENT_IDS_KEY: Final = "event_ids"
EVENT_IDS_VERSION: Final = "2"  # 1 (no row): session:<sid>; 2: session:<project>/<agent>/<sid>
_decode: Final = msgspec.json.Decoder().decode
_encode: Final = JsonEncoder().encode  # as rows.py encodes envelopes (lone surrogates escaped)
_BATCH: Final = 1000
_log = logging.getLogger(__name__)


class UpgradeReport(msgspec.Struct, frozen=True):
    """What an upgrade changed: rows rewritten, rows deleted, watermarks moved / dropped."""

    rewritten: int = 0
    deleted: int = 0
    marks_moved: int = 0
    marks_dropped: int = 0


def upgrade_indexes(engine: Engine, tables: LedgerTables, dialect: LedgerDialect) -> None:
    """Create today's indexes on an earlier ledger's events table, drop the replaced ones,
    and make the view for SQL readers when it is missing or out of date.

    The old ``scope_idx`` (session, agent, directory) goes: the planner
    preferred it and then sorted a whole session for every replay page;
    ``type_idx`` gave way to (event_type, notification_id); no reader filters
    by category, so ``category_idx`` goes too (ADR 0058).  The scoped indexes
    a bulk load was to make after its rows (:mod:`..bulk.deferred`) are made here
    when it was stopped before it could.
    """
    with engine.connect() as conn:
        plan = _index_plan(conn, tables, dialect)
    with engine.begin() as conn:
        if plan.changes:
            _apply(conn, plan)
        dialect.create_view(conn, tables)


def restore_indexes(conn: Connection, tables: LedgerTables, dialect: LedgerDialect) -> int:
    """Create the events table's missing indexes in ``conn``'s write transaction (a bulk
    load made them last, :mod:`..bulk.deferred`); returns how many it made."""
    plan = _index_plan(conn, tables, dialect)
    _apply(conn, plan)
    return len(plan.missing)


class _IndexPlan(NamedTuple):
    stale: set[str]
    missing: list[Index]
    obsolete: list[str]

    @property
    def changes(self) -> bool:
        return bool(self.missing or self.obsolete)


def _index_plan(conn: Connection, tables: LedgerTables, dialect: LedgerDialect) -> _IndexPlan:
    events = tables.events
    present = dialect.index_names(conn, events.name)
    # An earlier ledger's ids are all stored, under its own unique constraint.
    ids_held = row_form(conn, tables) != ROW_FORM
    stale = dialect.stale_indexes(conn, events)
    present -= stale
    # Form 2's own indexes: the stored ids, the session ids its streams spell.
    own = {f"{events.name}_event_id_idx", f"{events.name}_session_position_idx"}
    missing = [
        index
        for index in events.indexes
        if index.name not in present and not (ids_held and index.name in own)
    ]
    obsolete = [
        name
        for name in (
            f"{events.name}_scope_idx",
            f"{events.name}_type_idx",
            f"{events.name}_category_idx",
        )
        if name in present
    ]
    return _IndexPlan(stale, missing, obsolete)


def _apply(conn: Connection, plan: _IndexPlan) -> None:
    for name in plan.stale:  # made with an earlier spelling of its expression
        conn.execute(text(f"DROP INDEX IF EXISTS {name}"))
    for index in plan.missing:
        conn.execute(CreateIndex(index, if_not_exists=True))
    for name in plan.obsolete:
        conn.execute(text(f"DROP INDEX IF EXISTS {name}"))


def current_version(conn: Connection, tables: LedgerTables) -> str | None:
    """The event id scheme the ledger records (None: written before schemes were recorded)."""
    meta = tables.meta
    value = conn.execute(
        select(meta.c.value).where(meta.c.key == EVENT_IDS_KEY)
    ).scalar_one_or_none()
    return None if value is None else str(value)


def upgrade_event_ids(engine: Engine, tables: LedgerTables, *, lock: str | None) -> UpgradeReport:
    """Upgrade the ledger's ids when its recorded scheme is older (see the module docstring).

    ``engine`` begins write transactions the way the ledger's writers do
    (``BEGIN IMMEDIATE`` on SQLite); ``lock`` is the statement that takes the
    events table on PostgreSQL (None on SQLite).
    """
    with engine.connect() as conn:
        if current_version(conn, tables) == EVENT_IDS_VERSION:
            return UpgradeReport()
    with engine.begin() as conn:
        if lock is not None:
            conn.execute(text(lock))
        if current_version(conn, tables) == EVENT_IDS_VERSION:
            return UpgradeReport()  # another process upgraded it meanwhile
        report = _upgrade(conn, tables)
        meta = tables.meta
        conn.execute(delete(meta).where(meta.c.key == EVENT_IDS_KEY))
        conn.execute(meta.insert().values(key=EVENT_IDS_KEY, value=EVENT_IDS_VERSION))
    if report.rewritten or report.deleted or report.marks_moved or report.marks_dropped:
        _log.info(
            "ledger event ids upgraded to (project, agent, session id): %d rows rewritten, "
            "%d deleted, %d watermarks moved, %d dropped",
            report.rewritten,
            report.deleted,
            report.marks_moved,
            report.marks_dropped,
        )
    return report


def _upgrade(conn: Connection, tables: LedgerTables) -> UpgradeReport:
    events, marks = tables.events, tables.watermarks
    c = events.c
    statement = (
        update(events)
        .where(c.notification_id == bindparam("b_nid"))
        .values(
            event_id=bindparam("b_id"),
            stream_id=bindparam("b_stream"),
            event_json=bindparam("b_json"),
        )
    )
    rewritten = deleted = 0
    after = 0
    while True:
        # One page at a time in notification order: memory stays bounded on a large ledger.
        rows = conn.execute(
            select(
                c.notification_id, c.stream_id, c.sequence, c.session_id, c.project_id,
                c.agent_id, c.event_json,
            )
            .where(c.stream_id.like(SESSION_STREAMS_LIKE), c.notification_id > after)
            .order_by(c.notification_id)
            .limit(_BATCH)
        ).all()  # fmt: skip
        if not rows:
            break
        after = int(rows[-1][0])
        changes, doomed = _page_changes(rows)
        if changes:
            conn.execute(statement, changes)
        if doomed:
            conn.execute(delete(events).where(c.notification_id.in_(doomed)))
        rewritten, deleted = rewritten + len(changes), deleted + len(doomed)
    moved = dropped = 0
    legacy_marks = [
        (stream, session_id)
        for stream in conn.execute(
            select(marks.c.stream_id).where(marks.c.stream_id.like(SESSION_STREAMS_LIKE))
        ).scalars()
        if (session_id := legacy_session_of(stream)) is not None
    ]
    for stream, session_id in legacy_marks:
        owners = conn.execute(
            select(c.project_id, c.agent_id).where(c.session_id == session_id).distinct()
        ).all()
        if len(owners) == 1 and owners[0][0] and owners[0][1]:
            key = SessionKey(owners[0][0], owners[0][1], session_id)
            conn.execute(
                update(marks)
                .where(marks.c.stream_id == stream)
                .values(stream_id=key.stream_id, id_prefix=key.id_prefix)
            )
            moved += 1
        else:
            conn.execute(delete(marks).where(marks.c.stream_id == stream))
            dropped += 1
    return UpgradeReport(rewritten, deleted, moved, dropped)


def _page_changes(rows: Sequence[Any]) -> tuple[list[dict[str, Any]], list[int]]:
    """The updates of a page of rows (earlier-form rows only), and the rows to delete."""
    changes: list[dict[str, Any]] = []
    doomed: list[int] = []
    for nid, stream, sequence, session_id, project, agent, event_json in rows:
        if parse_session_stream(stream) is not None:
            continue
        if not (project and agent and session_id) or stream != legacy_stream_id(session_id):
            doomed.append(int(nid))
            continue
        key = SessionKey(project, agent, session_id)
        envelope = _decode(bytes(event_json))
        if not isinstance(envelope, dict):
            doomed.append(int(nid))
            continue
        new_id = key.event_id(int(sequence))
        envelope["id"], envelope["stream_id"] = new_id, key.stream_id
        changes.append(
            {"b_nid": nid, "b_id": new_id, "b_stream": key.stream_id, "b_json": _encode(envelope)}
        )
    return changes, doomed
