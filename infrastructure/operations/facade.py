"""The library's front door: one data root, and the common uses on it (ADR 0036).

``pentrace.open_root(path)`` returns a :class:`Root`; it records (through
:func:`~pentrace.infrastructure.eventstore.recording.open_recording`, so the
ledger is indexed as the harness writes), resumes, lists and shows sessions
(the session documents ``pentrace list --json`` prints), replays and
computes stats (the documents of ``pentrace stats --json``).  Everything here
calls the same functions as the CLI and the service; the full API stays where
it lives.  ``README.md`` has a runnable example.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pentrace.infrastructure.catalog.listing import (
    SessionFilter,
    list_sessions,
    read_row,
    resolve_session,
)
from pentrace.infrastructure.eventstore.application import (
    ResumedSession,
    SessionApplication,
    SessionHandle,
)
from pentrace.infrastructure.eventstore.recording import Recording, open_recording
from pentrace.infrastructure.operations.documents import session_detail, session_document
from pentrace.infrastructure.operations.stats import StatsQuery, stats_document
from pentrace.infrastructure.sessions.fork import read_replay
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef
from pentrace.projections.replay import ReplayItem

__all__ = ["Root", "SessionApplication", "SessionHandle", "open_root"]


@dataclass(frozen=True)
class Root:
    """One data root (``PENGUIN_HOME``): record, resume and query its sessions."""

    data_root: DataRoot

    @property
    def path(self) -> Path:
        """The data root's folder."""
        return self.data_root.path

    def record(self, project: str, agent: str, **options: Any) -> Recording:
        """A recording of ``project``/``agent`` that indexes into the ledger; close it when done.

        ``options`` go to ``open_recording`` (``ledger``, ``durability``, ``clock``, ...).
        """
        return open_recording(self.data_root, project, agent, **options)

    def find(self, session: str) -> SessionRef:
        """The one session ``session`` names: an id, a unique prefix, or ``project/agent/id``."""
        return resolve_session(self.data_root, session)

    @contextmanager
    def resume(self, session: str, **options: Any) -> Iterator[ResumedSession]:
        """Resume ``session`` from its latest shard, as PenguinHarness does, ledger wired in.

        A context manager: on leaving, the handle saves what is pending and releases the
        session's lock, and the recording closes.
        """
        ref = self.find(session)
        with self.record(ref.project, ref.agent, **options) as recording:
            resumed = recording.application.resume_session(ref.session_id)
            try:
                yield resumed
            finally:
                resumed.handle.close()

    def sessions(self, sort: str = "start", **filters: Any) -> list[dict[str, Any]]:
        """The session documents, filtered as ``pentrace list`` (``SessionFilter``)."""
        rows = list_sessions(self.data_root, SessionFilter(**filters), sort)
        return [session_document(row) for row in rows]

    def session(self, session: str) -> dict[str, Any]:
        """One session's detail document (``pentrace show --json`` without the old names)."""
        ref = self.find(session)
        return session_detail(self.data_root, ref, read_row(ref))

    def replay(self, session: str, *, include_uncommitted: bool = False) -> list[ReplayItem]:
        """The session's records placed in their rounds; committed history by default."""
        items = read_replay(self.find(session))
        return items if include_uncommitted else [item for item in items if item.committed]

    def stats(self, kind: str, **query: Any) -> dict[str, Any]:
        """The document of ``pentrace stats <kind> --json``, the projections caught up first."""
        return stats_document(self.path, StatsQuery(kind, **query))


def open_root(path: DataRoot | Path | str | None = None) -> Root:
    """The data root at ``path``; ``None`` is the one ``PENGUIN_HOME`` names."""
    if path is None:
        return Root(DataRoot.from_env())
    if isinstance(path, DataRoot):
        return Root(path)
    return Root(DataRoot(Path(path).expanduser().absolute()))
