"""The OmniMessage envelope and its codec: typed decode, faithful re-encode.

A decoded :class:`Envelope` remembers the exact bytes it came from, and so
does its payload.  Both are frozen, so an instance that still carries its
bytes is provably unmodified; :func:`encode_envelope` then returns those bytes,
which keeps unknown keys, key order, number spelling, escapes and fidelity
exactly as the writer produced them.  Any change is made with
``msgspec.structs.replace``, which builds a new instance *without* the
remembered bytes, so stale bytes can never be emitted.  See ADR 0003.

The JSON Schema of a trace line (:func:`envelope_json_schema`) is built here too, from the
payload Structs.
"""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw, UnsetType

from pentrace.domain.json_codec import JsonEncoder, encode_escaped
from pentrace.domain.omnimessage.events import EVENT_TYPES, EventPayload
from pentrace.domain.omnimessage.payloads import (
    COMPLETE_MODEL_TYPES,
    PARTIAL_TYPES,
    CompleteModelPayload,
    ModelPayload,
    SessionMeta,
)
from pentrace.domain.records import TraceRecord
from pentrace.errors import EnvelopeFormatError

__all__ = [
    "ENVELOPE_TYPES",
    "Envelope",
    "Payload",
    "UnknownPayload",
    "decode_envelope",
    "encode_envelope",
    "envelope_from_record",
    "envelope_json_schema",
    "envelope_type_for",
    "is_partial",
    "is_recordable",
    "payload_type",
]

ENVELOPE_TYPES: Final = ("session_meta", "model_msg", "event_msg")
LEGACY_META_KEYS: Final = frozenset(("tools", "thinking_level"))
_SOURCE: Final = "_pentrace_source"
_JSON_WHITESPACE: Final = b" \t\r\n"
_HINT: Final = (
    "read the line with pentrace.domain.records.decode_line, which accepts any JSON value, "
    "or run `pentrace audit` on the trace"
)


class UnknownPayload(msgspec.Struct, frozen=True):
    """A payload of a type this version does not know, kept as its exact JSON bytes."""

    raw: Raw
    payload_type: str | None = None


Payload = SessionMeta | ModelPayload | EventPayload | UnknownPayload


class Envelope(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, dict=True):
    """One trace line: ``{timestamp, type, payload[, origin]}``.

    ``origin`` lists child session ids outer to inner; it is omitted when unset.
    Encode with :func:`encode_envelope`, not ``msgspec.json.encode`` directly,
    so that remembered bytes and unknown payloads are honoured.
    """

    timestamp: str
    type: str
    payload: Payload
    origin: tuple[str, ...] | UnsetType = UNSET


class _Wire(msgspec.Struct, omit_defaults=True):
    timestamp: str
    type: str
    payload: Raw
    origin: tuple[str, ...] | UnsetType = UNSET


class _TypePeek(msgspec.Struct):
    type: Any = None


_ENVELOPE_TYPE_OF: Final[dict[type, str]] = {SessionMeta: "session_meta"}
_ENVELOPE_TYPE_OF.update(dict.fromkeys(COMPLETE_MODEL_TYPES + PARTIAL_TYPES, "model_msg"))
_ENVELOPE_TYPE_OF.update(dict.fromkeys(EVENT_TYPES, "event_msg"))

_TAGS: Final[dict[str, frozenset[str]]] = {
    "model_msg": frozenset(
        str(cls.__struct_config__.tag) for cls in COMPLETE_MODEL_TYPES + PARTIAL_TYPES
    ),
    "event_msg": frozenset(str(cls.__struct_config__.tag) for cls in EVENT_TYPES),
}
_DECODERS: Final[dict[str, msgspec.json.Decoder[Any]]] = {
    "session_meta": msgspec.json.Decoder(SessionMeta),
    "model_msg": msgspec.json.Decoder(ModelPayload),
    "event_msg": msgspec.json.Decoder(EventPayload),
}
_wire_decoder: Final = msgspec.json.Decoder(_Wire)
_peek_decoder: Final = msgspec.json.Decoder(_TypePeek)
_fields_decoder: Final = msgspec.json.Decoder(dict[str, Raw])
_encoder: Final = JsonEncoder()
_fast_encode: Final = msgspec.json.Encoder().encode  # encode_envelope's hot path


