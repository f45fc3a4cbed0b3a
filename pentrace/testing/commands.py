"""The commands a harness gives a session, as plain frozen values.

Each command stands for the trace records PenguinHarness writes for it (see
:mod:`pentrace.testing.render`).  They are deliberately independent of the
Session aggregate's method names so that the same generated sequence can drive
the aggregate, the trace renderer, or a user's own projection.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = [
    "STOP_STATUSES",
    "Abort",
    "Approval",
    "AssistantText",
    "BeginRequest",
    "Command",
    "CompactionBegin",
    "CompactionEnd",
    "EndRequest",
    "StartSession",
    "SubagentPointer",
    "Thinking",
    "TokenCounts",
    "TokenUsage",
    "ToolCall",
    "ToolOutput",
    "UserInput",
]

# Every request_end status PenguinHarness writes; only "completed" commits a round.
STOP_STATUSES = ("completed", "failed", "aborted", "timeout", "malformed", "auth")


@dataclass(frozen=True, slots=True)
class StartSession:
    """Open the session: ``session_meta`` then ``tool_list_ready``."""

    provider: str = "deepseek"
    model_id: str = "deepseek-v4-pro"
    model_context_window: int = 1_000_000
    system_prompt: str = "You are a careful coding agent."
    workspace: str = "/home/user/work"
    agent_state: str = "/home/user/.penguin/data/default_project/agents/default_agent/agent_state"
    tools: tuple[str, ...] = ("exec_command", "read_file")


@dataclass(frozen=True, slots=True)
class UserInput:
    """A user-role ``text`` message; the harness writes it before ``request_begin``."""

    text: str


@dataclass(frozen=True, slots=True)
class BeginRequest:
    """``request_begin``: one LLM API call starts."""


@dataclass(frozen=True, slots=True)
class AssistantText:
    """An assistant ``text`` message inside a request."""

    text: str


@dataclass(frozen=True, slots=True)
class Thinking:
    """An assistant ``thinking`` message inside a request."""

    thinking: str


@dataclass(frozen=True, slots=True)
class _OfCall:
    """Base of the commands about one tool call: its id comes first."""

    tool_call_id: str


@dataclass(frozen=True, slots=True)
class ToolCall(_OfCall):
    """An assistant ``tool_call`` inside a request (``arguments`` is a JSON string)."""

    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Approval(_OfCall):
    """``approval_decision`` for a tool call: ``allow``, ``deny`` or ``forbidden``."""

    decision: str


@dataclass(frozen=True, slots=True)
class ToolOutput(_OfCall):
    """A user-role ``tool_call_output`` answering an earlier call of the same request."""

    output: str


@dataclass(frozen=True, slots=True)
class Abort:
    """``abort``: the user interrupted the request."""

    reason: str = "user_interrupt"


@dataclass(frozen=True, slots=True)
class EndRequest:
    """``request_end`` with a status; only ``completed`` commits the round."""

    status: str = "completed"


@dataclass(frozen=True, slots=True)
class TokenCounts:
    """PenguinHarness ``TokenCounts``: cache_read, cache_write, output, total."""

    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    total: int = 0

    def __add__(self, other: TokenCounts) -> TokenCounts:
        return TokenCounts(
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
            self.output + other.output,
            self.total + other.total,
        )

    def as_dict(self) -> dict[str, int]:
        """The JSON object PenguinHarness writes for these counts (fields in order)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """``token_usage``: the session's running totals and the last request's counts."""

    session: TokenCounts
    request: TokenCounts


@dataclass(frozen=True, slots=True)
class _Compaction:
    """Base of the compaction commands: reason (context|turns|manual), then mode."""

    reason: str = "context"
    mode: str = "summarize"


@dataclass(frozen=True, slots=True)
class CompactionBegin(_Compaction):
    """``compaction_begin``: a compaction request follows."""


@dataclass(frozen=True, slots=True)
class CompactionEnd(_Compaction):
    """``compaction_end``; after a completed one the next write rotates to a new shard."""

    status: str = "completed"


@dataclass(frozen=True, slots=True)
class SubagentPointer:
    """``subagent``: the parent's pointer to a child session with its own trace."""

    session_id: str


Command = (
    StartSession
    | UserInput
    | BeginRequest
    | AssistantText
    | Thinking
    | ToolCall
    | Approval
    | ToolOutput
    | Abort
    | EndRequest
    | TokenUsage
    | CompactionBegin
    | CompactionEnd
    | SubagentPointer
)
