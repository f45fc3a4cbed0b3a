"""The simple model the resume-legality machine checks against.

It reads the lines that survived on disk (legal lines written by the Session
aggregate, plus torn fragments) and says, round by round, what resume must
give: which rounds committed, what each contributes to history, where the
interrupted-tool placeholders go, what is carried over, and the counters.  It
is written from the PenguinHarness rules for *legal* traces only (unique call
ids, ``stop_reason: completed`` on every call, no origin tags), so it stays
short; the fold under test handles every other input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pentrace.domain.records import TraceRecord
from pentrace.projections.synthetic import INTERRUPTED_OUTPUT, SyntheticRecord

Message = bytes | tuple[str, str]  # a line as written, or ("placeholder", call_id)
ZERO_TOKENS = {"cache_read": 0, "cache_write": 0, "output": 0, "total": 0}


@dataclass
class Expected:
    """What resuming the surviving lines must give."""

    history: list[Message] = field(default_factory=list)
    carry_over: list[Message] = field(default_factory=list)
    closed: bool = False
    summary: str | None = None
    tokens: Any = None
    last_request_total: Any = 0
    turns: int = 0
    dangling: dict[str, Any] | None = None


def surviving_records(data: bytes) -> list[tuple[bytes, dict[str, Any]]]:
    """The complete records in ``data``; torn fragments (never valid JSON) are not records."""
    records = []
    for piece in data.split(b"\n"):
        if not piece:
            continue
        try:
            value = json.loads(piece)
        except ValueError:
            continue
        records.append((piece, value))
    return records


@dataclass
class _Input:
    line: bytes
    call_id: str | None  # set for tool outputs


@dataclass
class _Round:
    inputs: list[_Input]
    outputs: list[bytes] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)


def _summary(texts: list[str]) -> str:
    text = "".join(texts)
    start, end = text.find("[summary]"), text.find("[/summary]")
    return text[start + len("[summary]") : end].strip() if 0 <= start < end else ""


def expected_resume(data: bytes) -> Expected:
    """Resume the latest shard's bytes by the round rules (see the module docstring)."""
    records = surviving_records(data)
    expected = Expected()
    waiting: list[_Input] = []
    current: _Round | None = None
    open_calls: list[str] = []  # committed, not yet answered, in commit order
    in_compaction = False
    last_completed_texts: list[str] = []
    usage: list[dict[str, Any]] = []

    def drop() -> None:
        nonlocal current, waiting
        assert current is not None
        kept = [i for i in current.inputs if i.call_id is not None or not in_compaction]
        waiting = kept + waiting
        current = None

    for line, value in records:
        payload = value.get("payload", {})
        kind, ptype = value.get("type"), payload.get("type")
        if kind == "model_msg" and payload.get("role") == "user":
            call_id = payload.get("tool_call_id") if ptype == "tool_call_output" else None
            waiting.append(_Input(line, call_id))
        elif kind == "model_msg" and current is not None:
            current.outputs.append(line)
            if ptype == "tool_call":
                current.calls.append(payload["tool_call_id"])
        elif ptype == "request_begin":
            if current is not None:
                drop()
            current, waiting = _Round(waiting), []
        elif ptype == "request_end":
            # The reference counts a stray completed end as a turn; a legal session never
            # writes one (its request_begin is always earlier in the same shard).
            assert current is not None, f"request_end without its request_begin: {line!r}"
            if payload.get("status") != "completed":
                drop()
                continue
            answers = {i.call_id for i in current.inputs if i.call_id in open_calls}
            for call_id in open_calls:
                if call_id not in answers:
                    expected.history.append(("placeholder", call_id))
            expected.history += [i.line for i in current.inputs if i.call_id in (None, *answers)]
            expected.history += current.outputs
            open_calls = list(current.calls)
            expected.turns += 0 if in_compaction else 1
            last_completed_texts = [
                json.loads(out)["payload"].get("text", "")
                for out in current.outputs
                if json.loads(out)["payload"].get("role") == "assistant"
            ]
            current = None
        elif ptype == "compaction_begin":
            in_compaction = True
            expected.dangling = {"reason": payload["reason"], "mode": payload["mode"]}
        elif ptype == "compaction_end":
            in_compaction = False
            expected.dangling = None
        elif ptype == "token_usage":
            usage.append(payload)

    expected.tokens = usage[-1]["session"] if usage else dict(ZERO_TOKENS)
    expected.last_request_total = usage[-1]["request"]["total"] if usage else 0
    last = records[-1][1] if records else {}
    closing = last.get("payload", {})
    if closing.get("type") == "compaction_end" and closing.get("status") == "completed":
        summary = _summary(last_completed_texts) if closing.get("mode") == "summarize" else None
        if summary != "":
            return Expected(closed=True, summary=summary, tokens=expected.tokens, turns=0)
    if current is not None:
        drop()
    answers = {i.call_id for i in waiting if i.call_id in open_calls}
    expected.carry_over = [i.line for i in waiting if i.call_id in (None, *answers)]
    expected.carry_over += [("placeholder", c) for c in open_calls if c not in answers]
    return expected


def shown_messages(messages: list[TraceRecord]) -> list[Message]:
    """Messages as the model writes them: raw lines, placeholders as ('placeholder', id)."""
    shown: list[Message] = []
    for message in messages:
        if isinstance(message, SyntheticRecord):
            assert message.payload()["output"] == INTERRUPTED_OUTPUT
            shown.append(("placeholder", message.tool_call_id))
        else:
            shown.append(message.raw)
    return shown


def check_pairing(messages: list[TraceRecord]) -> None:
    """Invariant 2: each call answered exactly once, after it; no output without its call."""
    called: set[Any] = set()
    answered: set[Any] = set()
    for message in messages:
        if message.ptype == "tool_call":
            assert message.tool_call_id not in called, f"call {message.tool_call_id} twice"
            called.add(message.tool_call_id)
        elif message.ptype == "tool_call_output":
            call_id = message.tool_call_id
            assert call_id in called, f"orphan output for {call_id}"
            assert call_id not in answered, f"call {call_id} answered twice"
            answered.add(call_id)
    assert called == answered, f"unanswered calls {sorted(called - answered)}"
