"""The catalog's derived cache: ``<root>/.pentrace/catalog.db``, one row per session.

Each row holds the session's shard signature and its encoded catalog row.  The
file is derived from the traces and may be deleted at any time.  Damage never
fails a command:

* a file that is not a database, or a malformed one, is deleted and rebuilt;
* a cache written by another version (``user_version``) is emptied;
* a locked or read-only cache makes this run work without it (logged).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from pentrace.infrastructure.storage.modes import prepare_sqlite_file, repair_modes, sqlite_files

__all__ = ["CACHE_VERSION", "CatalogCache", "Key", "cache_path", "open_cache"]

logger = logging.getLogger(__name__)

# Bump when SessionRow or SessionSummary change meaning: old rows are then dropped.
CACHE_VERSION: Final = 2  # 2: summaries carry token_totals (issue #13)
Key = tuple[str, str, str]
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS sessions ("
    " project TEXT NOT NULL, agent TEXT NOT NULL, session_id TEXT NOT NULL,"
    " signature BLOB NOT NULL, row BLOB NOT NULL,"
    " PRIMARY KEY (project, agent, session_id)) WITHOUT ROWID"
)


def cache_path(root: Path) -> Path:
    """Where the catalog cache of the data root ``root`` lives."""
    return root / ".pentrace" / "catalog.db"


class CatalogCache:
    """Signatures and rows by ``(project, agent, session_id)``; no database means no cache."""

    def __init__(self, connection: sqlite3.Connection | None) -> None:
        self._db = connection

    @property
    def enabled(self) -> bool:
        """True when rows are read from and written to a file."""
        return self._db is not None

    def load(self) -> dict[Key, tuple[bytes, bytes]]:
        """Every cached ``(signature, row)``; empty when the cache is off or unreadable."""
        if self._db is None:
            return {}
        try:
            found = self._db.execute(
                "SELECT project, agent, session_id, signature, row FROM sessions"
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            self._disable("read", exc)
            return {}
        return {(p, a, s): (bytes(sig), bytes(row)) for p, a, s, sig, row in found}

    def store(self, fresh: Iterable[tuple[Key, bytes, bytes]], gone: Iterable[Key]) -> None:
        """Upsert freshly read rows and forget sessions that no longer exist, in one transaction."""
        fresh, gone = list(fresh), list(gone)
        if self._db is None or not (fresh or gone):
            return
        try:
            with self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, ?, ?)",
                    [(*key, signature, row) for key, signature, row in fresh],
                )
                self._db.executemany(
                    "DELETE FROM sessions WHERE project = ? AND agent = ? AND session_id = ?",
                    gone,
                )
        except sqlite3.DatabaseError as exc:
            self._disable("update", exc)

    def close(self) -> None:
        """Close the database (a no-op without one)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def _disable(self, step: str, exc: sqlite3.DatabaseError) -> None:
        # The cache is derived: listing from the traces is slower but still right.
        logger.warning("catalog cache %s failed (%s); continuing without it", step, exc)
        self.close()


def _connect(path: Path) -> sqlite3.Connection:
    prepare_sqlite_file(path, own_folder=True, parents=False)
    db = sqlite3.connect(path, timeout=5.0, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version != CACHE_VERSION:
            db.execute("DROP TABLE IF EXISTS sessions")
            db.execute(f"PRAGMA user_version={CACHE_VERSION}")
        db.execute(_SCHEMA)
        db.execute("SELECT count(*) FROM sessions").fetchone()
    except BaseException:
        db.close()
        raise
    repair_modes(sqlite_files(path), where=path)  # the side files SQLite made
    db.isolation_level = "DEFERRED"
    return db


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def open_cache(root: Path) -> CatalogCache:
    """The cache of data root ``root``, rebuilt when damaged, disabled when unusable."""
    path = cache_path(root)
    try:
        prepare_sqlite_file(path, own_folder=True, parents=False)
    except OSError as exc:
        logger.warning("cannot create %s (%s); listing without a cache", path.parent, exc)
        return CatalogCache(None)
    try:
        return CatalogCache(_connect(path))
    except sqlite3.OperationalError as exc:
        # Locked, read-only or out of space: nothing to repair, just go without.
        logger.warning("catalog cache %s unusable (%s); listing without it", path, exc)
        return CatalogCache(None)
    except sqlite3.DatabaseError as exc:
        logger.warning("catalog cache %s is damaged (%s); rebuilding it", path, exc)
    try:
        _remove(path)
        return CatalogCache(_connect(path))
    except (OSError, sqlite3.DatabaseError) as exc:
        logger.warning("cannot rebuild catalog cache %s (%s); listing without it", path, exc)
        return CatalogCache(None)
