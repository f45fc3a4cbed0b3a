"""The tutorial's projection (docs/projections.md): tool-call failures per tool per day.

Run it with ``pentrace projections run \
pentrace.infrastructure.analytics.examples:ToolFailuresPerDay``.
"""

from __future__ import annotations

from pentrace.infrastructure.analytics import (
    AnalyticsEvent,
    AnalyticsProjection,
    Transaction,
    handles,
)

__all__ = ["ToolFailuresPerDay"]


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
