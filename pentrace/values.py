"""The one reader of the dates, ages and sizes that people type (``--since 7d``, ``--max-size 1G``).

Every option that takes a time, an age or a size goes through this module, so
the same forms work everywhere and anything else is the same clear
:class:`~pentrace.errors.UsageError` (exit code 2) naming the option, the
value and the accepted forms.

Times
    an ISO date (``2026-11-01``, midnight UTC), an ISO time (``2026-11-01T09:30``,
    ``2026-11-01T09:30:00+02:00``; UTC when it has no offset), an age before
    *now* (``45s``, ``30m``, ``12h``, ``7d``, ``2w``), ``today`` or ``yesterday``
    (midnight UTC), or ``now``.
Ages
    ``45s``, ``30m``, ``12h``, ``7d``, ``2w`` (a whole number and one unit).
Sizes
    a number of bytes (``4096``), or a number with a unit: ``K``, ``M``, ``G``,
    ``T`` and ``KiB`` ... ``TiB`` are powers of 1024; ``KB`` ... ``TB`` are powers
    of 1000 (``1.5GiB``, ``10MB``, ``500M``).

Nothing here reads the clock: the caller passes *now*, so tests can fix it.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta
from typing import Final

from pentrace.errors import UsageError

__all__ = [
    "AGE_FORMS",
    "AGE_UNITS",
    "SIZE_FORMS",
    "TIME_FORMS",
    "parse_age",
    "parse_day",
    "parse_size",
    "parse_time",
]

TIME_FORMS: Final = (
    "a date (2026-11-01), an ISO time (2026-11-01T09:30, UTC unless it has an offset), "
    "an age ago (30m, 12h, 7d, 2w), today, yesterday or now"
)
AGE_FORMS: Final = "a whole number and a unit: 45s, 30m, 12h, 7d, 2w"
SIZE_FORMS: Final = "bytes (4096) or a number and a unit: 500K, 10MB, 1.5GiB, 2G (K/M/G/T = 1024)"

# ASCII digits only, and few enough that int() stays cheap and a timedelta can hold them.
_AGE: Final = re.compile(r"(\d{1,12})\s*([smhdw])", re.IGNORECASE | re.ASCII)
AGE_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SIZE: Final = re.compile(
    r"(\d{1,30}(?:\.\d{1,30})?|\.\d{1,30})\s*(?:([kmgt])(ib|b)?|(b))?", re.IGNORECASE | re.ASCII
)
_POWERS: Final = {"k": 1, "m": 2, "g": 3, "t": 4}
# A date, an optional time; fromisoformat accepts much more (week dates, compact forms).
_ISO: Final = re.compile(
    r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?", re.ASCII
)


def _refuse(option: str, text: str, forms: str, *examples: str) -> UsageError:
    hint = "for example " + " or ".join(f"{option} {example}" for example in examples)
    shown = text if len(text) <= 60 else text[:57] + "..."
    return UsageError(f"{option} {shown!r}: expected {forms}", hint=hint)


def parse_age(text: str, *, option: str = "--older-than") -> timedelta:
    """``30d``, ``12h``, ``90m``, ``2w``, ``45s`` as a timedelta."""
    match = _AGE.fullmatch(text.strip())
    if match is None:
        raise _refuse(option, text, AGE_FORMS, "30d")
    try:
        return timedelta(seconds=int(match.group(1)) * AGE_UNITS[match.group(2).lower()])
    except OverflowError:
        raise _refuse(option, text, "an age of fewer than a million years", "30d") from None


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def parse_time(text: str, now: datetime, *, option: str = "--since") -> datetime:
    """A moment in UTC from any of the time forms (see the module doc)."""
    value = text.strip()
    lowered = value.lower()
    now = now.astimezone(UTC)
    if lowered == "now":
        return now
    if lowered in ("today", "yesterday"):
        return _midnight(now.date()) - timedelta(days=1 if lowered == "yesterday" else 0)
    if _AGE.fullmatch(value):
        try:
            return now - parse_age(value, option=option)
        except OverflowError:
            raise _refuse(
                option, text, "an age that reaches back no further than the year 1", "7d"
            ) from None
    if _ISO.fullmatch(value):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            pass  # 2026-13-45 has the shape but is no date
        else:
            return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    raise _refuse(option, text, TIME_FORMS, "7d", "2026-11-01")


def parse_day(text: str, now: datetime, *, option: str = "--since") -> str:
    """The UTC day (``YYYY-MM-DD``) of a time in any of the time forms."""
    return parse_time(text, now, option=option).date().isoformat()


def parse_size(text: str, *, option: str = "--max-size") -> int:
    """A number of bytes from ``4096``, ``500K``, ``10MB``, ``1.5GiB`` ... (see the module doc)."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise _refuse(option, text, SIZE_FORMS, "1G")
    number, prefix, suffix = float(match.group(1)), match.group(2), match.group(3)
    if prefix is None:
        return int(number)
    base = 1000 if suffix is not None and suffix.lower() == "b" else 1024
    return int(number * base ** _POWERS[prefix.lower()])
