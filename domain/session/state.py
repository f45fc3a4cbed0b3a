"""The Session aggregate's state and write plumbing; the commands live in ``session``.

State is small on purpose (counters, the open request, call ids awaiting
output, the shard index, an open compaction, a pending rotation); the
transcript lives only in the trace.  ``apply`` methods in
:mod:`pentrace.domain.session.events` update it from each line's header, so
rebuilding from a trace gives the same state as recording did.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Final

import msgspec
from eventsourcing.domain import BaseAggregate, OriginatorIDError, OriginatorVersionError

from pentrace.domain import omnimessage as om
from pentrace.domain.json_codec import encode_escaped
from pentrace.domain.records import PayloadHead, TraceRecord
from pentrace.domain.session import events as ev
from pentrace.domain.session.lines import known_record, meta_copy_line, stamp
from pentrace.errors import (
    DuplicateToolOutputError,
    RequestNotOpenError,
    SessionDeletedError,
    SessionNotStartedError,
    TraceError,
    UnencodableValueError,
    UnknownToolCallError,
)

__all__ = ["SessionState", "project_session"]

# msgspec directly, with the escaping fallback below: this is the recording hot path.
_encode: Final = msgspec.json.Encoder().encode
_new_event: Final = object.__new__
_APPLYING: Final = ev.APPLYING


class SessionState(BaseAggregate[str]):
    """Counters and plumbing shared by every Session command (see the module docstring)."""

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

    def _write(
        self,
        cls: type[ev.SessionEvent],
        kind: str,
        payload: om.Payload,
        now: datetime,
        head: PayloadHead | None = None,
    ) -> None:
        """Encode ``payload`` in a ``kind`` envelope as the next line; trigger ``cls`` (hot path).

        A fresh envelope has no remembered bytes, so ``encode_envelope()``
        would come down to the same msgspec encode.  ``head`` (the payload's
        header fields) is given for the classes whose ``apply`` reads the
        header: the event then carries the record reading the line would give.
        """
        if self.deleted or not self.started:
            self._check_writable(str(om.payload_type(payload)))
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


def project_session(session: SessionState | None, events: Iterable[Any]) -> SessionState | None:
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
