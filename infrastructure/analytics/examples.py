"""The tutorial's projection (docs/projections.md): tool-call failures per tool per day; and
the helpers to test a projection (:func:`run_in_batches`, :func:`dump`).

Run it with ``pentrace projections run \
pentrace.infrastructure.analytics.examples:ToolFailuresPerDay``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from eventsourcing.persistence import Tracking
from sqlalchemy import text

from pentrace.infrastructure.analytics import (
    AnalyticsEvent,
    AnalyticsProjection,
    Transaction,
    handles,
)
from pentrace.infrastructure.analytics.runner import open_ledger, open_projection
from pentrace.infrastructure.ledger.opener import LedgerApplication, LedgerMapper

__all__ = ["ToolFailuresPerDay", "dump", "run_in_batches"]


class ToolFailuresPerDay(AnalyticsProjection):
    """Failed tool calls per tool name and UTC day, in the table ``tf_daily``."""

    name = "tool_failures_per_day"
    schema = (
        "CREATE TABLE IF NOT EXISTS tf_calls (session_id VARCHAR(600), call_id VARCHAR(200), "
        "tool VARCHAR(200), PRIMARY KEY (session_id, call_id))",
        "CREATE TABLE IF NOT EXISTS tf_daily (tool VARCHAR(200), day VARCHAR(10), "
        "failures BIGINT, PRIMARY KEY (tool, day))",
    )

    @handles("tool.called")
    def on_call(self, event: AnalyticsEvent, tx: Transaction) -> None:
        """Remember which tool a call id belongs to."""
        key = {"session_id": event.session, "call_id": event.correlation["tool_call_id"]}
        tx.put("tf_calls", key, tool=event.payload["name"])

    @handles("tool.result")
    def on_result(self, event: AnalyticsEvent, tx: Transaction) -> None:
        """A result that states a stop_reason other than completed is a failure."""
        if event.payload.get("stop_reason") in (None, "completed"):
            return
        key = {"session_id": event.session, "call_id": event.correlation["tool_call_id"]}
        call = tx.get("tf_calls", key)
        tx.add("tf_daily", {"tool": call["tool"] if call else "?", "day": event.day}, failures=1)


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
