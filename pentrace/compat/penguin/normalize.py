"""Penguin's ``normalize_runtime_event``: a usable envelope from a prebuilt one."""

from __future__ import annotations

from collections.abc import Mapping
from copy import deepcopy
from typing import Any, Final

from pentrace.compat.penguin import _common
from pentrace.compat.penguin._common import (
    extract_directory,
    fill_defaults,
    normalize_event_directory,
)
from pentrace.compat.penguin._common import now_ms as wall_clock_ms
from pentrace.domain.redaction import redact
from pentrace.domain.runtime.envelope import (
    DEFAULT_SOURCE,
    SCHEMA_VERSION,
    assemble_event,
    envelope_correlation,
    envelope_header,
    envelope_projections,
    privacy_problem,
)
from pentrace.domain.runtime.scope import derive_stream_id, extract_scope

__all__ = ["normalize_runtime_event"]

_ASSIGNED: Final = (
    "schema_version", "category", "source", "subject", "time", "stream_id", "sequence",
    "scope", "correlation", "actor", "privacy", "payload", "projections",
)  # fmt: skip


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
    fill_defaults(
        merged, ("sessionID", "session_id", "conversation_id"), default_agent_id, default_session_id
    )
    directory = normalize_event_directory(extract_directory(merged) or default_directory)
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
    home, cwd = _common.home_and_cwd()
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
        moment = now_ms if now_ms is not None else wall_clock_ms()

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
    if value.get("stream_id") == "":
        rebuilt["stream_id"] = ""  # Penguin keeps any string stream id, even an empty one
    given_privacy = value.get("privacy")
    if (
        not rebuilt["privacy"]["redacted"]
        and isinstance(given_privacy, Mapping)
        and privacy_problem(given_privacy) is None
    ):
        rebuilt["privacy"] = dict(given_privacy)
    # Penguin returns ``dict(value)`` with its fields overwritten: extra keys
    # stay where they were (redacted here), the envelope's own keys follow.
    extras = redact({key: item for key, item in value.items() if key not in rebuilt})
    if extras.paths:
        fields = [*rebuilt["privacy"]["redacted_fields"], *(f"@{p}" for p in extras.paths)]
        rebuilt["privacy"] = {
            "classification": "sensitive",
            "redacted": True,
            "redacted_fields": fields,
        }
    event = {key: rebuilt[key] if key in rebuilt else extras.value[key] for key in value}
    for key in _ASSIGNED:
        event[key] = rebuilt[key]
    return event
