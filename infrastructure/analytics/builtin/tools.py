"""Built-in: tool calls by name - count, failures, aborts, timeouts, truncations, unanswered;
approval decisions (allow / deny / forbidden).  ``tool_minutes`` keeps the same counts per
UTC minute (the finer time buckets; version 2, ADR 0053) and per model: the session's
provider and model at the time of the call (version 3), as ``act_minutes`` does for requests.

A ``tool.result`` names its call only by ``tool_call_id``; the call's tool
name, minute and model come from ``tool_open`` (one row per call, marked answered
by its first output).  Unanswered calls are the rows never marked.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pentrace.infrastructure.analytics.api import handles
from pentrace.infrastructure.analytics.builtin import SessionModels
from pentrace.infrastructure.analytics.readmodel import Transaction
from pentrace.projections.analytics.events import AnalyticsEvent, is_truncated, tool_outcome

__all__ = ["ToolCalls"]


class ToolCalls(SessionModels):
    """Tool statistics per day, project, agent and tool; approvals per decision."""

    name = "tools"
    version = 3
    schema: ClassVar[tuple[str, ...]] = (
        "CREATE TABLE IF NOT EXISTS tool_daily (day VARCHAR(10), project VARCHAR(200), "
        "agent VARCHAR(200), tool VARCHAR(200), calls BIGINT, failures BIGINT, aborts BIGINT, "
        "timeouts BIGINT, truncations BIGINT, PRIMARY KEY (day, project, agent, tool))",
        "CREATE TABLE IF NOT EXISTS tool_open (session_id VARCHAR(600), call_id VARCHAR(200), "
        "day VARCHAR(10), project VARCHAR(200), agent VARCHAR(200), tool VARCHAR(200), "
        "answered BIGINT, minute VARCHAR(16), provider VARCHAR(200), model VARCHAR(200), "
        "PRIMARY KEY (session_id, call_id))",
        "CREATE TABLE IF NOT EXISTS tool_approvals (day VARCHAR(10), project VARCHAR(200), "
        "agent VARCHAR(200), decision VARCHAR(50), count BIGINT, "
        "PRIMARY KEY (day, project, agent, decision))",
        "CREATE TABLE IF NOT EXISTS tool_minutes (minute VARCHAR(16), project VARCHAR(200), "
        "agent VARCHAR(200), provider VARCHAR(200), model VARCHAR(200), tool VARCHAR(200), "
        "calls BIGINT, failures BIGINT, aborts BIGINT, timeouts BIGINT, truncations BIGINT, "
        "PRIMARY KEY (minute, project, agent, provider, model, tool))",
        "CREATE TABLE IF NOT EXISTS tool_sessions (session_id VARCHAR(600) PRIMARY KEY, "
        "provider TEXT, model TEXT)",
    )
    models_table = "tool_sessions"

    @handles("tool.called")
    def on_call(self, event: AnalyticsEvent, tx: Transaction) -> None:
        """Count the call and remember which tool its id belongs to."""
        call_id = event.correlation.get("tool_call_id")
        name = event.payload.get("name")
        tool = name if isinstance(name, str) else "unknown"
        where = {"project": event.scope.project_id or "", "agent": event.scope.agent_id or ""}
        provider, model = self.model_of(event.session, tx)
        tx.add("tool_daily", {"day": event.day, **where, "tool": tool}, calls=1)
        minute = {"minute": event.minute, **where, "provider": provider, "model": model}
        tx.add("tool_minutes", {**minute, "tool": tool}, calls=1)
        if isinstance(call_id, str):
            tx.put(
                "tool_open",
                {"session_id": event.session, "call_id": call_id},
                day=event.day,
                tool=tool,
                **minute,
            )

    @handles("tool.result")
    def on_result(self, event: AnalyticsEvent, tx: Transaction) -> None:
        """The first output of a call decides failure, abort, timeout and truncation."""
        call_id = event.correlation.get("tool_call_id")
        if not isinstance(call_id, str):
            return
        key = {"session_id": event.session, "call_id": call_id}
        call = tx.get("tool_open", key)
        if call is None or call["answered"]:
            return
        tx.put("tool_open", key, answered=1)
        outcome = tool_outcome(event.payload.get("stop_reason"))
        counts: dict[str, Any] = {}
        if outcome is not None:
            counts["failures"] = 1
            if outcome != "failures":
                counts[outcome] = 1
        if is_truncated(event.payload.get("output")):
            counts["truncations"] = 1
        if counts:
            where = {k: call[k] for k in ("project", "agent", "tool")}
            tx.add("tool_daily", {"day": call["day"], **where}, **counts)
            models = {k: call[k] for k in ("minute", "provider", "model")}
            tx.add("tool_minutes", {**models, **where}, **counts)

    @handles("permission.replied")
    def on_approval(self, event: AnalyticsEvent, tx: Transaction) -> None:
        """Count the decision (allow, deny, forbidden; anything else as itself)."""
        decision = event.payload.get("decision")
        key = {
            "day": event.day,
            "project": event.scope.project_id or "",
            "agent": event.scope.agent_id or "",
            "decision": decision if isinstance(decision, str) else "unknown",
        }
        tx.add("tool_approvals", key, count=1)
