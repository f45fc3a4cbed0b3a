"""Session references: which sessions a typed ``project/agent/session-id`` names.

The one matcher behind every command and route that takes a session
(:func:`pentrace.infrastructure.catalog.listing.resolve_session` over the traces,
``pentrace ledger forget`` over the ledger's sessions).  A reference is

* ``project/agent/<id>``: that owner's session,
* ``agent/<id>``: that agent's session in any project,
* ``<id>``: any owner's session,

where ``<id>`` is a full session id, a prefix of one, or a prefix of a native
id's 8-hex token.  An exact id wins over the longer ids it prefixes.  When
several sessions match, :func:`ambiguous` lists them as full references, and
its hint is the reference form that tells them apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from pentrace.domain.session.key import SessionKey, split_reference
from pentrace.errors import AmbiguousIdError, UsageError
from pentrace.infrastructure.storage.layout import is_session_id

__all__ = ["REFERENCE_HELP", "ambiguous", "match_sessions", "owner_of"]

# The help of every CLI SESSION argument.
REFERENCE_HELP: Final = (
    "Session id, a unique prefix of it, (a prefix of) its 8-hex token, or "
    "project/agent/session-id (also with a prefix) to name its owner."
)


def _token_of(session_id: str) -> str | None:
    return session_id[-8:] if is_session_id(session_id) else None


def owner_of(reference: str) -> tuple[str | None, str | None]:
    """The ``(project, agent)`` a reference names (None where it names none)."""
    project, agent, _ = split_reference(reference)
    return project, agent


def match_sessions(keys: Iterable[SessionKey], reference: str) -> list[SessionKey]:
    """The sessions among ``keys`` that ``reference`` names, sorted by reference.

    Raises :class:`~pentrace.errors.UsageError` for an empty reference.
    """
    project, agent, wanted = split_reference(reference)
    if not wanted:
        raise UsageError(
            f"expected a session id or prefix, found {reference.strip()[:120]!r}",
            hint="for example 3f8a1c2d, or demo/assistant/session-2026-11-29-10-00-00-3f8a1c2d",
        )
    exact: list[SessionKey] = []
    partial: list[SessionKey] = []
    for key in keys:
        if project is not None and key.project != project:
            continue
        if agent is not None and key.agent != agent:
            continue
        sid = key.session_id
        if sid == wanted:
            exact.append(key)
        elif sid.startswith(wanted) or (_token_of(sid) or "\0").startswith(wanted):
            partial.append(key)
    return sorted(exact or partial, key=lambda key: key.reference)


def ambiguous(reference: str, found: list[SessionKey]) -> AmbiguousIdError:
    """The error for a reference that names several sessions (listed as references)."""
    return AmbiguousIdError(reference.strip(), [key.reference for key in found])
