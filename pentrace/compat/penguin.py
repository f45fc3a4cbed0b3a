"""Drop-in replacements for Penguin's runtime-event functions (``penguin.system.runtime_events``).

Same names, same keyword arguments, plain dicts in Penguin's key order.  The
results equal Penguin's except where Penguin is weak (each deviation is listed
in ``docs/runtime-events.md``):

* redaction is pentrace's policy: more key names, secret shapes inside
  values, and actor, correlation, explicit scope, subject and projections are
  redacted too (W7, W12);
* stream ids are slugged injectively (W2), and an explicit ``sequence``
  raises the stream's counter so a later automatic one cannot repeat it;
* explicit ``scope.directory`` is normalised like a payload one (W11);
* directories are normalised without following symlinks (``normpath`` of the
  ``~``-expanded, absolute path) so the result does not depend on the disk.

W1 (counters restart at 1 with the process) cannot be fixed inside an
in-memory counter.  :func:`reset_runtime_event_sequences` takes the ledger's
high-water marks so a restarted process continues after them; the real fix is
pentrace's position-based ids (:func:`pentrace.domain.runtime_events.runtime_event_from_record`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Any, Final, TypedDict, Unpack

from pentrace.domain.redaction import redact
from pentrace.domain.runtime_events import (
    DEFAULT_SOURCE,
    SCHEMA_VERSION,
    build_event,
    extract_scope,
    opencode_payload,
)
from pentrace.domain.runtime_events import event_category as _event_category

__all__ = [
    "SCHEMA_VERSION",
    "OpenCodeOptions",
    "build_runtime_event",
    "event_category",
    "extract_runtime_scope",
    "normalize_runtime_event",
    "opencode_payload_from_runtime_event",
    "redact_runtime_payload",
    "reset_runtime_event_sequences",
    "runtime_event_from_opencode",
    "wrap_opencode_event",
]

_lock: Final = threading.Lock()
_counters: dict[str, int] = {}
_PENDING: Final = "pending"
_ENVELOPE_KEYS: Final = (
    "id",
    "schema_version",
    "type",
    "category",
    "source",
    "subject",
    "time",
    "stream_id",
    "sequence",
    "scope",
    "correlation",
    "actor",
    "privacy",
    "payload",
    "projections",
)


def _next_sequence(stream_id: str) -> int:
    with _lock:
        number = _counters.get(stream_id, 0) + 1
        _counters[stream_id] = number
        return number


def _raise_counter(stream_id: str, sequence: int) -> None:
    with _lock:
        _counters[stream_id] = max(_counters.get(stream_id, 0), sequence)


def reset_runtime_event_sequences(high_water: Mapping[str, int] | None = None) -> None:
    """Forget every per-stream counter; with ``high_water``, continue after those sequences.

    Pass the ledger's highest stored sequence per stream after a restart so new
    events do not reuse ids the ledger already holds (Penguin's W1).
    """
    with _lock:
        _counters.clear()
        _counters.update(high_water or {})


def _home_and_cwd() -> tuple[str, str]:
    return os.path.expanduser("~"), os.getcwd()


def event_category(event_type: str, payload: Mapping[str, Any] | None = None) -> str:
    """Penguin's category of an event type (``message.part.*`` judged on the part type)."""
    return _event_category(event_type, payload or {})


def extract_runtime_scope(payload: Mapping[str, Any] | None) -> dict[str, Any]:
    """Penguin's scope of a payload, from its redacted copy."""
    home, cwd = _home_and_cwd()
    return extract_scope(redact(dict(payload or {})).value, home=home, cwd=cwd)


def redact_runtime_payload(value: Any) -> tuple[Any, list[str]]:
    """A redacted deep copy and the redacted paths (dotted, with ``[i]``)."""
    result = redact(value)
    return result.value, result.paths


def build_runtime_event(
    *,
    event_type: str,
    payload: Mapping[str, Any] | None = None,
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
            return _next_sequence(stream)
        _raise_counter(stream, explicit)
        return explicit

    home, cwd = _home_and_cwd()
    event = build_event(
        event_type=event_type,
        payload=payload,
        time_ms=time_ms if time_ms is not None else int(time.time() * 1000),
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
    """The OpenCode view ``{id, order, time, type, properties}`` of an envelope."""
    return opencode_payload(event)


def _top_level_session(properties: Mapping[str, Any]) -> str:
    for key in ("sessionID", "session_id", "conversation_id"):
        value = properties.get(key)
        if isinstance(value, str) and value:
            return value
    return "-"


def _projection_source(payload: Mapping[str, Any]) -> str | None:
    # The payload's own id, then its part's or info's, then the ids it refers
    # to (Penguin's fixtures name a message part by the part, not the request).
    part, info = payload.get("part"), payload.get("info")
    candidates = (
        payload.get("id"),
        part.get("id") if isinstance(part, Mapping) else None,
        info.get("id") if isinstance(info, Mapping) else None,
        payload.get("partID"),
        payload.get("messageID"),
        payload.get("requestID"),
    )
    return next((value for value in candidates if isinstance(value, str) and value), None)


class OpenCodeOptions(TypedDict, total=False):
    """The envelope fields an OpenCode event may be given explicitly."""

    actor: Mapping[str, Any] | None
    category: str | None
    correlation: Mapping[str, Any] | None
    event_id: str | None
    scope: Mapping[str, Any] | None
    sequence: int | None
    source: str
    stream_id: str | None
    subject: str | None
    time_ms: int | None


def _type_and_properties(
    event: Mapping[str, Any] | str, properties: Mapping[str, Any] | None
) -> tuple[str, dict[str, Any]]:
    if isinstance(event, str):
        return event, dict(properties or {})
    given = event.get("properties")
    return str(event.get("type") or ""), dict(given) if isinstance(given, Mapping) else {}


def runtime_event_from_opencode(
    event: Mapping[str, Any] | str,
    properties: Mapping[str, Any] | None = None,
    **options: Unpack[OpenCodeOptions],
) -> dict[str, Any]:
    """The envelope of an OpenCode event: ``{type, properties}``, or the type and properties.

    Its ``projections.opencode.id`` is ``<type>:<top-level session or ->:<source id>``;
    without a source id the sequence stands in for it.
    """
    event_type, payload = _type_and_properties(event, properties)
    found = _projection_source(redact(payload).value)
    projection_id = f"{event_type}:{_top_level_session(payload)}:{found or _PENDING}"
    envelope = build_runtime_event(
        event_type=event_type,
        payload=payload,
        projections={"opencode": {"id": projection_id, "type": event_type}},
        **options,
    )
    if found is None:
        envelope["projections"]["opencode"]["id"] = projection_id.removesuffix(_PENDING) + str(
            envelope["sequence"]
        )
    return envelope


def wrap_opencode_event(
    event: Mapping[str, Any] | str,
    properties: Mapping[str, Any] | None = None,
    **options: Unpack[OpenCodeOptions],
) -> dict[str, Any]:
    """Build the envelope of an OpenCode event, then project it back to OpenCode's shape."""
    return opencode_payload(runtime_event_from_opencode(event, properties, **options))


def normalize_runtime_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """Rebuild an envelope from what it holds: defaults filled, everything redacted again.

    A ``privacy`` block is kept as given when nothing needed redaction.
    """
    payload = event.get("payload")
    sequence = event.get("sequence")
    time_value = event.get("time")

    def text(key: str) -> str | None:
        value = event.get(key)
        return value if isinstance(value, str) and value else None

    def mapping(key: str) -> Mapping[str, Any] | None:
        value = event.get(key)
        return value if isinstance(value, Mapping) else None

    rebuilt = build_runtime_event(
        event_type=text("type") or "",
        payload=payload if isinstance(payload, Mapping) else None,
        actor=mapping("actor"),
        category=text("category"),
        correlation=mapping("correlation"),
        event_id=text("id"),
        projections=mapping("projections"),
        scope=mapping("scope"),
        sequence=sequence if isinstance(sequence, int) else None,
        source=text("source") or DEFAULT_SOURCE,
        stream_id=text("stream_id"),
        subject=text("subject"),
        time_ms=time_value if isinstance(time_value, int) else None,
    )
    given_privacy = event.get("privacy")
    if not rebuilt["privacy"]["redacted"] and isinstance(given_privacy, Mapping):
        rebuilt["privacy"] = dict(given_privacy)
    return {key: rebuilt[key] for key in _ENVELOPE_KEYS}
