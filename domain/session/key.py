"""A session's identity: (project, agent, session id), and the ids derived from it.

The same session id may exist under two agents or two projects (a trace
imported twice, copied between installs, forked), so nothing derived from a
trace may use the session id alone (ADR 0023).  This module is the one place
that spells the derived forms:

* the **reference** an operator types and reads, ``project/agent/session-id``
  (names never hold ``/``, see :mod:`pentrace.infrastructure.storage.layout`);
* the ledger **stream id**, ``session:<project>/<agent>/<session-id>``, each
  name percent-encoded outside ``[A-Za-z0-9._~-]`` so it is ASCII, holds no
  ``:`` of its own and is safe in a URL and in an SSE ``id:`` line;
* the **event id** of the record at a position, ``evt:<stream id>:<%08d>``.

Common names (``demo``, ``agent_1``, ``session-2026-...``) encode to
themselves, so the usual id reads as its reference:
``evt:session:demo/agent_1/session-2026-11-29-10-00-00-3f8a1c2d:00000007``.

Names are percent-encoded by :func:`percent_encode`: every character outside a caller's
safe set becomes the ``%XX`` escapes of its UTF-8 bytes (lone surrogates included, through
``surrogatepass``), so two different names never encode alike and none encodes to nothing.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from pentrace.errors import UsageError

__all__ = [
    "SESSION_STREAMS_LIKE",
    "SESSION_STREAM_PREFIX",
    "SessionKey",
    "any_owner_streams_like",
    "key_of_reference",
    "legacy_event_parts",
    "legacy_session_of",
    "legacy_stream_id",
    "parse_session_stream",
    "percent_encode",
    "split_reference",
]

SESSION_STREAM_PREFIX: Final = "session:"
# SQL LIKE pattern of every session stream, of either form.
SESSION_STREAMS_LIKE: Final = SESSION_STREAM_PREFIX + "%"
_SAFE: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-")
_encoded: dict[str, str] = {}
# Stream ids of recent keys: every event of a session spells its stream (and id) again.
_MAX_STREAMS: Final = 4096
_streams: dict[SessionKey, str] = {}


def _encode(name: str) -> str:
    known = _encoded.get(name)
    if known is not None:
        return known
    text = percent_encode(name, _SAFE)
    if len(_encoded) < 4096:
        _encoded[name] = text
    return text


def _decode(text: str) -> str | None:
    """The name ``text`` encodes, or None when it is not an encoding :func:`_encode` makes."""
    out = bytearray()
    index = 0
    while index < len(text):
        char = text[index]
        if char == "%":
            digits = text[index + 1 : index + 3]
            if len(digits) != 2 or not all(c in "0123456789ABCDEF" for c in digits):
                return None
            out.append(int(digits, 16))
            index += 3
        elif char in _SAFE:
            out.append(ord(char))
            index += 1
        else:
            return None
    try:
        name = out.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None
    return name if name and _encode(name) == text else None


class SessionKey(NamedTuple):
    """Who owns a session and which one it is: the identity every derived store keys by."""

    project: str
    agent: str
    session_id: str

    @property
    def reference(self) -> str:
        """``project/agent/session-id``: what the CLI and the HTTP API accept and print."""
        return f"{self.project}/{self.agent}/{self.session_id}"

    @property
    def stream_id(self) -> str:
        """The ledger stream of the session's events (see the module docstring)."""
        known = _streams.get(self)
        if known is None:
            known = (
                f"{SESSION_STREAM_PREFIX}{_encode(self.project)}/{_encode(self.agent)}/"
                f"{_encode(self.session_id)}"
            )
            if len(_streams) >= _MAX_STREAMS:
                _streams.clear()
            _streams[self] = known
        return known

    @property
    def id_prefix(self) -> str:
        """What every event id of the session starts with, ``evt:<stream id>``."""
        return f"evt:{self.stream_id}"

    def event_id(self, position: int) -> str:
        """The id of the event of the record at 1-based ``position`` of the session's trace."""
        return f"{self.id_prefix}:{position:08d}"

    def __str__(self) -> str:
        return self.reference


