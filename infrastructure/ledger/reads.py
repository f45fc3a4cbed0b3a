"""The ledger's reads beyond eventsourcing's: replay with gaps, bounds, counts, streams.

A mixin of :class:`~.store.RuntimeEventLedger` (which brings ``db``); the SQL of
pages and replays is in :mod:`.replay` and :mod:`.pages`.
"""

from __future__ import annotations

from sqlalchemy import func, literal, select

from pentrace.domain.json_codec import escape_surrogates
from pentrace.domain.session.key import SESSION_STREAMS_LIKE, SessionKey, parse_session_stream
from pentrace.infrastructure.ledger.backend.database import LedgerDatabase
from pentrace.infrastructure.ledger.backend.schema import event_id_of, ids_match, stream_equals
from pentrace.infrastructure.ledger.pages import newest_entries
from pentrace.infrastructure.ledger.replay import (
    LedgerEntry,
    ReplayResult,
    Scope,
    replay_after,
    scope_bounds,
)

__all__ = ["LedgerReads"]


class LedgerReads:
    """Read-only queries over one ledger database."""

    db: LedgerDatabase

    def replay_after(
        self,
        last_event_id: str | None,
        limit: int | None = 1000,
        session_id: str | None = None,
        agent_id: str | None = None,
        directory: str | None = None,
        project_id: str | None = None,
    ) -> ReplayResult:
        """Retained events after a cursor in global order; see :mod:`.replay` for gaps."""
        scope = Scope(session_id, agent_id, directory, project_id)
        return replay_after(self.db, last_event_id, limit, scope)

    def bounds(
        self,
        session_id: str | None = None,
        agent_id: str | None = None,
        directory: str | None = None,
        project_id: str | None = None,
    ) -> tuple[str | None, str | None]:
        """Oldest and newest retained event ids within the filter scope."""
        return scope_bounds(self.db, Scope(session_id, agent_id, directory, project_id))

    def contains(self, event_id: str) -> bool:
        """Whether the event is currently retained."""
        events = self.db.tables.events
        with self.db.reading("look up a ledger event") as conn:
            found = conn.execute(
                select(event_id_of(events)).where(
                    ids_match(events, [event_id], digest=self.db.digest_streams)
                )
            ).scalars()
            return event_id in found

    def newest(self, limit: int = 100) -> list[LedgerEntry]:
        """The last ``limit`` retained events, oldest first."""
        return newest_entries(self, limit)

    def count(self) -> int:
        """Retained rows."""
        with self.db.reading("count ledger events") as conn:
            return int(
                conn.execute(select(func.count()).select_from(self.db.tables.events)).scalar_one()
            )

    def holds_nothing(self) -> bool:
        """Whether the ledger has no row and no retention watermark (a new ledger)."""
        events, marks = self.db.tables.events, self.db.tables.watermarks
        with self.db.reading("look for rows in the ledger") as conn:
            return all(
                conn.execute(select(literal(1)).select_from(table).limit(1)).first() is None
                for table in (events, marks)
            )

    def held_sequences(self, stream_id: str) -> tuple[set[int], int]:
        """Sequences of a stream the ledger holds, and the highest one retention pruned (0)."""
        stream_id = escape_surrogates(stream_id)  # as the rows hold it (ADR 0015)
        events, marks = self.db.tables.events, self.db.tables.watermarks
        with self.db.reading("read a stream's ledger positions") as conn:
            held = conn.execute(
                select(events.c.sequence).where(
                    stream_equals(events, stream_id, digest=self.db.digest_streams)
                )
            ).scalars()
            sequences = {int(value) for value in held}
            pruned = conn.execute(
                select(marks.c.max_sequence).where(marks.c.stream_id == stream_id)
            ).scalar_one_or_none()
        return sequences, int(pruned or 0)

    def session_streams(self) -> dict[SessionKey, int]:
        """Every session the ledger holds rows of, with its row count."""
        events = self.db.tables.events
        query = (
            select(events.c.stream_id, func.count())
            .where(events.c.stream_id.like(SESSION_STREAMS_LIKE))
            .group_by(events.c.stream_id)
        )
        with self.db.reading("list the ledger's session streams") as conn:
            rows = conn.execute(query).all()
        held = {}
        for stream, count in rows:
            key = parse_session_stream(str(stream))
            if key is not None:
                held[key] = int(count)
        return held
