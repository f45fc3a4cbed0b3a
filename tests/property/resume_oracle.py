"""A literal, quadratic port of the reference resume algorithm, used as a test oracle.

Written straight from resume-semantics.md over decoded JSON values, with none of
the fold's shortcuts (moved lists, open-call index, filtered-prefix count), so
that a property test can check the fast fold against it.  Ids are assumed to be
strings or missing, which is what the strategies generate.
"""

from __future__ import annotations

from typing import Any

from pentrace.projections.summary import extract_summary, js_truthy

PARTIALS = ("partial_text", "partial_thinking", "partial_tool_call", "partial_tool_call_output")


def _payload(value: Any) -> dict[str, Any]:
    payload = value.get("payload") if isinstance(value, dict) else None
    return payload if isinstance(payload, dict) else {}


def _is_event(value: Any, etype: str | None = None) -> bool:
    if not (isinstance(value, dict) and value.get("type") == "event_msg"):
        return False
    return etype is None or _payload(value).get("type") == etype


def _is_model(value: Any) -> bool:
    ptype = _payload(value).get("type")
    is_model = isinstance(value, dict) and value.get("type") == "model_msg"
    return is_model and not (isinstance(ptype, str) and ptype in PARTIALS)


def _output_id(value: Any) -> Any:
    payload = _payload(value)
    return payload.get("tool_call_id") if payload.get("type") == "tool_call_output" else None


def _summary_source(values: list[Any]) -> str:
    text, current, in_request = "", "", False
    for value in values:
        if _is_event(value, "request_begin"):
            in_request, current = True, ""
        elif _is_event(value, "request_end"):
            if _payload(value).get("status") == "completed":
                text = current
            in_request = False
        elif in_request and _is_model(value):
            payload = _payload(value)
            is_text = payload.get("type") == "text" and payload.get("role") == "assistant"
            if is_text and js_truthy(payload.get("text")):
                current += payload["text"]
    return text


def oracle(values: list[Any]) -> dict[str, Any]:
    """The reference's result, with placeholders as ``("placeholder", id)``."""
    metas = [v for v in values if isinstance(v, dict) and v.get("type") == "session_meta"]
    usages = [_payload(v) for v in values if _is_event(v, "token_usage")]
    sessions = [u["session"] for u in usages if js_truthy(u.get("session"))]
    requests = [u["request"] for u in usages if js_truthy(u.get("request"))]
    result: dict[str, Any] = {
        "meta": metas[0] if metas else None,
        "session_tokens": sessions[-1]
        if sessions
        else {"cache_read": 0, "cache_write": 0, "output": 0, "total": 0},
        "last_request_total": (
            (requests[-1].get("total") if isinstance(requests[-1], dict) else None)
            if requests
            else 0
        ),
    }
    if values and _is_event(values[-1], "compaction_end"):
        closing = _payload(values[-1])
        if closing.get("status") == "completed":
            summary = None
            if closing.get("mode") == "summarize":
                summary = extract_summary(_summary_source(values))
            if summary != "":
                return {
                    **result,
                    "history": [],
                    "carry_over": [],
                    "context_closed": True,
                    "pending_summary": summary,
                    "last_request_total": 0,
                    "session_turns": 0,
                    "render_messages": [],
                    "dangling_compaction": None,
                }
    return {**result, **_replay(values)}


def _replay(values: list[Any]) -> dict[str, Any]:
    history: list[Any] = []
    pending: list[Any] = []
    snapshot: list[Any] = []
    outputs: list[Any] = []
    render: list[Any] = []
    committed: list[Any] = []
    answered: set[Any] = set()
    state = {"in_request": False, "in_compaction": False, "turns": 0}
    dangling: Any = None

    def eligible(items: list[Any]) -> list[Any]:
        return [
            m
            for m in items
            if _output_id(m) is None
            or (_output_id(m) in committed and _output_id(m) not in answered)
        ]

    def drop() -> None:
        nonlocal pending, snapshot, outputs
        keep = snapshot
        if state["in_compaction"]:
            keep = [m for m in snapshot if _output_id(m) is not None]
        pending = keep + pending
        snapshot, outputs = [], []
        state["in_request"] = False

    for value in values:
        payload = _payload(value)
        if isinstance(value, dict) and value.get("type") == "session_meta":
            continue
        if _is_event(value, "request_begin"):
            if state["in_request"]:
                drop()
            snapshot, pending = pending, []
            state["in_request"] = True
        elif _is_event(value, "request_end"):
            if payload.get("status") != "completed":
                drop()
                continue
            kept = eligible(snapshot)
            kept_ids = {_output_id(m) for m in kept} - {None}
            for call_id in committed:
                if call_id not in answered and call_id not in kept_ids:
                    history.append(("placeholder", call_id))
                    answered.add(call_id)
            history += kept + outputs
            answered |= kept_ids
            for message in outputs:
                out = _payload(message)
                is_call = out.get("type") == "tool_call" and out.get("stop_reason") == "completed"
                call_id = out.get("tool_call_id")
                if is_call and js_truthy(call_id) and call_id not in committed:
                    committed.append(call_id)
            state["turns"] += 0 if state["in_compaction"] else 1
            snapshot, outputs = [], []
            state["in_request"] = False
        elif _is_model(value):
            render.append(value)
            if payload.get("role") == "user":
                pending.append(value)
            elif state["in_request"]:
                outputs.append(value)
        elif _is_event(value, "compaction_begin"):
            state["in_compaction"], dangling = True, value
        elif _is_event(value, "compaction_end"):
            state["in_compaction"], dangling = False, None
        elif _is_event(value, "abort") and not value.get("origin"):
            render.append(value)
    if state["in_request"]:
        drop()
    pending = eligible(pending)
    paired = answered | ({_output_id(m) for m in pending} - {None})
    carry_over = pending + [("placeholder", c) for c in committed if c not in paired]
    begin = _payload(dangling)
    return {
        "history": history,
        "carry_over": carry_over,
        "context_closed": False,
        "pending_summary": None,
        "session_turns": state["turns"],
        "render_messages": render,
        "dangling_compaction": None
        if dangling is None
        else {k: begin[k] for k in ("reason", "mode") if k in begin},
    }