def parse_session_stream(stream_id: str) -> SessionKey | None:
    """The session a ledger stream id belongs to, or None for any other stream.

    Streams of the earlier form ``session:<session-id>`` (before ADR 0023)
    are not session keys: they name no owner.
    """
    if not stream_id.startswith(SESSION_STREAM_PREFIX):
        return None
    parts = stream_id[len(SESSION_STREAM_PREFIX) :].split("/")
    if len(parts) != 3:
        return None
    names = [_decode(part) for part in parts]
    if names[0] is None or names[1] is None or names[2] is None:
        return None
    return SessionKey(names[0], names[1], names[2])


def any_owner_streams_like(session_id: str) -> str:
    """SQL LIKE pattern of the streams of ``session_id`` under any project and agent.

    ``%`` in an encoded name only widens the match, so callers check what it finds.
    """
    return f"{SESSION_STREAM_PREFIX}%/%/{_encode(session_id)}"


def legacy_stream_id(session_id: str) -> str:
    """The stream id of the earlier form, ``session:<session-id>`` (before ADR 0023)."""
    return SESSION_STREAM_PREFIX + session_id


def legacy_session_of(stream_id: str) -> str | None:
    """The session id of an earlier-form stream id, or None for any other stream."""
    if not stream_id.startswith(SESSION_STREAM_PREFIX) or parse_session_stream(stream_id):
        return None
    return stream_id[len(SESSION_STREAM_PREFIX) :]


def legacy_event_parts(event_id: str) -> tuple[str, int] | None:
    """``(session id, position)`` of an event id of the earlier ``evt:session:<sid>:<%08d>``
    form, or None (new-form ids hold a ``/``, which no session id does)."""
    prefix = "evt:" + SESSION_STREAM_PREFIX
    if not event_id.startswith(prefix):
        return None
    session_id, sep, digits = event_id[len(prefix) :].rpartition(":")
    if not sep or not session_id or "/" in session_id:
        return None
    if len(digits) < 8 or not digits.isascii() or not digits.isdigit():
        return None
    return session_id, int(digits)


def split_reference(text: str) -> tuple[str | None, str | None, str]:
    """``(project, agent, session part)`` of a typed reference.

    ``project/agent/id`` names all three, ``agent/id`` the agent only and a
    bare ``id`` (or prefix) neither; the session part may be a prefix.
    Raises :class:`~pentrace.errors.UsageError` for more than three parts.
    """
    parts = text.strip().split("/")
    if len(parts) > 3:
        raise UsageError(
            f"expected a session reference project/agent/session-id, found {len(parts)} "
            f"parts in {text.strip()[:120]!r}",
            hint="names hold no '/'; for example demo/assistant/3f8a1c2d",
        )
    if len(parts) == 3:
        return parts[0] or None, parts[1] or None, parts[2]
    if len(parts) == 2:
        return None, parts[0] or None, parts[1]
    return None, None, parts[0]


def key_of_reference(text: str) -> SessionKey:
    """The session a full ``project/agent/session-id`` reference names (no prefixes)."""
    project, agent, session_id = split_reference(text)
    if project is None or agent is None or not session_id:
        raise UsageError(
            f"expected a full session reference project/agent/session-id, found {text[:120]!r}",
            hint="for example demo/assistant/session-2026-11-29-10-00-00-3f8a1c2d",
        )
    return SessionKey(project, agent, session_id)


def percent_encode(text: str, safe: frozenset[str]) -> str:
    """``text`` with every character not in ``safe`` replaced by its ``%XX`` escapes."""
    if all(char in safe for char in text):
        return text
    return "".join(
        char
        if char in safe
        else "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
        for char in text
    )
