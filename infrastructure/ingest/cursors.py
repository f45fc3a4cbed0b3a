"""The follower's durable per-shard cursors, kept in the ledger database.

One row per follower ``source`` (host and data root, so several agent hosts
can share one PostgreSQL ledger) and shard, in the ledger's ``ingest_cursors`` table: where the
follower stopped (``offset``, the byte just after the last complete line it
consumed), the session position of the last record before that offset
(``position``), the position the shard starts after (``base``) and the file's
identity (device and inode) when it was read.

A cursor row is written by the same transaction as the ledger rows it covers
(:meth:`RuntimeEventLedger.extend` with ``before_commit``), so after a crash both
are there or neither is: the follower never skips a record and, because event
ids come from positions, never stores one twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import Connection, delete

from pentrace.infrastructure.ledger.store import RuntimeEventLedger

__all__ = ["Cursor", "CursorStore", "SessionKey", "change_reason"]

SessionKey = tuple[str, str, str]  # (project, agent, session id)


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where the follower stands in one shard."""

    shard: str  # the path relative to the data root
    session: SessionKey
    index: int
    device: int
    inode: int
    offset: int
    line: int
    base: int
    position: int


class CursorStore:
    """Reads and writes the cursor table next to one ledger's tables."""

    def __init__(self, ledger: RuntimeEventLedger, source: str) -> None:
        self.ledger = ledger
        self.source = source
        self.table = ledger.db.tables.ingest_cursors

    def load(self) -> dict[str, Cursor]:
        """Every cursor, by shard path."""
        with self.ledger.db.reading("read the ingest cursors") as conn:
            rows = conn.execute(self.table.select().where(self.table.c.source == self.source)).all()
        return {row.shard: _cursor(row) for row in rows}

    def writer(self, cursor: Cursor) -> Any:
        """A function that stores ``cursor`` on a connection (for ``extend(before_commit=...)``)."""

        def write(conn: Connection) -> None:
            conn.execute(delete(self.table).where(self._mine(), self.table.c.shard == cursor.shard))
            conn.execute(self.table.insert().values(source=self.source, **_values(cursor)))

        return write

    def forget(self, shards: list[str]) -> None:
        """Drop the cursors of shards that are gone."""
        if not shards:
            return
        with self.ledger.db.writing("forget ingest cursors") as conn:
            conn.execute(delete(self.table).where(self._mine(), self.table.c.shard.in_(shards)))

    def _mine(self) -> Any:
        return self.table.c.source == self.source


# Cursor field -> ingest_cursors column, besides the session key (three columns).
_COLUMNS: Final = (
    ("shard", "shard"),
    ("index", "shard_index"),
    ("device", "device"),
    ("inode", "inode"),
    ("offset", "byte_offset"),
    ("line", "line"),
    ("base", "base"),
    ("position", "position"),
)


def _values(cursor: Cursor) -> dict[str, Any]:
    project, agent, session_id = cursor.session
    values = {column: getattr(cursor, name) for name, column in _COLUMNS}
    values.update(project=project, agent=agent, session_id=session_id)
    return values


def _cursor(row: Any) -> Cursor:
    fields = {name: getattr(row, column) for name, column in _COLUMNS}
    return Cursor(session=(row.project, row.agent, row.session_id), **fields)


def change_reason(cursor: Cursor, device: int, inode: int, size: int, base: int) -> str | None:
    """Why ``cursor`` no longer fits its shard (new inode, shorter file, moved start), or None."""
    if (cursor.device, cursor.inode) != (device, inode):
        return "replaced (new inode)"
    if size < cursor.offset:
        return f"truncated ({size} bytes, cursor at {cursor.offset})"
    if cursor.base != base:
        return "an earlier shard of the session changed"
    return None
