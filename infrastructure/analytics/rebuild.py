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
model untouched.  The trace marks of a cold build (ADR 0050) go with the
old tables: the rebuilt read model follows the ledger's positions alone.

Failed events are isolated as in a catch-up (ADR 0032): the projection's
earlier failure records are dropped with its tables, and the events its
handler fails on now are recorded (with their ledger notification ids) in
the rebuild's transaction.  When the database refuses a batched write, the
rebuild starts over with each event in its own savepoint, so the refused
event is the one recorded.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final, TypeVar

from pentrace.infrastructure.analytics.api import AnalyticsProjection
from pentrace.infrastructure.analytics.database import FAILURES_TABLE, MARKS_TABLE, TRACKING_TABLE
from pentrace.infrastructure.analytics.failures import EventFailure
from pentrace.infrastructure.analytics.retry import ledger_rows
from pentrace.infrastructure.analytics.runner import open_ledger, open_projection
from pentrace.infrastructure.analytics.trace_events import session_events
from pentrace.infrastructure.analytics.transaction import BatchWriteError, Transaction
from pentrace.infrastructure.ledger import RuntimeEventLedger
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.storage.layout import iter_sessions
from pentrace.projections.analytics.events import AnalyticsEvent

__all__ = ["RebuildReport", "feed", "rebuild", "replace_read_model", "reset_read_model"]

_FLUSH_EVERY: Final = 20_000
T = TypeVar("T")


@dataclass(frozen=True)
class RebuildReport:
    """What a rebuild read: sessions, trace records fed, and the tracking position set."""

    sessions: int
    events: int
    position: int


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


def reset_read_model(projection: AnalyticsProjection, *, tracked: bool = True) -> Transaction:
    """Open the read model's transaction: drop and recreate its tables, drop its failure and
    trace-mark rows, and (``tracked``) its tracking position."""
    view = projection.view
    tx = view.transaction()
    for table in projection.tables:
        tx.execute(f"DROP TABLE IF EXISTS {table}")
    rows = (FAILURES_TABLE, MARKS_TABLE, *((TRACKING_TABLE,) if tracked else ()))
    for table in rows:
        tx.execute(f"DELETE FROM {table} WHERE application_name = :n", {"n": view.name})
    for statement in projection.schema:
        tx.execute(statement)
    return tx


def feed(
    projection: AnalyticsProjection, events: Iterable[AnalyticsEvent], strict: bool, fed: int
) -> int:
    """Apply ``events`` in the open transaction (failures recorded); returns ``fed`` plus them."""
    tx = projection.view.transaction()
    for event in events:
        failure = projection.apply(event, None, strict=strict)
        if failure is not None:
            projection.skip(failure, commit_first=False)
        fed += 1
        if fed % _FLUSH_EVERY == 0:
            tx.flush()
    return fed


@contextmanager
def _no_collection() -> Iterator[None]:
    """Hold the cycle collector off while a build merges rows: the batch's pending rows are
    many young objects, and collecting them again and again doubled the handlers' cost
    (docs/performance.md, "Cold analytics").  A build makes no cycles of its own."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def replace_read_model(
    projection: AnalyticsProjection, build: Callable[[bool], tuple[T, int]], position: int
) -> T:
    """Run ``build(strict)`` and commit what it wrote with tracking ``position``, in one
    transaction; when the database refuses a batched write, start over with ``strict``
    (each event in its own savepoint, so the refused event is the one recorded)."""
    view = projection.view
    try:
        with view.lock:
            for strict in (False, True):
                try:
                    with _no_collection():
                        result, fed = build(strict)
                    view.restart_from(None, position)
                    view.transaction().count = max(fed, 1)
                    view.commit()
                    return result
                except BatchWriteError:
                    if strict:
                        raise
                    view.rollback()  # start over, each event in its own savepoint
    except BaseException:
        view.rollback()
        raise
    raise AssertionError("unreachable: the strict pass returns or raises")


def _feed(
    projection: AnalyticsProjection, data_root: Path, limits: dict[str, int], strict: bool
) -> tuple[int, int]:
    """Drop and recreate the read model, then feed it every trace record up to ``limits``."""
    reset_read_model(projection)
    wanted = frozenset(projection.topics)
    sessions = fed = 0
    for ref in iter_sessions(data_root):
        limit = limits.get(ref.key.stream_id, 0)
        if limit == 0:
            continue
        sessions += 1
        fed = feed(projection, session_events(ref, limit, wanted), strict, fed)
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
        newest = ledger.head()
        limits = ledger.stream_limits(newest)
    finally:
        ledger.close()
    projection = open_projection(projection_class, data_root, env)
    view = projection.view

    def build(strict: bool) -> tuple[tuple[int, int], int]:
        sessions, fed = _feed(projection, data_root, limits, strict)
        if view.failures:
            ledger = open_ledger(data_root, env)
            try:
                view.failures = _notification_ids(ledger, view.failures)
            finally:
                ledger.close()
        return (sessions, fed), fed

    try:
        sessions, fed = replace_read_model(projection, build, newest)
    finally:
        view.db.close()
    return RebuildReport(sessions=sessions, events=fed, position=newest)
