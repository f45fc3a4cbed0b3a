"""Penguin's envelope builders: constants, category, scope, redaction, the OpenCode view.

The rest of Penguin's ``runtime_events`` module is in :mod:`.normalize` and
:mod:`.opencode_wrap`; :mod:`.runtime_events` gathers them under Penguin's
module name and lists them in its ``__all__``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pentrace.compat.penguin import _common
from pentrace.compat.penguin._common import now_ms
from pentrace.domain.redaction import redact
from pentrace.domain.runtime.envelope import (
    CATEGORIES,
    DEFAULT_SOURCE,
    SCHEMA_VERSION,
    build_event,
)
from pentrace.domain.runtime.envelope import event_category as _event_category
from pentrace.domain.runtime.scope import extract_scope

RUNTIME_EVENT_SCHEMA_VERSION: Final = SCHEMA_VERSION
RUNTIME_EVENT_CATEGORIES: Final[set[str]] = set(CATEGORIES)


def event_category(event_type: str, payload: Mapping[str, Any] | None = None) -> str:
    """Penguin's category of an event type (``message.part.*`` judged on the part type)."""
    return _event_category(event_type, payload or {})


def extract_runtime_scope(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Penguin's scope of a payload (ids, then ``part``/``info``/``status``, then directory)."""
    home, cwd = _common.home_and_cwd()
    return dict(extract_scope(payload, home=home, cwd=cwd))


def redact_runtime_payload(value: Any, path: str = "") -> tuple[Any, list[str]]:
    """A redacted deep copy and the redacted paths (dotted, ``[i]``), each under ``path``."""
    result = redact(value)
    if not path:
        return result.value, result.paths
    return result.value, [
        path + found if found.startswith("[") else f"{path}.{found}" if found else path
        for found in result.paths
    ]


def build_runtime_event(
    *,
    event_type: str,
    payload: Mapping[str, Any],
    actor: Mapping[str, Any] | None = None,
    category: str | None = None,
    correlation: Mapping[str, Any] | None = None,
    event_id: str | None = None,
    projections: Mapping[str, Any] | None = None,
    scope: Mapping[str, Any] | None = None,
    sequence: int | None = None,
    source: str = DEFAULT_SOURCE,
    stream_id: str | None = None,
    subject: str | None = None,
    time_ms: int | None = None,
) -> dict[str, Any]:
    """One ``penguin.runtime_event.v1`` envelope as a dict, in Penguin's key order."""
    explicit = sequence if isinstance(sequence, int) and not isinstance(sequence, bool) else None

    def assign(stream: str) -> int:
        if explicit is None:
            return _common.next_sequence(stream)
        _common.raise_counter(stream, explicit)
        return explicit

    home, cwd = _common.home_and_cwd()
    event = build_event(
        event_type=event_type,
        payload=payload,
        time_ms=time_ms if time_ms is not None else now_ms(),
        sequence=assign,
        event_id=event_id,
        category=category,
        source=source,
        subject=subject,
        stream_id=stream_id,
        scope=scope,
        correlation=correlation,
        actor=actor,
        projections=projections,
        home=home,
        cwd=cwd,
    )
    return event.to_builtins()


def opencode_payload_from_runtime_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """Penguin's OpenCode view ``{id, order, time, type, properties}`` of an envelope."""
    payload = event.get("payload")
    properties = dict(payload) if isinstance(payload, Mapping) else {}
    scope = event.get("scope")
    if isinstance(scope, Mapping):
        for prop, key in (("sessionID", "session_id"), ("agentID", "agent_id")):
            if scope.get(key) and not isinstance(properties.get(prop), str):
                properties[prop] = scope[key]
        if scope.get("directory") and not isinstance(properties.get("directory"), str):
            properties["directory"] = scope["directory"]
    projections = event.get("projections")
    opencode = projections.get("opencode") if isinstance(projections, Mapping) else None
    opencode = opencode if isinstance(opencode, Mapping) else {}
    event_id, opencode_type = event.get("id"), opencode.get("type")
    return {
        "id": event_id if isinstance(event_id, str) else opencode.get("id"),
        "order": event.get("sequence", 0),
        "time": event["time"] if "time" in event else now_ms(),
        "type": opencode_type if isinstance(opencode_type, str) else event.get("type"),
        "properties": properties,
    }