def payload_type(payload: Payload) -> str | None:
    """The payload's ``type`` tag (``None`` for ``session_meta``, which has none)."""
    if isinstance(payload, UnknownPayload):
        return payload.payload_type
    tag = payload.__struct_config__.tag
    return tag if isinstance(tag, str) else None


def envelope_type_for(payload: Payload) -> str | None:
    """The envelope ``type`` a known payload belongs in; ``None`` for an unknown payload."""
    return _ENVELOPE_TYPE_OF.get(type(payload))


def is_partial(payload: Payload) -> bool:
    """True for the live-only ``partial_*`` payloads, which are never written to a trace."""
    return isinstance(payload, PARTIAL_TYPES)


def is_recordable(envelope: Envelope) -> bool:
    """True when a trace writer may append this envelope.

    Partials are streamed but never recorded, and messages tagged with
    ``origin`` belong to the child session's own trace.
    """
    return not is_partial(envelope.payload) and not envelope.origin


def _remember(value: Any, source: bytes | Raw) -> None:
    value.__dict__[_SOURCE] = source


def _shape_error(exc: msgspec.ValidationError, prefix: str, where: str) -> EnvelopeFormatError:
    message = str(exc)
    if " - at `$" in message:
        message = message.replace(" - at `$", f" - at `${prefix}", 1)
    else:
        message = f"{message} - at `${prefix}`"
    return EnvelopeFormatError(f"{where}invalid OmniMessage envelope: {message}", hint=_HINT)


