"""One writer per session: an exclusive ``flock`` on a lock file, across processes.

The lock is taken on a small sidecar file, never on the shard itself, because the
holder writes who it is (pid, host, since) into the file so that a second writer
can name it in its error, and a shard must hold trace lines only.  The kernel
drops an ``flock`` when the holder's last descriptor closes, including when the
process dies (even by SIGKILL), so a lock can never go stale; the holder text
left behind by a dead process is overwritten by the next holder.

``flock`` locks belong to an open file description: a second ``open`` of the same
lock file in the *same* process conflicts too, which is what we want (two
writers in one process must not interleave either).  On NFS, Linux emulates
``flock`` with POSIX byte-range locks; traces are meant to live on local disks.
See ADR 0005.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from pentrace.errors import TraceError, TraceLockedError, UsageError
from pentrace.infrastructure.storage.modes import open_private

__all__ = ["LockHolder", "SessionLock", "read_holder"]

_POLL_FIRST: Final = 0.001
_POLL_MAX: Final = 0.05
_HOLDER_MAX_BYTES: Final = 4096


class LockHolder:
    """Who holds a lock, as written into the lock file by the holder."""

    __slots__ = ("host", "pid", "since")

    def __init__(self, pid: int | None, host: str | None, since: str | None) -> None:
        self.pid = pid
        self.host = host
        self.since = since

    def describe(self) -> str:
        """``pid 123 on host h since 2026-...``, or a note that the holder is unknown."""
        if self.pid is None:
            return "an unknown holder (it has not written its details yet)"
        return f"pid {self.pid} on host {self.host or '?'} since {self.since or '?'}"


def read_holder(lock_path: Path) -> LockHolder:
    """Read the holder details from a lock file; unknown fields come back as ``None``."""
    try:
        with open(lock_path, "rb") as handle:
            data = handle.read(_HOLDER_MAX_BYTES)
        value = json.loads(data) if data.strip() else {}
    except (OSError, ValueError):
        # The holder may be between truncate and write; that is "unknown", not an error.
        value = {}
    if not isinstance(value, dict):
        value = {}
    pid = value.get("pid")
    host = value.get("host")
    since = value.get("since")
    return LockHolder(
        pid if isinstance(pid, int) else None,
        host if isinstance(host, str) else None,
        since if isinstance(since, str) else None,
    )


def _utc_now() -> datetime:
    return datetime.now(UTC)


class SessionLock:
    """An exclusive lock on ``lock_path`` held until :meth:`release`.

    ``wait=None`` (the default, see ADR 0005) fails at once with
    :class:`~pentrace.errors.TraceLockedError` naming the holder; a number waits
    up to that many seconds (``math.inf`` waits for ever) before failing.
    ``label`` names what is locked in messages (a session id or a shard path).
    """

    def __init__(
        self,
        lock_path: Path,
        *,
        label: str,
        wait: float | None = None,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        if wait is not None and (math.isnan(wait) or wait < 0):
            raise UsageError(
                f"lock wait must be None or >= 0 seconds, got {wait!r} for {label}",
                hint="pass wait=None to fail at once, or a number of seconds",
            )
        self.path = lock_path
        self.label = label
        try:
            fd = open_private(lock_path, os.O_RDWR)
        except OSError as exc:
            raise TraceError(
                f"cannot open the lock file {lock_path} for {label}: "
                f"{exc.strerror or type(exc).__name__}",
                hint="check the traces folder's permissions",
            ) from exc
        try:
            self._acquire(fd, wait)
            self._write_holder(fd, clock())
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd

    def _acquire(self, fd: int, wait: float | None) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if not wait:
                self._raise_locked(waited=None)
        deadline = time.monotonic() + wait if wait is not None else 0.0
        pause = _POLL_FIRST
        # flock has no timeout of its own; polling keeps this usable from any thread
        # (an alarm signal would only work in the main thread).
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._raise_locked(waited=wait)
            time.sleep(min(pause, remaining))
            pause = min(pause * 2, _POLL_MAX)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                continue

    def _raise_locked(self, waited: float | None) -> None:
        holder = read_holder(self.path)
        after = "" if waited is None else f" after waiting {waited:g} s"
        raise TraceLockedError(
            f"{self.label} is being written by another writer{after}: the lock "
            f"{self.path} is held by {holder.describe()}; two writers would interleave lines",
            hint="stop the other writer (it releases the lock when it exits), "
            "or open with wait=<seconds> to queue behind it",
        )

    @staticmethod
    def _write_holder(fd: int, since: datetime) -> None:
        details = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": since.astimezone(UTC).isoformat(timespec="seconds"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(details).encode() + b"\n", 0)

    @property
    def held(self) -> bool:
        """True until :meth:`release` has been called."""
        return self._fd is not None

    def release(self) -> None:
        """Release the lock (idempotent); the holder text stays until the next holder."""
        fd, self._fd = self._fd, None
        if fd is not None:
            # Closing the descriptor drops the flock; no separate LOCK_UN needed.
            os.close(fd)

    def __enter__(self) -> SessionLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
