"""Shard file steps for the trace writer: open, create whole, finish short writes, roll back."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from pentrace.errors import TraceWriteError
from pentrace.infrastructure.storage.modes import open_private
from pentrace.infrastructure.storage.temp import in_flight, temp_name
from pentrace.infrastructure.trace.durability import FsyncFn, fsync_directory

__all__ = ["create_shard", "finish_short_write", "open_for_append", "probe_tail", "roll_back"]


def open_for_append(path: Path) -> int | None:
    """An ``O_APPEND`` descriptor on an existing shard; None when there is none yet."""
    try:
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    except FileNotFoundError:
        return None  # created whole with its first batch, see create_shard
    except OSError as exc:
        raise TraceWriteError(
            f"cannot open {path} for appending: {exc.strerror or type(exc).__name__}",
            hint="check the file's permissions and the disk",
        ) from exc


def finish_short_write(fd: int, buffer: bytes, written: int) -> None:
    """Write the rest of a buffer after a short write; only we append, so it stays contiguous."""
    view = memoryview(buffer)
    while written < len(buffer):
        step = os.write(fd, view[written:])
        if step <= 0:
            raise OSError(errno.ENOSPC, "no progress writing the rest of a record")
        written += step


def roll_back(path: Path, fd: int, before: int) -> tuple[str, tuple[int, bool] | None]:
    """Truncate a failed append back to ``before`` bytes; return what to say, and the tail.

    The tail (size, torn) is None when the truncation worked; when it failed
    the tail is unknown, so it is probed again and the next record heals it.
    """
    try:
        os.ftruncate(fd, before)
    except OSError:
        return "; rolling back failed, the next record starts on a new line", probe_tail(path, fd)
    return f"; the shard was rolled back to {before} bytes", None


def probe_tail(path: Path, fd: int) -> tuple[int, bool]:
    """The shard's size and whether its last byte is not ``\\n`` (a torn tail to heal)."""
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0, False
        with open(path, "rb") as handle:
            handle.seek(size - 1)
            return size, handle.read(1) != b"\n"
    except OSError:
        # Unknown tail: a leading newline is harmless (blank lines are not records).
        return os.lseek(fd, 0, os.SEEK_END), True


def create_shard(path: Path, buffer: bytes, count: int, fsync: FsyncFn | None) -> int:
    """Create ``path`` holding exactly ``buffer`` (``count`` records); return an append fd.

    The bytes go to a hidden temporary file (mode 0600) that is fsynced and
    renamed into place, then the folder is fsynced, so the shard appears whole
    or not at all.  ``fsync=None`` (Durability.NONE) skips both fsyncs.  The
    caller holds the session lock, so the existence check cannot race another
    pentrace writer.
    """
    with in_flight(temp_name(path)) as temp:
        return _create(path, temp, buffer, count, fsync)


def _create(path: Path, temp: Path, buffer: bytes, count: int, fsync: FsyncFn | None) -> int:
    renamed = False
    try:
        fd = open_private(temp, os.O_WRONLY | os.O_EXCL)
        try:
            written = os.write(fd, buffer)
            if written != len(buffer):
                finish_short_write(fd, buffer, written)
            if fsync is not None:
                fsync(fd)
        finally:
            os.close(fd)
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, "the shard appeared while it was being created")
        os.rename(temp, path)
        renamed = True
        if fsync is not None:
            fsync_directory(path.parent, fsync)
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    except OSError as exc:
        # All or nothing: a shard that is not known to be whole is removed again.
        (path if renamed else temp).unlink(missing_ok=True)
        raise TraceWriteError(
            f"could not create {path} with its first {count} record(s) "
            f"({len(buffer)} bytes): {exc.strerror or type(exc).__name__}",
            hint="check free disk space and the folder's permissions, then save again",
        ) from exc
