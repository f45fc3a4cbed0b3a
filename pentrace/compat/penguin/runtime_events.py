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

from pentrace.compat.penguin._common import normalize_event_directory, reset_runtime_event_sequences
from pentrace.compat.penguin.envelope import (
    RUNTIME_EVENT_CATEGORIES,
    RUNTIME_EVENT_SCHEMA_VERSION,
    build_runtime_event,
    event_category,
    extract_runtime_scope,
    opencode_payload_from_runtime_event,
    redact_runtime_payload,
)
from pentrace.compat.penguin.normalize import normalize_runtime_event
from pentrace.compat.penguin.opencode_wrap import runtime_event_from_opencode, wrap_opencode_event

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
