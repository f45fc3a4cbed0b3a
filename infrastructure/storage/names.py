"""Naming rules: which names may become path components, session ids and shard file names.

Every project, agent, session id and workspace name passes :func:`validate_name`
before it is joined to a path, so no name can climb out of the data root.
:mod:`pentrace.infrastructure.storage.layout` re-exports the public names.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from pathlib import PureWindowsPath

from pentrace.errors import InvalidNameError

__all__ = [
    "MAX_NAME_BYTES",
    "SHARD_SUFFIX",
    "SessionIdParts",
    "check_token",
    "is_session_id",
    "name_problem",
    "new_session_id",
    "parse_session_id",
    "parse_shard_name",
    "validate_name",
]

# A shard file name adds "_NNN.jsonl" to the session id, and NAME_MAX is 255 bytes.
MAX_NAME_BYTES = 200
SHARD_SUFFIX = ".jsonl"

_SESSION_ID = re.compile(r"session-(\d{4})-(\d{2})-(\d{2})-(\d{2})-(\d{2})-(\d{2})-([0-9a-f]{8})")
_HEX8 = re.compile(r"[0-9a-f]{8}")
_NAME_HINT = (
    "use a plain name such as 'my-project' or 'agent_1': not '.' or '..', no '/', '\\', "
    f"NUL or control characters, at most {MAX_NAME_BYTES} bytes"
)


def _shown(value: str) -> str:
    return repr(value[:60]) + ("..." if len(value) > 60 else "")


def name_problem(value: str) -> str | None:
    """Why ``value`` is unsafe as one path component, or ``None`` when it is safe."""
    if not value:
        return "it is empty"
    if value in (".", ".."):
        return "it is a relative path component"
    if "/" in value or "\\" in value or (os.altsep is not None and os.altsep in value):
        return "it contains a path separator"
    if "\x00" in value:
        return "it contains a NUL character"
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in value):
        return "it contains a control character"
    if PureWindowsPath(value).drive:
        return "it names a drive"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (from a JSON escape or a non-UTF-8 file name) has no UTF-8
        # form, so PenguinHarness could not spell the path and no store could hold the name.
        return "it holds a lone surrogate, which has no UTF-8 form"
    if len(value.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"it is longer than {MAX_NAME_BYTES} bytes"
    return None


def validate_name(kind: str, value: str) -> str:
    """Return ``value`` if it is safe as one path component, else raise InvalidNameError.

    ``kind`` names what the value is ("project", "agent", "session id",
    "workspace") so the message says which argument was wrong.
    """
    problem = name_problem(value) if isinstance(value, str) else "it is not a string"
    if problem is not None:
        raise InvalidNameError(
            f"invalid {kind} name {_shown(str(value))}: {problem}", hint=_NAME_HINT
        )
    return value


@dataclass(frozen=True, slots=True)
class SessionIdParts:
    """The pieces of a native session id: creation time (as written) and its 8-hex token."""

    created: datetime
    token: str


def check_token(token: str) -> str:
    """Return ``token`` if it is 8 lowercase hex digits, else raise InvalidNameError."""
    if not _HEX8.fullmatch(token):
        raise InvalidNameError(
            f"invalid token {_shown(token)}: expected 8 lowercase hex digits",
            hint="omit the token to get a random one",
        )
    return token


def new_session_id(now: datetime, token: str | None = None) -> str:
    """A native id ``session-YYYY-MM-DD-HH-mm-ss-<8hex>`` for a session created at ``now``.

    ``now`` is formatted as given (PenguinHarness uses local wall-clock time);
    ``token`` defaults to 8 random hex digits.
    """
    hex8 = check_token(token) if token is not None else secrets.token_hex(4)
    return f"session-{now:%Y-%m-%d-%H-%M-%S}-{hex8}"


def parse_session_id(value: str) -> SessionIdParts:
    """Split a native session id into its parts; raise InvalidNameError for any other id."""
    match = _SESSION_ID.fullmatch(value)
    if match is not None:
        year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
        try:
            created = datetime(year, month, day, hour, minute, second)
        except ValueError:
            match = None
        else:
            return SessionIdParts(created, match.group(7))
    raise InvalidNameError(
        f"expected a session id like 'session-2026-07-18-11-10-22-3f8a1c2d', found {_shown(value)}",
        hint="imported sessions may keep other ids; check with is_session_id() first",
    )


def is_session_id(value: str) -> bool:
    """True when ``value`` is a native ``session-YYYY-MM-DD-HH-mm-ss-<8hex>`` id."""
    try:
        parse_session_id(value)
    except InvalidNameError:
        return False
    return True


def parse_shard_name(name: str) -> tuple[str, int] | None:
    """``(session_id, index)`` for a file named ``<sessionId>_<NNN>.jsonl``, else ``None``."""
    if not name.endswith(SHARD_SUFFIX):
        return None
    session_id, sep, digits = name[: -len(SHARD_SUFFIX)].rpartition("_")
    if not sep or not digits.isascii() or not digits.isdigit():
        return None
    index = int(digits)
    # Only the canonical spelling (%03d) counts, so each index has exactly one file name.
    if index < 1 or f"{index:03d}" != digits or name_problem(session_id) is not None:
        return None
    return session_id, index
