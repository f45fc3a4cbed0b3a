"""Rebuild a read model from the traces (the source of truth), not only from the ledger.

Retention prunes the ledger, so a new projection - or one that fell behind
retention - cannot be built from it.  :func:`rebuild` instead:

1. syncs the ledger from the traces, so it holds every record not evicted;
2. notes the ledger's newest notification id ``M`` and, per session, the
   highest position the ledger held at ``M`` (retained or evicted);
3. in **one** transaction drops the read model's tables, recreates them,
   feeds every trace record up to that position through the projection's
   handlers (the same redacted envelopes the ledger holds), and sets the
   tracking position to ``M``.

Records after those positions reach the ledger with ids above ``M``, so the
runner delivers them once.  A crash during a rebuild leaves the old read
model untouched.

Failed events are isolated as in a catch-up (ADR 0032): the projection's
earlier failure records are dropped with its tables, and the events its
handler fails on now are recorded (with their ledger notification ids) in
the rebuild's transaction.  When the database refuses a batched write, the
rebuild starts over with each event in its own savepoint, so the refused
event is the one recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from sqlalchemy import func, select

from pentrace.infrastructure.analytics.api import AnalyticsProjection
from pentrace.infrastructure.analytics.database import FAILURES_TABLE, TRACKING_TABLE
from pentrace.infrastructure.analytics.failures import EventFailure
from pentrace.infrastructure.analytics.retry import ledger_rows
from pentrace.infrastructure.analytics.runner import open_ledger, open_projection
from pentrace.infrastructure.analytics.trace_events import session_events
from pentrace.infrastructure.analytics.transaction import BatchWriteError
from pentrace.infrastructure.ledger import RuntimeEventLedger
from pentrace.infrastructure.ledger.indexer import sync
from pentrace.infrastructure.storage.layout import iter_sessions

__all__ = ["RebuildReport", "rebuild"]

_FLUSH_EVERY: Final = 20_000


@dataclass(frozen=True)
class RebuildReport:
    """What a rebuild read: sessions, trace records fed, and the tracking position set."""

    sessions: int
    events: int
    position: int


def _ledger_limits(ledger: RuntimeEventLedger, newest: int) -> dict[str, int]:
    events, marks = ledger.db.tables.events, ledger.db.tables.watermarks
    with ledger.db.reading("read the ledger's positions per session") as conn:
        held = conn.execute(
            select(events.c.stream_id, func.max(events.c.sequence))
            .where(events.c.notification_id <= newest)
            .group_by(events.c.stream_id)
        ).all()
        pruned = conn.execute(select(marks.c.stream_id, marks.c.max_sequence)).all()
    limits = {str(stream): int(top) for stream, top in held}
    for stream, top in pruned:
        limits[str(stream)] = max(limits.get(str(stream), 0), int(top))
    return limits


def _notification_ids(
    ledger: RuntimeEventLedger, failures: list[EventFailure]
) -> list[EventFailure]:
    """The failures with the notification id the ledger gave each event (None if pruned)."""
    rows = ledger_rows(ledger, failures)
    return [
        replace(f, notification_id=rows[f.stream_id, f.sequence][0])
        if (f.stream_id, f.sequence) in rows
        else f
        for f in failures
    ]


def _feed(
    projection: AnalyticsProjection, data_root: Path, limits: dict[str, int], strict: bool
) -> tuple[int, int]:
    """Drop and recreate the read model, then feed it every trace record up to ``limits``."""
    view = projection.view
    tx = view.transaction()
    for table in projection.tables:
        tx.execute(f"DROP TABLE IF EXISTS {table}")
    for table in (TRACKING_TABLE, FAILURES_TABLE):
        tx.execute(f"DELETE FROM {table} WHERE application_name = :n", {"n": view.name})
    for statement in projection.schema:
        tx.execute(statement)
    wanted = frozenset(projection.topics)
    sessions = fed = 0
    for ref in iter_sessions(data_root):
        limit = limits.get(ref.key.stream_id, 0)
        if limit == 0:
            continue
        sessions += 1
        for event in session_events(ref, limit, wanted):
            failure = projection.apply(event, None, strict=strict)
            if failure is not None:
                projection.skip(failure, commit_first=False)
            fed += 1
            if fed % _FLUSH_EVERY == 0:
                tx.flush()
    return sessions, fed


def rebuild(
    projection_class: type[AnalyticsProjection],
    *,
    data_root: Path,
    env: Mapping[str, str] | None = None,
) -> RebuildReport:
    """Recreate the projection's read model from the traces; equal to an incremental run."""
    ledger = open_ledger(data_root, env)
    try:
        sync(ledger, data_root)
        newest = ledger.max_notification_id() or 0
        limits = _ledger_limits(ledger, newest)
    finally:
        ledger.close()
    projection = open_projection(projection_class, data_root, env)
    view = projection.view
    try:
        with view.lock:
            for strict in (False, True):
                try:
                    sessions, fed = _feed(projection, data_root, limits, strict)
                    if view.failures:
                        ledger = open_ledger(data_root, env)
                        try:
                            view.failures = _notification_ids(ledger, view.failures)
                        finally:
                            ledger.close()
                    view.restart_from(None, newest)
                    view.transaction().count = max(fed, 1)
                    view.commit()
                    break
                except BatchWriteError:
                    if strict:
                        raise
                    view.rollback()  # start over, each event in its own savepoint
    except BaseException:
        view.rollback()
        raise
    finally:
        view.db.close()
    return RebuildReport(sessions=sessions, events=fed, position=newest)
