"""The Session aggregate's domain events: one event class per kind of trace line.

Each event carries the exact envelope bytes of the line it stands for
(``line``); ``apply`` reads only header fields from it (through
:class:`~pentrace.domain.records.TraceRecord`) and updates the small counters
the aggregate keeps.  Most kinds need no parsing at all: the class says it.

The trace has no topic column, so :func:`event_class_for` rebuilds the class
from a record's header.  Stored names are part of the format: never rename a
class here, only add new ones.

Why this module is over 300 lines: a stored topic is ``module:ClassName``, so
every event class must stay in this one module (moving one would change the
topic written for new events), and the lookup from a header to a class stays
beside them because :class:`TraceOpened` applies through it.  Most classes
are a docstring each.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Final

from eventsourcing.domain import CanInitAggregate, CanMutateAggregate
from eventsourcing.utils import register_topic

from pentrace.domain.records import TraceRecord
from pentrace.domain.session.lines import raw_payload

if TYPE_CHECKING:
    from pentrace.domain.session.aggregate import Session

__all__ = [
    "APPLYING",
    "EVENT_CLASSES",
    "HEADER",
    "Aborted",
    "ApprovalDecided",
    "CompactionBegan",
    "CompactionEnded",
    "ForeignRecordKept",
    "GoalFinished",
    "ImageUrlRecorded",
    "InlineDataRecorded",
    "InlineThinkingRecorded",
    "McpConnectBegan",
    "McpConnectEnded",
    "RecordAppended",
    "RequestBegan",
    "RequestEnded",
    "SessionEvent",
    "SessionStarted",
    "ShardOpened",
    "SubagentSpawned",
    "TextRecorded",
    "ThinkingRecorded",
    "TokenUsageRecorded",
    "ToolCallOutputRecorded",
    "ToolCallRecorded",
    "ToolsListed",
    "TraceOpened",
    "event_class_for",
    "model_message_class",
]

COMPLETED: Final = "completed"
# Where a mapper may leave the reader's TraceRecord on an event: not a field, so
# it takes no part in equality and is never stored.
HEADER: Final = "_header"


# Subclasses that add no field inherit this dataclass's frozen __init__, __eq__,
# __hash__ and __repr__ (which names the subclass): only those with fields are decorated.
@dataclass(frozen=True, eq=True)
class SessionEvent(CanMutateAggregate[str]):
    """Base of every Session event: one trace line, at position ``originator_version``."""

    originator_id: str
    originator_version: int
    timestamp: datetime
    line: bytes

    def apply(self, aggregate: Session) -> None:
        """Lines that change no counter (the default)."""

    def header(self) -> TraceRecord:
        """The line's parsed header; reused when the reader already parsed it."""
        record = self.__dict__.get(HEADER)
        return record if record is not None else TraceRecord(self.line)


@dataclass(frozen=True, eq=True)
class SessionStarted(SessionEvent, CanInitAggregate[str]):
    """The first ``session_meta`` line: the session exists from here on."""

    originator_topic: str

    def apply(self, aggregate: Session) -> None:
        """Remember the meta payload (for shard copies) and mark the session started."""
        aggregate.started = True
        aggregate.meta_payload = raw_payload(self.line)


@dataclass(frozen=True, eq=True)
class TraceOpened(SessionEvent, CanInitAggregate[str]):
    """The first line of a foreign trace that does not begin with ``session_meta``."""

    originator_topic: str

    def apply(self, aggregate: Session) -> None:
        """Apply the line as the event class its header names would (without starting)."""
        cls = event_class_for(self.header(), 2)
        if cls is not ShardOpened:
            cls.apply(self, aggregate)


class ShardOpened(SessionEvent):
    """A ``session_meta`` copy after position 1: a new shard begins (rotation)."""

    def apply(self, aggregate: Session) -> None:
        """Move to the next shard; the meta copy becomes the current meta."""
        aggregate.shard_index += 1
        aggregate.rotation_pending = False
        aggregate.started = True
        aggregate.meta_payload = raw_payload(self.line)


class ToolsListed(SessionEvent):
    """``tool_list_ready``: the tool definitions offered to the model."""

    def apply(self, aggregate: Session) -> None:
        """Keep the payload so a rotated shard can start with a copy."""
        aggregate.tools_payload = raw_payload(self.line)


class RequestBegan(SessionEvent):
    """``request_begin``: one LLM call starts."""

    def apply(self, aggregate: Session) -> None:
        """Open a request; a request still open is dropped, as replay drops it."""
        aggregate.open_calls.clear()
        aggregate.answered_recent.clear()
        aggregate.open_request = True
        aggregate.requests += 1


class RequestEnded(SessionEvent):
    """``request_end``: the call finished with ``status`` (``completed`` commits it)."""

    def apply(self, aggregate: Session) -> None:
        """Commit or drop the round's tool calls; a completed end counts a turn."""
        if self.header().status == COMPLETED:
            unanswered = aggregate.unanswered
            for call_id, completed in aggregate.open_calls.items():
                if completed:
                    unanswered[call_id] = None
            if aggregate.compaction is None:
                aggregate.turns += 1
        aggregate.open_calls.clear()
        aggregate.open_request = False


