"""RuntimeEvents: the public, redacted event envelope (``penguin.runtime_event.v1``).

The one module to import for envelopes.  It re-exports the envelope and its
builder (:mod:`pentrace.domain.runtime.envelope`), Penguin's derivation rules
(:mod:`pentrace.domain.runtime.scope`) and the trace record mapping
(:mod:`pentrace.domain.runtime.mapping`), and the one path every indexer takes
from a session's records to its encoded events
(:mod:`pentrace.domain.runtime.session_events`)::

    event = runtime_event_from_record(
        record, session_id=sid, position=7, project="p", agent="a", directory="/srv/app"
    )
    event.id            # "evt:session:<sid>:00000007"
    msgspec.json.encode(event)  # Penguin's key order
"""

from __future__ import annotations

from pentrace.domain.runtime.envelope import (
    CATEGORIES,
    DEFAULT_SOURCE,
    SCHEMA_VERSION,
    Privacy,
    RuntimeEvent,
    build_event,
    event_category,
    event_id_for,
    opencode_payload,
)
from pentrace.domain.runtime.mapping import (
    EVENT_TYPES,
    MODEL_MESSAGE_TYPES,
    event_type_for,
    time_ms_of,
)
from pentrace.domain.runtime.mapping import event_from_record as runtime_event_from_record
from pentrace.domain.runtime.scope import (
    derive_stream_id,
    derive_subject,
    extract_correlation,
    extract_scope,
    normalize_directory,
    slug_stream_id,
    source_id,
)
from pentrace.domain.runtime.session_events import (
    EncodedEvent,
    SessionEvents,
    encode_event,
    record_workspace,
)

__all__ = [
    "CATEGORIES",
    "DEFAULT_SOURCE",
    "EVENT_TYPES",
    "MODEL_MESSAGE_TYPES",
    "SCHEMA_VERSION",
    "EncodedEvent",
    "Privacy",
    "RuntimeEvent",
    "SessionEvents",
    "build_event",
    "derive_stream_id",
    "derive_subject",
    "encode_event",
    "event_category",
    "event_id_for",
    "event_type_for",
    "extract_correlation",
    "extract_scope",
    "normalize_directory",
    "opencode_payload",
    "record_workspace",
    "runtime_event_from_record",
    "slug_stream_id",
    "source_id",
    "time_ms_of",
]
