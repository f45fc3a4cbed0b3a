"""Penguin's ``penguin.system.runtime_events`` API over pentrace's envelope builder.

Same names, signatures, keyword arguments, defaults and result shapes as
Penguin (checked against Maximooch/penguin @7ae429a5); the differences are
the fixed weaknesses and the few listed in ``docs/runtime-events.md`` under
"Deviations from Penguin":

* redaction is pentrace's policy: more key names, secret shapes inside
  values, and actor, correlation, explicit scope, subject and projections are
  redacted too (W7, W12);
* stream ids are slugged injectively (W2), and an explicit ``sequence``
  raises the stream's counter so a later automatic one cannot repeat it;
* explicit ``scope.directory`` is normalised like a payload one (W11);
* directories are normalised without following symlinks;
* a privacy block is only ever written consistent (``public``/``False``/``[]``
  or ``sensitive``/``True``/paths): :func:`normalize_runtime_event` keeps a
  given block only when it is one of those.

W1 (counters restart at 1 with the process) cannot be fixed inside an
in-memory counter: :func:`reset_runtime_event_sequences` takes high-water
marks, and :class:`pentrace.compat.penguin.RuntimeEventLedger` raises the
counters to what its file already holds when it opens.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from copy import deepcopy
from typing import Any, Final

from pentrace.compat.penguin import _counters
from pentrace.compat.penguin._counters import reset_runtime_event_sequences
from pentrace.domain.redaction import redact
from pentrace.domain.runtime_envelope import (
    CATEGORIES,
    DEFAULT_SOURCE,
    SCHEMA_VERSION,
    assemble_event,
    build_event,
    envelope_correlation,
    envelope_header,
    envelope_projections,
)
from pentrace.domain.runtime_envelope import event_category as _event_category
from pentrace.domain.runtime_scope import derive_stream_id, extract_scope, source_id
from pentrace.domain.runtime_scope import normalize_directory as _normalize_directory
from pentrace.domain.runtime_validation import privacy_problem

__all__ = [
    "RUNTIME_EVENT_CATEGORIES",
    "RUNTIME_EVENT_SCHEMA_VERSION",
    "build_runtime_event",
    "event_category",
    "extract_runtime_scope",
    "normalize_event_directory",
    "normalize_runtime_event",
    "opencode_payload_from_runtime_event",
    "redact_runtime_payload",
    "reset_runtime_event_sequences",
    "runtime_event_from_opencode",
    "wrap_opencode_event",
]

RUNTIME_EVENT_SCHEMA_VERSION: Final = SCHEMA_VERSION
RUNTIME_EVENT_CATEGORIES: Final[set[str]] = set(CATEGORIES)
_PUBLIC: Final = {"classification": "public", "redacted": False, "redacted_fields": []}
_ASSIGNED: Final = (
    "schema_version", "category", "source", "subject", "time", "stream_id", "sequence",
    "scope", "correlation", "actor", "privacy", "payload", "projections",
)  # fmt: skip


def _now_ms() -> int:
    return int(time.time() * 1000)


def _first_string(mapping: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = mapping.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def normalize_event_directory(directory: str | None) -> str | None:
    """An absolute, normalised directory (``~`` expanded), or None for a blank or non-string."""
    home, cwd = _counters.home_and_cwd()
    return _normalize_directory(directory, home=home, cwd=cwd)


def _extract_directory(payload: Mapping[str, Any]) -> str | None:
    # Penguin's order: top-level ``directory`` (a blank one ends the search),
    # then ``directory``, ``path.cwd`` and ``cwd`` of ``info``, ``path``, ``part``.
    value = payload.get("directory")
    if isinstance(value, str) and value:
        return normalize_event_directory(value)
    for parent in ("info", "path", "part"):
        nested = payload.get(parent)
        if not isinstance(nested, Mapping):
            continue
        path = nested.get("path")
        for candidate in (
            nested.get("directory"),
            path.get("cwd") if isinstance(path, Mapping) else None,
            nested.get("cwd"),
        ):
            if isinstance(candidate, str) and candidate:
                return normalize_event_directory(candidate)
    return None


def event_category(event_type: str, payload: Mapping[str, Any] | None = None) -> str:
    """Penguin's category of an event type (``message.part.*`` judged on the part type)."""
    return _event_category(event_type, payload or {})


