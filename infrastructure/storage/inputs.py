"""Paths given by a user: read only regular files, write only over regular files.

Every command that reads a path it was given (a trace to import or
resume-check, a price table, a token file) opens it through
:func:`open_regular`: the open never blocks (``O_NONBLOCK``, so a FIFO with
no writer cannot hang it) and anything that is not a regular file once open -
a FIFO, ``/dev/zero`` or another device, a socket, a folder, a symlink to any
of these - is refused with :class:`~pentrace.errors.NotRegularFileError`
naming the path.  Inputs that must fit in memory are read with
:func:`read_small_file`, which stops at :data:`MAX_SMALL_INPUT` bytes;
:func:`read_config_text` reads one as UTF-8 text and words every failure as a
:class:`~pentrace.errors.ConfigError` naming the file.
:func:`check_output_path` refuses to publish a file over anything but a
regular file (an atomic rename over ``/dev/null`` or a FIFO would replace it).
"""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path
from typing import BinaryIO, Final

from pentrace.errors import ConfigError, NotRegularFileError

__all__ = [
    "MAX_SMALL_INPUT",
    "check_data_root",
    "check_output_path",
    "open_regular",
    "read_config_text",
    "read_small_file",
]

# Price tables and token files are a few KiB; 1 MiB is far beyond any real one.
MAX_SMALL_INPUT: Final = 1024 * 1024


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a regular file" if stat.S_ISREG(mode) else "an unknown kind of file"


def _refuse(path: Path, what: str, mode: int) -> NotRegularFileError:
    error = NotRegularFileError(
        f"{what} {path} is {_kind(mode)}, expected a regular file",
        hint=f"pass the path of a regular file as the {what}",
    )
    error.kind = _kind(mode)
    return error


def open_regular(path: Path, what: str) -> BinaryIO:
    """Open ``path`` for reading (unbuffered) if it is a regular file; never blocks.

    ``what`` names the input in errors (``"trace file"``, ``"price table"``).  OS
    errors (missing, unreadable) propagate as they are, for the caller to word.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _refuse(path, what, mode)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def read_small_file(path: Path, what: str, limit: int = MAX_SMALL_INPUT) -> bytes:
    """The bytes of a regular file that must fit in memory; more than ``limit`` is refused."""
    with open_regular(path, what) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise NotRegularFileError(
            f"{what} {path} is larger than {limit} bytes, the most pentrace reads into memory",
            hint=f"check that this is the {what} you meant",
        )
    return data


def read_config_text(path: Path, what: str, hint: str) -> str:
    """The UTF-8 text of a small configuration file (a price table, a token file).

    A file that cannot be read, or is not UTF-8, is a :class:`ConfigError` naming
    ``what`` and the path and giving ``hint``; it never quotes the file's content.
    """
    try:
        return read_small_file(path, what).decode("utf-8")
    except UnicodeDecodeError as error:
        found = f"bytes that are not UTF-8 (at byte {error.start})"
    except OSError as error:
        found = error.strerror or type(error).__name__
    raise ConfigError(f"{what} {path}: expected a readable file, found {found}", hint=hint)


def check_output_path(path: Path, what: str, hint: str | None = None) -> None:
    """Refuse an output path that exists and is not a regular file (a FIFO, device, folder).

    Other OS errors propagate, for the caller to word.
    """
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return  # a new name (or a bad folder, which the write itself reports)
    if not stat.S_ISREG(mode):
        raise NotRegularFileError(
            f"{what} {path} is {_kind(mode)}, expected a regular file or a new name",
            hint=hint or "choose another file name (leave out -o to write to standard output)",
        )


def check_data_root(path: Path) -> None:
    """Refuse a data root that exists but is not a folder (a missing one is created later)."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError:
        return  # the command's own access reports it, with its own context
    if not stat.S_ISDIR(mode):
        raise NotRegularFileError(
            f"data root {path} is {_kind(mode)}, expected a folder",
            hint="pass --data-root (or PENGUIN_HOME) naming a folder",
        )
