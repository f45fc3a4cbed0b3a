"""One set of numbers per session: the definitions every surface reads (issue #13).

``pentrace sessions list``, ``show``, ``stats``, ``report``, the HTTP API
and the analytics read models all answer "how many requests, turns, tokens,
how long, which model" from these rules, so two screens never give two
answers to one question:

* **requests** are the requests that began (``request_begin``), counted by
  how they ended: the ``request_end`` status (``other`` for an unknown one),
  ``open`` when none came.  The total is their sum.
* **turns** are requests that ended exactly ``"completed"`` outside a
  compaction span (resume's rule, ``docs/resume.md``).
* **tokens** are the sum of the ``request`` counts of *every* ``token_usage``
  record, committed or not (a failed request still used tokens): fresh
  input is what ``total`` leaves after output and the two cache counts,
  never below zero.  The harness's running ``session`` counts are resume's
  carry-over, shown apart as such.
* **duration** runs from the first record's timestamp to the last one's.
* the **model** is ``provider/model_id`` of the first ``session_meta``
  (``model_id`` alone without a provider).

:func:`numbers_of` reads them off a
:class:`~pentrace.projections.session_summary.SessionSummary`; the analytics
projections apply :func:`token_delta` and :func:`model_name` per event.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import msgspec

if TYPE_CHECKING:
    from pentrace.projections.session_summary import SessionSummary

__all__ = [
    "TOKEN_FIELDS",
    "SessionNumbers",
    "TokenDelta",
    "add_tokens",
    "duration_seconds",
    "model_name",
    "numbers_of",
    "parse_timestamp",
    "token_count",
    "token_delta",
]

TOKEN_FIELDS: Final = ("input", "output", "cache_read", "cache_write", "total")
TokenDelta = tuple[int, int, int, int, int]
"""(input, output, cache_read, cache_write, total) of one request."""
_UNKNOWN: Final = frozenset({"", "unknown"})


class SessionNumbers(msgspec.Struct, kw_only=True):
    """A session's headline numbers, as every surface shows them."""

    requests: dict[str, int]
    request_total: int
    turns: int
    tokens: dict[str, int]
    duration_s: float | None
    model: str | None


_MAX_COUNT: Final = 2**63 - 1  # what a BIGINT column holds


def _finite(value: Any) -> int | float | None:
    """``value`` when it is a finite number >= 0 (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value if value >= 0 else None


def token_count(value: Any) -> int | float:
    """A token count as written when it is a finite number >= 0, else 0.

    Counts of other shapes (``1e400`` read as infinity, ``-5``, ``true``,
    ``"12"``, an object) count as nothing rather than failing every command
    that adds them up.
    """
    number = _finite(value)
    return 0 if number is None else number


def _count(value: Any) -> int:
    """A count as an int: 0 for anything but a finite number in 0..2**63-1 (1e400, -5, "7")."""
    number = _finite(value)
    count = 0 if number is None else int(number)
    return count if count <= _MAX_COUNT else 0


def token_delta(payload: dict[str, Any]) -> TokenDelta | None:
    """The request's token counts of a ``token_usage`` payload, or None without them."""
    request = payload.get("request")
    if not isinstance(request, dict):
        return None
    output = _count(request.get("output"))
    cache_read = _count(request.get("cache_read"))
    cache_write = _count(request.get("cache_write"))
    total = _count(request.get("total"))
    fresh = max(total - output - cache_read - cache_write, 0)
    return (fresh, output, cache_read, cache_write, total)


def add_tokens(totals: dict[str, int], delta: TokenDelta) -> None:
    """Add one request's counts to running totals keyed by :data:`TOKEN_FIELDS`."""
    for name, value in zip(TOKEN_FIELDS, delta, strict=True):
        totals[name] = totals.get(name, 0) + value


def model_name(provider: object, model_id: object) -> str | None:
    """``provider/model_id`` (``model_id`` alone without a provider; None without a model)."""
    if not isinstance(model_id, str) or model_id in _UNKNOWN:
        return None
    if isinstance(provider, str) and provider not in _UNKNOWN:
        return f"{provider}/{model_id}"
    return model_id


def parse_timestamp(stamp: str | None) -> datetime | None:
    """A record's ISO 8601 timestamp as an aware datetime (UTC when it names no zone), or None."""
    if stamp is None:
        return None
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _ms(stamp: str | None) -> int | None:
    moment = parse_timestamp(stamp)
    return None if moment is None else int(moment.timestamp() * 1000)


def duration_seconds(first: str | None, last: str | None) -> float | None:
    """Seconds from the first record's timestamp to the last's (None when one is unreadable)."""
    start, end = _ms(first), _ms(last)
    if start is None or end is None:
        return None
    return round((end - start) / 1000, 3)


def numbers_of(summary: SessionSummary) -> SessionNumbers:
    """The numbers of a session summary."""
    requests = {status: count for status, count in summary.requests.items() if count}
    return SessionNumbers(
        requests=requests,
        request_total=sum(requests.values()),
        turns=summary.turns,
        tokens=dict(summary.token_totals),
        duration_s=duration_seconds(summary.first_timestamp, summary.last_timestamp),
        model=model_name(summary.provider, summary.model_id),
    )
