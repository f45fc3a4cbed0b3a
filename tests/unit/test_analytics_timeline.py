"""The report's timeline fold: spans pair up, tokens go to their request, open spans end last."""

from __future__ import annotations

from typing import Any

from pentrace.projections.analytics.events import AnalyticsEvent
from pentrace.projections.analytics.timeline import build_timeline


def event(
    kind: str, time: int, payload: dict[str, Any] | None = None, **corr: str
) -> AnalyticsEvent:
    return AnalyticsEvent(
        id=f"e{time}", type=kind, time=time, payload=payload or {}, correlation=dict(corr)
    )


def test_requests_tools_approvals_compactions_and_tokens_are_folded_in_order() -> None:
    timeline = build_timeline(
        "s",
        [
            event("session.created", 0, {"model_id": "m1"}),
            event("run.started", 10),
            event("tool.called", 11, {"name": "sh"}, tool_call_id="c1"),
            event("permission.replied", 12, {"decision": "deny"}, tool_call_id="c1"),
            event("tool.result", 13, {"stop_reason": "timeout"}, tool_call_id="c1"),
            event("run.error", 20, {"status": "failed"}),
            event("token.usage.updated", 21, {"request": {"total": 50, "output": 5}}),
            event("session.compaction.started", 30, {"mode": "summarize", "context": 900}),
            event("session.compacted", 40, {"status": "completed"}),
            event("session.updated", 41, {"model_id": "m2"}),
            event("run.started", 50),
            event("tool.called", 51, {"name": "read"}, tool_call_id="c2"),
        ],
    )
    first, second = timeline.requests
    assert (first.status, first.end_ms, first.tokens) == ("failed", 20, 50)
    assert (second.status, second.end_ms) == ("open", 51)  # never ended: ends at the last event
    assert [(t.label, t.status) for t in timeline.tools] == [("sh", "timeouts"), ("read", "open")]
    assert [(m.kind, m.label) for m in timeline.markers] == [("approval", "deny")]
    [compaction] = timeline.compactions
    assert (compaction.status, compaction.detail["context"]) == ("completed", 900)
    # The session's model is its first session_meta's, as `sessions list` names it.
    assert timeline.model == "m1"
    assert timeline.tokens == 50
    assert (timeline.start_ms, timeline.end_ms) == (0, 51)
