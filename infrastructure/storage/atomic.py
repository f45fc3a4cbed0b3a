"""Publish a file atomically: write a hidden temp file beside it, fsync, then rename or link.

Readers see either no file or the whole file, never a prefix, and a failure
(disk full, a refused name, an error from the data source) leaves nothing
behind but what was there before.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from pentrace.errors import PentraceError, UsageError
from pentrace.infrastructure.storage.inputs import check_output_path
from pentrace.infrastructure.storage.modes import open_private
from pentrace.infrastructure.storage.temp import in_flight, temp_name
from pentrace.infrastructure.trace.durability import fsync_directory

__all__ = ["publish_file"]


def publish_file(dest: Path, chunks: Iterable[bytes], *, overwrite: bool) -> int:
    """Write ``chunks`` to ``dest`` atomically and durably; return the number of bytes.

    With ``overwrite=False`` the file is published with ``link(2)``, which
    refuses an existing ``dest`` even when another process created it a moment
    ago; that raises :class:`~pentrace.errors.UsageError`.  ``dest.parent``
    must exist, and ``dest`` must not be a FIFO, device or folder
    (:class:`~pentrace.errors.NotRegularFileError`).  The file is 0600
    (:mod:`~pentrace.infrastructure.storage.modes`); its temp file is marked in
    flight so no stale-temp cleaner removes it.
    """
    # An atomic rename over /dev/null or a FIFO would replace it: refuse what is not a file.
    check_output_path(dest, "destination")
    with in_flight(temp_name(dest)) as temp:
        return _publish(dest, temp, chunks, overwrite)


def _publish(dest: Path, temp: Path, chunks: Iterable[bytes], overwrite: bool) -> int:
    written = 0
    try:
        fd = open_private(temp, os.O_WRONLY | os.O_TRUNC)
        try:
            for chunk in chunks:
                view = memoryview(chunk)
                while view:
                    count = os.write(fd, view)
                    view = view[count:]
                    written += count
            os.fsync(fd)
        finally:
            os.close(fd)
        if overwrite:
            os.replace(temp, dest)
        else:
            try:
                os.link(temp, dest)
            except FileExistsError:
                raise UsageError(
                    f"{dest} already exists; refusing to overwrite it",
                    hint="choose another destination or remove the file first",
                ) from None
            os.unlink(temp)
        fsync_directory(dest.parent)
    except OSError as exc:
        _discard(temp)
        raise PentraceError(
            f"cannot write {dest}: {exc.strerror or type(exc).__name__}",
            hint="check free space and the folder's permissions",
        ) from exc
    except BaseException:
        _discard(temp)
        raise
    return written


def _discard(temp: Path) -> None:
    temp.unlink(missing_ok=True)
