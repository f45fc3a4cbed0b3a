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
correlation, projections) are :mod:`.scope`'s.  It is pure: time,
sequence, home and working directory are arguments.  Trace records become
events through :mod:`pentrace.domain.runtime.session_events`; the public
entry point for all of them is :mod:`pentrace.domain.runtime`.

Whether an envelope is well formed (:func:`envelope_problems`, :func:`privacy_problem`) is
checked here too, each problem naming its field: Penguin's ledger rules, a little stricter
(``redacted_fields`` is always a list of strings, and a ``public`` block lists none).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import msgspec

from pentrace.domain.redaction import redact
from pentrace.domain.runtime.scope import (
    CATEGORIES,
    DEFAULT_SOURCE,
    Header,
    envelope_correlation,
    envelope_header,
    envelope_projections,
    event_category,
    slug_stream_id,
)

__all__ = [
    "CATEGORIES",
    "CLASSIFICATIONS",
    "DEFAULT_SOURCE",
    "SCHEMA_VERSION",
    "Header",
    "Privacy",
    "RuntimeEvent",
    "assemble_event",
    "build_event",
    "envelope_correlation",
    "envelope_header",
    "envelope_problems",
    "envelope_projections",
    "event_category",
    "event_id_for",
    "opencode_payload",
    "privacy_problem",
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


CLASSIFICATIONS: Final = ("public", "sensitive")


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value[:40])
    return type(value).__name__


def privacy_problem(privacy: Mapping[str, Any]) -> str | None:
    """What is wrong with a privacy block (``privacy.<field>: expected ..., found ...``)."""
    classification = privacy.get("classification")
    redacted = privacy.get("redacted", ...)
    fields = privacy.get("redacted_fields", ...)
    if classification not in CLASSIFICATIONS:
        return (
            "privacy.classification: expected 'public' or 'sensitive', "
            f"found {_shown(classification)}"
        )
    if fields is ... or not isinstance(fields, list):
        shown = "nothing" if fields is ... else _shown(fields)
        return f"privacy.redacted_fields: expected a list, found {shown}"
    if not all(isinstance(path, str) for path in fields):
        return "privacy.redacted_fields: expected a list of strings, found a non-string item"
    want = classification == "sensitive"
    if redacted is ... or redacted is not want:
        found = "nothing" if redacted is ... else _shown(redacted)
        return (
            f"privacy.redacted: expected {_shown(want)} for classification "
            f"{classification!r}, found {found}"
        )
    if not want and fields:
        return (
            "privacy.redacted_fields: expected [] for classification 'public', "
            f"found {len(fields)} path(s)"
        )
    return None


def envelope_problems(envelope: Mapping[str, Any]) -> list[str]:
    """Every shape problem of an envelope, each naming its field; empty when it is well formed."""
    problems = []
    version = envelope.get("schema_version")
    if version != SCHEMA_VERSION:
        problems.append(f"schema_version: expected {SCHEMA_VERSION!r}, found {_shown(version)}")
    for key in ("id", "type"):
        value = envelope.get(key)
        if not isinstance(value, str) or not value:
            problems.append(f"{key}: expected a non-empty string, found {_shown(value)}")
    if not isinstance(envelope.get("payload"), Mapping):
        problems.append(f"payload: expected an object, found {_shown(envelope.get('payload'))}")
    privacy = envelope.get("privacy")
    if not isinstance(privacy, Mapping):
        problems.append(f"privacy: expected an object, found {_shown(privacy)}")
    else:
        problem = privacy_problem(privacy)
        if problem is not None:
            problems.append(problem)
    return problems
