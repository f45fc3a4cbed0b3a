"""OmniMessage payload Structs, field for field as PenguinHarness writes them.

Field order is wire order: msgspec encodes a Struct's fields in declaration
order, the tag ``type`` first, so each class lists its fields in the order
PenguinHarness's builders insert them.  Every class is ``kw_only`` so that
optional fields can sit where the writer puts them, not only at the end.

Choices that keep a decoded line faithful (see ADR 0003):

- Optional fields default to ``UNSET`` and are omitted when unset
  (``omit_defaults``), so an absent key stays absent.
- Provider ``fidelity`` and tool ``parameters`` are opaque JSON kept as
  ``msgspec.Raw``: their bytes are never re-serialised.
- Numbers are ``int | float`` so ``10`` and ``10.0`` stay distinct and big
  integers keep their precision.
- Enumerations (roles, statuses, reasons) are plain ``str`` on the wire types:
  a newer writer's new value must not make a line unreadable.  The ``Literal``
  aliases below document the known values and type our own builders.
- Payload classes carry ``dict=True`` only so that a decoded instance can
  remember the bytes it came from, outside its fields (see ``omnimessage``).
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec
from msgspec import UNSET, Raw, UnsetType

__all__ = [
    "COMPLETE_MODEL_TYPES",
    "EVENT_TYPES",
    "PARTIAL_TYPES",
    "STOP_REASONS",
    "Abort",
    "ApprovalDecision",
    "CompactionBegin",
    "CompactionEnd",
    "CompleteModelPayload",
    "EventPayload",
    "GoalFinished",
    "ImageUrl",
    "InlineData",
    "InlineThinking",
    "McpConnectBegin",
    "McpConnectEnd",
    "McpServerResult",
    "ModelPayload",
    "Number",
    "PartialPayload",
    "PartialText",
    "PartialThinking",
    "PartialToolCall",
    "PartialToolCallOutput",
    "RequestBegin",
    "RequestEnd",
    "Role",
    "SessionMeta",
    "StopReason",
    "StreamEventType",
    "Subagent",
    "Text",
    "Thinking",
    "TokenCounts",
    "TokenUsage",
    "ToolCall",
    "ToolCallOutput",
    "ToolDefinition",
    "ToolListReady",
]

Number = int | float
"""A JSON number as written: ``int`` for integer literals, ``float`` otherwise."""

StopReason = Literal["completed", "failed", "aborted", "timeout", "malformed", "auth"]
STOP_REASONS: Final[frozenset[str]] = frozenset(
    ("completed", "failed", "aborted", "timeout", "malformed", "auth")
)
Role = Literal["user", "assistant"]
StreamEventType = Literal["start", "delta", "stop"]


class _Payload(
    msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, dict=True, tag_field="type"
):
    """Base of every tagged payload: frozen, tag ``type`` first, unset fields omitted."""


class _Part(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Base of nested objects inside a payload (tool definitions, MCP results)."""


class TokenCounts(msgspec.Struct, frozen=True, kw_only=True):
    """Token counts; all four keys are always written, zeros included."""

    cache_read: Number = 0
    cache_write: Number = 0
    output: Number = 0
    total: Number = 0

    def __add__(self, other: TokenCounts) -> TokenCounts:
        """Field-wise sum, as PenguinHarness accumulates session usage."""
        if not isinstance(other, TokenCounts):
            return NotImplemented
        return TokenCounts(
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            output=self.output + other.output,
            total=self.total + other.total,
        )


# --- session_meta ------------------------------------------------------------


class SessionMeta(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, dict=True):
    """The first record of every shard: per-session invariants (untagged).

    Legacy ``tools`` and ``thinking_level`` keys are accepted on decode and
    never emitted; the decoder strips them (see ``omnimessage``).
    """

    session_id: str
    provider: str
    model_id: str
    model_context_window: Number | str
    system_prompt: str
    agent_state: str
    workspace: str
    source: str | UnsetType = UNSET


# --- model_msg: complete messages -------------------------------------------


class Text(_Payload, frozen=True, tag="text"):
    """Plain text from the user, the assistant or a harness (``sender``)."""

    role: str
    text: str
    sender: str | UnsetType = UNSET
    stop_reason: str | UnsetType = UNSET
    fidelity: Raw | UnsetType = UNSET


class Thinking(_Payload, frozen=True, tag="thinking"):
    """Model reasoning text; ``fidelity`` often holds a required signature."""

    role: str
    thinking: str
    stop_reason: str | UnsetType = UNSET
    fidelity: Raw | UnsetType = UNSET


class InlineThinking(_Payload, frozen=True, tag="inline_thinking"):
    """Opaque reasoning bytes (base64) with their MIME type."""

    role: str
    data: str
    mime_type: str
    stop_reason: str | UnsetType = UNSET
    fidelity: Raw | UnsetType = UNSET


class ToolCall(_Payload, frozen=True, tag="tool_call"):
    """A tool request; ``arguments`` is a JSON document kept as a string."""

    role: str
    name: str
    arguments: str
    tool_call_id: str
    stop_reason: str | UnsetType = UNSET
    fidelity: Raw | UnsetType = UNSET


class ToolCallOutput(_Payload, frozen=True, tag="tool_call_output", kw_only=True):
    """The answer to one tool call; ``images`` are data URLs."""

    role: str
    output: str
    images: tuple[str, ...] | UnsetType = UNSET
    tool_call_id: str
    stop_reason: str | UnsetType = UNSET


class ImageUrl(_Payload, frozen=True, tag="image_url"):
    """An image given by web URL or data URL."""

    role: str
    image_url: str
    stop_reason: str | UnsetType = UNSET


