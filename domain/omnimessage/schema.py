"""JSON Schema export of a trace line, built from the payload Structs."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from pentrace.domain.omnimessage.codec import ENVELOPE_TYPES
from pentrace.domain.omnimessage.events import EventPayload
from pentrace.domain.omnimessage.payloads import CompleteModelPayload, SessionMeta

__all__ = ["envelope_json_schema"]

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
