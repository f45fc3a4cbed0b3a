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

:func:`retry` (``pentrace projections retry``) applies the recorded failed
events again, read back from the ledger, once the handler is fixed.
:func:`session_events` / :func:`trace_envelopes` give a session's records as
the redacted envelopes the ledger would hold for them (the path a rebuild, the
cold build and ``pentrace report`` share).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final, TypeVar

from pentrace.domain.records import TraceRecord
from pentrace.domain.runtime import SessionEvents, event_type_for
from pentrace.infrastructure.analytics.api import AnalyticsProjection
from pentrace.infrastructure.analytics.database import (
    FAILURES_TABLE,
    MARKS_TABLE,
    TRACKING_TABLE,
    analytics_owner,
)
from pentrace.infrastructure.analytics.failures import (
    EventFailure,
    forget_failure,
    read_failures,
    select_failures,
)
from pentrace.infrastructure.analytics.runner import open_ledger, open_projection
from pentrace.infrastructure.analytics.transaction import BatchWriteError, Transaction
from pentrace.infrastructure.ledger import RuntimeEventLedger
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.ledger.bulk.build import RECORD_ERRORS
from pentrace.infrastructure.ledger.opener import LedgerEvent
from pentrace.infrastructure.ledger.rows import ROW_COLUMNS, encoded_values
from pentrace.infrastructure.storage.layout import SessionRef, iter_sessions
from pentrace.infrastructure.trace.reader import read_session
from pentrace.projections.analytics.events import AnalyticsEvent, decode_event

__all__ = [
    "RebuildReport",
    "RetryReport",
    "feed",
    "ledger_rows",
    "rebuild",
    "replace_read_model",
    "reset_read_model",
    "retry",
    "session_events",
    "trace_envelopes",
]

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
    """Recreate the projection's read model from the traces; equal to an incremental run
    (one build at a time per data root: ``analytics_owner``)."""
    with analytics_owner(data_root):
        return _rebuild(projection_class, data_root, env)


def _rebuild(
    projection_class: type[AnalyticsProjection], data_root: Path, env: Mapping[str, str] | None
) -> RebuildReport:
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


Position = tuple[str, int]


@dataclass(frozen=True)
class RetryReport:
    """What a retry did: events applied now, still failing, and no longer in the ledger."""

    applied: int
    failing: tuple[EventFailure, ...]
    missing: tuple[EventFailure, ...]


def ledger_rows(
    ledger: RuntimeEventLedger, failures: list[EventFailure]
) -> dict[Position, tuple[int, bytes]]:
    """Each failed event's notification id and envelope, by stream position (pruned: absent)."""
    found = ledger.rows_at((failure.stream_id, failure.sequence) for failure in failures)
    return {key: (entry.notification_id or 0, entry.event_json) for key, entry in found.items()}


def retry(
    projection_class: type[AnalyticsProjection],
    *,
    data_root: Path,
    env: Mapping[str, str] | None = None,
) -> RetryReport:
    """Apply every recorded failed event of the projection again (see the module docstring)."""
    projection = open_projection(projection_class, data_root, env)
    view = projection.view
    try:
        recorded = read_failures(view.db, view.name)
        if not recorded:
            return RetryReport(applied=0, failing=(), missing=())
        ledger = open_ledger(data_root, env)
        try:
            rows = ledger_rows(ledger, recorded)
        finally:
            ledger.close()
        applied, failing, missing = 0, [], []
        with view.lock:
            view.transaction()
            # Read again, locked, inside the transaction: a concurrent retry took what is gone.
            for failure in select_failures(view.open_connection(), view.name, for_update=True):
                row = rows.get((failure.stream_id, failure.sequence))
                if row is None:
                    missing.append(failure)
                    continue
                notification_id, envelope = row
                event = LedgerEvent(
                    failure.stream_id, failure.sequence, failure.event_type, envelope
                )
                again = projection.apply(event, notification_id, strict=True)
                if again is None:
                    forget_failure(view.open_connection(), failure)
                    applied += 1
                else:
                    failing.append(replace(again, attempts=failure.attempts + 1))
                    view.failures.append(again)
            view.commit(track=False)
    except BaseException:
        view.rollback()
        raise
    finally:
        view.db.close()
    return RetryReport(applied=applied, failing=tuple(failing), missing=tuple(missing))


_JSON: Final = ROW_COLUMNS.index("event_json")


def trace_envelopes(
    ref: SessionRef,
    limit: int | None,
    types: Collection[str],
    refused: list[tuple[int, BaseException]] | None = None,
) -> Iterator[tuple[int, bytes | None]]:
    """``(position, envelope JSON)`` of each record up to ``limit``; None for a skipped type,
    and for a record the ledger cannot take (noted in ``refused`` when given)."""
    mapper = SessionEvents(ref.key)
    record: TraceRecord
    for position, record in enumerate(read_session(ref.shards), start=1):
        if limit is not None and position > limit:
            return
        if types and event_type_for(record, position) not in types:
            mapper.skip(position, record)
            yield position, None
            continue
        # The ledger's own row check: an envelope it would refuse (RedactionError) is not
        # folded either; it is a gap, as in the ledger (ADR 0102), and the session goes on.
        try:
            data = encoded_values(mapper.encoded(position, record), 0)[_JSON]
        except RECORD_ERRORS as error:
            mapper.skip(position, record)  # a first record still names the workspace
            if refused is not None:
                refused.append((position, error))
            yield position, None
            continue
        yield position, data


def session_events(
    ref: SessionRef, limit: int | None = None, types: Collection[str] = ()
) -> Iterator[AnalyticsEvent]:
    """Each record (positions 1..``limit``) mapped, redacted and decoded as the ledger's would be.

    The records take the indexer's path (:class:`~pentrace.domain.runtime.SessionEvents`),
    so the envelope bytes decoded here are the ones ``ledger sync`` stores.  With
    ``types``, records of other event types are skipped before the (costly)
    mapping and redaction.
    """
    for _, data in trace_envelopes(ref, limit, types):
        if data is not None:
            yield decode_event(data)
