"""The ``penguin.runtime_event.v1`` envelope: one redacted, public view of an event.

:class:`RuntimeEvent` is a msgspec Struct whose fields are in Penguin's key
order, so ``msgspec.json.encode(event)`` is byte-compatible with Penguin's
envelopes.  :func:`build_event` applies Penguin's rules (category, scope,
correlation, subject, stream id, id) with three deliberate differences:

* every envelope field that can carry caller data - type, category, source,
  subject, scope, correlation, actor, projections - goes through the same
  redaction as the payload (Penguin copies them verbatim, W7); ids are never
  rewritten, so an id or stream id that holds a secret is refused by the ledger;
* an explicit ``scope.directory`` is normalised like a payload one and
  replaces ``workspace`` too (W11);
* stream ids are slugged injectively (W2).

The fields between the id and the payload (category, subject, scope, actor,
correlation, projections) are :mod:`.header`'s.  It is pure: time,
sequence, home and working directory are arguments.  Trace records become
events through :mod:`pentrace.domain.runtime.session_events`; the public
entry point for all of them is :mod:`pentrace.domain.runtime`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import msgspec

from pentrace.domain.redaction import redact
from pentrace.domain.runtime.header import (
    CATEGORIES,
    DEFAULT_SOURCE,
    Header,
    envelope_correlation,
    envelope_header,
    envelope_projections,
    event_category,
)
from pentrace.domain.runtime.scope import slug_stream_id

__all__ = [
    "CATEGORIES",
    "DEFAULT_SOURCE",
    "SCHEMA_VERSION",
    "Header",
    "Privacy",
    "RuntimeEvent",
    "assemble_event",
    "build_event",
    "envelope_correlation",
    "envelope_header",
    "envelope_projections",
    "event_category",
    "event_id_for",
    "opencode_payload",
]

SCHEMA_VERSION: Final = "penguin.runtime_event.v1"


class Privacy(msgspec.Struct, frozen=True):
    """What redaction did: ``sensitive`` with the hidden paths, or ``public``."""

    classification: str
    redacted: bool
    redacted_fields: list[str]


class RuntimeEvent(msgspec.Struct, frozen=True):
    """One ``penguin.runtime_event.v1`` envelope, fields in Penguin's key order."""

    id: str
    schema_version: str
    type: str
    category: str
    source: str
    subject: str
    time: int
    stream_id: str
    sequence: int
    scope: dict[str, Any]
    correlation: dict[str, Any]
    actor: dict[str, Any]
    privacy: Privacy
    payload: dict[str, Any]
    projections: dict[str, Any]

    def to_builtins(self) -> dict[str, Any]:
        """The envelope as plain dicts and lists, in key order."""
        value: dict[str, Any] = msgspec.to_builtins(self)
        return value


def event_id_for(stream_id: str, sequence: int) -> str:
    """``evt:<slug(stream_id)>:<sequence as %08d>``."""
    return f"evt:{slug_stream_id(stream_id)}:{sequence:08d}"


def assemble_event(
    header: Header,
    *,
    correlation: tuple[dict[str, Any], list[str]],
    body: dict[str, Any],
    payload_paths: list[str],
    time_ms: int,
    sequence: int,
    projections: tuple[dict[str, Any], list[str]],
    event_id: str | None = None,
) -> RuntimeEvent:
    """The envelope of a header, its correlation, payload and projections, all redacted.

    ``correlation`` comes from :func:`envelope_correlation`, ``projections``
    from :func:`envelope_projections`.  The header's dicts are copied, so one
    header may serve many events.
    """
    kept_correlation, correlation_paths = correlation
    kept_projections, projection_paths = projections
    paths = [
        *payload_paths,
        *header.lead_paths,
        *correlation_paths,
        *header.actor_paths,
        *projection_paths,
    ]
    return RuntimeEvent(
        id=event_id or event_id_for(header.stream_id, sequence),
        schema_version=SCHEMA_VERSION,
        type=header.type,
        category=header.category,
        source=header.source,
        subject=header.subject,
        time=time_ms,
        stream_id=header.stream_id,
        sequence=sequence,
        scope=dict(header.scope),
        correlation=kept_correlation,
        actor=dict(header.actor),
        privacy=Privacy(
            classification="sensitive" if paths else "public",
            redacted=bool(paths),
            redacted_fields=paths,
        ),
        payload=body,
        projections=kept_projections,
    )


def build_event(
    *,
    event_type: str,
    payload: Mapping[str, Any] | None,
    time_ms: int,
    sequence: int | Callable[[str], int],
    event_id: str | None = None,
    category: str | None = None,
    source: str = DEFAULT_SOURCE,
    subject: str | None = None,
    stream_id: str | None = None,
    scope: Mapping[str, Any] | None = None,
    correlation: Mapping[str, Any] | None = None,
    actor: Mapping[str, Any] | None = None,
    projections: Mapping[str, Any] | None = None,
    home: str | None = None,
    cwd: str | None = None,
) -> RuntimeEvent:
    """Build one redacted envelope (pure).

    ``sequence`` is an int, or a function of the stream id that returns one
    (Penguin's per-stream counter lives in :mod:`pentrace.compat.penguin`).
    """
    redacted = redact(dict(payload or {}), depth=1)
    header = envelope_header(
        event_type=event_type,
        body=redacted.value,
        category=category,
        source=source,
        subject=subject,
        stream_id=stream_id,
        scope=scope,
        actor=actor,
        home=home,
        cwd=cwd,
    )
    number = sequence(header.stream_id) if callable(sequence) else sequence
    return assemble_event(
        header,
        correlation=envelope_correlation(redacted.value, correlation),
        body=redacted.value,
        payload_paths=redacted.paths,
        time_ms=time_ms,
        sequence=number,
        projections=envelope_projections(projections),
        event_id=event_id,
    )


def opencode_payload(event: RuntimeEvent | Mapping[str, Any]) -> dict[str, Any]:
    """The OpenCode view ``{id, order, time, type, properties}`` of an envelope.

    ``properties`` is the payload with ``sessionID``, ``agentID`` and
    ``directory`` filled from scope where the payload lacks them.
    """
    envelope = event.to_builtins() if isinstance(event, RuntimeEvent) else event
    payload = envelope.get("payload")
    properties = dict(payload) if isinstance(payload, Mapping) else {}
    scope = envelope.get("scope")
    scope = scope if isinstance(scope, Mapping) else {}
    for prop, key in (
        ("sessionID", "session_id"),
        ("agentID", "agent_id"),
        ("directory", "directory"),
    ):
        value = scope.get(key)
        if not properties.get(prop) and isinstance(value, str) and value:
            properties[prop] = value
    return {
        "id": envelope.get("id"),
        "order": envelope.get("sequence"),
        "time": envelope.get("time"),
        "type": envelope.get("type"),
        "properties": properties,
    }
