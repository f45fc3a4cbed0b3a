"""SQLite side stores (the catalog cache, the search index): one opener, one error conversion,
and one owner at a time for whatever builds a derived store.

A side store is derived from the traces, so a file that cannot be read (not a
database, malformed, or stamped by another version) is deleted and created
again rather than reported; a file another connection holds past the busy
timeout is reported as locked.  :class:`SideStore` opens one (WAL, the schema
created, the version checked), and :meth:`SideStore.converted` turns every
``sqlite3`` error of it into the store's own :class:`~pentrace.errors.PentraceError`
subclass, with the store's hint.  The ledger and the analytics read models go
through SQLAlchemy instead (``ledger/backend/``), with their own converter.

:func:`owner` is the one-owner rule for derived stores (issue #32): an
exclusive ``flock`` on ``<store>.lock`` taken by one thread at a time in a
process (re-entrant within the thread) and by one process at a time on the
host, so that concurrent first requests build or catch up a store once, the
others waiting and then finding it current.  The kernel drops the lock when
its holder dies (SIGKILL included), so it never goes stale.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pentrace.errors import PentraceError
from pentrace.infrastructure.storage.modes import (
    make_private_dirs,
    open_private,
    prepare_sqlite_file,
    repair_modes,
    sqlite_files,
)

__all__ = ["SideStore", "delete_files", "is_busy", "owner"]

_POLL_FIRST: Final = 0.002
_POLL_MAX: Final = 0.05
_OWNER_WAIT: Final = 600.0


class _OtherVersion(sqlite3.DatabaseError):
    """The file is a database of another version of the store: recreated like a damaged one."""


def is_busy(error: sqlite3.Error) -> bool:
    """True when SQLite says another connection holds the file."""
    text = str(error).lower()
    return "locked" in text or "busy" in text


def delete_files(path: Path) -> None:
    """Delete a store's file and its WAL, shared-memory and journal side files."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")


@dataclass(frozen=True)
class SideStore:
    """How to open one SQLite side store and what its errors become.

    ``version`` is stamped into ``PRAGMA user_version`` (``meta_version`` instead
    into a ``meta(key, value)`` row ``schema``, as the search index has always
    kept it); a file stamped otherwise is recreated.
    """

    path: Path
    what: str
    schema: Sequence[str]
    error: type[PentraceError]
    hint: str
    user_version: int | None = None
    meta_version: str | None = None
    busy_seconds: float = 30.0
    pragmas: Sequence[str] = ("journal_mode=WAL",)
    own_folder: bool = True
    parents: bool = True

    def open(self) -> sqlite3.Connection:
        """Open (creating it if needed) the store; a damaged or foreign file is recreated.

        Opening holds the store's owner lock, so no other thread or process
        deletes the file while this one checks or creates it.
        """
        with owner(self.path, self.what, wait=self.busy_seconds, error=self.error):
            try:
                return self._connect()
            except sqlite3.DatabaseError as error:
                if is_busy(error):
                    raise self.locked() from error
            # A derived store that cannot be read is rebuilt, never a crash.
            delete_files(self.path)
            try:
                return self._connect()
            except sqlite3.Error as error:
                raise self.converted(error) from error

    def _connect(self) -> sqlite3.Connection:
        prepare_sqlite_file(self.path, own_folder=self.own_folder, parents=self.parents)
        conn = sqlite3.connect(
            self.path, timeout=self.busy_seconds, isolation_level=None, check_same_thread=False
        )
        try:
            for pragma in self.pragmas:
                conn.execute(f"PRAGMA {pragma}")
            if self.user_version is not None:
                found = conn.execute("PRAGMA user_version").fetchone()[0]
                if found != self.user_version:
                    fresh = not conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone()
                    if not fresh:
                        raise _OtherVersion(f"{self.what}: user_version {found}")
                    conn.execute(f"PRAGMA user_version={int(self.user_version)}")
            for statement in self.schema:
                conn.execute(statement)
            if self.meta_version is not None:
                conn.execute("CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT)")
                row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                if row is None:
                    conn.execute(
                        "INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (self.meta_version,)
                    )
                elif row[0] != self.meta_version:
                    raise _OtherVersion(f"{self.what}: schema version {row[0]}")
        except BaseException:
            conn.close()
            raise
        repair_modes(sqlite_files(self.path), where=self.path)  # the side files SQLite made
        return conn

    # -- errors ---------------------------------------------------------------------
    def locked(self) -> PentraceError:
        """The error for a store another connection holds past the busy timeout."""
        return self.error(
            f"{self.what} {self.path} is locked by another process",
            hint="wait for the other command to finish, then retry",
        )

    def converted(self, error: sqlite3.Error) -> PentraceError:
        """The store's error for a ``sqlite3`` error of it (first line only)."""
        if is_busy(error):
            return self.locked()
        first = (str(error).splitlines() or [type(error).__name__])[0][:160]
        return self.error(f"{self.what} {self.path} failed: {first}", hint=self.hint)

    def execute(
        self, conn: sqlite3.Connection, sql: str, params: Sequence[object] = ()
    ) -> sqlite3.Cursor:
        """``conn.execute`` with the store's errors converted."""
        try:
            return conn.execute(sql, params)
        except sqlite3.Error as error:
            raise self.converted(error) from error

    def write(self, conn: sqlite3.Connection, work: Callable[[], None]) -> None:
        """Run ``work()`` in one ``BEGIN IMMEDIATE`` transaction, rolled back on any error;
        a ``sqlite3`` error becomes the store's error."""
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            raise self.converted(error) from error
        try:
            work()
        except BaseException as error:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            if isinstance(error, sqlite3.Error):
                raise self.converted(error) from error
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as error:
            raise self.converted(error) from error


