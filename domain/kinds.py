"""Every record kind pentrace knows, declared once: the table the other tables derive from.

A *kind* is one payload ``type`` of a trace line (``text``, ``request_end``,
...).  Its row names everything that hangs on that string: the envelope
``type`` it travels in, the msgspec payload Struct that decodes it (whose tag
is the string), the Session event class a recorded line of it becomes, and
the RuntimeEvent ``type`` it maps to (with a ``status`` that can change that
type, and the category only the never-persisted partials name).  The lookups
the aggregate, the eventsourcing mapper and the runtime mapping use are
computed from :data:`KINDS` here; tests hold the table to the payload unions
of :mod:`pentrace.domain.omnimessage`, so a Struct without a row, a row
without a Struct, or a tag typed twice fails.

``session_meta`` is not a row: its envelope ``type`` is its kind, it has no
tag, and what it stands for depends on its position (the session's first
line, or a new shard's copy).  :func:`event_class_for` and
:func:`runtime_type_for` spell that rule out beside the table.

Adding a kind is the checklist in ``docs/architecture.md`` ("Adding a trace
record type"): the Struct, one row here, the event class, the command.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, NamedTuple

from pentrace.domain import omnimessage as om
from pentrace.domain.omnimessage.payloads import TaggedPayload
from pentrace.domain.records import TraceRecord
from pentrace.domain.session import events as ev

__all__ = [
    "KINDS",
    "META",
    "Envelope",
    "Kind",
    "by_envelope",
    "event_class_for",
    "kind_of",
    "model_message_class",
    "runtime_type_for",
]

Envelope = Literal["model_msg", "event_msg"]
META: Final = "session_meta"
_MODEL: Final = "model_msg"
_EVENT: Final = "event_msg"
_NO_STATUS: Final[tuple[tuple[str, str], ...]] = ()


class Kind(NamedTuple):
    """One record kind: every name its payload ``type`` string stands for."""

    tag: str
    envelope: Envelope
    payload: type[TaggedPayload]
    # The Session event a recorded line of this kind becomes (a partial, never
    # recorded, is kept as any foreign line is).
    event: type[ev.SessionEvent]
    # The RuntimeEvent type; with ``statuses``, the type for any status not listed.
    runtime_type: str
    # ``(status, RuntimeEvent type)`` pairs that override ``runtime_type``.
    statuses: tuple[tuple[str, str], ...] = _NO_STATUS
    # Only the partials name a category: their payload has no ``part`` to judge by.
    category: str | None = None

    @property
    def runtime_types(self) -> frozenset[str]:
        """Every RuntimeEvent type a record of this kind may map to."""
        return frozenset({self.runtime_type, *(kind for _, kind in self.statuses)})


_STREAM: Final = "message.part.updated"
KINDS: Final[tuple[Kind, ...]] = (
    # model_msg: complete messages.
    Kind("text", _MODEL, om.Text, ev.TextRecorded, "message.updated"),
    Kind("thinking", _MODEL, om.Thinking, ev.ThinkingRecorded, "message.reasoning.updated"),
    Kind(
        "inline_thinking",
        _MODEL,
        om.InlineThinking,
        ev.InlineThinkingRecorded,
        "message.reasoning.updated",
    ),
    Kind("tool_call", _MODEL, om.ToolCall, ev.ToolCallRecorded, "tool.called"),
    Kind("tool_call_output", _MODEL, om.ToolCallOutput, ev.ToolCallOutputRecorded, "tool.result"),
    Kind("image_url", _MODEL, om.ImageUrl, ev.ImageUrlRecorded, "message.updated"),
    Kind("inline_data", _MODEL, om.InlineData, ev.InlineDataRecorded, "message.updated"),
    # model_msg: streamed partials (PenguinHarness never persists them).
    Kind("partial_text", _MODEL, om.PartialText, ev.RecordAppended, _STREAM, (), "stream_chunk"),
    Kind(
        "partial_thinking",
        _MODEL,
        om.PartialThinking,
        ev.RecordAppended,
        _STREAM,
        (),
        "stream_chunk",
    ),
    Kind(
        "partial_tool_call",
        _MODEL,
        om.PartialToolCall,
        ev.RecordAppended,
        _STREAM,
        (),
        "tool_action_lifecycle",
    ),
    Kind(
        "partial_tool_call_output",
        _MODEL,
        om.PartialToolCallOutput,
        ev.RecordAppended,
        _STREAM,
        (),
        "tool_action_lifecycle",
    ),
    # event_msg.
    Kind("request_begin", _EVENT, om.RequestBegin, ev.RequestBegan, "run.started"),
    Kind(
        "request_end",
        _EVENT,
        om.RequestEnd,
        ev.RequestEnded,
        "run.error",
        (("completed", "run.completed"), ("aborted", "run.aborted")),
    ),
    Kind(
        "approval_decision", _EVENT, om.ApprovalDecision, ev.ApprovalDecided, "permission.replied"
    ),
    Kind("abort", _EVENT, om.Abort, ev.Aborted, "session.aborted"),
    Kind("token_usage", _EVENT, om.TokenUsage, ev.TokenUsageRecorded, "token.usage.updated"),
    Kind(
        "compaction_begin",
        _EVENT,
        om.CompactionBegin,
        ev.CompactionBegan,
        "session.compaction.started",
    ),
    Kind(
        "compaction_end",
        _EVENT,
        om.CompactionEnd,
        ev.CompactionEnded,
        "session.compaction.error",
        (("completed", "session.compacted"),),
    ),
    Kind("goal_finished", _EVENT, om.GoalFinished, ev.GoalFinished, "task.finished"),
    Kind("subagent", _EVENT, om.Subagent, ev.SubagentSpawned, "session.subagent.started"),
    Kind("tool_list_ready", _EVENT, om.ToolListReady, ev.ToolsListed, "tool.list.updated"),
    Kind(
        "mcp_connect_begin", _EVENT, om.McpConnectBegin, ev.McpConnectBegan, "tool.mcp.connecting"
    ),
    Kind("mcp_connect_end", _EVENT, om.McpConnectEnd, ev.McpConnectEnded, "tool.mcp.connected"),
    # A line of another agent's store that maps to no record (infrastructure/agents).
    Kind("foreign_record", _EVENT, om.ForeignRecord, ev.ForeignRecordKept, "trace.event"),
)

# The lookups, derived: (envelope type, payload type) -> row, and per envelope type.
_BY_KEY: Final[dict[tuple[str, str], Kind]] = {(k.envelope, k.tag): k for k in KINDS}
_BY_ENVELOPE: Final[dict[str, dict[str, Kind]]] = {
    envelope: {k.tag: k for k in KINDS if k.envelope == envelope} for envelope in (_MODEL, _EVENT)
}
_EVENT_CLASS: Final[dict[str, dict[object, type[ev.SessionEvent]]]] = {
    envelope: {tag: kind.event for tag, kind in rows.items()}
    for envelope, rows in _BY_ENVELOPE.items()
}
_MODEL_CLASSES: Final = _EVENT_CLASS[_MODEL]


def by_envelope(envelope: str) -> Mapping[str, Kind]:
    """The rows of one envelope type, by payload type, in table order (none: empty)."""
    return _BY_ENVELOPE.get(envelope, {})


def kind_of(record: TraceRecord) -> Kind | None:
    """The row of a record's envelope and payload type, or None (foreign, future, meta)."""
    ptype = record.ptype
    if type(ptype) is not str or not isinstance(record.kind, str):
        return None
    return _BY_KEY.get((record.kind, ptype))