def extract_runtime_scope(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Penguin's scope of a payload (ids, then ``part``/``info``/``status``, then directory)."""
    home, cwd = _counters.home_and_cwd()
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
            return _counters.next_sequence(stream)
        _counters.raise_counter(stream, explicit)
        return explicit

    home, cwd = _counters.home_and_cwd()
    event = build_event(
        event_type=event_type,
        payload=payload,
        time_ms=time_ms if time_ms is not None else _now_ms(),
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
        "time": event["time"] if "time" in event else _now_ms(),
        "type": opencode_type if isinstance(opencode_type, str) else event.get("type"),
        "properties": properties,
    }


def _fill_defaults(
    properties: dict[str, Any],
    session_keys: tuple[str, ...],
    default_agent_id: str | None,
    default_session_id: str | None,
) -> None:
    if default_session_id and not _first_string(properties, session_keys):
        properties["sessionID"] = default_session_id
    if default_agent_id and not _first_string(properties, ("agentID", "agent_id")):
        properties["agentID"] = default_agent_id


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
    with the properties as overlay; otherwise a new envelope is built whose
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
    _fill_defaults(properties, ("sessionID", "session_id"), default_agent_id, default_session_id)
    directory = normalize_event_directory(_extract_directory(properties) or default_directory)
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
        session = _first_string(properties, ("sessionID", "session_id", "conversation_id"))
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


def _merged_payload(
    payload: Mapping[str, Any],
    overlay_payload: Mapping[str, Any] | None,
    default_agent_id: str | None,
    default_directory: str | None,
    default_session_id: str | None,
) -> dict[str, Any]:
    merged = deepcopy(dict(payload))
    if isinstance(overlay_payload, Mapping):
        for key, item in overlay_payload.items():
            merged.setdefault(str(key), deepcopy(item))
    _fill_defaults(
        merged, ("sessionID", "session_id", "conversation_id"), default_agent_id, default_session_id
    )
    directory = normalize_event_directory(_extract_directory(merged) or default_directory)
    if directory:
        merged.setdefault("directory", directory)
    return merged


def normalize_runtime_event(
    value: Mapping[str, Any],
    *,
    default_agent_id: str | None = None,
    default_directory: str | None = None,
    default_session_id: str | None = None,
    now_ms: int | None = None,
    overlay_payload: Mapping[str, Any] | None = None,
    sequence: int | None = None,
) -> dict[str, Any] | None:
    """A usable envelope from ``value`` (None without a type, an id or a payload mapping).

    Defaults fill what the payload lacks, ``overlay_payload`` adds keys it does
    not have, and everything is redacted again.  An existing stream id, a
    positive sequence, a subject and an integer time are kept.
    """
    event_type, event_id, payload = value.get("type"), value.get("id"), value.get("payload")
    if not isinstance(event_type, str) or not event_type:
        return None
    if not isinstance(event_id, str) or not event_id or not isinstance(payload, Mapping):
        return None
    merged = _merged_payload(
        payload, overlay_payload, default_agent_id, default_directory, default_session_id
    )
    redacted = redact(merged, depth=1)
    home, cwd = _counters.home_and_cwd()
    given_scope = value.get("scope")
    given_scope = given_scope if isinstance(given_scope, Mapping) else None
    scope = {**extract_scope(redacted.value, home=home, cwd=cwd), **(given_scope or {})}
    stream = value.get("stream_id")
    if not isinstance(stream, str) or (stream == "global" and derive_stream_id(scope) != "global"):
        stream = None
    number = value.get("sequence")
    if not isinstance(number, int) or number <= 0:
        number = sequence if sequence is not None else 0
    moment = value.get("time")
    if not isinstance(moment, int):
        moment = now_ms if now_ms is not None else _now_ms()

    def text(key: str) -> str | None:
        item = value.get(key)
        return item if isinstance(item, str) and item else None

    def mapping(key: str) -> Mapping[str, Any] | None:
        item = value.get(key)
        return item if isinstance(item, Mapping) else None

    header = envelope_header(
        event_type=event_type,
        body=redacted.value,
        category=text("category"),
        source=text("source") or DEFAULT_SOURCE,
        subject=text("subject"),
        stream_id=stream,
        scope=given_scope,
        actor=mapping("actor"),
        home=home,
        cwd=cwd,
    )
    rebuilt = assemble_event(
        header,
        correlation=envelope_correlation(redacted.value, mapping("correlation")),
        body=redacted.value,
        payload_paths=redacted.paths,
        time_ms=moment,
        sequence=number,
        projections=envelope_projections(mapping("projections")),
        event_id=event_id,
    ).to_builtins()
    rebuilt["schema_version"] = text("schema_version") or SCHEMA_VERSION
    given_privacy = value.get("privacy")
    if (
        not rebuilt["privacy"]["redacted"]
        and isinstance(given_privacy, Mapping)
        and privacy_problem(given_privacy) is None
    ):
        rebuilt["privacy"] = dict(given_privacy)
    # Penguin returns ``dict(value)`` with its fields overwritten: extra keys
    # stay where they were (redacted here), the envelope's own keys follow.
    event = {key: redact(item, depth=1).value for key, item in value.items()}
    event["id"], event["type"] = rebuilt["id"], rebuilt["type"]
    for key in _ASSIGNED:
        event[key] = rebuilt[key]
    return event
