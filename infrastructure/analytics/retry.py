"""``pentrace projections retry``: apply the events a handler failed on, once it is fixed.

The failed events are read back from the ledger by their stream position and
handed to the projection again, in ledger order, each in its own savepoint.
An event that is applied now loses its failure record in the same
transaction as its read-model writes (so no event is applied twice, even by
two retries at once: the failure rows are locked first); one that fails
again keeps its record, with one more attempt counted.  The tracking
position does not move.  Events retention has pruned from the ledger cannot
be retried: ``pentrace projections rebuild`` reads them from the traces.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from pentrace.infrastructure.analytics.api import AnalyticsProjection
from pentrace.infrastructure.analytics.failures import (
    EventFailure,
    forget_failure,
    read_failures,
    select_failures,
)
from pentrace.infrastructure.analytics.runner import open_ledger, open_projection
from pentrace.infrastructure.ledger import RuntimeEventLedger
from pentrace.infrastructure.ledger.opener import LedgerEvent

__all__ = ["RetryReport", "ledger_rows", "retry"]

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