def event_class_for(record: TraceRecord, position: int) -> type[ev.SessionEvent]:
    """The Session event class a trace record at ``position`` (1-based) stands for.

    A ``session_meta`` starts the session at position 1 and opens a shard
    after it; any other first line opens a foreign trace; an origin-tagged
    line, an unknown kind and a foreign envelope are kept as they are.
    """
    kind = record.kind
    if kind == META:
        return ev.SessionStarted if position == 1 else ev.ShardOpened
    if position == 1:
        return ev.TraceOpened
    if record.has_origin:
        return ev.RecordAppended
    classes = _EVENT_CLASS.get(kind) if isinstance(kind, str) else None
    if classes is None:
        return ev.RecordAppended
    try:
        return classes.get(record.ptype, ev.RecordAppended)
    except TypeError:  # an unhashable payload type (a list, an object) is foreign
        return ev.RecordAppended


def model_message_class(ptype: object) -> type[ev.SessionEvent]:
    """The event class of a complete model message of payload type ``ptype``."""
    return _MODEL_CLASSES.get(ptype, ev.RecordAppended) if type(ptype) is str else ev.RecordAppended


def runtime_type_for(record: TraceRecord, position: int) -> str:
    """The RuntimeEvent type of a record (the table in ``docs/runtime-events.md``).

    Unknown payload types map to ``message.updated`` (a model message) or
    ``trace.event`` (an event); a foreign envelope to ``trace.record``.
    """
    kind, ptype = record.kind, record.ptype
    if kind == META:
        return "session.created" if position == 1 else "session.updated"
    if kind == _MODEL:
        row = _BY_ENVELOPE[_MODEL].get(ptype) if type(ptype) is str else None
        return "message.updated" if row is None else row.runtime_type
    if kind == _EVENT and type(ptype) is str:
        row = _BY_ENVELOPE[_EVENT].get(ptype)
        if row is None:
            return "trace.event"
        if row.statuses:
            status = record.status
            for value, runtime_type in row.statuses:
                if status == value:
                    return runtime_type
        return row.runtime_type
    return "trace.record"
