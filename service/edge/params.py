"""The one place HTTP request values are parsed: query parameters, path values, headers.

Every route reads its inputs through these functions, so every bad value is a
:class:`~pentrace.service.edge.errors.BadRequest` (HTTP 400) that names the
parameter, says what was expected and echoes at most a short, escaped prefix of
what was found.  No route calls ``int()`` on a client string itself.

Rules shared by all of them:

- a parameter given twice (``?limit=1&limit=2``) is refused, not silently the last;
- an empty value means "not given" (``?limit=`` is the default);
- text never holds control characters and is bounded in length;
- integers are ASCII digits only (``²`` and ``٣`` are digits to ``str.isdigit``,
  not to this module), within a stated range, so nothing huge reaches ``int()``.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from datetime import date, datetime
from typing import Final

from starlette.requests import Request

from pentrace.errors import UsageError
from pentrace.infrastructure.operations.sessions import parse_time_bound
from pentrace.service.edge.errors import BadRequest

__all__ = [
    "MAX_TEXT",
    "choice",
    "cursor",
    "day",
    "flag",
    "integer",
    "integer_or",
    "path_text",
    "text",
    "time_bound",
]

MAX_TEXT: Final = 200  # the longest name pentrace accepts (project, agent, session id)
_MAX_CURSOR: Final = 1024
_ECHO: Final = 40
_DIGITS: Final = re.compile(r"[0-9]{1,18}")  # ASCII only; 18 digits fit any range below
_DAY: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off"})


def _found(raw: str) -> str:
    """A short, escaped echo of a client value for an error message."""
    shown = raw[:_ECHO]
    return repr(shown) + (f" (and {len(raw) - _ECHO} more characters)" if len(raw) > _ECHO else "")


def _raw(request: Request, name: str) -> str | None:
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise BadRequest(
            f"query parameter {name}: expected one value, found {len(values)}",
            hint=f"pass {name} once",
        )
    if not values or values[0] == "":
        return None
    return values[0]


def _checked_text(what: str, raw: str, max_chars: int, example: str) -> str:
    if len(raw) > max_chars:
        raise BadRequest(
            f"{what}: expected at most {max_chars} characters, found {len(raw)}",
            hint=f"for example {example}",
        )
    if _CONTROL.search(raw):
        raise BadRequest(
            f"{what}: expected text without control characters, found {_found(raw)}",
            hint=f"for example {example}",
        )
    return raw


def text(request: Request, name: str, *, max_chars: int = MAX_TEXT) -> str | None:
    """A free-text query parameter (a name, a model, a folder), or None when not given."""
    raw = _raw(request, name)
    if raw is None:
        return None
    return _checked_text(f"query parameter {name}", raw, max_chars, f"?{name}=value")


def path_text(request: Request, name: str, *, max_chars: int = MAX_TEXT) -> str:
    """A path value (``{session_id}``), with the same text rules as :func:`text`."""
    raw = str(request.path_params[name])
    return _checked_text(f"path value {name}", raw, max_chars, f"a {name} from the list")


def session_path(request: Request) -> str:
    """The ``{project}/{agent}/{session_id}`` of a path, as one session reference (ADR 0023)."""
    return "/".join(path_text(request, name) for name in ("project", "agent", "session_id"))


def integer(
    request: Request, name: str, *, low: int, high: int, default: int | None = None
) -> int | None:
    """An integer query parameter within ``low..high``, else ``default``."""
    raw = _raw(request, name)
    return default if raw is None else _bounded(name, raw, low, high, None)


def integer_or(
    request: Request, name: str, word: str, *, high: int, low: int = 1
) -> int | str | None:
    """An integer within ``low..high`` or the literal ``word`` (``?shard=all``), else None."""
    raw = _raw(request, name)
    if raw is None or raw == word:
        return raw
    return _bounded(name, raw, low, high, word)


def _bounded(name: str, raw: str, low: int, high: int, word: str | None) -> int:
    value = int(raw) if _DIGITS.fullmatch(raw) else None
    if value is None or not low <= value <= high:
        also = f" or {word!r}" if word else ""
        raise BadRequest(
            f"query parameter {name}: expected an integer from {low} to {high}{also}, "
            f"found {_found(raw)}",
            hint=f"for example ?{name}={max(low, 1)}" + (f" or ?{name}={word}" if word else ""),
        )
    return value


def flag(request: Request, name: str) -> bool | None:
    """A boolean query parameter (``true``/``false``, ``1``/``0``, ``yes``/``no``,
    ``on``/``off``), or None when not given."""
    raw = _raw(request, name)
    if raw is None:
        return None
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise BadRequest(
        f"query parameter {name}: expected true or false, found {_found(raw)}",
        hint=f"for example ?{name}=true",
    )


def choice(request: Request, name: str, choices: Collection[str]) -> str | None:
    """One of ``choices``, or None when not given."""
    raw = _raw(request, name)
    if raw is None:
        return None
    if raw not in choices:
        raise BadRequest(
            f"query parameter {name}: expected one of {', '.join(choices)}, found {_found(raw)}",
            hint=f"for example ?{name}={next(iter(choices))}",
        )
    return raw


def day(request: Request, name: str) -> str | None:
    """A calendar day ``YYYY-MM-DD`` that exists, or None when not given."""
    raw = _raw(request, name)
    if raw is None:
        return None
    try:
        valid = bool(_DAY.fullmatch(raw)) and date.fromisoformat(raw) is not None
    except ValueError:
        valid = False
    if not valid:
        raise BadRequest(
            f"query parameter {name}: expected a day YYYY-MM-DD, found {_found(raw)}",
            hint=f"for example ?{name}=2026-11-01",
        )
    return raw


def time_bound(request: Request, name: str, now: datetime) -> datetime | None:
    """A time bound as ``pentrace sessions list --since`` takes it (a day, an ISO time or an
    age such as ``7d``), or None when not given."""
    raw = _raw(request, name)
    if raw is None:
        return None
    _checked_text(f"query parameter {name}", raw, 64, f"?{name}=7d")
    try:
        return parse_time_bound(raw, now)
    except UsageError as error:
        raise BadRequest(
            f"query parameter {name}: {error.message}",
            hint=f"for example ?{name}=2026-11-01 or ?{name}=7d",
        ) from None


def cursor(request: Request) -> str | None:
    """The SSE cursor: the ``last_event_id`` query parameter, else the ``Last-Event-ID``
    header (the query wins); None when neither is given or both are blank.

    The header is read as the UTF-8 bytes a browser sends (Starlette decodes headers as
    Latin-1); a value that is not UTF-8, holds control characters or is longer than
    1024 characters is a 400, not an unknown cursor.
    """
    raw = _raw(request, "last_event_id")
    what = "query parameter last_event_id"
    if raw is None:
        what = "header Last-Event-ID"
        values = [value for key, value in request.scope["headers"] if key == b"last-event-id"]
        if len(values) > 1:
            raise BadRequest(
                f"{what}: expected one value, found {len(values)}", hint="send the header once"
            )
        if not values:
            return None
        try:
            raw = values[0].decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest(
                f"{what}: expected UTF-8 text, found bytes that are not",
                hint="send the id of an event this stream delivered",
            ) from None
    raw = raw.strip()
    if not raw:
        return None
    return _checked_text(what, raw, _MAX_CURSOR, "an id: line this stream delivered")
