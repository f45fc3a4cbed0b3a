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

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import msgspec
from eventsourcing.domain import BaseAggregate, OriginatorIDError, OriginatorVersionError

from pentrace.domain import omnimessage as om
from pentrace.domain import session_events as ev
from pentrace.domain.session_lines import meta_copy_line, stamp
from pentrace.errors import (
    CompactionStateError,
    DuplicateToolOutputError,
    PartialMessageError,
    RequestAlreadyOpenError,
    RequestNotOpenError,
    SessionDeletedError,
    SessionNotStartedError,
    UnknownToolCallError,
)

__all__ = ["Fidelity", "Session", "ToolSpec", "project_session"]

UNSET: Final = msgspec.UNSET
# Opaque provider fidelity: raw JSON bytes (kept byte for byte), a Raw, or a mapping.
Fidelity = bytes | msgspec.Raw | Mapping[str, Any] | None
# A tool definition, or a mapping with name, description and optional JSON Schema parameters.
ToolSpec = om.ToolDefinition | Mapping[str, Any]
_COMPLETED: Final = "completed"
_encode: Final = msgspec.json.Encoder().encode


def _fidelity(value: Fidelity) -> msgspec.Raw | msgspec.UnsetType:
    if value is None:
        return UNSET
    if isinstance(value, bytes):
        return msgspec.Raw(value)
    return om.as_fidelity(value)


def _opt(value: Any) -> Any:
    return UNSET if value is None else value


def _tool(spec: ToolSpec) -> om.ToolDefinition:
    if isinstance(spec, om.ToolDefinition):
        return spec
    parameters = spec.get("parameters")
    raw = UNSET if parameters is None else msgspec.Raw(msgspec.json.encode(parameters))
    return om.ToolDefinition(name=spec["name"], description=spec["description"], parameters=raw)


