"""Every trace record becomes exactly one RuntimeEvent (``docs/runtime-events.md``).

The event's sequence is the record's *position* in its session trace and its
id is ``evt:session:<project>/<agent>/<session_id>:<position:08d>``
(:class:`~pentrace.domain.session.key.SessionKey`, ADR 0023), so
indexing the same trace again - after a restart, or into an empty ledger -
gives the same ids, and new records always get new ones (Penguin's W1).

Categories come from Penguin's category rules applied to the mapped type;
only the never-persisted partials name theirs explicitly, because their
payload has no ``part`` to judge by.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any, Final

from pentrace.domain.kinds import Envelope, by_envelope, runtime_type_for
from pentrace.domain.records import TraceRecord
from pentrace.domain.redaction import Redacted, redact_decoded, redact_string
from pentrace.domain.runtime.envelope import (
    Header,
    RuntimeEvent,
    assemble_event,
    envelope_correlation,
    envelope_header,
)
from pentrace.domain.runtime.scope import BODY_READS
from pentrace.domain.session.key import SessionKey

__all__ = [
    "EVENT_TYPES",
    "MODEL_MESSAGE_TYPES",
    "event_from_record",
    "event_type_for",
    "kinds_for",
    "partial_category",
    "record_actor",
    "record_correlation",
    "record_scope",
    "stamp_ms",
    "time_ms_of",
]

# Derived from the kinds table (what each payload type maps to when no status decides).
MODEL_MESSAGE_TYPES: Final[dict[str, str]] = {
    tag: kind.runtime_type for tag, kind in by_envelope("model_msg").items()
}
EVENT_TYPES: Final[dict[str, str]] = {
    tag: kind.runtime_type for tag, kind in by_envelope("event_msg").items() if not kind.statuses
}
# What the header of an envelope may read from its body (see ``_header``).
_BODY_READS: Final = BODY_READS
_MAX_HEADERS: Final = 4096
_headers: dict[tuple[Any, ...], Header] = {}
_CATEGORIES: Final[dict[str, str]] = {
    tag: kind.category for tag, kind in by_envelope("model_msg").items() if kind.category
}


def event_type_for(record: TraceRecord, position: int) -> str:
    """The RuntimeEvent type of a record (the table in ``docs/runtime-events.md``)."""
    return runtime_type_for(record, position)


def time_ms_of(record: TraceRecord, fallback_ms: int = 0) -> int:
    """Milliseconds since the epoch of the envelope ``timestamp`` (naive means UTC)."""
    value = record.value()
    return stamp_ms(value.get("timestamp") if isinstance(value, dict) else None, fallback_ms)


# What a payload type the kinds table does not know maps to, per envelope type.
_CATCH_ALL: Final[tuple[tuple[Envelope, str], ...]] = (
    ("model_msg", "message.updated"),
    ("event_msg", "trace.event"),
)


def kinds_for(types: Collection[str]) -> dict[str, frozenset[str] | None] | None:
    """Which records may map to one of ``types`` (:func:`event_type_for`): per record kind
    (envelope ``type``), the payload types that may (None: any); a kind left out maps to none
    of them.  None when any record may (``trace.record``).  A cheap test before the mapping.
    """
    wanted = frozenset(types)
    if "trace.record" in wanted:
        return None
    kinds: dict[str, frozenset[str] | None] = {}
    if not wanted.isdisjoint(("session.created", "session.updated")):
        kinds["session_meta"] = None
    # An unknown payload type maps to the envelope's catch-all: then any payload may.
    for envelope, catch_all in _CATCH_ALL:
        if catch_all in wanted:
            kinds[envelope] = None
        elif tags := frozenset(
            tag for tag, kind in by_envelope(envelope).items() if kind.runtime_types & wanted
        ):
            kinds[envelope] = tags
    return kinds


def stamp_ms(stamp: object, fallback_ms: int = 0) -> int:
    """Milliseconds since the epoch of a record's ``timestamp`` value (naive means UTC), or
    ``fallback_ms`` when it is not an ISO 8601 string."""
    if not isinstance(stamp, str):
        return fallback_ms
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return fallback_ms
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _payload(record: TraceRecord) -> dict[str, Any]:
    value = record.value()
    if isinstance(value, dict) and isinstance(value.get("payload"), dict):
        return dict(value["payload"])
    # Not an OmniMessage: keep the whole value where a UI can still show it.
    return {"record": value}


def record_actor(record: TraceRecord, payload: dict[str, Any], agent: str) -> dict[str, Any]:
    """The envelope actor of a record: its user, the session's agent, or the runtime."""
    if record.kind == "model_msg":
        if record.role == "user":
            sender = payload.get("sender")
            return {"type": "user", "id": sender if isinstance(sender, str) and sender else "user"}
        return {"type": "assistant", "id": agent}
    name = record.ptype if isinstance(record.ptype, str) else record.kind
    return {"type": "runtime", "id": name if isinstance(name, str) else "record"}


