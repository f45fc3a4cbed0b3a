"""Drop-in replacements for Penguin's runtime-event modules: change one import.

``pentrace.compat.penguin`` offers every public name of Penguin's
``penguin.system.runtime_events``, ``penguin.system.runtime_event_ledger``
and ``penguin.web.services.opencode_events`` with the same signatures,
keyword arguments, defaults and result shapes.  The differences are listed in
``docs/runtime-events.md`` under "Deviations from Penguin".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from pentrace.compat.penguin.opencode_events import (
    GLOBAL_STATUS_EVENTS,
    directory_matches,
    emit_opencode_event,
    extract_event_directory,
    extract_event_session,
    normalize_directory,
    normalize_opencode_event,
    record_opencode_event,
    schedule_opencode_event,
    sse_event_frame,
)
from pentrace.compat.penguin.runtime_events import (
    RUNTIME_EVENT_CATEGORIES,
    RUNTIME_EVENT_SCHEMA_VERSION,
    build_runtime_event,
    event_category,
    extract_runtime_scope,
    normalize_event_directory,
    normalize_runtime_event,
    opencode_payload_from_runtime_event,
    redact_runtime_payload,
    reset_runtime_event_sequences,
    runtime_event_from_opencode,
    wrap_opencode_event,
)

if TYPE_CHECKING:
    from pentrace.compat.penguin.ledger import (
        DEFAULT_LEDGER_CLEANUP_INTERVAL_SECONDS,
        DEFAULT_LEDGER_MAX_AGE_DAYS,
        DEFAULT_LEDGER_MAX_BYTES,
        DEFAULT_LEDGER_MAX_EVENTS,
        ReplayResult,
        RuntimeEventLedger,
        RuntimeEventLedgerPolicy,
        default_ledger_path,
        get_runtime_event_ledger,
        policy_from_env,
    )

# The ledger names load SQLAlchemy; they are imported on first use (PEP 562), so
# code that only builds envelopes stays quick to import.
_LEDGER_NAMES = frozenset(
    {
        "DEFAULT_LEDGER_CLEANUP_INTERVAL_SECONDS",
        "DEFAULT_LEDGER_MAX_AGE_DAYS",
        "DEFAULT_LEDGER_MAX_BYTES",
        "DEFAULT_LEDGER_MAX_EVENTS",
        "ReplayResult",
        "RuntimeEventLedger",
        "RuntimeEventLedgerPolicy",
        "default_ledger_path",
        "get_runtime_event_ledger",
        "policy_from_env",
    }
)


def __getattr__(name: str) -> Any:
    if name in _LEDGER_NAMES:
        from pentrace.compat.penguin import ledger

        return getattr(ledger, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


SCHEMA_VERSION = RUNTIME_EVENT_SCHEMA_VERSION


class OpenCodeOptions(TypedDict, total=False):
    """Kept for callers of earlier pentrace versions; Penguin's helpers take explicit keywords."""

    default_agent_id: str | None
    default_directory: str | None
    default_session_id: str | None
    now_ms: int | None
    sequence: int | None


__all__ = [
    "DEFAULT_LEDGER_CLEANUP_INTERVAL_SECONDS",
    "DEFAULT_LEDGER_MAX_AGE_DAYS",
    "DEFAULT_LEDGER_MAX_BYTES",
    "DEFAULT_LEDGER_MAX_EVENTS",
    "GLOBAL_STATUS_EVENTS",
    "RUNTIME_EVENT_CATEGORIES",
    "RUNTIME_EVENT_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "OpenCodeOptions",
    "ReplayResult",
    "RuntimeEventLedger",
    "RuntimeEventLedgerPolicy",
    "build_runtime_event",
    "default_ledger_path",
    "directory_matches",
    "emit_opencode_event",
    "event_category",
    "extract_event_directory",
    "extract_event_session",
    "extract_runtime_scope",
    "get_runtime_event_ledger",
    "normalize_directory",
    "normalize_event_directory",
    "normalize_opencode_event",
    "normalize_runtime_event",
    "opencode_payload_from_runtime_event",
    "policy_from_env",
    "record_opencode_event",
    "redact_runtime_payload",
    "reset_runtime_event_sequences",
    "runtime_event_from_opencode",
    "schedule_opencode_event",
    "sse_event_frame",
    "wrap_opencode_event",
]
