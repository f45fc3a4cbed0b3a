"""Built-in: requests by status and retries, compactions, goals, sessions, subagent trees.

* ``act_requests``: ``request_end`` per day/project/agent/status, with retries
  (an ``attempt`` above 1).
* ``act_minutes``: the same per UTC minute, with the session's provider and
  model at the request's end (requests and success rate per model and in
  finer time buckets; version 2, ADR 0053).
* ``act_compactions``: one row per compaction (mode, reason, context size
  before, outcome; ``open`` until it ends).
* ``act_goals``: ``goal_finished`` outcomes.
* ``act_sessions``: start/end time, requests, turns, model (as
  :mod:`pentrace.projections.session_summary` defines them), model switches
  and the parent session.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pentrace.domain.runtime import EVENT_TYPES, MODEL_MESSAGE_TYPES
from pentrace.infrastructure.analytics.api import AnalyticsProjection, handles
from pentrace.infrastructure.analytics.readmodel import Transaction
from pentrace.projections.analytics.events import AnalyticsEvent, bigint, request_bucket

__all__ = ["EVERY_TYPE", "SessionActivity"]

# Every type a trace record maps to (``docs/runtime-events.md``).
EVERY_TYPE: tuple[str, ...] = tuple(
    dict.fromkeys(
        (
            "session.created",
            "session.updated",
            *MODEL_MESSAGE_TYPES.values(),
            *EVENT_TYPES.values(),
            "run.completed",
            "run.aborted",
            "run.error",
            "session.compacted",
            "session.compaction.error",
            "trace.event",
            "trace.record",
        )
    )
)


def _where(event: AnalyticsEvent) -> dict[str, Any]:
    return {
        "day": event.day,
        "project": event.scope.project_id or "",
        "agent": event.scope.agent_id or "",
    }


def _text(value: Any, default: str = "unknown") -> str:
    return value if isinstance(value, str) else default


class SessionActivity(AnalyticsProjection):
    """Requests, compactions, goals and the session table (durations, turns, trees)."""

    name = "sessions"
    version = 2
    schema: ClassVar[tuple[str, ...]] = (
        "CREATE TABLE IF NOT EXISTS act_requests (day VARCHAR(10), project VARCHAR(200), "
        "agent VARCHAR(200), status VARCHAR(50), count BIGINT, retries BIGINT, "
        "PRIMARY KEY (day, project, agent, status))",
        "CREATE TABLE IF NOT EXISTS act_minutes (minute VARCHAR(16), project VARCHAR(200), "
        "agent VARCHAR(200), provider VARCHAR(200), model VARCHAR(200), status VARCHAR(50), "
        "count BIGINT, retries BIGINT, "
        "PRIMARY KEY (minute, project, agent, provider, model, status))",
        "CREATE TABLE IF NOT EXISTS act_compactions (session_id VARCHAR(600), sequence BIGINT, "
        "day VARCHAR(10), mode VARCHAR(50), reason VARCHAR(50), context BIGINT, "
        "outcome VARCHAR(50), PRIMARY KEY (session_id, sequence))",
        "CREATE TABLE IF NOT EXISTS act_goals (day VARCHAR(10), project VARCHAR(200), "
        "agent VARCHAR(200), outcome VARCHAR(50), count BIGINT, "
        "PRIMARY KEY (day, project, agent, outcome))",
        "CREATE TABLE IF NOT EXISTS act_sessions (session_id VARCHAR(600) PRIMARY KEY, "
        "project VARCHAR(200), agent VARCHAR(200), model VARCHAR(200), "
        "provider VARCHAR(200), parent VARCHAR(200), started_ms BIGINT, ended_ms BIGINT, "
        "turns BIGINT, requests BIGINT, model_switches BIGINT, open_compaction BIGINT, "
        "current_model VARCHAR(200), bare_id VARCHAR(200), current_provider VARCHAR(200))",
        # A subagent pointer names the child's session id only; the child may run under
        # another agent, so the tree query finds its owner (queries.tree).
        "CREATE TABLE IF NOT EXISTS act_subagents (parent VARCHAR(600), child_id VARCHAR(200), "
        "project VARCHAR(200), agent VARCHAR(200), PRIMARY KEY (parent, child_id))",
    )

    @handles(*EVERY_TYPE)
    def on_any(self, event: AnalyticsEvent, tx: Transaction) -> None:
        """Every record of a session stretches its time span (``session_numbers``: the
        duration runs from the first record's timestamp to the last's)."""
        if not event.time:
            return  # a record without a readable timestamp
        key = {"session_id": event.session}
        tx.least("act_sessions", key, started_ms=event.time)
        tx.greatest("act_sessions", key, ended_ms=event.time)

    @handles("run.started")
    def on_request_begin(self, event: AnalyticsEvent, tx: Transaction) -> None:
        """A request is counted when it begins, however it ends (``session_numbers``)."""
        tx.add("act_sessions", {"session_id": event.session}, requests=1)

    @handles("session.created", "session.updated")
    def on_meta(self, event: AnalyticsEvent, tx: Transaction) -> None:
        """Record project, agent and the session's model (its first session_meta's, as
        ``session_numbers`` defines it); a different model later is a model switch."""
        key = {"session_id": event.session}
        model = _text(event.payload.get("model_id"))
        provider = _text(event.payload.get("provider"))
        row = tx.get("act_sessions", key)
        if row is not None and row.get("current_model") not in (None, model):
            tx.add("act_sessions", key, model_switches=1)
        if row is None or row.get("current_model") is None:
            tx.put(
                "act_sessions",
                key,
                bare_id=event.session_id,
                project=event.scope.project_id or "",
                agent=event.scope.agent_id or "",
                model=model,
                provider=provider,
            )
        tx.put("act_sessions", key, current_model=model, current_provider=provider)

    @handles("run.completed", "run.aborted", "run.error")
    def on_request_end(self, event: AnalyticsEvent, tx: Transaction) -> None:
        """Count the request by status (per day, and per minute with the session's model at
        the time); a completed one outside a compaction is a turn."""
        attempt = event.payload.get("attempt")
        retried = isinstance(attempt, int) and not isinstance(attempt, bool) and attempt > 1
        status = request_bucket(event.payload.get("status"))
        key = {"session_id": event.session}
        row = tx.get("act_sessions", key)
        where = _where(event)
        counts = {"count": 1, "retries": int(retried)}
        tx.add("act_requests", {**where, "status": status}, **counts)
        minute = {
            "minute": event.minute,
            "project": where["project"],
            "agent": where["agent"],
            "provider": _text((row or {}).get("current_provider")),
            "model": _text((row or {}).get("current_model")),
            "status": status,
        }
        tx.add("act_minutes", minute, **counts)
        if status == "completed" and (row is None or not row.get("open_compaction")):
            tx.add("act_sessions", key, turns=1)

    @handles("session.compaction.started")
    def on_compaction_begin(self, event: AnalyticsEvent, tx: Transaction) -> None:
        """Open a compaction row with its mode, reason and context size before."""
        context = event.payload.get("context")
        tx.put(
            "act_compactions",
            {"session_id": event.session, "sequence": event.sequence},
            day=event.day,
            mode=_text(event.payload.get("mode")),
            reason=_text(event.payload.get("reason")),
            context=bigint(context),
            outcome="open",
        )
        tx.put("act_sessions", {"session_id": event.session}, open_compaction=event.sequence)

    @handles("session.compacted", "session.compaction.error")
    def on_compaction_end(self, event: AnalyticsEvent, tx: Transaction) -> None:
        """Close the open compaction with its outcome (its status)."""
        key = {"session_id": event.session}
        row = tx.get("act_sessions", key)
        begin = row.get("open_compaction") if row else None
        sequence = begin if begin else event.sequence
        tx.put(
            "act_compactions",
            {"session_id": event.session, "sequence": sequence},
            day=event.day,
            outcome=_text(event.payload.get("status")),
        )
        tx.put("act_sessions", key, open_compaction=0)

    @handles("task.finished")
    def on_goal(self, event: AnalyticsEvent, tx: Transaction) -> None:
        """Count the goal's outcome."""
        outcome = _text(event.payload.get("outcome"))
        tx.add("act_goals", {**_where(event), "outcome": outcome}, count=1)

    @handles("session.subagent.started")
    def on_subagent(self, event: AnalyticsEvent, tx: Transaction) -> None:
        """Link the child session to its parent."""
        child = event.correlation.get("child_session_id")
        if isinstance(child, str) and child:
            tx.put(
                "act_subagents",
                {"parent": event.session, "child_id": child},
                project=event.scope.project_id or "",
                agent=event.scope.agent_id or "",
            )
