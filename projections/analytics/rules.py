"""The pure rules behind the built-in analytics (no I/O, no clock).

Where the session summary (:mod:`pentrace.projections.session_summary`)
already defines a rule - request statuses, which statuses are errors, when a
tool call failed - and where :mod:`pentrace.projections.session_summary`
defines one (a request's token counts, the model name), these rules import it
instead of restating it, so
``pentrace sessions show`` and ``pentrace stats`` never disagree.
"""

from __future__ import annotations

from typing import Any, Final

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
    "TokenDelta",
    "bigint",
    "is_error_status",
    "is_truncated",
    "request_bucket",
    "token_delta",
    "tool_outcome",
]

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
