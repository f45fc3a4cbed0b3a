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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sqlalchemy import func, select

from pentrace.infrastructure.analytics.api import AnalyticsProjection
from pentrace.infrastructure.analytics.database import TRACKING_TABLE
from pentrace.infrastructure.analytics.runner import open_ledger, open_projection
from pentrace.infrastructure.analytics.trace_events import session_events
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
        newest = ledger.head()
        limits = _ledger_limits(ledger, newest)
    finally:
        ledger.close()
    projection = open_projection(projection_class, data_root, env)
    view = projection.view
    sessions = fed = 0
    try:
        with view.lock:
            tx = view.transaction()
            for table in projection.tables:
                tx.execute(f"DROP TABLE IF EXISTS {table}")
            tx.execute(
                f"DELETE FROM {TRACKING_TABLE} WHERE application_name = :n", {"n": view.name}
            )
            for statement in projection.schema:
                tx.execute(statement)
            wanted = frozenset(projection.topics)
            for ref in iter_sessions(data_root):
                limit = limits.get(ref.key.stream_id, 0)
                if limit == 0:
                    continue
                sessions += 1
                for event in session_events(ref, limit, wanted):
                    projection.handle(event, tx)
                    fed += 1
                    if fed % _FLUSH_EVERY == 0:
                        tx.flush()
            view.restart_from(None, newest)
            view.transaction().count = max(fed, 1)
            view.commit()
    except BaseException:
        view.rollback()
        raise
    finally:
        view.db.close()
    return RebuildReport(sessions=sessions, events=fed, position=newest)
