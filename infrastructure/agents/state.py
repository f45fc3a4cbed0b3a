"""The durable state of the foreign-session import: cursors, mapping state, usage keys (ADR 0096).

``<root>/.pentrace/agents.db`` (SQLite, 0600) holds, per source (a file, or
a database and its sessions):

* ``sources``: the cursor (device, inode, byte offset and line number, or an
  opaque row position) and the mapper's small state (open requests and tool
  calls, models, running totals), encoded with msgpack;
* ``links``: the ids a mapper must look up later (Claude Code's ``uuid`` to
  the session and branch it went to), so memory stays bounded;
* ``usage``: per usage key (``<agent>:<message id>:<request id>``, ...) the
  most each kind has reached, which is how duplicates add nothing (ADR 0096);
* ``sessions``: per pentrace session written, its record count and where its
  trace ended (shard index, size) at the last commit.

One transaction per batch commits all of them *after* the batch's records are
in the trace and fsynced, so after a crash the trace is never behind the
state: at most the records of one batch are ahead of it, and the next pass
maps that batch again, finds its records already in the trace (same bytes)
and skips them.  The state is derived: deleting the file makes the next pass
map every source again from the start, skipping what the traces hold.

One importer at a time: :func:`open_state` takes ``<root>/.pentrace/agents.lock``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Final

import msgspec

from pentrace.errors import AgentSourceError
from pentrace.infrastructure.agents.core import ZERO, Counts
from pentrace.infrastructure.storage.modes import make_private_dirs
from pentrace.infrastructure.storage.sqlite import SideStore
from pentrace.infrastructure.trace.locking import SessionLock

__all__ = ["Cursor", "SessionMark", "State", "open_state", "state_path"]

_VERSION: Final = 1
_TOPS: Final = 4096
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS sources (agent TEXT NOT NULL, source TEXT NOT NULL, "
    "dev INTEGER, ino INTEGER, position INTEGER, line INTEGER, marker TEXT, state BLOB, "
    "PRIMARY KEY (agent, source))",
    "CREATE TABLE IF NOT EXISTS links (agent TEXT NOT NULL, source TEXT NOT NULL, "
    "name TEXT NOT NULL, target TEXT NOT NULL, PRIMARY KEY (agent, source, name)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS usage (key TEXT PRIMARY KEY, input INTEGER, output INTEGER, "
    "cache_read INTEGER, cache_write INTEGER) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS sessions (project TEXT NOT NULL, agent TEXT NOT NULL, "
    "session TEXT NOT NULL, records INTEGER, shard INTEGER, size INTEGER, "
    "PRIMARY KEY (project, agent, session)) WITHOUT ROWID",
)
_MOVE: Final = (
    "UPDATE sources SET source = ? WHERE agent = ? AND source = ?",
    "UPDATE links SET source = ? WHERE agent = ? AND source = ?",
)
_HINT: Final = "the file is derived: delete it and run the import again to re-derive it"


class Cursor(msgspec.Struct, frozen=True):
    """Where a source was read to: its file identity, byte offset and line (or a marker)."""

    dev: int = 0
    ino: int = 0
    position: int = 0
    line: int = 0
    marker: str = ""


class SessionMark(msgspec.Struct, frozen=True):
    """A pentrace session's record count and trace end at the last commit."""

    records: int
    shard: int
    size: int


def state_path(root: Path) -> Path:
    """``<root>/.pentrace/agents.db``."""
    return root / ".pentrace" / "agents.db"


