"""OmniMessage ``event_msg`` payloads, fields in PenguinHarness's wire order.

The conventions are those of ``omnimessage_payloads`` (see its docstring and
ADR 0003): frozen, tag ``type`` first, unset optional fields omitted, opaque
JSON kept as ``msgspec.Raw``, numbers as written, enumerations as ``str``.
"""

from __future__ import annotations

from typing import Final, get_args

from msgspec import UNSET, Raw, UnsetType

from pentrace.domain.omnimessage.payloads import NestedPart, Number, TaggedPayload, TokenCounts

# Re-exported whole by the package: a new payload is listed here and nowhere else.
__all__ = [
    "EVENT_TYPES",
    "Abort",
    "ApprovalDecision",
    "CompactionBegin",
    "CompactionEnd",
    "EventPayload",
    "ForeignRecord",
    "GoalFinished",
    "McpConnectBegin",
    "McpConnectEnd",
    "McpServerResult",
    "RequestBegin",
    "RequestEnd",
    "Subagent",
    "TokenUsage",
    "ToolDefinition",
    "ToolListReady",
]


# --- event_msg ----------------------------------------------------------------


class RequestBegin(TaggedPayload, frozen=True, tag="request_begin"):
    """Opens one LLM request."""


class RequestEnd(TaggedPayload, frozen=True, tag="request_end"):
    """Closes one LLM request; ``status == "completed"`` commits the turn."""

    status: str
    error_message: str | UnsetType = UNSET
    attempt: Number | UnsetType = UNSET
    retry_in_ms: Number | UnsetType = UNSET


class ApprovalDecision(TaggedPayload, frozen=True, tag="approval_decision"):
    """The approval outcome for one tool call (allow, deny, forbidden)."""

    decision: str
    tool_call_id: str


class Abort(TaggedPayload, frozen=True, tag="abort"):
    """The user or the harness aborted the run; PenguinHarness writes ``reason: null``."""

    reason: str | UnsetType | None = UNSET


class TokenUsage(TaggedPayload, frozen=True, tag="token_usage"):
    """Cumulative session usage and the last request's usage."""

    session: TokenCounts
    request: TokenCounts


class Compaction(TaggedPayload, frozen=True):
    """Base of the compaction events: their ``reason`` and ``mode`` come first."""

    reason: str
    mode: str


class CompactionBegin(Compaction, frozen=True, tag="compaction_begin"):
    """Context compaction starts (reason context|turns|manual, mode summarize|discard)."""

    context: Number
    turns: Number


class CompactionEnd(Compaction, frozen=True, tag="compaction_end"):
    """Context compaction ends; ``completed`` closes the shard's context."""

    status: str
    attempt: Number | UnsetType = UNSET
    error_message: str | UnsetType = UNSET


class GoalFinished(TaggedPayload, frozen=True, tag="goal_finished"):
    """A goal-mode run ended (complete, blocked, budget_limited, aborted)."""

    outcome: str
    rounds: Number
    tokens_used: Number


class Subagent(TaggedPayload, frozen=True, tag="subagent"):
    """Pointer to a direct child session, written where it was spawned."""

    session_id: str


class ToolDefinition(NestedPart, frozen=True):
    """One tool as sent to the model; ``parameters`` is an opaque JSON Schema."""

    name: str
    description: str
    parameters: Raw | UnsetType = UNSET


class ToolListReady(TaggedPayload, frozen=True, tag="tool_list_ready"):
    """The session's full tool list, once known."""

    tools: tuple[ToolDefinition, ...]


class McpConnectBegin(TaggedPayload, frozen=True, tag="mcp_connect_begin"):
    """MCP servers are being contacted."""

    servers: tuple[str, ...]


class McpServerResult(NestedPart, frozen=True):
    """One MCP server's connect outcome (transport stdio|http|sse)."""

    server: str
    transport: str
    status: str
    duration_ms: Number
    tools: Number | UnsetType = UNSET
    error: str | UnsetType = UNSET


class McpConnectEnd(TaggedPayload, frozen=True, tag="mcp_connect_end"):
    """The MCP connect phase ended, with one result per server."""

    status: str
    results: tuple[McpServerResult, ...]


class ForeignRecord(TaggedPayload, frozen=True, tag="foreign_record"):
    """A line of another agent's session store that maps to no record (ADR 0095): its
    ``record_type``, and the ``problem`` it has when it breaks that agent's own resume.
    The line itself is kept in the envelope's ``foreign`` key."""

    agent: str
    record_type: str
    note: str | UnsetType = UNSET
    problem: str | UnsetType = UNSET


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
    | ForeignRecord
)

# The union is the one list; the tuple (for isinstance and lookups) comes from it.
EVENT_TYPES: Final[tuple[type[TaggedPayload], ...]] = get_args(EventPayload)
