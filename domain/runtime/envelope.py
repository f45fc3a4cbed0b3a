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

It is pure: time, sequence, home and working directory are arguments.  Trace
records become events through :mod:`pentrace.domain.runtime.mapping`; the
public entry point for both is :mod:`pentrace.domain.runtime`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

import msgspec

from pentrace.domain.redaction import redact, redact_text
from pentrace.domain.redaction.memo import redact_flat
from pentrace.domain.runtime.scope import (
    derive_stream_id,
    derive_subject,
    extract_correlation,
    extract_scope,
    normalize_directory,
    slug_stream_id,
)

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
DEFAULT_SOURCE: Final = "penguin.backend"
CATEGORIES: Final = (
    "session_lifecycle",
    "message_lifecycle",
    "stream_chunk",
    "tool_action_lifecycle",
    "file_diff",
    "task_run_state",
    "provider_model_state",
    "cwm_token_usage",
    "notification",
    "error",
    "user_input_approval",
)
_APPROVAL_TYPES: Final = frozenset(
    {
        "permission.asked",
        "permission.replied",
        "question.asked",
        "question.replied",
        "question.rejected",
    }
)
_PART_TYPES: Final = frozenset({"message.part.updated", "message.part.removed"})
_PREFIX_CATEGORIES: Final = (
    (("tool.", "tool_", "action.", "todo."), "tool_action_lifecycle"),
    (("task.", "run."), "task_run_state"),
    (("provider.", "model."), "provider_model_state"),
    (("token.", "usage.", "context_window.", "cwm."), "cwm_token_usage"),
    (("notification.",), "notification"),
    (("file.", "lsp."), "file_diff"),
)


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


def event_category(event_type: str, payload: Mapping[str, Any]) -> str:
    """Penguin's first-matching category rule for an event type (case-sensitive)."""
    if event_type in _APPROVAL_TYPES:
        return "user_input_approval"
    if event_type in _PART_TYPES:
        part = payload.get("part")
        part_type = part.get("type") if isinstance(part, Mapping) else None
        return "stream_chunk" if part_type in ("text", "reasoning") else "tool_action_lifecycle"
    if event_type.startswith("message."):
        return "message_lifecycle"
    if event_type.startswith(("session.diff", "vcs.")):
        return "file_diff"
    if event_type.startswith("session.error") or event_type.endswith(".error"):
        return "error"
    if event_type.startswith("session."):
        return "session_lifecycle"
    for prefixes, category in _PREFIX_CATEGORIES:
        if event_type.startswith(prefixes):
            return category
    return "session_lifecycle"


def event_id_for(stream_id: str, sequence: int) -> str:
    """``evt:<slug(stream_id)>:<sequence as %08d>``."""
    return f"evt:{slug_stream_id(stream_id)}:{sequence:08d}"


def _field(name: str, value: Any) -> tuple[Any, list[str]]:
    """One envelope field redacted, and its hidden paths (``@name`` or ``@name.<path>``)."""
    if not value:
        return value, []
    if isinstance(value, str):
        clean = redact_text(value)
        return clean, [f"@{name}"] if clean != value else []
    clean, paths = redact_flat(value, depth=1)
    return clean, [f"@{name}.{path}" if path else f"@{name}" for path in paths]


class Header(NamedTuple):
    """An envelope's redacted fields from ``type`` to ``actor`` but ``correlation``.

    These are the fields all events of a session and type share; the
    correlation (a tool call id) and the rest change from event to event.
    Hidden paths come in envelope key order: the payload's, ``lead_paths``
    (type to scope), the correlation's, ``actor_paths``, the projections'.
    """

    type: str
    category: str
    source: str
    subject: str
    stream_id: str
    scope: dict[str, Any]
    actor: dict[str, Any]
    lead_paths: list[str]
    actor_paths: list[str]


def _explicit_scope(
    extracted: dict[str, Any],
    explicit: Mapping[str, Any] | None,
    home: str | None,
    cwd: str | None,
) -> dict[str, Any]:
    scope = dict(extracted)
    given = {key: value for key, value in (explicit or {}).items() if value is not None}
    for key in ("directory", "workspace"):
        if isinstance(given.get(key), str) and given[key]:
            given[key] = normalize_directory(given[key], home=home, cwd=cwd) or ""
    if "directory" in given and "workspace" not in given:
        # A directory given explicitly replaces the payload's workspace too (W11).
        given["workspace"] = given["directory"]
    scope.update(given)
    return scope


def envelope_header(
    *,
    event_type: str,
    body: dict[str, Any],
    category: str | None = None,
    source: str = DEFAULT_SOURCE,
    subject: str | None = None,
    stream_id: str | None = None,
    scope: Mapping[str, Any] | None = None,
    actor: Mapping[str, Any] | None = None,
    home: str | None = None,
    cwd: str | None = None,
) -> Header:
    """Penguin's rules for the fields between the id and the payload, redacted.

    ``body`` is the already redacted payload, which scope, category and
    subject are read from.  The correlation is :func:`envelope_correlation`.
    """
    merged_scope, scope_paths = _field(
        "scope", _explicit_scope(extract_scope(body, home=home, cwd=cwd), scope, home, cwd)
    )
    event_type, type_paths = _field("type", event_type)
    kind, category_paths = _field("category", category or event_category(event_type, body))
    source, source_paths = _field("source", source)
    about, subject_paths = _field(
        "subject", subject or derive_subject(event_type, merged_scope, body)
    )
    stream = stream_id or derive_stream_id(merged_scope)
    kept_actor, actor_paths = _field("actor", dict(actor or {}))
    return Header(
        event_type,
        kind,
        source,
        about,
        stream,
        merged_scope,
        kept_actor,
        [*type_paths, *category_paths, *source_paths, *subject_paths, *scope_paths],
        actor_paths,
    )


def envelope_correlation(
    body: Mapping[str, Any], correlation: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The redacted correlation of an envelope (explicit ids, then the body's) and its paths."""
    return _field("correlation", extract_correlation(body, correlation))


def envelope_projections(
    projections: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], list[str]]:
    """The redacted projections of an envelope and their paths."""
    return _field("projections", dict(projections or {}))


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
