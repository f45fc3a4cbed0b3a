"""The Session aggregate: commands that write a legal trace, one event per line.

Commands take the time as ``now`` (the domain never reads a clock), check
legality, build the OmniMessage payload and trigger the event whose ``line``
is the encoded envelope; the event class and envelope type of a payload come
from the kinds table (:mod:`pentrace.domain.kinds`).  State is small on
purpose (counters, the open request, call ids awaiting output, the shard
index, an open compaction, a pending rotation); the transcript lives only in
the trace.  ``apply`` methods in :mod:`pentrace.domain.session.events`
update it from each line's header, so rebuilding from a trace gives the same
state as recording did.

Refusals raise a :class:`~pentrace.errors.IllegalCommandError` subclass naming
the session and the sequence (position) the write would have taken.  Every
command is marked with :func:`command`, which is how
:class:`~pentrace.infrastructure.sessions.handle.SessionHandle` finds the
commands it stamps with a clock and saves (``closes`` marks the ones that end
a unit of work: a request, a compaction).

Why this module is over 300 lines: it is one class, the aggregate, with its
state, its commands and the write plumbing they share (the recording hot
path); the stored topic ``pentrace.domain.session.aggregate:Session`` pins
the class here, and splitting it by inheritance over three modules (as it
was) made one concept hard to read.  Most of the length is one short method
per command.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, TypeVar, get_args

import msgspec
from eventsourcing.domain import BaseAggregate, OriginatorIDError, OriginatorVersionError
from eventsourcing.utils import register_topic
from msgspec import UNSET

from pentrace.domain import omnimessage as om
from pentrace.domain.json_codec import JsonEncoder, encode_escaped
from pentrace.domain.kinds import KINDS
from pentrace.domain.records import PayloadHead, TraceRecord
from pentrace.domain.session import events as ev
from pentrace.domain.session.lines import (
    Fidelity,
    ToolSpec,
    fidelity_raw,
    known_record,
    meta_copy_line,
    optional,
    stamp,
    token_counts,
    tool_definition,
)
from pentrace.errors import (
    CompactionStateError,
    DuplicateToolOutputError,
    PartialMessageError,
    RequestAlreadyOpenError,
    RequestNotOpenError,
    SessionDeletedError,
    SessionNotStartedError,
    TraceError,
    UnencodableValueError,
    UnknownStatusError,
    UnknownToolCallError,
)

__all__ = ["COMMANDS", "Fidelity", "Session", "ToolSpec", "command", "project_session"]

_COMPLETED: Final = "completed"
_REQUEST_STATUSES: Final = get_args(om.StopReason)
# msgspec directly, with the escaping fallback in ``_encode_slowly``: the recording hot path.
_encode: Final = msgspec.json.Encoder().encode
_encode_meta: Final = JsonEncoder().encode
_new_event: Final = object.__new__
_APPLYING: Final = ev.APPLYING
# Payload Struct -> (event class, envelope type), from the kinds table.
_WRITES: Final[dict[type, tuple[type[ev.SessionEvent], str]]] = {
    kind.payload: (kind.event, kind.envelope) for kind in KINDS
}
_Method = TypeVar("_Method", bound=Callable[..., None])
_COMMAND: Final = "__session_command__"


def command(*, closes: bool = False) -> Callable[[_Method], _Method]:
    """Mark a method as a Session command (``closes``: it ends a unit of work)."""

    def mark(method: _Method) -> _Method:
        setattr(method, _COMMAND, closes)
        return method

    return mark


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
        try:
            return msgspec.json.decode(self.meta_payload, type=om.SessionMeta)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            # msgspec names the field and the expected type, never the value.
            raise TraceError(
                f"session {self.id}: expected a complete session_meta, found: {exc}",
                hint="the trace was written by another tool; read its first line with `pentrace`",
            ) from None

    def abandon_open_request(self) -> None:
        """Forget a request left open by a process that died (resume does this).

        Nothing is written: replay drops an open round when the next
        ``request_begin`` arrives, and so does ``apply`` on a rebuild, which
        also drops it at a completed ``compaction_end`` (the context closes
        there, see ``CompactionEnded``), so a checkpoint taken before the
        rotation equals the fold.  The dropped round's tool calls get no output.
        """
        self.open_request = False
        self.open_calls.clear()

    def mark_deleted(self) -> None:
        """Refuse every later write; deletion removes the trace, so it is not itself a line."""
        self.deleted = True

    # ---------------------------------------------------------------- commands

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
        line = _encode_meta(om.Envelope(timestamp=text, type="session_meta", payload=meta))
        session = cls._create(ev.SessionStarted, id=session_id, timestamp=exact, line=line)
        tool_list = om.ToolListReady(tools=tuple(tool_definition(t) for t in tools))
        session._write(tool_list, now)
        return session

    @command()
    def begin_request(self, *, now: datetime) -> None:
        """``request_begin``; refused while a request is open."""
        self._check_writable("request_begin")
        if self.open_request:
            raise RequestAlreadyOpenError(
                self._where("request_begin") + "expected no open request, found one open",
                hint="end the open request with end_request() first",
            )
        self._write(om.RequestBegin(), now)

    @command(closes=True)
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
        head = PayloadHead("request_end", None, None, status, None)
        self._write(payload, now, head)

    @command()
    def decide_approval(self, tool_call_id: str, decision: str, *, now: datetime) -> None:
        """``approval_decision`` (allow, deny or forbidden) for a tool call."""
        payload = om.ApprovalDecision(decision=decision, tool_call_id=tool_call_id)
        self._write(payload, now)

    @command()
    def abort(self, *, now: datetime, reason: str | None = None) -> None:
        """``abort``; like PenguinHarness, a missing reason is written as ``null``."""
        self._write(om.abort(reason), now)

    @command()
    def record_token_usage(
        self,
        session: om.TokenCounts | Mapping[str, int],
        request: om.TokenCounts | Mapping[str, int],
        *,
        now: datetime,
    ) -> None:
        """``token_usage``: session totals and this request's counts."""
        payload = om.TokenUsage(session=token_counts(session), request=token_counts(request))
        self._write(payload, now)

    @command()
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
        self._write(payload, now)

    @command(closes=True)
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
        self._write(payload, now)

    @command()
    def record_subagent(self, child_session_id: str, *, now: datetime) -> None:
        """``subagent``: the pointer to a child session's own trace."""
        self._write(om.Subagent(session_id=child_session_id), now)

    @command()
    def finish_goal(self, outcome: str, *, now: datetime, rounds: int, tokens_used: int) -> None:
        """``goal_finished`` with its outcome."""
        payload = om.GoalFinished(outcome=outcome, rounds=rounds, tokens_used=tokens_used)
        self._write(payload, now)

    @command()
    def begin_mcp_connect(self, servers: Sequence[str], *, now: datetime) -> None:
        """``mcp_connect_begin`` for the named servers."""
        self._write(om.McpConnectBegin(servers=tuple(servers)), now)

    @command()
    def end_mcp_connect(
        self, status: str, results: Sequence[om.McpServerResult], *, now: datetime
    ) -> None:
        """``mcp_connect_end`` with one result per server."""
        payload = om.McpConnectEnd(status=status, results=tuple(results))
        self._write(payload, now)

    @command()
    def record_user_input(
        self,
        text: str,
        *,
        now: datetime,
        images: Sequence[str] = (),
        sender: str | None = None,
    ) -> None:
        """User input (written before ``request_begin``): a text message, then image_url ones."""
        payload = om.Text(role="user", text=text, sender=optional(sender))
        self._write(payload, now)
        for url in images:
            self.record_image_url(url, now=now)

    @command()
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
        self._write(payload, now)

    @command()
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
        self._write(payload, now)

    @command()
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
        self._write(payload, now)

    @command()
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
        if self.deleted or not self.started or not self.open_request:
            self._require_open_request("tool_call")
        head = PayloadHead("tool_call", "assistant", tool_call_id, None, stop_reason)
        self._write(payload, now, head)

    @command()
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
            stop_reason=optional(stop_reason),
        )
        self._check_writable("tool_call_output")
        self._check_output_allowed(tool_call_id)
        head = PayloadHead("tool_call_output", "user", tool_call_id, None, stop_reason)
        self._write(payload, now, head)

    @command()
    def record_image_url(self, image_url: str, *, now: datetime, role: om.Role = "user") -> None:
        """An ``image_url`` message."""
        self._write(om.ImageUrl(role=role, image_url=image_url), now)

    @command()
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
        self._write(payload, now)

    @command()
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
        self._write(payload, now)

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

    def _write(self, payload: om.Payload, now: datetime, head: PayloadHead | None = None) -> None:
        """Encode ``payload`` as the next line; trigger its kind's event (the hot path).

        A fresh envelope has no remembered bytes, so ``encode_envelope()``
        would come down to the same msgspec encode.  ``head`` (the payload's
        header fields) is given for the classes whose ``apply`` reads the
        header: the event then carries the record reading the line would give.
        """
        if self.deleted or not self.started:
            self._check_writable(str(om.payload_type(payload)))
        cls, kind = _WRITES[type(payload)]
        text, exact = stamp(now)
        envelope = om.Envelope(timestamp=text, type=kind, payload=payload)
        try:
            line = _encode(envelope)
        except (TypeError, ValueError, OverflowError):  # UnicodeEncodeError is a ValueError
            line = self._encode_slowly(envelope)
        if self.rotation_pending:
            self._rotate(now)
        self._trigger(cls, exact, line, None if head is None else known_record(line, kind, head))

    def _encode_slowly(self, envelope: om.Envelope) -> bytes:
        """Lone surrogates become JSON escapes (ADR 0015); a value with no JSON form is refused.

        Refused before anything changes: nothing pending, no rotation, no event.
        """
        try:
            return encode_escaped(envelope)
        except (TypeError, ValueError, OverflowError) as exc:
            raise UnencodableValueError(
                self._where(str(om.payload_type(envelope.payload)))
                + f"expected values with a JSON form, found one without ({exc})",
                hint="pass str, int, float, bool, None, lists and dicts of them",
            ) from None

    def _trigger(
        self,
        cls: type[ev.SessionEvent],
        timestamp: datetime,
        line: bytes,
        header: TraceRecord | None = None,
    ) -> None:
        """``trigger_event`` without its generic keyword handling (the hot path).

        The event is built the way eventsourcing's Mapper rebuilds events
        (its ``__dict__`` filled directly) and applied as ``mutate`` would,
        minus its id and version checks, which hold by construction here
        (rebuilds from the trace check both, in :func:`project_session`).
        ``header``, when given, rides along outside the dataclass fields, as
        the mapper's does (see ``SessionEvent.header``).
        """
        event = _new_event(cls)
        # BaseAggregate's own attributes (eventsourcing 9.5.6, pinned): the
        # properties in front of them cost more than the rest of this method.
        version = self._version + 1
        state = event.__dict__
        state["originator_id"] = self._id
        state["originator_version"] = version
        state["timestamp"] = timestamp
        state["line"] = line
        if header is not None:
            state[ev.HEADER] = header
        if cls in _APPLYING:
            event.apply(self)
        self._version = version
        self._modified_on = timestamp
        self._pending_events.append(event)

    def collect_events(self) -> list[ev.SessionEvent]:
        """Take the pending events, oldest first (the library pops them one by one)."""
        collected: list[Any] = self._pending_events[:]
        self._pending_events.clear()
        return collected

    def _rotate(self, now: datetime) -> None:
        """Open the next shard with copies of session_meta and tool_list_ready."""
        text, exact = stamp(now)
        meta = meta_copy_line("session_meta", self.meta_payload, text)
        self._trigger(ev.ShardOpened, exact, meta)
        if self.tools_payload is not None:
            tools = meta_copy_line("event_msg", self.tools_payload, text)
            self._trigger(ev.ToolsListed, exact, tools)


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


# Every command, and whether it ends a unit of work: derived from the marks above.
COMMANDS: Final[Mapping[str, bool]] = {
    name: getattr(method, _COMMAND)
    for name, method in vars(Session).items()
    if hasattr(method, _COMMAND)
}

# The aggregate's topic before the module moved into this package (ADR 0029).
register_topic("pentrace.domain.session:Session", Session)
