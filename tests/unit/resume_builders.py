"""Small builders for hand-written PenguinHarness traces (resume tests)."""

from __future__ import annotations

import itertools
from typing import Any

from pentrace.domain.records import TraceRecord
from pentrace.projections.resume import ResumeResult
from pentrace.projections.synthetic import INTERRUPTED_OUTPUT, SyntheticRecord

Envelope = dict[str, Any]
ZERO_TOKENS = {"cache_read": 0, "cache_write": 0, "output": 0, "total": 0}

_clock = itertools.count(1)


def _stamp() -> str:
    # Distinct timestamps let a placeholder show whose timestamp it borrowed.
    tick = next(_clock)
    return f"2026-11-29T10:{tick // 60 % 60:02d}:{tick % 60:02d}.000Z"


def envelope(kind: str, payload: Any = None, *, origin: Any = None, **extra: Any) -> Envelope:
    value: Envelope = {"timestamp": _stamp(), "type": kind}
    if payload is not None:
        value["payload"] = payload
    if origin is not None:
        value["origin"] = origin
    value.update(extra)
    return value


def meta(session_id: str = "session-2026-11-29-10-00-00-0badcafe") -> Envelope:
    return envelope("session_meta", {"session_id": session_id, "provider": "p", "model_id": "m"})


def model(ptype: str, role: str, origin: Any = None, **fields: Any) -> Envelope:
    return envelope("model_msg", {"type": ptype, "role": role, **fields}, origin=origin)


def user(text: str, origin: Any = None) -> Envelope:
    return model("text", "user", origin=origin, text=text)


def say(text: Any) -> Envelope:
    return model("text", "assistant", text=text, stop_reason="completed")


def think(text: str) -> Envelope:
    return model("thinking", "assistant", thinking=text, stop_reason="completed")


def call(call_id: Any, stop_reason: str | None = "completed") -> Envelope:
    fields: dict[str, Any] = {"name": "exec_command", "arguments": "{}", "tool_call_id": call_id}
    if stop_reason is not None:
        fields["stop_reason"] = stop_reason
    return model("tool_call", "assistant", **fields)


def output(call_id: Any = None, text: str = "done", role: str = "user") -> Envelope:
    fields: dict[str, Any] = {"output": text}
    if call_id is not None:
        fields["tool_call_id"] = call_id
    return model("tool_call_output", role, **fields)


def event(etype: str, origin: Any = None, **fields: Any) -> Envelope:
    return envelope("event_msg", {"type": etype, **fields}, origin=origin)


def begin(origin: Any = None) -> Envelope:
    return event("request_begin", origin=origin)


def end(status: Any = "completed", origin: Any = None) -> Envelope:
    if status is None:
        return event("request_end", origin=origin)
    return event("request_end", origin=origin, status=status)


def usage(session: Any = None, request: Any = None, origin: Any = None) -> Envelope:
    return event("token_usage", origin=origin, session=session, request=request)


def tokens(total: int) -> dict[str, int]:
    return {"cache_read": 1, "cache_write": 2, "output": 3, "total": total}


def compaction_begin(**fields: Any) -> Envelope:
    return event("compaction_begin", **fields)


def compaction_end(status: str = "completed", mode: str | None = "summarize") -> Envelope:
    fields: dict[str, Any] = {"reason": "context", "status": status}
    if mode is not None:
        fields["mode"] = mode
    return event("compaction_end", **fields)


def placeholder(call_envelope: Envelope) -> tuple[str, Envelope]:
    """An expected interrupted-tool placeholder answering ``call_envelope``."""
    payload = {
        "type": "tool_call_output",
        "role": "user",
        "output": INTERRUPTED_OUTPUT,
        "tool_call_id": call_envelope["payload"]["tool_call_id"],
        "stop_reason": "aborted",
    }
    stamp = call_envelope["timestamp"]
    return ("synthetic", {"timestamp": stamp, "type": "model_msg", "payload": payload})


def summary_text(summary: str, closing: Envelope) -> tuple[str, Envelope]:
    """An expected pending ``[context_summary]`` message for a closure at ``closing``."""
    text = f"[context_summary]\n{summary}\n[/context_summary]"
    payload = {"type": "text", "role": "user", "text": text, "stop_reason": "completed"}
    return (
        "synthetic",
        {"timestamp": closing["timestamp"], "type": "model_msg", "payload": payload},
    )


def records(trace: list[Any]) -> list[TraceRecord]:
    return [TraceRecord.from_value(value, line) for line, value in enumerate(trace, 1)]


def shown(record: TraceRecord) -> Any:
    """A record as the tests compare it: trace values as-is, synthesized ones tagged."""
    if isinstance(record, SyntheticRecord):
        return ("synthetic", record.value())
    return record.value()


def observed(result: ResumeResult) -> dict[str, Any]:
    """Every field of a result, in comparable form."""
    return {
        "history": [shown(r) for r in result.history],
        "carry_over": [shown(r) for r in result.carry_over],
        "context_closed": result.context_closed,
        "pending_summary": None
        if result.pending_summary is None
        else shown(result.pending_summary),
        "session_tokens": result.session_tokens,
        "last_request_total": result.last_request_total,
        "session_turns": result.session_turns,
        "render_messages": [shown(r) for r in result.render_messages],
        "meta": None if result.meta is None else result.meta.value(),
        "dangling_compaction": result.dangling_compaction,
    }