class InlineData(_Payload, frozen=True, tag="inline_data"):
    """Inline bytes (base64) with their MIME type."""

    role: str
    data: str
    mime_type: str
    stop_reason: str | UnsetType = UNSET
    fidelity: Raw | UnsetType = UNSET


# --- model_msg: streaming partials (live only, never in a trace) ------------


class PartialText(_Payload, frozen=True, tag="partial_text"):
    """A streamed text fragment."""

    role: str
    event_type: str
    text: str
    stop_reason: str | UnsetType = UNSET


class PartialThinking(_Payload, frozen=True, tag="partial_thinking"):
    """A streamed thinking fragment."""

    role: str
    event_type: str
    thinking: str
    stop_reason: str | UnsetType = UNSET


class PartialToolCall(_Payload, frozen=True, tag="partial_tool_call"):
    """A streamed fragment of a tool call's arguments."""

    role: str
    event_type: str
    name: str
    arguments: str
    tool_call_id: str
    stop_reason: str | UnsetType = UNSET


class PartialToolCallOutput(_Payload, frozen=True, tag="partial_tool_call_output", kw_only=True):
    """A streamed fragment of a tool's output."""

    role: str
    event_type: str
    output: str
    images: tuple[str, ...] | UnsetType = UNSET
    tool_call_id: str
    stop_reason: str | UnsetType = UNSET


# --- event_msg ----------------------------------------------------------------


class RequestBegin(_Payload, frozen=True, tag="request_begin"):
    """Opens one LLM request."""


class RequestEnd(_Payload, frozen=True, tag="request_end"):
    """Closes one LLM request; ``status == "completed"`` commits the turn."""

    status: str
    error_message: str | UnsetType = UNSET
    attempt: Number | UnsetType = UNSET
    retry_in_ms: Number | UnsetType = UNSET


class ApprovalDecision(_Payload, frozen=True, tag="approval_decision"):
    """The approval outcome for one tool call (allow, deny, forbidden)."""

    decision: str
    tool_call_id: str


class Abort(_Payload, frozen=True, tag="abort"):
    """The user or the harness aborted the run; PenguinHarness writes ``reason: null``."""

    reason: str | UnsetType | None = UNSET


class TokenUsage(_Payload, frozen=True, tag="token_usage"):
    """Cumulative session usage and the last request's usage."""

    session: TokenCounts
    request: TokenCounts


class CompactionBegin(_Payload, frozen=True, tag="compaction_begin"):
    """Context compaction starts (reason context|turns|manual, mode summarize|discard)."""

    reason: str
    mode: str
    context: Number
    turns: Number


class CompactionEnd(_Payload, frozen=True, tag="compaction_end"):
    """Context compaction ends; ``completed`` closes the shard's context."""

    reason: str
    mode: str
    status: str
    attempt: Number | UnsetType = UNSET
    error_message: str | UnsetType = UNSET


class GoalFinished(_Payload, frozen=True, tag="goal_finished"):
    """A goal-mode run ended (complete, blocked, budget_limited, aborted)."""

    outcome: str
    rounds: Number
    tokens_used: Number


class Subagent(_Payload, frozen=True, tag="subagent"):
    """Pointer to a direct child session, written where it was spawned."""

    session_id: str


class ToolDefinition(_Part, frozen=True):
    """One tool as sent to the model; ``parameters`` is an opaque JSON Schema."""

    name: str
    description: str
    parameters: Raw | UnsetType = UNSET


class ToolListReady(_Payload, frozen=True, tag="tool_list_ready"):
    """The session's full tool list, once known."""

    tools: tuple[ToolDefinition, ...]


class McpConnectBegin(_Payload, frozen=True, tag="mcp_connect_begin"):
    """MCP servers are being contacted."""

    servers: tuple[str, ...]


class McpServerResult(_Part, frozen=True):
    """One MCP server's connect outcome (transport stdio|http|sse)."""

    server: str
    transport: str
    status: str
    duration_ms: Number
    tools: Number | UnsetType = UNSET
    error: str | UnsetType = UNSET


class McpConnectEnd(_Payload, frozen=True, tag="mcp_connect_end"):
    """The MCP connect phase ended, with one result per server."""

    status: str
    results: tuple[McpServerResult, ...]


CompleteModelPayload = (
    Text | Thinking | InlineThinking | ToolCall | ToolCallOutput | ImageUrl | InlineData
)
PartialPayload = PartialText | PartialThinking | PartialToolCall | PartialToolCallOutput
ModelPayload = CompleteModelPayload | PartialPayload
EventPayload = (
    RequestBegin
    | RequestEnd
    | ApprovalDecision
    | Abort
    | TokenUsage
    | CompactionBegin
    | CompactionEnd
    | GoalFinished
    | Subagent
    | ToolListReady
    | McpConnectBegin
    | McpConnectEnd
)

COMPLETE_MODEL_TYPES: Final[tuple[type[_Payload], ...]] = (
    Text,
    Thinking,
    InlineThinking,
    ToolCall,
    ToolCallOutput,
    ImageUrl,
    InlineData,
)
PARTIAL_TYPES: Final[tuple[type[_Payload], ...]] = (
    PartialText,
    PartialThinking,
    PartialToolCall,
    PartialToolCallOutput,
)
EVENT_TYPES: Final[tuple[type[_Payload], ...]] = (
    RequestBegin,
    RequestEnd,
    ApprovalDecision,
    Abort,
    TokenUsage,
    CompactionBegin,
    CompactionEnd,
    GoalFinished,
    Subagent,
    ToolListReady,
    McpConnectBegin,
    McpConnectEnd,
)