_MODEL_CLASS: Final[dict[type, type[ev.SessionEvent]]] = {
    om.Text: ev.TextRecorded,
    om.Thinking: ev.ThinkingRecorded,
    om.InlineThinking: ev.InlineThinkingRecorded,
    om.ToolCall: ev.ToolCallRecorded,
    om.ToolCallOutput: ev.ToolCallOutputRecorded,
    om.ImageUrl: ev.ImageUrlRecorded,
    om.InlineData: ev.InlineDataRecorded,
}


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

    @property
    def records(self) -> int:
        """How many trace records (lines) the session has: the last one's position."""
        return self.version

    def awaiting_output(self) -> list[str]:
        """Call ids that may still get a tool_call_output: open-request calls, then committed."""
        return [*self.open_calls, *(c for c in self.unanswered if c not in self.open_calls)]

    def meta(self) -> om.SessionMeta:
        """The current session_meta payload (provider, model, workspace, ...)."""
        return msgspec.json.decode(self.meta_payload, type=om.SessionMeta)

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
            source=_opt(source),
        )
        text, exact = stamp(now)
        line = _encode(om.Envelope(timestamp=text, type="session_meta", payload=meta))
        session = cls._create(ev.SessionStarted, id=session_id, timestamp=exact, line=line)
        tool_list = om.ToolListReady(tools=tuple(_tool(t) for t in tools))
        session._emit(ev.ToolsListed, tool_list, now)
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
        self._write(ev.TextRecorded, om.Text(role="user", text=text, sender=_opt(sender)), now)
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
        """``request_end(status, ...)``; ``completed`` commits the request."""
        self._require_open_request("request_end")
        payload = om.RequestEnd(
            status=status,
            error_message=_opt(error_message),
            attempt=_opt(attempt),
            retry_in_ms=_opt(retry_in_ms),
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
            sender=_opt(sender),
            stop_reason=_opt(stop_reason),
            fidelity=_fidelity(fidelity),
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
            stop_reason=_opt(stop_reason),
            fidelity=_fidelity(fidelity),
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
            stop_reason=_opt(stop_reason),
            fidelity=_fidelity(fidelity),
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
            stop_reason=_opt(stop_reason),
            fidelity=_fidelity(fidelity),
        )
        self.record_model_message(payload, now=now)

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
            images=tuple(images) if images else UNSET,
            tool_call_id=tool_call_id,
            stop_reason=_opt(stop_reason),
        )
        self.record_model_message(payload, now=now)

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
            role=role, data=data, mime_type=mime_type, fidelity=_fidelity(fidelity)
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
        self._write(_MODEL_CLASS.get(type(payload), ev.RecordAppended), payload, now)

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
        payload = om.TokenUsage(session=_counts(session), request=_counts(request))
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
            attempt=_opt(attempt),
            error_message=_opt(error_message),
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

    def abandon_open_request(self) -> None:
        """Forget a request left open by a process that died (resume does this).

        Nothing is written: replay drops an open round when the next
        ``request_begin`` arrives, and so does ``apply`` on a rebuild.  The
        dropped round's tool calls get no output.
        """
        self.open_request = False
        self.open_calls.clear()

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

    def _check_output_allowed(self, tool_call_id: str) -> None:
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
            + f" ({len(self.awaiting_output())} call(s) await output)",
            hint="record the tool_call first; calls of failed requests get no output",
        )

    def _write(self, cls: type[ev.SessionEvent], payload: om.Payload, now: datetime) -> None:
        if self.deleted or not self.started:
            self._check_writable(str(om.payload_type(payload)))
        if self.rotation_pending:
            self._rotate(now)
        self._emit(cls, payload, now)

    def _emit(self, cls: type[ev.SessionEvent], payload: om.Payload, now: datetime) -> None:
        text, exact = stamp(now)
        kind = om.envelope_type_for(payload)
        assert kind is not None, "commands only build known payloads"
        # A fresh envelope has no remembered bytes, so encode_envelope() would
        # come down to this same encode; skipping its checks keeps the hot path short.
        envelope = om.Envelope(timestamp=text, type=kind, payload=payload)
        self._trigger(cls, exact, _encode(envelope))

    def _trigger(self, cls: type[ev.SessionEvent], timestamp: datetime, line: bytes) -> None:
        """``trigger_event`` without its generic keyword handling (the hot path).

        The event is built the way eventsourcing's Mapper rebuilds events
        (``__dict__`` set directly) and applied as ``mutate`` would, minus its
        id and version checks, which hold by construction here.  Rebuilds from
        the trace still go through ``mutate``.
        """
        event = object.__new__(cls)
        version = self.version + 1
        state = {
            "originator_id": self.id,
            "originator_version": version,
            "timestamp": timestamp,
            "line": line,
        }
        object.__setattr__(event, "__dict__", state)
        event.apply(self)
        self.version = version
        self.modified_on = timestamp
        self.pending_events.append(event)

    def _rotate(self, now: datetime) -> None:
        """Open the next shard with copies of session_meta and tool_list_ready."""
        text, exact = stamp(now)
        meta = meta_copy_line("session_meta", self.meta_payload, text)
        self._trigger(ev.ShardOpened, exact, meta)
        if self.tools_payload is not None:
            tools = meta_copy_line("event_msg", self.tools_payload, text)
            self._trigger(ev.ToolsListed, exact, tools)


def _counts(value: om.TokenCounts | Mapping[str, int]) -> om.TokenCounts:
    if isinstance(value, om.TokenCounts):
        return value
    return om.TokenCounts(**value)


def project_session(session: Session | None, events: Iterable[Any]) -> Session | None:
    """Fold events into a session: a plain projector for ``Repository.get``.

    eventsourcing's default projector asserts ``isinstance(event,
    CanMutateProtocol)`` per event (a runtime Protocol check that dominates
    rebuild time) and ``mutate`` sets ``modified_on`` on every event.  Here
    the created event goes through ``mutate``, later ones are checked for id
    and version inline and applied, and ``modified_on`` is set once.
    """
    iterator = iter(events)
    if session is None:
        first = next(iterator, None)
        if first is None:
            return None
        session = first.mutate(None)
        assert session is not None
    session_id = session.id
    version = session.version
    last = None
    for event in iterator:
        version += 1
        if event.originator_version != version:
            raise OriginatorVersionError(event.originator_version, version)
        if event.originator_id != session_id:
            raise OriginatorIDError(event.originator_id, session_id)
        event.apply(session)
        last = event
    if last is not None:
        session.version = version
        session.modified_on = last.timestamp
    return session
