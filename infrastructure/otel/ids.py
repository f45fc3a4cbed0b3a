"""Trace and span ids from positions, so that exporting again gives the same ids (ADR 0097).

An OpenTelemetry id is random in a live instrumentation; here it is a digest
of what names the span in the trace: the session (project, agent, session id,
ADR 0023), the position of the record that opens the span, and the span's
role (a task's ``invoke_agent`` and its first request's ``chat`` both open at
a ``request_begin``).  The same trace therefore always gives the same ids, in
a batch export, in the live exporter, after a restart or a SIGKILL, and a
receiver that keeps one span per id holds every span once.

BLAKE2b keyed by a fixed personalisation: 16 bytes for a trace id, 8 for a
span id.  The all-zero id is invalid in OpenTelemetry; a digest that is zero
(2**-64 for a span) becomes 1.
"""

from __future__ import annotations

from functools import lru_cache
from hashlib import blake2b
from typing import Final, Literal

from pentrace.domain.session.key import SessionKey

__all__ = ["SpanRole", "span_id", "trace_id"]

SpanRole = Literal["task", "chat", "tool", "compaction"]
_TRACE: Final = b"pentrace.trace"
_SPAN: Final = b"pentrace.span"


@lru_cache(maxsize=4096)
def _key_bytes(key: SessionKey) -> bytes:
    # Length-prefixed, so no two keys (names may hold any character but "/") share bytes.
    parts = (key.project, key.agent, key.session_id)
    return b"".join(b"%d:%s" % (len(encoded), encoded) for encoded in map(_utf8, parts))


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _digest(person: bytes, key: SessionKey, position: int, role: bytes, size: int) -> int:
    value = int.from_bytes(
        blake2b(
            b"%s|%d|%s" % (_key_bytes(key), position, role), digest_size=size, person=person
        ).digest(),
        "big",
    )
    return value or 1


def trace_id(key: SessionKey, position: int) -> int:
    """The 128-bit trace id of the task of ``key`` that opens at ``position``."""
    return _digest(_TRACE, key, position, b"task", 16)


def span_id(key: SessionKey, position: int, role: SpanRole) -> int:
    """The 64-bit id of the ``role`` span of ``key`` that opens at ``position``."""
    return _digest(_SPAN, key, position, role.encode("ascii"), 8)