def record_correlation(record: TraceRecord, payload: dict[str, Any]) -> dict[str, Any]:
    """The explicit correlation of a record: tool call, child session, origin."""
    correlation: dict[str, Any] = {}
    if isinstance(record.tool_call_id, str) and record.tool_call_id:
        correlation["tool_call_id"] = record.tool_call_id
    child = payload.get("session_id")
    if record.kind == "event_msg" and record.ptype == "subagent" and isinstance(child, str):
        correlation["child_session_id"] = child
    if record.has_origin and isinstance(record.origin, list):
        correlation["origin"] = [item for item in record.origin if isinstance(item, str)]
    return correlation


def record_scope(
    record: TraceRecord,
    payload: dict[str, Any],
    session_id: str,
    project: str,
    agent: str,
    directory: str | None,
) -> dict[str, Any]:
    """The explicit scope of a session's record (a ``session_meta`` adds its provider)."""
    scope: dict[str, Any] = {
        "session_id": session_id,
        "conversation_id": session_id,
        "agent_id": agent,
        "project_id": project,
        "directory": directory,
    }
    if record.kind == "session_meta":
        scope["provider_id"] = (
            payload.get("provider") if isinstance(payload.get("provider"), str) else None
        )
    return scope


def partial_category(record: TraceRecord) -> str | None:
    """The category a never-persisted partial names, else None (the type's rule decides)."""
    if record.kind == "model_msg" and isinstance(record.ptype, str):
        return _CATEGORIES.get(record.ptype)
    return None


def _header(
    event_type: str,
    body: dict[str, Any],
    category: str | None,
    stream_id: str,
    scope: dict[str, Any],
    actor: dict[str, Any],
    home: str | None,
    redacting: bool,
) -> Header:
    """The envelope header, remembered while the body cannot change it.

    Scope, category and subject read the body only through the keys in
    ``_BODY_READS``, so a body without them gives every event of a session,
    type and actor the same header: one computation instead of six field
    redactions each.  The key holds every other input (strings and None).
    """
    key = None
    if _BODY_READS.isdisjoint(body):
        key = (event_type, category, home, redacting, tuple(scope.items()), tuple(actor.items()))
        header = _headers.get(key)
        if header is not None:
            return header
    header = envelope_header(
        event_type=event_type,
        body=body,
        category=category,
        stream_id=stream_id,
        scope=scope,
        actor=actor,
        home=home,
        redacting=redacting,
    )
    if key is not None:
        if len(_headers) >= _MAX_HEADERS:
            _headers.clear()
        _headers[key] = header
    return header


def _opencode(event_id: str, event_type: str, redacting: bool) -> tuple[dict[str, Any], list[str]]:
    """``envelope_projections({"opencode": {"id": ..., "type": ...}})``, without the walk.

    The keys are fixed and clean, so the walk would redact the two strings
    and nothing else.
    """
    if not redacting:
        return {"opencode": {"id": event_id, "type": event_type}}, []
    clean_id = redact_string(event_id, depth=3)
    clean_type = redact_string(event_type, depth=3)
    paths = []
    if clean_id != event_id:
        paths.append("@projections.opencode.id")
    if clean_type != event_type:
        paths.append("@projections.opencode.type")
    return {"opencode": {"id": clean_id, "type": clean_type}}, paths


def event_from_record(
    record: TraceRecord,
    *,
    session_id: str,
    position: int,
    project: str,
    agent: str,
    directory: str | None,
    home: str | None = None,
    fallback_time_ms: int = 0,
    redacting: bool = True,
) -> RuntimeEvent:
    """The RuntimeEvent of the record at 1-based ``position`` of a session's trace.

    ``directory`` is the session's workspace (normalised; ``~`` expands only
    with ``home``).  A record without a readable timestamp gets
    ``fallback_time_ms``.  The envelope equals ``build_event`` of the same
    fields; only the work of computing it is shared between events.
    ``redacting=False`` redacts nothing: the candidate that
    :mod:`.session_events` keeps only when the screen clears its bytes.
    """
    event_type = event_type_for(record, position)
    key = SessionKey(project, agent, session_id)
    stream = key.stream_id
    payload = _payload(record)
    redacted = redact_decoded(payload, record.raw, depth=1) if redacting else Redacted(payload, [])
    anchor = (
        record.tool_call_id
        if isinstance(record.tool_call_id, str) and record.tool_call_id
        else position
    )
    header = _header(
        event_type,
        redacted.value,
        partial_category(record),
        stream,
        record_scope(record, payload, session_id, project, agent, directory),
        record_actor(record, payload, agent),
        home,
        redacting,
    )
    return assemble_event(
        header,
        correlation=envelope_correlation(
            redacted.value, record_correlation(record, payload), redacting=redacting
        ),
        body=redacted.value,
        payload_paths=redacted.paths,
        time_ms=time_ms_of(record, fallback_time_ms),
        sequence=position,
        # A stream the redaction policy changed keeps the slugged id of the redacted form.
        event_id=key.event_id(position) if header.stream_id == stream else None,
        projections=_opencode(f"{event_type}:{session_id}:{anchor}", event_type, redacting),
    )
