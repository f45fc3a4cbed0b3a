"""Private by default (design decision 13): every file pentrace makes is 0600, every folder 0700.

This is the one place files and folders under a data root are created or
have their modes repaired:

* :func:`make_private_dirs` is ``mkdir -p`` whose new folders are exactly
  0700, whatever the umask (``Path.mkdir(parents=True)`` gives the parents
  ``0777 & ~umask``);
* :func:`open_private` opens (creating) a file at exactly 0600;
* :func:`prepare_sqlite_file` creates a SQLite store empty at 0600 *before*
  SQLite opens it - SQLite gives its ``-wal``, ``-shm`` and ``-journal``
  side files the mode of the main file - and repairs an existing store;
* :func:`tighten` strips group and other bits from an existing file or
  folder (never following a symlink, never touching what we do not own).

A repair is reported once per store or data root per process: one log
warning (one stderr line in the CLI) with the count, never one per file.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from pentrace.infrastructure.storage.inputs import check_output_path

__all__ = [
    "PRIVATE_DIR",
    "PRIVATE_FILE",
    "SQLITE_SIDE_SUFFIXES",
    "make_private_dir",
    "make_private_dirs",
    "missing_dirs",
    "open_private",
    "prepare_sqlite_file",
    "repair_below",
    "repair_modes",
    "report_repairs",
    "sqlite_files",
    "tighten",
    "write_new_private",
]

logger = logging.getLogger(__name__)

PRIVATE_FILE: Final = 0o600
PRIVATE_DIR: Final = 0o700
SQLITE_SIDE_SUFFIXES: Final = ("-wal", "-shm", "-journal")
_OTHERS: Final = 0o077

_reported: set[str] = set()
_reported_lock = threading.Lock()


def tighten(path: Path | str) -> bool:
    """Strip group and other permission bits from ``path``; True when its mode changed.

    A missing path, a symlink (its target may be anything), and a file owned
    by another user are left alone.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.geteuid():
        return False
    mode = stat.S_IMODE(info.st_mode)
    if not mode & _OTHERS:
        return False
    os.chmod(path, mode & ~_OTHERS, follow_symlinks=False)
    return True


def report_repairs(where: Path | str, count: int) -> None:
    """Say once per ``where`` (per process) that ``count`` modes were tightened."""
    if count <= 0:
        return
    key = str(where)
    with _reported_lock:
        if key in _reported:
            return
        _reported.add(key)
    logger.warning(
        "pentrace: tightened %d file(s)/folder(s) of %s that other users could read "
        "(now 0600 files, 0700 folders)",
        count,
        key,
    )


def repair_modes(paths: Iterable[Path | str], *, where: Path | str) -> int:
    """Tighten every path in ``paths``, report the count once under ``where``; return it."""
    count = sum(1 for path in paths if tighten(path))
    report_repairs(where, count)
    return count


def make_private_dir(folder: Path) -> bool:
    """Create one folder at exactly 0700; False when it exists already (made by anyone)."""
    try:
        os.mkdir(folder, PRIVATE_DIR)
    except FileExistsError:
        return False
    # The umask can only take bits away; this also restores an owner bit it took.
    os.chmod(folder, PRIVATE_DIR)
    return True


def make_private_dirs(path: Path, *, within: Path | None = None) -> list[Path]:
    """``mkdir -p path`` with every new folder exactly 0700; return the new ones, outermost first.

    With ``within`` (a data root), the existing folders from ``within`` down
    to ``path`` are repaired too (reported once under ``within``); folders
    outside it are never touched.
    """
    missing, probe = missing_dirs(path)
    made = [folder for folder in missing if make_private_dir(folder)]
    if within is not None:
        repair_below(within, probe)
    return made


def missing_dirs(path: Path) -> tuple[list[Path], Path]:
    """The folders ``mkdir -p path`` would create, outermost first, and the folder they start in.

    The folder they start in is the nearest one that exists (the root when none does).
    """
    missing: list[Path] = []
    probe = path
    while not probe.is_dir():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    missing.reverse()
    return missing, probe


def repair_below(root: Path, *paths: Path) -> int:
    """Tighten the folders strictly below ``root`` down to each of ``paths`` (and those
    paths themselves); report the count once under ``root``.  Paths outside it are skipped."""
    targets: dict[Path, None] = {}
    for path in paths:
        targets.update(dict.fromkeys(_chain(root, path)))
    return repair_modes(targets, where=root)


def _chain(root: Path, deepest: Path) -> list[Path]:
    """The folders strictly below ``root`` down to ``deepest`` (none if it is outside)."""
    try:
        relative = deepest.relative_to(root)
    except ValueError:
        return []
    chain = []
    current = root
    for part in relative.parts:
        current = current / part
        chain.append(current)
    return chain


def open_private(path: Path | str, flags: int) -> int:
    """``os.open(path, flags | O_CREAT)`` where a file it creates is exactly 0600.

    An existing file opened this way is repaired (no report: the caller's
    store reports its own repairs).
    """
    fd = os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE)
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid():
            mode = stat.S_IMODE(info.st_mode)
            if mode & _OTHERS or mode & PRIVATE_FILE != PRIVATE_FILE:
                os.fchmod(fd, (mode & ~_OTHERS) | PRIVATE_FILE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_new_private(path: Path, data: bytes, *, durable: bool = False) -> None:
    """Create ``path`` at 0600 holding ``data`` (an existing file: ``FileExistsError``);
    ``durable`` syncs the file before it is closed (its folder is the caller's to sync)."""
    fd = open_private(path, os.O_WRONLY | os.O_EXCL)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def sqlite_files(path: Path) -> list[Path]:
    """A SQLite store's main file and its side files."""
    return [path, *(Path(f"{path}{suffix}") for suffix in SQLITE_SIDE_SUFFIXES)]


def prepare_sqlite_file(path: Path, *, own_folder: bool = False, parents: bool = True) -> None:
    """Before SQLite opens ``path``: create its folder (0700) and the file itself (0600).

    An existing store, its side files and its folder when that is the store's
    own (``own_folder``, or a folder named after the store such as
    ``runtime_events/runtime_events.db``) are repaired and the repair reported
    once.  Call again after the first connection to check the side
    files SQLite made.
    """
    # SQLite would block reading a FIFO's "header" for ever: refuse what is not a file.
    check_output_path(path, "database file", hint="point the setting at a regular file")
    if parents:
        make_private_dirs(path.parent)
    else:
        make_private_dir(path.parent)  # its parent missing is an error (FileNotFoundError)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE)
    except FileExistsError:
        pass
    else:
        try:
            os.fchmod(fd, PRIVATE_FILE)
        finally:
            os.close(fd)
    # A folder named after its store (runtime_events/runtime_events.db) is the store's own.
    mine = own_folder or path.parent.name == path.stem
    targets: list[Path] = [path.parent] if mine else []
    repair_modes([*targets, *sqlite_files(path)], where=path)
