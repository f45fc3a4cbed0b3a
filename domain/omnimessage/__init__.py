"""OmniMessage: the typed trace-line schema shared with PenguinHarness.

This thin public module re-exports five parts; import from here:

- ``omnimessage_payloads`` and ``omnimessage_events``: one frozen msgspec
  Struct per payload type, fields in PenguinHarness's wire order, partials
  included;
- ``omnimessage_codec``: :class:`Envelope`, :func:`decode_envelope`,
  :func:`encode_envelope` (faithful: an unmodified decoded line re-encodes to
  its original bytes) and predicates;
- ``omnimessage_schema``: the JSON Schema export;
- ``omnimessage_build``: builders with PenguinHarness's defaults, and
  :func:`format_timestamp` (the domain takes time as an argument).

The format is specified in ``docs/trace-format.md``; the fidelity and
unknown-field design is ADR 0003.
"""

from __future__ import annotations

from msgspec import UNSET, Raw, UnsetType

# The payload modules' own ``__all__`` lists are re-exported whole (extended below), so a
# new payload Struct is named once, in its module; the star imports are that re-export.
from pentrace.domain.omnimessage import events, payloads
from pentrace.domain.omnimessage.build import (
    abort,
    as_fidelity,
    format_timestamp,
    image_url_message,
    inline_data_message,
    inline_thinking_message,
    make_envelope,
    parse_timestamp,
    text_message,
    thinking_message,
    tool_call_message,
    tool_call_output_message,
)
from pentrace.domain.omnimessage.codec import (
    ENVELOPE_TYPES,
    LEGACY_META_KEYS,
    Envelope,
    Payload,
    UnknownPayload,
    decode_envelope,
    encode_envelope,
    envelope_from_record,
    envelope_json_schema,
    envelope_type_for,
    is_partial,
    is_recordable,
    payload_type,
)
from pentrace.domain.omnimessage.events import *  # noqa: F403
from pentrace.domain.omnimessage.payloads import *  # noqa: F403

__all__ = [
    "ENVELOPE_TYPES",
    "LEGACY_META_KEYS",
    "UNSET",
    "Envelope",
    "Payload",
    "Raw",
    "UnknownPayload",
    "UnsetType",
    "abort",
    "as_fidelity",
    "decode_envelope",
    "encode_envelope",
    "envelope_from_record",
    "envelope_json_schema",
    "envelope_type_for",
    "format_timestamp",
    "image_url_message",
    "inline_data_message",
    "inline_thinking_message",
    "is_partial",
    "is_recordable",
    "make_envelope",
    "parse_timestamp",
    "payload_type",
    "text_message",
    "thinking_message",
    "tool_call_message",
    "tool_call_output_message",
]
__all__ += events.__all__
__all__ += payloads.__all__
