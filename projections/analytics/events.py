"""What an analytics projection receives: one redacted RuntimeEvent, decoded once.

Projections never see trace lines.  The ledger path (a ledger row's
``event_json``) and the rebuild path (a trace record mapped by
:func:`pentrace.domain.runtime.runtime_event_from_record` and encoded)
both give the same envelope bytes, so both give the same
:class:`AnalyticsEvent` - that is why a rebuild equals the incremental result.

Below it, the pure rules the built-in projections apply (request buckets, tool
outcomes, truncation, token deltas), taken from the session summary where it
defines them, so that ``pentrace sessions show`` and ``pentrace stats`` never
disagree.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from pentrace.domain.json_codec import JsonDecoder
from pentrace.projections.session_summary import (
    ERROR_STATUSES,
    REQUEST_STATUSES,
    TOKEN_FIELDS,
    TokenDelta,
    token_delta,
)

__all__ = [
    "TOKEN_FIELDS",
    "TRUNCATION_MARK",
    "AnalyticsEvent",
    "Scope",
    "TokenDelta",
    "bigint",
    "day_of",
    "decode_event",
    "is_error_status",
    "is_truncated",
    "iso_of",
    "minute_of",
    "request_bucket",
    "token_delta",
    "tool_outcome",
]


class Scope(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The envelope's scope fields analytics group by (others are ignored)."""

    session_id: str | None = None
    agent_id: str | None = None
    project_id: str | None = None
    provider_id: str | None = None
    model_id: str | None = None


class AnalyticsEvent(msgspec.Struct, kw_only=True):
    """One redacted RuntimeEvent: type, time (ms), stream position, scope, correlation, payload."""

    id: str
    type: str
    time: int = 0
    stream_id: str = "global"
    sequence: int = 0
    scope: Scope = msgspec.field(default_factory=Scope)
    correlation: dict[str, Any] = msgspec.field(default_factory=dict)
    payload: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def session(self) -> str:
        """The session's identity, ``project/agent/session-id`` ("" outside a session).

        Read models key sessions by it: the same session id may exist under
        several agents or projects (ADR 0023).  An event without project and
        agent (a foreign envelope) keys by its session id alone.
        """
        session_id, project, agent = (
            self.scope.session_id,
            self.scope.project_id,
            self.scope.agent_id,
        )
        if not session_id:
            return ""
        return f"{project}/{agent}/{session_id}" if project and agent else session_id

    @property
    def session_id(self) -> str:
        """The bare session id ("" for events outside a session)."""
        return self.scope.session_id or ""

    @property
    def day(self) -> str:
        """The UTC day of the event time, ``YYYY-MM-DD``."""
        return day_of(self.time)

    @property
    def minute(self) -> str:
        """The UTC minute of the event time, ``YYYY-MM-DDTHH:MM`` (its first 13 characters
        are the hour, its first 10 the day)."""
        return minute_of(self.time)


_decoder: Final = JsonDecoder(AnalyticsEvent)


def decode_event(event_json: bytes) -> AnalyticsEvent:
    """Decode a RuntimeEvent envelope (ledger ``event_json``) into an :class:`AnalyticsEvent`."""
    return _decoder.decode(event_json)


_DAY_MS: Final = 86_400_000
_days: dict[int, str] = {}


def day_of(time_ms: int) -> str:
    """``YYYY-MM-DD`` of a millisecond timestamp, in UTC."""
    number = time_ms // _DAY_MS
    day = _days.get(number)
    if day is None:
        # Memoised per day number: this runs once per event on the catch-up path.
        day = _days[number] = datetime.fromtimestamp(number * 86_400, UTC).strftime("%Y-%m-%d")
    return day


def minute_of(time_ms: int) -> str:
    """``YYYY-MM-DDTHH:MM`` of a millisecond timestamp, in UTC (no time zone, no DST)."""
    into_day = time_ms % _DAY_MS
    return f"{day_of(time_ms)}T{into_day // 3_600_000:02d}:{into_day // 60_000 % 60:02d}"


def iso_of(time_ms: int) -> str:
    """ISO 8601 (UTC, milliseconds) of a millisecond timestamp."""
    moment = datetime.fromtimestamp(time_ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{time_ms % 1000:03d}Z"


TRUNCATION_MARK: Final = "[output truncated: "
_OUTCOMES: Final = {"aborted": "aborts", "timeout": "timeouts"}

_MAX_COUNT: Final = 2**63 - 1  # what a BIGINT column holds


def bigint(value: Any) -> int | None:
    """``value`` when it is an int a BIGINT column holds, else None (``2**70``, ``"7"``)."""
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and -_MAX_COUNT <= value <= _MAX_COUNT
    ):
        return value
    return None


def request_bucket(status: Any) -> str:
    """The request-status bucket of a ``request_end`` status (the session summary's names)."""
    return status if isinstance(status, str) and status in REQUEST_STATUSES else "other"


def is_error_status(status: Any) -> bool:
    """True for the statuses the session summary counts as errors."""
    return isinstance(status, str) and status in ERROR_STATUSES


def tool_outcome(stop_reason: Any) -> str | None:
    """Which counter a tool output adds to: None for success, else failures/aborts/timeouts.

    The failure rule is the session summary's: a call fails when its output
    *states* a ``stop_reason`` other than ``completed``; aborts and timeouts
    are the two failures counted on their own as well.
    """
    if stop_reason is None or stop_reason == "completed":
        return None
    return _OUTCOMES.get(stop_reason, "failures") if isinstance(stop_reason, str) else "failures"


def is_truncated(output: Any) -> bool:
    """True when a tool output carries the trace's truncation note."""
    return isinstance(output, str) and TRUNCATION_MARK in output
