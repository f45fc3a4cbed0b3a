"""Which ledger sessions a typed reference names (``pentrace ledger forget/tail/replay``).

Part of :mod:`pentrace.infrastructure.ledger.admin`, which re-exports it.  A
reference is matched against the sessions the ledger holds rows of
(:mod:`pentrace.infrastructure.sessions.refs`), as ``project/agent/id``
references (ADR 0023).
"""

from __future__ import annotations

from collections.abc import Sequence

from pentrace.domain.session.key import SessionKey, split_reference
from pentrace.errors import NoMatchError, UsageError
from pentrace.infrastructure.ledger import RuntimeEventLedger
from pentrace.infrastructure.sessions.refs import ambiguous, match_sessions
from pentrace.infrastructure.storage.layout import DataRoot

__all__ = ["ledger_session", "untraced_sessions"]


def untraced_sessions(
    ledger: RuntimeEventLedger, root: DataRoot, wanted: Sequence[str]
) -> dict[SessionKey, int]:
    """The ledger rows held per named session, after checking none has a trace under ``root``.

    Each of ``wanted`` is a session reference (:mod:`.session_refs`) naming
    exactly one session the ledger holds.  Raises unless every name resolves
    and none has traces (a traced session's events would only come back on
    the next ``ledger sync``).  Remove them with
    ``ledger.forget_stream(key.stream_id)``.
    """
    held = ledger.session_streams()
    chosen: dict[SessionKey, int] = {}
    for name in wanted:
        key = _held_session(held, name.strip(), ledger.db.where)
        chosen[key] = held[key]
    present = {ref.key for ref in root.iter_sessions()} if root.path.is_dir() else set()
    traced = [key for key in chosen if key in present]
    if traced:
        raise UsageError(
            f"session {traced[0]} still has traces under {root.path}: expected only sessions "
            "whose traces are gone; its events would come back on the next `ledger sync`",
            hint=f"delete the session itself: `pentrace delete {traced[0]}`",
        )
    return chosen


def ledger_session(ledger: RuntimeEventLedger, reference: str) -> SessionKey | str:
    """The one session the ledger holds that ``reference`` names (:mod:`.session_refs`).

    A full ``project/agent/session-id`` that the ledger does not hold yet is
    taken as given (``tail -f`` may wait for a session about to start).  A
    bare id that names no session key (a Penguin-format ledger, whose streams
    are ``session:<id>``) is returned as the id itself: a filter on the
    ``session_id`` column, as Penguin filters.
    """
    held = ledger.session_streams()
    if not match_sessions(held, reference):
        project, agent, session_id = split_reference(reference)
        if project and agent and session_id:
            return SessionKey(project, agent, session_id)
        if project is None and agent is None and session_id:
            return session_id
    return _held_session(held, reference.strip(), ledger.db.where)


def _held_session(held: dict[SessionKey, int], name: str, where: str) -> SessionKey:
    matches = match_sessions(held, name)
    if len(matches) > 1:
        raise ambiguous(name, matches)
    if not matches:
        raise NoMatchError(
            f"the ledger at {where} holds no events of a session {name!r}: expected a "
            "session id, a unique prefix of one, or project/agent/session-id",
            hint="`pentrace audit` lists the ledger's sessions that have no trace",
        )
    return matches[0]