# -- one owner per derived store ------------------------------------------------------
_GUARD = threading.Lock()
_THREAD_LOCKS: dict[str, threading.RLock] = {}
_HELD = threading.local()


def _thread_lock(key: str) -> threading.RLock:
    with _GUARD:
        lock = _THREAD_LOCKS.get(key)
        if lock is None:
            lock = _THREAD_LOCKS[key] = threading.RLock()
        return lock


@contextlib.contextmanager
def owner(
    path: Path,
    what: str,
    *,
    wait: float = _OWNER_WAIT,
    error: type[PentraceError] = PentraceError,
) -> Iterator[None]:
    """Be the one owner of the store at ``path`` (see the module docstring) for the block.

    Waits up to ``wait`` seconds for another owner, then raises ``error``
    naming the store.  Re-entrant within one thread.
    """
    key = str(path)
    held: dict[str, int] = getattr(_HELD, "counts", None) or {}
    _HELD.counts = held
    if held.get(key):
        held[key] += 1
        try:
            yield
        finally:
            held[key] -= 1
        return
    deadline = time.monotonic() + wait
    lock = _thread_lock(key)
    if not lock.acquire(timeout=max(wait, 0.0)):
        raise _owner_busy(path, what, wait, error)
    try:
        fd = _flock(Path(f"{path}.lock"), deadline)
        if fd is None:
            raise _owner_busy(path, what, wait, error)
        held[key] = 1
        try:
            yield
        finally:
            held.pop(key, None)
            os.close(fd)  # drops the flock
    finally:
        lock.release()


def _flock(lock_path: Path, deadline: float) -> int | None:
    make_private_dirs(lock_path.parent)
    fd = open_private(lock_path, os.O_RDWR | os.O_CLOEXEC)
    pause = _POLL_FIRST
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(pause)
            pause = min(pause * 2, _POLL_MAX)


def _owner_busy(path: Path, what: str, wait: float, error: type[PentraceError]) -> PentraceError:
    return error(
        f"{what} {path}: another command has been building it for over {wait:g} s",
        hint="wait for the other command to finish, then retry",
    )
