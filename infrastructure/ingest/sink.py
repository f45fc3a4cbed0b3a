"""The follower's writes: one batch of a session's lines into the ledger, with its cursor.

A batch becomes RuntimeEvents (:func:`~pentrace.infrastructure.ledger.indexer.build_events`),
positions the ledger already holds below its floor are left out (another
writer, such as ``ledger sync``, indexed them first), and the rest are
appended in one transaction that also stores the shard's new cursor.
"""

from __future__ import annotations

from pentrace.domain.records import TraceRecord
from pentrace.errors import LedgerConflictError, LedgerError
from pentrace.infrastructure.ingest.cursors import Cursor, CursorStore, SessionKey
from pentrace.infrastructure.ingest.stats import IngestStats
from pentrace.infrastructure.ledger.indexer import (
    build_events,
    record_workspace,
    session_directory,
)
from pentrace.infrastructure.ledger.rows import as_envelope
from pentrace.infrastructure.ledger.store import RuntimeEventLedger
from pentrace.infrastructure.storage.layout import ShardRef

__all__ = ["LedgerSink"]


class LedgerSink:
    """Writes the follower's batches; remembers each session's directory and ledger floor."""

    def __init__(
        self, ledger: RuntimeEventLedger, cursors: CursorStore, stats: IngestStats
    ) -> None:
        self.ledger = ledger
        self.cursors = cursors
        self.stats = stats
        self._directories: dict[SessionKey, str | None] = {}
        self._floors: dict[SessionKey, int] = {}

    def first_record(self, key: SessionKey, record: TraceRecord) -> None:
        """The session's first record names its workspace directory."""
        self._directories[key] = record_workspace(record)

    def forget(self, key: SessionKey) -> None:
        """Drop what is remembered about a session that is gone."""
        self._directories.pop(key, None)
        self._floors.pop(key, None)

    def write(
        self,
        key: SessionKey,
        shards: tuple[ShardRef, ...],
        records: list[tuple[int, bytes]],
        cursor: Cursor,
    ) -> None:
        """Append ``(position, line)`` records above the floor and store ``cursor`` with them."""
        project, agent, session_id = key
        directory = self._directory(key, shards)
        try:
            events = build_events(
                session_id, records, project=project, agent=agent, directory=directory
            )
        except LedgerError as error:
            raise LedgerConflictError(error.message, hint=error.hint) from None
        envelopes = [as_envelope(event) for event in events]
        if envelopes and key not in self._floors:
            stream = str(envelopes[0].get("stream_id") or "")
            self._floors[key] = self.ledger.held_sequences(stream)[1] if stream else 0
        floor = self._floors.get(key, 0)
        kept = [
            env for (position, _), env in zip(records, envelopes, strict=True) if position > floor
        ]
        new = self.ledger.extend(kept, before_commit=self.cursors.writer(cursor))
        self.stats.indexed += new
        self.stats.already_held += len(kept) - new

    def _directory(self, key: SessionKey, shards: tuple[ShardRef, ...]) -> str | None:
        if key not in self._directories:
            self._directories[key] = session_directory(shards)
        return self._directories[key]