class TextRecorded(SessionEvent):
    """A complete ``text`` model message (user input or assistant reply)."""


class ThinkingRecorded(SessionEvent):
    """A complete ``thinking`` model message."""


class InlineThinkingRecorded(SessionEvent):
    """A complete ``inline_thinking`` model message (base64 data)."""


class ImageUrlRecorded(SessionEvent):
    """An ``image_url`` model message."""


class InlineDataRecorded(SessionEvent):
    """An ``inline_data`` model message (base64 data with a mime type)."""


class ToolCallRecorded(SessionEvent):
    """A ``tool_call`` model message: the call now awaits its output."""

    def apply(self, aggregate: Session) -> None:
        """Track the call id; only calls that stopped ``completed`` survive a commit."""
        record = self.header()
        call_id = record.tool_call_id
        if isinstance(call_id, str):
            stop = record.stop_reason
            aggregate.open_calls[call_id] = stop is None or stop == COMPLETED


class ToolCallOutputRecorded(SessionEvent):
    """A ``tool_call_output`` model message answering one call id."""

    def apply(self, aggregate: Session) -> None:
        """The call is answered: it no longer awaits output."""
        call_id = self.header().tool_call_id
        if isinstance(call_id, str):
            aggregate.open_calls.pop(call_id, None)
            aggregate.unanswered.pop(call_id, None)
            aggregate.answered_recent.add(call_id)


class ApprovalDecided(SessionEvent):
    """``approval_decision``: allow, deny or forbidden for one tool call."""


class Aborted(SessionEvent):
    """``abort``: the user or the harness aborted the running request."""


class TokenUsageRecorded(SessionEvent):
    """``token_usage``: session and request token counts."""


class CompactionBegan(SessionEvent):
    """``compaction_begin``: a context compaction starts."""

    def apply(self, aggregate: Session) -> None:
        """Remember reason and mode, so a dangling compaction can be closed alike."""
        payload = self.header().payload()
        reason, mode = payload.get("reason"), payload.get("mode")
        aggregate.compaction = (
            reason if isinstance(reason, str) else "manual",
            mode if isinstance(mode, str) else "discard",
        )


class CompactionEnded(SessionEvent):
    """``compaction_end``: completed closes the context; the next write rotates."""

    def apply(self, aggregate: Session) -> None:
        """Close the compaction span; a completed one defers a rotation to the next write.

        A completed compaction closes the context: the next record opens a new
        shard, and resume reads the newest shard alone, so a request still
        open here can never commit.  It is dropped, as ``request_begin`` drops
        one; this is also where a request resume forgot in memory only (the
        process that began it died) stops being open in a rebuild.
        """
        aggregate.compaction = None
        completed = self.header().status == COMPLETED
        aggregate.rotation_pending = completed
        if completed:
            aggregate.open_request = False
            aggregate.open_calls.clear()


class GoalFinished(SessionEvent):
    """``goal_finished``: the task reached an outcome."""


class SubagentSpawned(SessionEvent):
    """``subagent``: a pointer to a child session with its own trace."""


class McpConnectBegan(SessionEvent):
    """``mcp_connect_begin``: MCP servers are being connected."""


class McpConnectEnded(SessionEvent):
    """``mcp_connect_end``: MCP connection results."""


class ForeignRecordKept(SessionEvent):
    """``foreign_record``: a line of another agent's store kept as it is (ADR 0095)."""


class RecordAppended(SessionEvent):
    """Any other line (foreign or future kinds, origin-tagged messages): kept, not applied."""


# Every class above, in order: what the mapper may store a topic for.  Which
# payload type stands for which class is a column of ``pentrace.domain.kinds``.
EVENT_CLASSES: Final[tuple[type[SessionEvent], ...]] = tuple(
    cls
    for cls in list(globals().values())
    if isinstance(cls, type) and issubclass(cls, SessionEvent) and cls is not SessionEvent
)


# Topics stored before the module moved into this package (ADR 0029): a ledger
# used as an eventsourcing recorder holds them, so they keep resolving.
for _cls in EVENT_CLASSES:
    register_topic(f"pentrace.domain.session_events:{_cls.__qualname__}", _cls)


# The classes whose apply() changes state; the others only take a position.
APPLYING: Final[frozenset[type[SessionEvent]]] = frozenset(
    cls for cls in EVENT_CLASSES if cls.apply is not SessionEvent.apply
)


def event_class_for(record: TraceRecord, position: int) -> type[SessionEvent]:
    """The event class a trace record at ``position`` (1-based) stands for.

    The lookup is derived from the kinds table, which imports this module;
    :func:`pentrace.domain.kinds.event_class_for` is the same function.
    """
    from pentrace.domain import kinds  # here: kinds imports this module

    return kinds.event_class_for(record, position)


def model_message_class(ptype: str | None) -> type[SessionEvent]:
    """The event class of a complete model message of payload type ``ptype``."""
    from pentrace.domain import kinds  # here: kinds imports this module

    return kinds.model_message_class(ptype)
