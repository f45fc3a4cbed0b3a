"""The search index's SQLite file: its schema, opening it, transactions and clean errors.

The index is derived data, so a file that cannot be read (corrupt, or of
another schema version) is deleted and created again rather than reported;
a file another process holds is reported as locked.  Every ``sqlite3`` error
of the index becomes a :class:`~pentrace.errors.SearchIndexError` here
(:func:`converted`), for the refresh (:mod:`~pentrace.infrastructure.search.index`)
and the queries (:mod:`~pentrace.infrastructure.search.query`) alike.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Final

from pentrace.errors import SearchIndexError
from pentrace.infrastructure.storage.modes import prepare_sqlite_file, repair_modes, sqlite_files

__all__ = [
    "SCHEMA_VERSION",
    "connect",
    "converted",
    "delete_files",
    "execute",
    "is_busy",
    "locked",
    "open_index",
    "write",
]

SCHEMA_VERSION: Final = "1"
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS sessions(id INTEGER PRIMARY KEY AUTOINCREMENT, project TEXT NOT "
    "NULL, agent TEXT NOT NULL, session_id TEXT NOT NULL, position INTEGER NOT NULL, turns "
    "INTEGER NOT NULL, in_compaction INTEGER NOT NULL, UNIQUE(project, agent, session_id))",
    "CREATE TABLE IF NOT EXISTS shards(session INTEGER NOT NULL, path TEXT NOT NULL, idx INTEGER "
    "NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, offset INTEGER NOT NULL, lines "
    "INTEGER NOT NULL, tail BLOB NOT NULL, PRIMARY KEY(session, path))",
    "CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(body, kind UNINDEXED, role UNINDEXED, "
    "turn UNINDEXED, time UNINDEXED, shard UNINDEXED, line UNINDEXED, "
    "tokenize='unicode61 remove_diacritics 2')",
)


def open_index(path: Path) -> sqlite3.Connection:
    """Open (creating it if needed) the index at ``path``; an unreadable one is recreated."""
    try:
        return connect(path)
    except sqlite3.DatabaseError as error:
        if is_busy(error):
            raise locked(path) from error
        # A derived index that cannot be read is rebuilt, never a crash.
        delete_files(path)
        return connect(path)


def connect(path: Path) -> sqlite3.Connection:
    """Connect to ``path`` and create the schema; a file of another version raises."""
    prepare_sqlite_file(path, own_folder=True)
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        for statement in _SCHEMA:
            conn.execute(statement)
        found = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if found is None:
            conn.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        elif found[0] != SCHEMA_VERSION:
            raise sqlite3.DatabaseError("search index schema version differs")
    except BaseException:
        conn.close()
        raise
    repair_modes(sqlite_files(path), where=path)  # the side files SQLite made
    return conn


def delete_files(path: Path) -> None:
    """Delete the index file and its WAL and shared-memory side files."""
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")


def execute(
    conn: sqlite3.Connection, path: Path, sql: str, params: tuple[object, ...] = ()
) -> sqlite3.Cursor:
    """``conn.execute`` with the index's errors converted."""
    try:
        return conn.execute(sql, params)
    except sqlite3.OperationalError as error:
        raise converted(path, error) from error


def write(conn: sqlite3.Connection, path: Path, work: Callable[[], None]) -> None:
    """Run ``work()`` in one IMMEDIATE transaction, rolled back on any error."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        raise converted(path, error) from error
    try:
        work()
    except BaseException as error:
        conn.execute("ROLLBACK")
        if isinstance(error, sqlite3.OperationalError):
            raise converted(path, error) from error
        raise
    conn.execute("COMMIT")


def is_busy(error: sqlite3.Error) -> bool:
    """True when SQLite says another connection holds the file."""
    text = str(error).lower()
    return "locked" in text or "busy" in text


def locked(path: Path) -> SearchIndexError:
    """The error for an index another process holds."""
    return SearchIndexError(
        f"the search index {path} is locked by another process",
        hint="wait for the other search or rebuild to finish, then retry",
    )


def converted(path: Path, error: sqlite3.Error) -> SearchIndexError:
    """The :class:`SearchIndexError` for a ``sqlite3`` error of the index at ``path``."""
    if is_busy(error):
        return locked(path)
    return SearchIndexError(
        f"the search index {path} failed: {str(error).splitlines()[0][:160]}",
        hint="run `pentrace search --rebuild` to recreate it from the traces",
    )
