"""Builders that produce payloads exactly as PenguinHarness's builders do.

PenguinHarness always writes ``stop_reason`` on complete model messages
(``"completed"`` unless told otherwise), writes fidelity and tool-output images
only when non-empty, and writes ``abort.reason`` as ``null`` when there is
none.  The Structs cannot express "default but still written", so these
functions do.  Time is always passed in: the domain never reads the clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from msgspec import UNSET, Raw, UnsetType

from pentrace.domain.json_codec import JsonEncoder
from pentrace.domain.omnimessage.codec import Envelope, Payload, envelope_type_for
from pentrace.domain.omnimessage.events import Abort
from pentrace.domain.omnimessage.payloads import (
    ImageUrl,
    InlineData,
    InlineThinking,
    Role,
    StopReason,
    Text,
    Thinking,
    ToolCall,
    ToolCallOutput,
)
from pentrace.errors import UsageError

__all__ = [
    "abort",
    "as_fidelity",
    "format_timestamp",
    "image_url_message",
    "inline_data_message",
    "inline_thinking_message",
    "make_envelope",
    "parse_timestamp",
    "text_message",
    "thinking_message",
    "tool_call_message",
    "tool_call_output_message",
]

FidelityInput = Raw | Mapping[str, Any] | UnsetType
_encoder: Final = JsonEncoder()


def format_timestamp(moment: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` in UTC, as JavaScript's ``toISOString`` writes it.

    Sub-millisecond digits are truncated, not rounded, like a JavaScript Date.
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise UsageError(
            f"expected a timezone-aware datetime, found naive {moment.isoformat()}",
            hint="pass datetime.now(timezone.utc) or attach a tzinfo",
        )
    utc = moment.astimezone(UTC)
    return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"


def parse_timestamp(text: str) -> datetime:
    """The aware UTC datetime of an envelope timestamp (any ISO 8601 form Python reads)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"expected an ISO 8601 timestamp like 2026-07-18T03:10:22.531Z, found {text!r}",
            hint="envelope timestamps come from format_timestamp()",
        ) from None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def as_fidelity(fidelity: FidelityInput) -> Raw | UnsetType:
    """Opaque provider fidelity as raw JSON; an empty mapping counts as absent.

    A ``Raw`` is kept byte for byte; a mapping is encoded once, here.
    """
    if isinstance(fidelity, Raw):
        return fidelity
    if fidelity is UNSET or not fidelity:
        return UNSET
    return Raw(_encoder.encode(fidelity))


def make_envelope(
    timestamp: str, payload: Payload, *, origin: Sequence[str] | UnsetType = UNSET
) -> Envelope:
    """Wrap a known payload in an envelope whose ``type`` is derived from the payload."""
    kind = envelope_type_for(payload)
    if kind is None:
        raise UsageError(
            f"cannot derive an envelope type for {type(payload).__name__}",
            hint="build Envelope(type=..., payload=...) directly for unknown payloads",
        )
    chain = UNSET if isinstance(origin, UnsetType) else tuple(origin)
    return Envelope(timestamp=timestamp, type=kind, payload=payload, origin=chain)


def text_message(
    role: Role,
    text: str,
    *,
    sender: str | UnsetType = UNSET,
    stop_reason: StopReason = "completed",
    fidelity: FidelityInput = UNSET,
) -> Text:
    """A complete ``text`` message."""
    return Text(
        role=role,
        text=text,
        sender=sender,
        stop_reason=stop_reason,
        fidelity=as_fidelity(fidelity),
    )


def thinking_message(
    thinking: str, *, stop_reason: StopReason = "completed", fidelity: FidelityInput = UNSET
) -> Thinking:
    """A complete ``thinking`` message (always from the assistant)."""
    return Thinking(
        role="assistant",
        thinking=thinking,
        stop_reason=stop_reason,
        fidelity=as_fidelity(fidelity),
    )


def inline_thinking_message(
    data: str, mime_type: str, *, fidelity: FidelityInput = UNSET
) -> InlineThinking:
    """A complete ``inline_thinking`` message (base64 data)."""
    return InlineThinking(
        role="assistant",
        data=data,
        mime_type=mime_type,
        stop_reason="completed",
        fidelity=as_fidelity(fidelity),
    )


def tool_call_message(
    name: str,
    arguments: str,
    tool_call_id: str,
    *,
    stop_reason: StopReason = "completed",
    fidelity: FidelityInput = UNSET,
) -> ToolCall:
    """A complete ``tool_call``; ``arguments`` is the JSON text the model produced."""
    return ToolCall(
        role="assistant",
        name=name,
        arguments=arguments,
        tool_call_id=tool_call_id,
        stop_reason=stop_reason,
        fidelity=as_fidelity(fidelity),
    )


def tool_call_output_message(
    output: str,
    tool_call_id: str,
    *,
    images: Sequence[str] = (),
    stop_reason: StopReason = "completed",
) -> ToolCallOutput:
    """A complete ``tool_call_output``; images (data URLs) are written only when present."""
    return ToolCallOutput(
        role="user",
        output=output,
        images=tuple(images) if images else UNSET,
        tool_call_id=tool_call_id,
        stop_reason=stop_reason,
    )


def image_url_message(image_url: str) -> ImageUrl:
    """A user ``image_url`` message (web URL or data URL)."""
    return ImageUrl(role="user", image_url=image_url, stop_reason="completed")


def inline_data_message(
    role: Role, data: str, mime_type: str, *, fidelity: FidelityInput = UNSET
) -> InlineData:
    """A complete ``inline_data`` message (base64 data)."""
    return InlineData(
        role=role,
        data=data,
        mime_type=mime_type,
        stop_reason="completed",
        fidelity=as_fidelity(fidelity),
    )


def abort(reason: str | None = None) -> Abort:
    """An ``abort`` event; like PenguinHarness, a missing reason is written as ``null``."""
    return Abort(reason=reason)
