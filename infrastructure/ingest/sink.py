"""The follower's writes: one batch of a session's lines into the ledger, with its cursor.

A batch becomes ledger rows through the indexers' one path
(:class:`~pentrace.domain.runtime.SessionEvents`, ADR 0038),
positions the ledger already holds below its floor are left out (another
writer, such as ``ledger sync``, indexed them first), and the rest are
appended in one transaction that also stores the shard's new cursor.
"""

from __future__ import annotations

from pentrace.domain.records import TraceRecord
from pentrace.domain.runtime import SessionEvents, record_workspace
from pentrace.domain.session.key import SessionKey as Owner
from pentrace.infrastructure.ingest.cursors import Cursor, CursorStore, SessionKey
from pentrace.infrastructure.ingest.stats import IngestStats
from pentrace.infrastructure.ledger.indexer import session_directory
from pentrace.infrastructure.ledger.rows import encoded_row
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
        records: list[tuple[int, TraceRecord]],
        cursor: Cursor,
    ) -> None:
        """Append ``(position, record)`` pairs above the floor and store ``cursor`` with them."""
        owner = Owner(*key)
        mapper = SessionEvents(owner, self._directory(key, shards))
        if records and key not in self._floors:
            self._floors[key] = self.ledger.held_sequences(owner.stream_id)[1]
        floor = self._floors.get(key, 0)
        now = self.ledger.now_ms()
        kept = [
            encoded_row(mapper.encoded(position, record), now)
            for position, record in records
            if position > floor
        ]
        new = self.ledger.append_rows(kept, before_commit=self.cursors.writer(cursor))
        self.stats.indexed += new
        self.stats.already_held += len(kept) - new

    def _directory(self, key: SessionKey, shards: tuple[ShardRef, ...]) -> str | None:
        if key not in self._directories:
            self._directories[key] = session_directory(shards)
        return self._directories[key]
