"""The Session aggregate: commands that write a legal trace, one event per line.

State is small on purpose (counters, the open request, call ids awaiting
output, the shard index, an open compaction, a pending rotation); the
transcript lives only in the trace.  Commands take the time as ``now`` (the
domain never reads a clock), check legality, encode the line and trigger the
event; ``apply`` methods in :mod:`pentrace.domain.session_events` update the
state from the line's header, so rebuilding from a trace gives the same state.

Refusals raise a :class:`~pentrace.errors.IllegalCommandError` subclass naming
the session and the sequence (position) the write would have taken.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import msgspec
from eventsourcing.domain import BaseAggregate

from pentrace.domain import session_events as ev
from pentrace.domain.session_lines import encode_line, meta_copy_line, stamp
from pentrace.errors import (
    CompactionStateError,
    DuplicateToolOutputError,
    PartialMessageError,
    RequestAlreadyOpenError,
    RequestNotOpenError,
    SessionDeletedError,
    SessionNotStartedError,
    UnknownToolCallError,
    UsageError,
)

__all__ = ["Session"]

_EVENT: Final = "event_msg"
_MODEL: Final = "model_msg"


def _put(payload: dict[str, Any], **optional: Any) -> dict[str, Any]:
    """Add the optional fields that are set, in the order given; fidelity stays raw."""
    for key, value in optional.items():
        if value is None:
            continue
        payload[key] = msgspec.Raw(value) if key == "fidelity" else value
    return payload


class Session(BaseAggregate[str]):
    """One recorded agent session; its id is the session id, its version the record count."""

    def __init__(self) -> None:
        self.started: bool = False
        self.deleted: bool = False
        self.shard_index: int = 1
        self.requests: int = 0
        self.turns: int = 0
        self.open_request: bool = False
        # Calls of the open request awaiting output -> whether they stopped "completed".
        self.open_calls: dict[str, bool] = {}
        # Committed calls still unanswered (insertion-ordered, like replay's list).
        self.unanswered: dict[str, None] = {}
        # Calls answered since the last request_begin, to tell duplicates from unknown ids.
        self.answered_recent: set[str] = set()
        self.compaction: tuple[str, str] | None = None
        self.rotation_pending: bool = False
        self.meta_payload: bytes = b"null"
        self.tools_payload: bytes | None = None

    # ----------------------------------------------------------------- reading

    @property
    def records(self) -> int:
        """How many trace records (lines) the session has; the last one's position."""
        return self.version

    def awaiting_output(self) -> list[str]:
        """Call ids that may still get a tool_call_output: open-request calls, then committed."""
        return [*self.open_calls, *(c for c in self.unanswered if c not in self.open_calls)]

    # ---------------------------------------------------------------- creation

    @classmethod
    def start(
        cls,
        session_id: str,
        *,
        now: datetime,
        provider: str,
        model_id: str,
        model_context_window: int | str,
        system_prompt: str,
        agent_state: str,
        workspace: str,
        tools: Sequence[Mapping[str, Any]] = (),
        source: str | None = None,
    ) -> Session:
        """Start a session: writes ``session_meta`` then ``tool_list_ready``."""
        text, exact = stamp(now)
        meta = _put(
            {
                "session_id": session_id,
                "provider": provider,
                "model_id": model_id,
                "model_context_window": model_context_window,
                "system_prompt": system_prompt,
                "agent_state": agent_state,
                "workspace": workspace,
            },
            source=source,
        )
        line = encode_line("session_meta", meta, text)
        session = cls._create(ev.SessionStarted, id=session_id, timestamp=exact, line=line)
        tool_list = {"type": "tool_list_ready", "tools": list(tools)}
        session._emit(ev.ToolsListed, _EVENT, tool_list, now)
        return session

    # ---------------------------------------------------------------- commands

    def record_user_input(
        self,
        text: str,
        *,
        now: datetime,
        images: Sequence[str] = (),
        sender: str | None = None,
    ) -> None:
        """User input (written before ``request_begin``): a text message, then image_url ones."""
        payload = _put({"type": "text", "role": "user", "text": text}, sender=sender)
        self._write(ev.TextRecorded, payload, now)
        for url in images:
            self.record_image_url(url, now=now)

    def begin_request(self, *, now: datetime) -> None:
        """``request_begin``; refused while a request is open."""
        self._check_writable("request_begin")
        if self.open_request:
            raise RequestAlreadyOpenError(
                self._where("request_begin") + "expected no open request, found one open",
                hint="end the open request with end_request() first",
            )
        self._write(ev.RequestBegan, {"type": "request_begin"}, now, _EVENT)

    def end_request(
        self,
        status: str,
        *,
        now: datetime,
        error_message: str | None = None,
        attempt: int | None = None,
        retry_in_ms: int | None = None,
    ) -> None:
        """``request_end(status, ...)``; ``completed`` commits the request."""
        self._require_open_request("request_end")
        payload = _put(
            {"type": "request_end", "status": status},
            error_message=error_message,
            attempt=attempt,
            retry_in_ms=retry_in_ms,
        )
        self._write(ev.RequestEnded, payload, now, _EVENT)

    def record_text(
        self,
        text: str,
        *,
        now: datetime,
        role: str = "assistant",
        sender: str | None = None,
        fidelity: bytes | None = None,
        stop_reason: str | None = None,
    ) -> None:
        """A complete ``text`` message (``fidelity`` is raw JSON bytes, kept verbatim)."""
        payload = _put(
            {"type": "text", "role": role, "text": text},
            sender=sender,
            fidelity=fidelity,
            stop_reason=stop_reason,
        )
        self._write(ev.TextRecorded, payload, now)

    def record_thinking(
        self,
        thinking: str,
        *,
        now: datetime,
        fidelity: bytes | None = None,
        stop_reason: str | None = None,
    ) -> None:
        """A complete ``thinking`` message from the assistant."""
        payload = _put(
            {"type": "thinking", "role": "assistant", "thinking": thinking},
            fidelity=fidelity,
            stop_reason=stop_reason,
        )
        self._write(ev.ThinkingRecorded, payload, now)

    def record_inline_thinking(
        self,
        data: str,
        mime_type: str,
        *,
        now: datetime,
        fidelity: bytes | None = None,
        stop_reason: str | None = None,
    ) -> None:
        """An ``inline_thinking`` message (base64 ``data``)."""
        payload = _put(
            {"type": "inline_thinking", "data": data, "mime_type": mime_type},
            fidelity=fidelity,
            stop_reason=stop_reason,
        )
        self._write(ev.InlineThinkingRecorded, payload, now)

    def record_tool_call(
        self,
        name: str,
        arguments: str,
        tool_call_id: str,
        *,
        now: datetime,
        fidelity: bytes | None = None,
        stop_reason: str | None = None,
    ) -> None:
        """A ``tool_call`` (``arguments`` is a JSON string); needs an open request."""
        self._require_open_request("tool_call")
        payload = _put(
            {
                "type": "tool_call",
                "role": "assistant",
                "name": name,
                "arguments": arguments,
                "tool_call_id": tool_call_id,
            },
            fidelity=fidelity,
            stop_reason=stop_reason,
        )
        self._write(ev.ToolCallRecorded, payload, now)

    def record_tool_output(
        self,
        tool_call_id: str,
        output: str,
        *,
        now: datetime,
        images: Sequence[str] | None = None,
        stop_reason: str | None = None,
    ) -> None:
        """A ``tool_call_output`` for a call awaiting output (unknown or answered ids: refused)."""
        self._check_writable("tool_call_output")
        self._check_output_allowed(tool_call_id)
        payload = _put(
            {"type": "tool_call_output", "role": "user", "output": output},
            images=list(images) if images is not None else None,
        )
        payload["tool_call_id"] = tool_call_id
        _put(payload, stop_reason=stop_reason)
        self._write(ev.ToolCallOutputRecorded, payload, now)

    def record_image_url(self, image_url: str, *, now: datetime, role: str = "user") -> None:
        """An ``image_url`` message."""
        payload = {"type": "image_url", "role": role, "image_url": image_url}
        self._write(ev.ImageUrlRecorded, payload, now)

    def record_inline_data(
        self,
        data: str,
        mime_type: str,
        *,
        now: datetime,
        role: str = "user",
        fidelity: bytes | None = None,
    ) -> None:
        """An ``inline_data`` message (base64 ``data``)."""
        payload = _put(
            {"type": "inline_data", "role": role, "data": data, "mime_type": mime_type},
            fidelity=fidelity,
        )
        self._write(ev.InlineDataRecorded, payload, now)

    def record_model_message(self, payload: Mapping[str, Any], *, now: datetime) -> None:
        """Any complete model message given as a payload mapping; ``partial_*`` is refused."""
        ptype = payload.get("type")
        if isinstance(ptype, str) and ptype.startswith("partial_"):
            raise PartialMessageError(
                self._where(ptype) + "expected a complete model message, found a streaming "
                f"fragment {ptype!r}",
                hint="append the complete message once the stream segment ends",
            )
        if ptype == "tool_call":
            self._require_open_request("tool_call")
        if ptype == "tool_call_output":
            self._check_writable("tool_call_output")
            self._check_output_allowed(payload.get("tool_call_id"))
        self._write(_model_class(ptype), dict(payload), now)

    def decide_approval(self, tool_call_id: str, decision: str, *, now: datetime) -> None:
        """``approval_decision`` (allow, deny or forbidden) for a tool call."""
        payload = {"type": "approval_decision", "decision": decision, "tool_call_id": tool_call_id}
        self._write(ev.ApprovalDecided, payload, now, _EVENT)

    def abort(self, *, now: datetime, reason: str | None = None) -> None:
        """``abort`` with an optional reason."""
        self._write(ev.Aborted, _put({"type": "abort"}, reason=reason), now, _EVENT)

    def record_token_usage(
        self, session: Mapping[str, int], request: Mapping[str, int], *, now: datetime
    ) -> None:
        """``token_usage``: session totals and this request's counts."""
        payload = {"type": "token_usage", "session": dict(session), "request": dict(request)}
        self._write(ev.TokenUsageRecorded, payload, now, _EVENT)

    def begin_compaction(
        self, reason: str, mode: str, *, now: datetime, context: int, turns: int
    ) -> None:
        """``compaction_begin``; refused while another compaction is open."""
        if self.compaction is not None:
            raise CompactionStateError(
                self._where("compaction_begin") + "expected no open compaction, found one open",
                hint="end it with end_compaction() first",
            )
        payload = {
            "type": "compaction_begin",
            "reason": reason,
            "mode": mode,
            "context": context,
            "turns": turns,
        }
        self._write(ev.CompactionBegan, payload, now, _EVENT)

    def end_compaction(
        self,
        status: str,
        *,
        now: datetime,
        attempt: int | None = None,
        error_message: str | None = None,
    ) -> None:
        """``compaction_end`` with the open compaction's reason and mode."""
        if self.compaction is None:
            raise CompactionStateError(
                self._where("compaction_end") + "expected an open compaction, found none",
                hint="call begin_compaction() first",
            )
        reason, mode = self.compaction
        payload = _put(
            {"type": "compaction_end", "reason": reason, "mode": mode, "status": status},
            attempt=attempt,
            error_message=error_message,
        )
        self._write(ev.CompactionEnded, payload, now, _EVENT)

    def record_subagent(self, child_session_id: str, *, now: datetime) -> None:
        """``subagent``: the pointer to a child session's own trace."""
        payload = {"type": "subagent", "session_id": child_session_id}
        self._write(ev.SubagentSpawned, payload, now, _EVENT)

    def finish_goal(self, outcome: str, *, now: datetime, rounds: int, tokens_used: int) -> None:
        """``goal_finished`` with its outcome."""
        payload = {
            "type": "goal_finished",
            "outcome": outcome,
            "rounds": rounds,
            "tokens_used": tokens_used,
        }
        self._write(ev.GoalFinished, payload, now, _EVENT)

    def begin_mcp_connect(self, servers: Sequence[str], *, now: datetime) -> None:
        """``mcp_connect_begin`` for the named servers."""
        payload = {"type": "mcp_connect_begin", "servers": list(servers)}
        self._write(ev.McpConnectBegan, payload, now, _EVENT)

    def end_mcp_connect(
        self, status: str, results: Sequence[Mapping[str, Any]], *, now: datetime
    ) -> None:
        """``mcp_connect_end`` with one result per server."""
        payload = {"type": "mcp_connect_end", "status": status, "results": list(results)}
        self._write(ev.McpConnectEnded, payload, now, _EVENT)

    def mark_deleted(self) -> None:
        """Refuse every later write; deletion removes the trace, so it is not itself a line."""
        self.deleted = True

    # ------------------------------------------------------------- internals

    def _where(self, what: str) -> str:
        return f"session {self.id}: {what} at sequence {self.version + 1}: "

    def _check_writable(self, what: str) -> None:
        if self.deleted:
            raise SessionDeletedError(
                self._where(what) + "expected a live session, found it deleted",
                hint="start a new session; a deleted one takes no more records",
            )
        if not self.started:
            raise SessionNotStartedError(
                self._where(what) + "expected a session_meta record first, found none",
                hint="start the session with Session.start() (its trace has no session_meta)",
            )

    def _require_open_request(self, what: str) -> None:
        self._check_writable(what)
        if not self.open_request:
            raise RequestNotOpenError(
                self._where(what) + "expected an open request, found none",
                hint="call begin_request() first",
            )

    def _check_output_allowed(self, tool_call_id: Any) -> None:
        if tool_call_id in self.open_calls or tool_call_id in self.unanswered:
            return
        if tool_call_id in self.answered_recent:
            raise DuplicateToolOutputError(
                self._where("tool_call_output")
                + f"expected one output for call {tool_call_id!r}, found it already answered",
                hint="write each tool call's output once",
            )
        raise UnknownToolCallError(
            self._where("tool_call_output")
            + f"expected a call id awaiting output, found {tool_call_id!r}"
            + f" (awaiting: {len(self.awaiting_output())})",
            hint="record the tool_call first; outputs of failed requests are dropped",
        )

    def _write(
        self,
        cls: type[ev.SessionEvent],
        payload: Mapping[str, Any],
        now: datetime,
        kind: str = _MODEL,
    ) -> None:
        self._check_writable(str(payload.get("type")))
        if self.rotation_pending:
            self._rotate(now)
        self._emit(cls, kind, payload, now)

    def _emit(
        self, cls: type[ev.SessionEvent], kind: str, payload: Mapping[str, Any], now: datetime
    ) -> None:
        text, exact = stamp(now)
        self.trigger_event(cls, timestamp=exact, line=encode_line(kind, payload, text))

    def _rotate(self, now: datetime) -> None:
        """Open the next shard with copies of session_meta and tool_list_ready."""
        text, exact = stamp(now)
        meta = meta_copy_line("session_meta", self.meta_payload, text)
        self.trigger_event(ev.ShardOpened, timestamp=exact, line=meta)
        if self.tools_payload is not None:
            tools = meta_copy_line(_EVENT, self.tools_payload, text)
            self.trigger_event(ev.ToolsListed, timestamp=exact, line=tools)


def _model_class(ptype: Any) -> type[ev.SessionEvent]:
    if not isinstance(ptype, str):
        raise UsageError(
            f"expected a model message payload with a string 'type', found {type(ptype).__name__}",
            hint="pass a payload such as {'type': 'text', 'role': 'assistant', 'text': '...'}",
        )
    return ev.model_message_class(ptype)
