"""The analytics projections, for ``pentrace projections ...``, ``stats``, ``report``
and the service's analytics routes (ADRs 0036, 0103): which ones there are, running,
rebuilding and retrying them, their read models' database, their failed events, and
their status: what ``pentrace projections status`` prints and
``GET /api/v1/projections`` returns, read in one place.

Each row: the projection's tracking position, the ledger's newest notification,
how far behind it is, whether ledger retention (or a read model built before
ADR 0023's session keys) means it needs a rebuild, and its failed events (ADR 0032).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pentrace.infrastructure.analytics.api import AnalyticsProjection
from pentrace.infrastructure.analytics.database import (
    ENV_ANALYTICS_URL,
    GROUPS,
    AnalyticsDatabase,
    analytics_url,
)
from pentrace.infrastructure.analytics.failures import EventFailure, failure_warnings, read_failures
from pentrace.infrastructure.analytics.rebuild import rebuild, retry, session_events
from pentrace.infrastructure.analytics.registry import BUILTINS, resolve
from pentrace.infrastructure.analytics.runner import (
    AnalyticsRunner,
    open_ledger,
    open_projection,
    pruned_through,
)

__all__ = [
    "BUILTINS",
    "ENV_ANALYTICS_URL",
    "GROUPS",
    "AnalyticsDatabase",
    "AnalyticsRunner",
    "failure_warnings",
    "failures_of",
    "projection_status",
    "rebuild",
    "resolve",
    "retry",
    "session_events",
    "warnings_of",
]


def warnings_of(root: Path, names: Iterable[str], env: Mapping[str, str]) -> list[str]:
    """One line per projection of ``names`` whose numbers leave out failed events (ADR 0032)."""
    db = AnalyticsDatabase(analytics_url(root, env))
    try:
        return failure_warnings(db, names)
    finally:
        db.close()


def failures_of(root: Path, projections: Iterable[type[AnalyticsProjection]]) -> list[EventFailure]:
    """The events the projections' handlers failed on, projection by projection."""
    found: list[EventFailure] = []
    for each in projections:
        projection = open_projection(each, root)
        try:
            found += read_failures(projection.view.db, each.name)
        finally:
            projection.view.db.close()
    return found


def projection_status(
    root: Path,
    projections: Iterable[type[AnalyticsProjection]],
    *,
    env: Mapping[str, str] | None = None,
    with_failures: bool = False,
) -> dict[str, Any]:
    """``{"projections": [row, ...]}``; ``with_failures`` adds each row's failed events."""
    ledger = open_ledger(root, env)
    try:
        newest = ledger.max_notification_id() or 0
        pruned = pruned_through(ledger)
    finally:
        ledger.close()
    rows = []
    for each in projections:
        projection = open_projection(each, root, env)
        try:
            position = projection.view.max_tracking_id(each.name) or 0
            stale = projection.view.stale_identity()  # old session keys or projection version
            failures = read_failures(projection.view.db, each.name)
        finally:
            projection.view.db.close()
        row: dict[str, Any] = {
            "name": each.name,
            "position": position,
            "ledger_newest": newest,
            "behind": max(newest - position, 0),
            "needs_rebuild": pruned > position or stale,
            "failed_events": len(failures),
            "max_failures": projection.max_failures,
        }
        if with_failures:
            row["failures"] = [failure.as_json() for failure in failures]
        rows.append(row)
    return {"projections": rows}
