"""A session's timeline for the HTML report: requests, tool calls, approvals, compactions, tokens.

A pure fold over the session's redacted :class:`AnalyticsEvent` objects, in
trace order.  Spans that never closed (a crash mid-request) end at the last
event's time with the status ``open``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pentrace.projections.analytics.events import (
    AnalyticsEvent,
    request_bucket,
    token_delta,
    tool_outcome,
)
from pentrace.projections.session_summary import model_name

__all__ = ["Marker", "Span", "Timeline", "build_timeline"]


@dataclass
class Span:
    """Something with a start and an end: a request, a tool call or a compaction."""

    kind: str
    label: str
    start_ms: int
    end_ms: int | None = None
    status: str = "open"
    tokens: int = 0
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class Marker:
    """A point in time: an approval decision, a subagent start, a goal."""

    kind: str
    label: str
    time_ms: int


@dataclass
class Timeline:
    """The report's model: spans by kind, markers, and the session's time bounds."""

    session_id: str
    model: str = "unknown"
    tokens: int = 0
    start_ms: int = 0
    end_ms: int = 0
    requests: list[Span] = field(default_factory=list)
    tools: list[Span] = field(default_factory=list)
    compactions: list[Span] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)


def _text(value: Any, default: str = "?") -> str:
    return value if isinstance(value, str) else default


def build_timeline(session_id: str, events: Iterable[AnalyticsEvent]) -> Timeline:
    """Fold a session's events (trace order) into a :class:`Timeline`."""
    timeline = Timeline(session_id)
    request: Span | None = None
    last_request: Span | None = None
    calls: dict[str, Span] = {}
    compaction: Span | None = None
    first = True
    meta_seen = False
    for event in events:
        now, kind, payload = event.time, event.type, event.payload
        if first:
            timeline.start_ms, first = now, False
        timeline.end_ms = max(timeline.end_ms, now)
        if kind == "session.created" or (kind == "session.updated" and not meta_seen):
            # The session's model is its first session_meta's (session_numbers.model_name).
            named = model_name(payload.get("provider"), payload.get("model_id"))
            timeline.model, meta_seen = named or timeline.model, True
        elif kind == "run.started":
            request = Span("request", f"request {len(timeline.requests) + 1}", now)
            timeline.requests.append(request)
        elif kind in ("run.completed", "run.aborted", "run.error") and request is not None:
            request.end_ms, request.status = now, request_bucket(payload.get("status"))
            last_request, request = request, None
        elif kind == "tool.called":
            span = Span("tool", _text(payload.get("name")), now)
            timeline.tools.append(span)
            calls[_text(event.correlation.get("tool_call_id"), "")] = span
        elif kind == "tool.result":
            answered = calls.pop(_text(event.correlation.get("tool_call_id"), ""), None)
            if answered is not None:
                outcome = tool_outcome(payload.get("stop_reason"))
                answered.end_ms = now
                answered.status = "completed" if outcome is None else outcome
        elif kind == "permission.replied":
            timeline.markers.append(Marker("approval", _text(payload.get("decision")), now))
        elif kind == "session.compaction.started":
            context = payload.get("context")
            compaction = Span("compaction", _text(payload.get("mode")), now)
            compaction.detail = {"reason": payload.get("reason"), "context": context}
            timeline.compactions.append(compaction)
        elif kind in ("session.compacted", "session.compaction.error") and compaction is not None:
            compaction.end_ms, compaction.status = now, _text(payload.get("status"))
            compaction = None
        elif kind == "token.usage.updated":
            delta = token_delta(payload)
            target = request or last_request
            if delta is not None:
                # The session total counts every record (session_numbers); a request's
                # bar shows what was reported while it ran, or right after it ended.
                timeline.tokens += delta[4]
                if target is not None:
                    target.tokens += delta[4]
        elif kind == "session.subagent.started":
            child = _text(event.correlation.get("child_session_id"))
            timeline.markers.append(Marker("subagent", child, now))
        elif kind == "task.finished":
            timeline.markers.append(Marker("goal", _text(payload.get("outcome")), now))
    for span in (*timeline.requests, *timeline.tools, *timeline.compactions):
        if span.end_ms is None:
            span.end_ms = timeline.end_ms
    return timeline
