"""OmniMessage ``session_meta`` and ``model_msg`` payload Structs (events are in
``omnimessage_events``), field for field as PenguinHarness writes them.  Import
them from ``pentrace.domain.omnimessage``.

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

from typing import Final, Literal, get_args

import msgspec
from msgspec import UNSET, Raw, UnsetType

# Re-exported whole by the package: a new payload is listed here and nowhere else.
__all__ = [
    "COMPLETE_MODEL_TYPES",
    "PARTIAL_TYPES",
    "STOP_REASONS",
    "CompleteModelPayload",
    "ImageUrl",
    "InlineData",
    "InlineThinking",
    "ModelPayload",
    "Number",
    "PartialPayload",
    "PartialText",
    "PartialThinking",
    "PartialToolCall",
    "PartialToolCallOutput",
    "Role",
    "SessionMeta",
    "StopReason",
    "StreamEventType",
    "Text",
    "Thinking",
    "TokenCounts",
    "ToolCall",
    "ToolCallOutput",
]

Number = int | float
"""A JSON number as written: ``int`` for integer literals, ``float`` otherwise."""

StopReason = Literal["completed", "failed", "aborted", "timeout", "malformed", "auth"]
STOP_REASONS: Final[frozenset[str]] = frozenset(
    ("completed", "failed", "aborted", "timeout", "malformed", "auth")
)
Role = Literal["user", "assistant"]
StreamEventType = Literal["start", "delta", "stop"]


class TaggedPayload(
    msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, dict=True, tag_field="type"
):
    """Base of every tagged payload: frozen, tag ``type`` first, unset fields omitted."""


class NestedPart(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
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


class ModelMessage(TaggedPayload, frozen=True):
    """Base of the ``model_msg`` payloads: the speaker's ``role`` is their first field."""

    role: str


class Text(ModelMessage, frozen=True, tag="text"):
    """Plain text from the user, the assistant or a harness (``sender``)."""

    text: str
    sender: str | UnsetType = UNSET
    stop_reason: str | UnsetType = UNSET
    fidelity: Raw | UnsetType = UNSET


class Thinking(ModelMessage, frozen=True, tag="thinking"):
    """Model reasoning text; ``fidelity`` often holds a required signature."""

    thinking: str
    stop_reason: str | UnsetType = UNSET
    fidelity: Raw | UnsetType = UNSET


class InlineBytes(ModelMessage, frozen=True):
    """Base of the messages that carry bytes (base64 ``data``) with their MIME type."""

    data: str
    mime_type: str
    stop_reason: str | UnsetType = UNSET
    fidelity: Raw | UnsetType = UNSET


class InlineThinking(InlineBytes, frozen=True, tag="inline_thinking"):
    """Opaque reasoning bytes (base64) with their MIME type."""


class ToolCall(ModelMessage, frozen=True, tag="tool_call"):
    """A tool request; ``arguments`` is a JSON document kept as a string."""

    name: str
    arguments: str
    tool_call_id: str
    stop_reason: str | UnsetType = UNSET
    fidelity: Raw | UnsetType = UNSET


class ToolCallOutput(ModelMessage, frozen=True, tag="tool_call_output", kw_only=True):
    """The answer to one tool call; ``images`` are data URLs."""

    output: str
    images: tuple[str, ...] | UnsetType = UNSET
    tool_call_id: str
    stop_reason: str | UnsetType = UNSET


class ImageUrl(ModelMessage, frozen=True, tag="image_url"):
    """An image given by web URL or data URL."""

    image_url: str
    stop_reason: str | UnsetType = UNSET


class InlineData(InlineBytes, frozen=True, tag="inline_data"):
    """Inline bytes (base64) with their MIME type."""


# --- model_msg: streaming partials (live only, never in a trace) ------------


class PartialMessage(ModelMessage, frozen=True):
    """Base of the streamed partials: ``role``, then the stream ``event_type``."""

    event_type: str


class PartialText(PartialMessage, frozen=True, tag="partial_text"):
    """A streamed text fragment."""

    text: str
    stop_reason: str | UnsetType = UNSET


class PartialThinking(PartialMessage, frozen=True, tag="partial_thinking"):
    """A streamed thinking fragment."""

    thinking: str
    stop_reason: str | UnsetType = UNSET


class PartialToolCall(PartialMessage, frozen=True, tag="partial_tool_call"):
    """A streamed fragment of a tool call's arguments."""

    name: str
    arguments: str
    tool_call_id: str
    stop_reason: str | UnsetType = UNSET


class PartialToolCallOutput(
    PartialMessage, frozen=True, tag="partial_tool_call_output", kw_only=True
):
    """A streamed fragment of a tool's output."""

    output: str
    images: tuple[str, ...] | UnsetType = UNSET
    tool_call_id: str
    stop_reason: str | UnsetType = UNSET


CompleteModelPayload = (
    Text | Thinking | InlineThinking | ToolCall | ToolCallOutput | ImageUrl | InlineData
)
PartialPayload = PartialText | PartialThinking | PartialToolCall | PartialToolCallOutput
ModelPayload = CompleteModelPayload | PartialPayload
# The unions are the one list; the tuples (for isinstance and lookups) come from them.
COMPLETE_MODEL_TYPES: Final[tuple[type[TaggedPayload], ...]] = get_args(CompleteModelPayload)
PARTIAL_TYPES: Final[tuple[type[TaggedPayload], ...]] = get_args(PartialPayload)
