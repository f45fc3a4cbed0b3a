"""Drop-in replacements for Penguin's runtime-event modules: change one import.

``pentrace.compat.penguin`` offers every public name of Penguin's
``penguin.system.runtime_events``, ``penguin.system.runtime_event_ledger``
and ``penguin.web.services.opencode_events`` with the same signatures,
keyword arguments, defaults and result shapes.  The differences are listed in
``docs/runtime-events.md`` under "Deviations from Penguin".
"""

# Each module's ``__all__`` is its list of Penguin names; they are re-exported by star
# imports (the ledger's only for type checking: at run time ``__getattr__`` loads them),
# which ruff cannot follow.
# ruff: noqa: F405

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, TypedDict

from pentrace.compat.penguin.opencode_events import *  # noqa: F403
from pentrace.compat.penguin.runtime_events import *  # noqa: F403

if TYPE_CHECKING:
    from pentrace.compat.penguin.ledger import *  # noqa: F403

# The ledger names (``ledger.__all__``) load SQLAlchemy; they are imported on first use
# (PEP 562), so code that only builds envelopes stays quick to import.  Private and
# dunder names never load it: tools probe those on any module.


def __getattr__(name: str) -> Any:
    if not name.startswith("_"):
        ledger = importlib.import_module("pentrace.compat.penguin.ledger")
        if name in ledger.__all__:
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