def _too_deep(where: str) -> EnvelopeFormatError:
    return EnvelopeFormatError(
        f"{where}invalid OmniMessage envelope: JSON nested too deeply to decode", hint=_HINT
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not strict JSON")


def _json_error(exc: msgspec.DecodeError, data: bytes, where: str) -> EnvelopeFormatError:
    """Tell invalid JSON apart from JSON that JavaScript accepts but msgspec cannot hold."""
    try:
        json.loads(data, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return EnvelopeFormatError(
            f"{where}expected one strict JSON object per line, found invalid JSON ({exc})",
            hint=_HINT,
        )
    return EnvelopeFormatError(
        f"{where}the line is valid JSON but holds a lone surrogate escape, which typed "
        f"decoding cannot represent ({exc})",
        hint=_HINT,
    )


def _strip_legacy(payload_raw: Raw) -> Raw | None:
    """Return the payload's bytes without legacy keys, or ``None`` when it has none.

    Only ``session_meta`` payloads come here, one per shard, so a full key scan
    is cheap and also catches keys spelled with escapes.
    """
    try:
        fields = _fields_decoder.decode(payload_raw)
    except (msgspec.DecodeError, RecursionError):
        return None  # not an object: the typed decode reports the shape error
    if LEGACY_META_KEYS.isdisjoint(fields):
        return None
    kept = {key: value for key, value in fields.items() if key not in LEGACY_META_KEYS}
    return Raw(_encoder.encode(kept))


def _decode_payload(kind: str, payload_raw: Raw, where: str) -> Payload:
    decoder = _DECODERS.get(kind)
    if decoder is None:
        return UnknownPayload(raw=payload_raw, payload_type=_peek_type(payload_raw))
    try:
        payload: Payload = decoder.decode(payload_raw)
    except RecursionError:
        raise _too_deep(where) from None
    except msgspec.ValidationError as exc:
        ptype = _peek_type(payload_raw)
        if kind in _TAGS and isinstance(ptype, str) and ptype not in _TAGS[kind]:
            return UnknownPayload(raw=payload_raw, payload_type=ptype)
        raise _shape_error(exc, ".payload", where) from None
    except msgspec.DecodeError as exc:
        raise _json_error(exc, bytes(payload_raw), where) from None
    _remember(payload, payload_raw)
    return payload


def _peek_type(payload_raw: Raw) -> str | None:
    try:
        ptype = _peek_decoder.decode(payload_raw).type
    except (msgspec.DecodeError, RecursionError):
        return None
    return ptype if isinstance(ptype, str) else None


def decode_envelope(raw: bytes, *, where: str = "") -> Envelope:
    """Decode one trace line (no trailing newline needed) into a typed :class:`Envelope`.

    Unknown payload types become :class:`UnknownPayload`; unknown keys are kept
    in the remembered bytes.  ``where`` (e.g. ``"trace.jsonl:12: "``) prefixes
    error messages.  Raises :class:`~pentrace.errors.EnvelopeFormatError`
    naming the field path when the line is not an envelope.
    """
    data = bytes(raw).strip(_JSON_WHITESPACE)
    try:
        wire = _wire_decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise _shape_error(exc, "", where) from None
    except msgspec.DecodeError as exc:
        raise _json_error(exc, data, where) from None
    except RecursionError:
        raise _too_deep(where) from None
    payload_raw = wire.payload
    if wire.type == "session_meta":
        stripped = _strip_legacy(payload_raw)
        if stripped is not None:
            line_fields = _fields_decoder.decode(data)
            line_fields["payload"] = stripped
            data = _encoder.encode(line_fields)
            payload_raw = stripped
    payload = _decode_payload(wire.type, payload_raw, where)
    envelope = Envelope(
        timestamp=wire.timestamp, type=wire.type, payload=payload, origin=wire.origin
    )
    _remember(envelope, data)
    return envelope


def envelope_from_record(record: TraceRecord) -> Envelope:
    """The typed envelope of a parsed trace line; errors name the record's line number."""
    where = f"line {record.line}: " if record.line else ""
    return decode_envelope(record.raw, where=where)


def encode_envelope(envelope: Envelope) -> bytes:
    """Encode one envelope as a trace line, without the trailing newline.

    An unmodified decoded envelope yields its original bytes; a new or changed
    one is encoded field by field in PenguinHarness's key order, reusing any
    unmodified payload's original bytes.
    """
    source = envelope.__dict__.get(_SOURCE)
    if source is not None:
        return bytes(source)
    payload = envelope.payload
    expected = _ENVELOPE_TYPE_OF.get(type(payload))
    if expected is not None and expected != envelope.type:
        raise EnvelopeFormatError(
            f"envelope type {envelope.type!r} does not match its payload: "
            f"{type(payload).__name__} belongs in {expected!r}",
            hint="build envelopes with make_envelope(), which derives the type",
        )
    if isinstance(payload, UnknownPayload):
        payload_raw: Raw | None = payload.raw
    else:
        payload_raw = payload.__dict__.get(_SOURCE)
    value: Any = envelope
    if payload_raw is not None:
        value = _Wire(envelope.timestamp, envelope.type, payload_raw, envelope.origin)
    try:
        return _fast_encode(value)
    except UnicodeEncodeError:
        return encode_escaped(value)  # lone surrogates become JSON escapes (ADR 0015)


_OPAQUE_OBJECTS: Final = {
    "fidelity": "opaque provider data, kept byte for byte",
    "parameters": "the tool's JSON Schema, kept byte for byte",
}


def envelope_json_schema() -> dict[str, Any]:
    """JSON Schema (2020-12) of a trace line: the envelope with every recordable payload."""
    groups: dict[str, Any] = {
        "session_meta": SessionMeta,
        "model_msg": CompleteModelPayload,
        "event_msg": EventPayload,
    }
    refs, defs = msgspec.json.schema_components(
        list(groups.values()), ref_template="#/$defs/{name}"
    )
    variants = [
        {"properties": {"type": {"const": kind}, "payload": ref}}
        for kind, ref in zip(groups, refs, strict=True)
    ]
    for definition in defs.values():
        properties = definition.get("properties", {})
        for name in _OPAQUE_OBJECTS.keys() & properties.keys():
            # msgspec describes Raw as "any JSON"; these hold JSON objects.
            properties[name] = {"type": "object", "description": _OPAQUE_OBJECTS[name]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "OmniMessage envelope (one trace line)",
        "type": "object",
        "properties": {
            "timestamp": {"type": "string", "description": "ISO 8601 UTC, milliseconds, Z"},
            "type": {"enum": list(ENVELOPE_TYPES)},
            "payload": {"type": "object"},
            "origin": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["timestamp", "type", "payload"],
        "oneOf": variants,
        "$defs": defs,
    }
