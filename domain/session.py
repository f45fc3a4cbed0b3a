"""The Session aggregate: commands that write a legal trace, one event per line.

Commands take the time as ``now`` (the domain never reads a clock), check
legality, build the OmniMessage payload and trigger the event whose ``line``
is the encoded envelope; :class:`~pentrace.domain.session_state.SessionState`
holds the small state and the write plumbing.

Refusals raise a :class:`~pentrace.errors.IllegalCommandError` subclass naming
the session and the sequence (position) the write would have taken.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Final, get_args

import msgspec

from pentrace.domain import omnimessage as om
from pentrace.domain import session_events as ev
from pentrace.domain.session_lines import (
    Fidelity,
    ToolSpec,
    fidelity_raw,
    optional,
    stamp,
    token_counts,
    tool_definition,
)
from pentrace.domain.session_state import SessionState, project_session
from pentrace.errors import (
    CompactionStateError,
    PartialMessageError,
    RequestAlreadyOpenError,
    UnknownStatusError,
)

__all__ = ["Fidelity", "Session", "ToolSpec", "project_session"]

_COMPLETED: Final = "completed"
_REQUEST_STATUSES: Final = get_args(om.StopReason)
_encode: Final = msgspec.json.Encoder().encode


class Session(SessionState):
    """One recorded agent session; its id is the session id, its version the record count."""

    @classmethod
    def start(
        cls,
        session_id: str,
        *,
        now: datetime,
        provider: str,
        model_id: str,
        model_context_window: float | str,
        system_prompt: str,
        agent_state: str,
        workspace: str,
        tools: Sequence[ToolSpec] = (),
        source: str | None = None,
    ) -> Session:
        """Start a session: writes ``session_meta`` then ``tool_list_ready``."""
        meta = om.SessionMeta(
            session_id=session_id,
            provider=provider,
            model_id=model_id,
            model_context_window=model_context_window,
            system_prompt=system_prompt,
            agent_state=agent_state,
            workspace=workspace,
            source=optional(source),
        )
        text, exact = stamp(now)
        line = _encode(om.Envelope(timestamp=text, type="session_meta", payload=meta))
        session = cls._create(ev.SessionStarted, id=session_id, timestamp=exact, line=line)
        tool_list = om.ToolListReady(tools=tuple(tool_definition(t) for t in tools))
        session._write(ev.ToolsListed, tool_list, now)
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
        self._write(ev.TextRecorded, om.Text(role="user", text=text, sender=optional(sender)), now)
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
        self._write(ev.RequestBegan, om.RequestBegin(), now)

    def end_request(
        self,
        status: str,
        *,
        now: datetime,
        error_message: str | None = None,
        attempt: int | None = None,
        retry_in_ms: int | None = None,
    ) -> None:
        """``request_end(status, ...)``; ``completed`` commits the request.

        ``status`` must be a StopReason value (readers treat any other as a failure).
        """
        self._require_open_request("request_end")
        if status not in _REQUEST_STATUSES:
            raise UnknownStatusError(
                self._where("request_end")
                + f"expected a status in {'|'.join(_REQUEST_STATUSES)}, found {str(status)[:40]!r}",
                hint="pass one of the StopReason values, e.g. 'completed' or 'failed'",
            )
        payload = om.RequestEnd(
            status=status,
            error_message=optional(error_message),
            attempt=optional(attempt),
            retry_in_ms=optional(retry_in_ms),
        )
        self._write(ev.RequestEnded, payload, now)

    def record_text(
        self,
        text: str,
        *,
        now: datetime,
        role: om.Role = "assistant",
        sender: str | None = None,
        fidelity: Fidelity = None,
        stop_reason: str | None = _COMPLETED,
    ) -> None:
        """A complete ``text`` message (``fidelity`` is kept verbatim)."""
        payload = om.Text(
            role=role,
            text=text,
            sender=optional(sender),
            stop_reason=optional(stop_reason),
            fidelity=fidelity_raw(fidelity),
        )
        self._write(ev.TextRecorded, payload, now)

    def record_thinking(
        self,
        thinking: str,
        *,
        now: datetime,
        fidelity: Fidelity = None,
        stop_reason: str | None = _COMPLETED,
    ) -> None:
        """A complete ``thinking`` message from the assistant."""
        payload = om.Thinking(
            role="assistant",
            thinking=thinking,
            stop_reason=optional(stop_reason),
            fidelity=fidelity_raw(fidelity),
        )
        self._write(ev.ThinkingRecorded, payload, now)

    def record_inline_thinking(
        self,
        data: str,
        mime_type: str,
        *,
        now: datetime,
        fidelity: Fidelity = None,
        stop_reason: str | None = _COMPLETED,
    ) -> None:
        """An ``inline_thinking`` message (base64 ``data``)."""
        payload = om.InlineThinking(
            role="assistant",
            data=data,
            mime_type=mime_type,
            stop_reason=optional(stop_reason),
            fidelity=fidelity_raw(fidelity),
        )
        self._write(ev.InlineThinkingRecorded, payload, now)

    def record_tool_call(
        self,
        name: str,
        arguments: str,
        tool_call_id: str,
        *,
        now: datetime,
        fidelity: Fidelity = None,
        stop_reason: str | None = _COMPLETED,
    ) -> None:
        """A ``tool_call`` (``arguments`` is a JSON string); needs an open request."""
        payload = om.ToolCall(
            role="assistant",
            name=name,
            arguments=arguments,
            tool_call_id=tool_call_id,
            stop_reason=optional(stop_reason),
            fidelity=fidelity_raw(fidelity),
        )
        self._require_open_request("tool_call")
        self._write(ev.ToolCallRecorded, payload, now)

    def record_tool_output(
        self,
        tool_call_id: str,
        output: str,
        *,
        now: datetime,
        images: Sequence[str] = (),
        stop_reason: str | None = None,
    ) -> None:
        """A ``tool_call_output`` for a call awaiting output (unknown or answered ids: refused)."""
        payload = om.ToolCallOutput(
            role="user",
            output=output,
            images=tuple(images) if images else msgspec.UNSET,
            tool_call_id=tool_call_id,
            stop_reason=optional(stop_reason),
        )
        self._check_writable("tool_call_output")
        self._check_output_allowed(tool_call_id)
        self._write(ev.ToolCallOutputRecorded, payload, now)

    def record_image_url(self, image_url: str, *, now: datetime, role: om.Role = "user") -> None:
        """An ``image_url`` message."""
        self._write(ev.ImageUrlRecorded, om.ImageUrl(role=role, image_url=image_url), now)

    def record_inline_data(
        self,
        data: str,
        mime_type: str,
        *,
        now: datetime,
        role: om.Role = "user",
        fidelity: Fidelity = None,
    ) -> None:
        """An ``inline_data`` message (base64 ``data``)."""
        payload = om.InlineData(
            role=role, data=data, mime_type=mime_type, fidelity=fidelity_raw(fidelity)
        )
        self._write(ev.InlineDataRecorded, payload, now)

    def record_model_message(self, payload: om.ModelPayload, *, now: datetime) -> None:
        """Any complete model message given as an OmniMessage payload; ``partial_*`` is refused."""
        if om.is_partial(payload):
            ptype = om.payload_type(payload)
            raise PartialMessageError(
                self._where(str(ptype))
                + f"expected a complete model message, found a streaming fragment {ptype!r}",
                hint="append the complete message once the stream segment ends",
            )
        if isinstance(payload, om.ToolCall):
            self._require_open_request("tool_call")
        elif isinstance(payload, om.ToolCallOutput):
            self._check_writable("tool_call_output")
            self._check_output_allowed(payload.tool_call_id)
        self._write(ev.model_message_class(om.payload_type(payload)), payload, now)

    def decide_approval(self, tool_call_id: str, decision: str, *, now: datetime) -> None:
        """``approval_decision`` (allow, deny or forbidden) for a tool call."""
        payload = om.ApprovalDecision(decision=decision, tool_call_id=tool_call_id)
        self._write(ev.ApprovalDecided, payload, now)

    def abort(self, *, now: datetime, reason: str | None = None) -> None:
        """``abort``; like PenguinHarness, a missing reason is written as ``null``."""
        self._write(ev.Aborted, om.abort(reason), now)

    def record_token_usage(
        self,
        session: om.TokenCounts | Mapping[str, int],
        request: om.TokenCounts | Mapping[str, int],
        *,
        now: datetime,
    ) -> None:
        """``token_usage``: session totals and this request's counts."""
        payload = om.TokenUsage(session=token_counts(session), request=token_counts(request))
        self._write(ev.TokenUsageRecorded, payload, now)

    def begin_compaction(
        self, reason: str, mode: str, *, now: datetime, context: int = 0, turns: int = 0
    ) -> None:
        """``compaction_begin``; refused while another compaction is open."""
        if self.compaction is not None:
            raise CompactionStateError(
                self._where("compaction_begin") + "expected no open compaction, found one open",
                hint="end it with end_compaction() first",
            )
        payload = om.CompactionBegin(reason=reason, mode=mode, context=context, turns=turns)
        self._write(ev.CompactionBegan, payload, now)

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
        payload = om.CompactionEnd(
            reason=reason,
            mode=mode,
            status=status,
            attempt=optional(attempt),
            error_message=optional(error_message),
        )
        self._write(ev.CompactionEnded, payload, now)

    def record_subagent(self, child_session_id: str, *, now: datetime) -> None:
        """``subagent``: the pointer to a child session's own trace."""
        self._write(ev.SubagentSpawned, om.Subagent(session_id=child_session_id), now)

    def finish_goal(self, outcome: str, *, now: datetime, rounds: int, tokens_used: int) -> None:
        """``goal_finished`` with its outcome."""
        payload = om.GoalFinished(outcome=outcome, rounds=rounds, tokens_used=tokens_used)
        self._write(ev.GoalFinished, payload, now)

    def begin_mcp_connect(self, servers: Sequence[str], *, now: datetime) -> None:
        """``mcp_connect_begin`` for the named servers."""
        self._write(ev.McpConnectBegan, om.McpConnectBegin(servers=tuple(servers)), now)

    def end_mcp_connect(
        self, status: str, results: Sequence[om.McpServerResult], *, now: datetime
    ) -> None:
        """``mcp_connect_end`` with one result per server."""
        payload = om.McpConnectEnd(status=status, results=tuple(results))
        self._write(ev.McpConnectEnded, payload, now)
