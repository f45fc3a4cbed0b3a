"""When the trace writer calls fsync, and the directory fsyncs that make new files durable.

See ADR 0004.  The ``fsync`` callable is a seam: tests pass a counting wrapper
around :func:`os.fsync` to check the policy without a power cut.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from pathlib import Path

from pentrace.errors import TraceWriteError
from pentrace.infrastructure.storage.modes import make_private_dir, missing_dirs

__all__ = ["Durability", "FsyncFn", "fsync_directory", "make_dirs_durably"]

FsyncFn = Callable[[int], None]


class Durability(enum.Enum):
    """How hard the writer works to get records onto stable storage.

    - ``NONE``: never fsync; the OS writes back when it likes.  A process crash
      loses nothing (the page cache survives it); a power cut may lose the tail.
    - ``PER_REQUEST`` (default): fsync after a ``request_end`` record (or any
      append with ``sync=True``), and the directory when a shard is created.  A
      request whose end was acknowledged survives a power cut.
    - ``EVERY_RECORD``: fsync after every append.
    """

    NONE = "none"
    PER_REQUEST = "per_request"
    EVERY_RECORD = "every_record"


def fsync_directory(path: Path, fsync: FsyncFn = os.fsync) -> None:
    """fsync a directory so that entries created or renamed in it survive a power cut."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fsync(fd)
    finally:
        os.close(fd)


def make_dirs_durably(path: Path, fsync: FsyncFn | None = os.fsync) -> None:
    """``mkdir -p path`` (mode 0700 for new folders), fsyncing the parent of each folder it creates.

    With ``fsync=None`` the folders are created without any fsync.  OS errors
    become :class:`~pentrace.errors.TraceWriteError` naming the folder.
    """
    for folder in missing_dirs(path)[0]:
        try:
            if not make_private_dir(folder):
                # Another process made it between our check and mkdir; it fsyncs its own.
                continue
        except OSError as exc:
            raise TraceWriteError(
                f"cannot create the trace folder {folder}: {exc.strerror or type(exc).__name__}",
                hint="check the data root's permissions and free disk space",
            ) from exc
        if fsync is not None:
            try:
                fsync_directory(folder.parent, fsync)
            except OSError as exc:
                raise TraceWriteError(
                    f"cannot fsync {folder.parent}: {exc.strerror or type(exc).__name__}",
                    hint="check the file system; use Durability.NONE where it cannot fsync",
                ) from exc