class State:
    """The open state store (see the module docstring); also the :class:`UsageBook`."""

    def __init__(self, conn: sqlite3.Connection, lock: SessionLock, path: Path) -> None:
        self._conn = conn
        self._lock = lock
        self.path = path
        self._in_tx = False
        # Links written since the last savepoint or commit, stored in one executemany.
        self._links: dict[tuple[str, str, str], str] = {}
        # The usage keys seen last, with their tops (bounded): streamed rows repeat a key.
        self._tops: dict[str, Counts] = {}

    # -- transactions ------------------------------------------------------------

    def _tx(self) -> None:
        if not self._in_tx:
            self._conn.execute("BEGIN IMMEDIATE")
            self._in_tx = True

    def commit(self) -> None:
        """Commit what this batch changed."""
        self._store_links()
        if self._in_tx:
            self._conn.execute("COMMIT")
            self._in_tx = False

    def rollback(self) -> None:
        """Forget what this batch changed (its records were not written)."""
        self._links.clear()
        self._tops.clear()
        if self._in_tx:
            self._conn.execute("ROLLBACK")
            self._in_tx = False

    def mark(self) -> None:
        """Remember this point of the batch: :meth:`back` forgets what changed after it
        (one source's part of a batch that holds several)."""
        self._store_links()
        self._tx()
        self._conn.execute("SAVEPOINT source")

    def back(self) -> None:
        """Forget what changed since the last :meth:`mark` (the batch goes on)."""
        self._links.clear()
        self._tops.clear()
        if self._in_tx:
            self._conn.execute("ROLLBACK TO source")

    def _store_links(self) -> None:
        if self._links:
            self._tx()
            self._conn.executemany(
                "INSERT OR REPLACE INTO links (agent, source, name, target) VALUES (?, ?, ?, ?)",
                [(*key, target) for key, target in self._links.items()],
            )
            self._links.clear()

    def close(self) -> None:
        """Roll back anything uncommitted, close the database, release the lock."""
        try:
            self.rollback()
            self._conn.close()
        finally:
            self._lock.release()

    def __enter__(self) -> State:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sources -----------------------------------------------------------------

    def cursor(self, agent: str, source: str) -> tuple[Cursor, bytes | None] | None:
        """The cursor and mapper state of a source, or None when it was never read."""
        row = self._conn.execute(
            "SELECT dev, ino, position, line, marker, state FROM sources "
            "WHERE agent = ? AND source = ?",
            (agent, source),
        ).fetchone()
        if row is None:
            return None
        dev, ino, position, line, marker, state = row
        return Cursor(dev, ino, position, line, marker or ""), state

    def save_cursor(self, agent: str, source: str, cursor: Cursor, state: bytes) -> None:
        self._tx()
        self._conn.execute(
            "INSERT INTO sources (agent, source, dev, ino, position, line, marker, state) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (agent, source) DO UPDATE SET "
            "dev = excluded.dev, ino = excluded.ino, position = excluded.position, "
            "line = excluded.line, marker = excluded.marker, state = excluded.state",
            (agent, source, cursor.dev, cursor.ino, cursor.position, cursor.line,
             cursor.marker, state),
        )  # fmt: skip

    def moved_source(self, agent: str, dev: int, ino: int, source: str) -> str | None:
        """A source of ``agent`` read before as the same file (device, inode) under a path
        that no longer exists: ``source`` is that file moved (Codex archives so).  Its
        cursor, state and links now belong to ``source``; returns the old path."""
        self._store_links()
        rows = self._conn.execute(
            "SELECT source FROM sources WHERE agent = ? AND dev = ? AND ino = ? AND source != ?",
            (agent, dev, ino, source),
        ).fetchall()
        for (old,) in rows:
            if not Path(old).exists():
                self._tx()
                for statement in _MOVE:
                    self._conn.execute(statement, (source, agent, old))
                return str(old)
        return None

    def forget_source(self, agent: str, source: str) -> None:
        """Drop a source's cursor and links (it is read again from its start)."""
        self._store_links()
        self._tx()
        self._conn.execute("DELETE FROM sources WHERE agent = ? AND source = ?", (agent, source))
        self._conn.execute("DELETE FROM links WHERE agent = ? AND source = ?", (agent, source))

    def sources(self, agent: str) -> list[str]:
        """Every source of ``agent`` the state holds."""
        rows = self._conn.execute("SELECT source FROM sources WHERE agent = ?", (agent,))
        return [row[0] for row in rows]

    # -- links -------------------------------------------------------------------

    def link(self, agent: str, source: str, name: str) -> str | None:
        held = self._links.get((agent, source, name))
        if held is not None:
            return held
        row = self._conn.execute(
            "SELECT target FROM links WHERE agent = ? AND source = ? AND name = ?",
            (agent, source, name),
        ).fetchone()
        return None if row is None else str(row[0])

    def set_link(self, agent: str, source: str, name: str, target: str) -> None:
        """Keep a link (stored with the others at the next savepoint or commit)."""
        self._links[(agent, source, name)] = target

    # -- usage -------------------------------------------------------------------

    def observe(self, key: str, counts: Counts) -> Counts | None:
        """What a usage row adds under ``key`` (each kind above the most seen before)."""
        held: Counts | None = self._tops.get(key)
        if held is None:
            row = self._conn.execute(
                "SELECT input, output, cache_read, cache_write FROM usage WHERE key = ?", (key,)
            ).fetchone()
            if row is not None:
                held = (row[0], row[1], row[2], row[3])
        known = held is not None
        held = held or ZERO
        delta = (
            max(counts[0] - held[0], 0),
            max(counts[1] - held[1], 0),
            max(counts[2] - held[2], 0),
            max(counts[3] - held[3], 0),
        )
        if known and delta == ZERO:
            return None
        top = (
            max(held[0], counts[0]),
            max(held[1], counts[1]),
            max(held[2], counts[2]),
            max(held[3], counts[3]),
        )
        self._tx()
        self._conn.execute(
            "INSERT OR REPLACE INTO usage (key, input, output, cache_read, cache_write) "
            "VALUES (?, ?, ?, ?, ?)",
            (key, *top),
        )
        if len(self._tops) >= _TOPS:
            self._tops.clear()  # bounded: older keys are read from the store again
        self._tops[key] = top
        return delta

    # -- sessions ----------------------------------------------------------------

    def session_mark(self, project: str, agent: str, session: str) -> SessionMark | None:
        row = self._conn.execute(
            "SELECT records, shard, size FROM sessions WHERE project = ? AND agent = ? "
            "AND session = ?",
            (project, agent, session),
        ).fetchone()
        return None if row is None else SessionMark(row[0], row[1], row[2])

    def set_session_mark(self, project: str, agent: str, session: str, mark: SessionMark) -> None:
        self._tx()
        self._conn.execute(
            "INSERT OR REPLACE INTO sessions (project, agent, session, records, shard, size) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (project, agent, session, mark.records, mark.shard, mark.size),
        )


def _store(path: Path) -> SideStore:
    return SideStore(
        path=path,
        what="the agents import state",
        schema=_SCHEMA,
        error=AgentSourceError,
        hint=_HINT,
        user_version=_VERSION,
        pragmas=("journal_mode=WAL", "synchronous=NORMAL"),
        own_folder=False,
    )


def open_state(root: Path, *, wait: float | None = 30.0) -> State:
    """Lock and open the state of data root ``root`` (a damaged file is made again).

    Raises :class:`~pentrace.errors.TraceLockedError` when another import or
    follower holds the state past ``wait`` seconds.
    """
    path = state_path(root)
    make_private_dirs(path.parent)
    lock = SessionLock(path.with_name("agents.lock"), label="the agents import state", wait=wait)
    try:
        # Derived state (ADR 0096): the side-store opener makes a damaged file again.
        conn = _store(path).open()
    except BaseException:
        lock.release()
        raise
    return State(conn, lock, path)


def encode_state(value: Any) -> bytes:
    """A mapper's state as stored (msgpack)."""
    return msgspec.msgpack.encode(value)
