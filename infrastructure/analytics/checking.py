"""Helpers to test projections: feed the ledger in batches with restarts, and dump read models.

::

    run_in_batches(MyProjection, data_root, cuts=[3, 10])   # 3 runs: [0,3) [3,10) [10,...)
    assert dump(MyProjection, data_root) == expected

Each batch opens a fresh projection over the same read model (as a restarted
runner would), feeds it the ledger's notifications after its committed
position the way the library's runner does, and commits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from eventsourcing.persistence import Tracking
from sqlalchemy import text

from pentrace.infrastructure.analytics.api import AnalyticsProjection
from pentrace.infrastructure.analytics.runner import open_ledger, open_projection
from pentrace.infrastructure.ledger.opener import LedgerApplication, LedgerMapper

__all__ = ["dump", "run_in_batches"]


def run_in_batches(
    projection_class: type[AnalyticsProjection],
    data_root: Path,
    cuts: Sequence[int] = (),
    env: Mapping[str, str] | None = None,
) -> int:
    """Feed every ledger notification, restarting the projection at each cut; returns events."""
    ledger = open_ledger(data_root, env)
    try:
        notifications = list(ledger.select_notifications(start=None, limit=10**9))
    finally:
        ledger.close()
    mapper = LedgerMapper()
    edges = [0, *sorted({c for c in cuts if 0 < c < len(notifications)}), len(notifications)]
    fed = 0
    for low, high in pairwise(edges):
        projection = open_projection(projection_class, data_root, env)
        try:
            position = projection.view.max_tracking_id(projection_class.name) or 0
            for notification in notifications[low:high]:
                if notification.id <= position:
                    continue
                tracking = Tracking(LedgerApplication.name, notification.id)
                projection.process_event(mapper.to_domain_event(notification), tracking)
                fed += 1
            projection.commit()
        finally:
            projection.view.db.close()
    return fed


def dump(
    projection_class: type[AnalyticsProjection],
    data_root: Path,
    env: Mapping[str, str] | None = None,
) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every read-model table, sorted: compare two read models with ``==``."""
    projection = open_projection(projection_class, data_root, env)
    try:
        with projection.view.db.reading("dump a read model") as conn:
            return {
                table: sorted(
                    (tuple(row) for row in conn.execute(text(f"SELECT * FROM {table}"))),
                    key=repr,
                )
                for table in projection.tables
            }
    finally:
        projection.view.db.close()
