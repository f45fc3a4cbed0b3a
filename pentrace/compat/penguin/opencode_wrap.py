"""Penguin's ``runtime_event_from_opencode`` and ``wrap_opencode_event``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pentrace.compat.penguin._common import (
    extract_directory,
    fill_defaults,
    first_string,
    normalize_event_directory,
)
from pentrace.compat.penguin.envelope import (
    build_runtime_event,
    opencode_payload_from_runtime_event,
)
from pentrace.compat.penguin.normalize import normalize_runtime_event
from pentrace.domain.runtime.scope import source_id

__all__ = ["runtime_event_from_opencode", "wrap_opencode_event"]


def runtime_event_from_opencode(
    data: Mapping[str, Any],
    *,
    default_agent_id: str | None = None,
    default_directory: str | None = None,
    default_session_id: str | None = None,
    now_ms: int | None = None,
    sequence: int | None = None,
) -> dict[str, Any] | None:
    """The RuntimeEvent of an OpenCode payload ``{type, properties[, id, runtime_event]}``.

    None without a usable type.  An attached ``runtime_event`` is normalised
    with the properties as overlay, as Penguin does (ADR 0101): an envelope
    Penguin built comes back unchanged, and a scope is completed from the
    payload as ``build_runtime_event`` would have made it (``workspace``
    beside ``directory``); otherwise a new envelope is built whose
    ``projections.opencode.id`` is the payload's ``id``, else
    ``<type>:<top-level session or ->:<source id>``, the sequence standing in
    for a missing source id.
    """
    event_type = data.get("type")
    existing = data.get("runtime_event")
    if (not isinstance(event_type, str) or not event_type) and isinstance(existing, Mapping):
        event_type = existing.get("type")
    if not isinstance(event_type, str) or not event_type:
        return None
    raw = data.get("properties")
    properties = dict(raw) if isinstance(raw, Mapping) else {}
    fill_defaults(properties, ("sessionID", "session_id"), default_agent_id, default_session_id)
    directory = normalize_event_directory(extract_directory(properties) or default_directory)
    if directory:
        properties["directory"] = directory
    if isinstance(existing, Mapping):
        normalized = normalize_runtime_event(
            existing,
            default_agent_id=default_agent_id,
            default_directory=directory or default_directory,
            default_session_id=default_session_id,
            now_ms=now_ms,
            overlay_payload=properties,
            sequence=sequence,
        )
        if normalized:
            return normalized
    found = source_id(properties)
    projection_id = data.get("id")
    pending = False
    if not isinstance(projection_id, str) or not projection_id:
        session = first_string(properties, ("sessionID", "session_id", "conversation_id"))
        pending = found is None
        projection_id = f"{event_type}:{session or '-'}:{found or 'pending'}"
    event = build_runtime_event(
        event_type=event_type,
        payload=properties,
        projections={"opencode": {"id": projection_id, "type": event_type}},
        sequence=sequence,
        time_ms=now_ms,
    )
    if pending:
        session = event["scope"].get("session_id")
        event["projections"]["opencode"]["id"] = (
            f"{event_type}:{session or '-'}:{event['sequence']}"
        )
    return event


def wrap_opencode_event(
    event_type: str,
    properties: Mapping[str, Any],
    *,
    default_agent_id: str | None = None,
    default_directory: str | None = None,
    default_session_id: str | None = None,
    now_ms: int | None = None,
) -> dict[str, Any]:
    """The EventBus payload ``{type, properties, runtime_event, id, time, order}``.

    ``properties`` become the envelope's projected (redacted) properties; with
    no usable type the payload comes back without an envelope.
    """
    data: dict[str, Any] = {"type": event_type, "properties": dict(properties)}
    runtime_event = runtime_event_from_opencode(
        data,
        default_agent_id=default_agent_id,
        default_directory=default_directory,
        default_session_id=default_session_id,
        now_ms=now_ms,
    )
    if runtime_event is not None:
        data["runtime_event"] = runtime_event
        projected = opencode_payload_from_runtime_event(runtime_event)
        data["id"] = projected["id"]
        data["time"] = projected["time"]
        data["order"] = projected["order"]
        data["properties"] = dict(projected["properties"])
    return data
