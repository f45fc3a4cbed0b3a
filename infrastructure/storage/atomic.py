"""Publish a file atomically, and the hidden temporary files that makes.

:func:`publish_file` writes a hidden temp file beside the destination, fsyncs
it, then renames or links it into place.  Readers see either no file or the
whole file, never a prefix, and a failure (disk full, a refused name, an
error from the data source) leaves nothing behind but what was there before.

Every file pentrace publishes this way (a new shard, a checkpoint, an import,
a fork, an export) is first written to ``.<name>.<pid>.tmp`` beside its
destination.  A process killed between the write and the rename (SIGKILL
during rotation or a checkpoint write) leaves that file behind; nothing else
ever reads it.

A temp file is **stale** - safe to remove - when no one can still be writing it:

* this process is not writing it (a registry of the temp files in flight here);
* and its pid is not a live process on this host, or the remover holds the
  session's writer lock and the file is a shard temp (only the lock holder
  ever creates shard temps, so under the lock every one is left over).

A temp file named with this process's own pid that is not in flight here was
left by an earlier process that had the same pid (pids are reused, in
containers often).  Checkpoint temps are written by readers too, without the
lock, so for them only a dead pid (or our own) counts.  A live pid that was
reused by an unrelated process keeps a stale file until that process ends:
erring that way never removes a file someone is writing.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pentrace.errors import PentraceError, UsageError
from pentrace.infrastructure.storage.inputs import check_output_path
from pentrace.infrastructure.storage.modes import open_private
from pentrace.infrastructure.trace.durability import fsync_directory

__all__ = [
    "TempFile",
    "agent_temps",
    "in_flight",
    "is_stale",
    "parse_temp_name",
    "publish_file",
    "remove_stale",
    "session_checkpoints",
    "session_temps",
    "temp_name",
]


_TEMP: Final = re.compile(r"\.(?P<target>.+)\.(?P<pid>[0-9]{1,10})\.tmp")
_in_flight: set[str] = set()
_in_flight_lock = threading.Lock()


def temp_name(dest: Path) -> Path:
    """``.<name>.<pid>.tmp`` beside ``dest``: hidden, and not a ``.jsonl`` the shard scan takes."""
    return dest.with_name(f".{dest.name}.{os.getpid()}.tmp")


def parse_temp_name(name: str) -> tuple[str, int] | None:
    """``(target file name, pid)`` of a temp file name, or ``None`` for any other name."""
    match = _TEMP.fullmatch(name)
    if match is None:
        return None
    return match["target"], int(match["pid"])


@contextmanager
def in_flight(temp: Path) -> Iterator[Path]:
    """Mark ``temp`` as being written by this process until the block ends."""
    key = os.path.abspath(temp)
    with _in_flight_lock:
        _in_flight.add(key)
    try:
        yield temp
    finally:
        with _in_flight_lock:
            _in_flight.discard(key)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return True  # not a pid we can judge: keep the file
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    except OverflowError:
        return False
    return True


def is_stale(temp: TempFile, *, locked: bool) -> bool:
    """Whether ``temp`` is left over (see the module docstring); ``locked``: we hold the lock."""
    with _in_flight_lock:
        if os.path.abspath(temp.path) in _in_flight:
            return False
    if temp.shard and locked:
        return True
    return temp.pid == os.getpid() or not _alive(temp.pid)


def _owner(target: str, suffix: str) -> str | None:
    """The session id of ``<session_id>_<NNN><suffix>`` (a shard or checkpoint name)."""
    stem = target.removesuffix(suffix)
    sid, sep, index = stem.rpartition("_")
    if stem == target or not sep or not sid or not index.isdigit():
        return None
    return sid


def _owned_by(target: str, session_id: str, suffix: str) -> bool:
    return _owner(target, suffix) == session_id


@dataclass(frozen=True, slots=True)
class TempFile:
    """A temp file of a session: where, whose session and pid, and whether a shard's."""

    path: Path
    session_id: str
    pid: int
    shard: bool


def agent_temps(traces: Path) -> list[TempFile]:
    """Every temp file of any session under an agent's ``traces/`` folder, sorted by path.

    Shard temps sit in the date folders (``.<sid>_<NNN>.jsonl.<pid>.tmp``);
    checkpoint temps in ``.checkpoints/`` (``.<sid>_<NNN>.json.<pid>.tmp``).
    """
    found: list[TempFile] = []
    folders = [(traces / ".checkpoints", ".json", False)]
    try:
        with os.scandir(traces) as entries:
            folders += [
                (Path(e.path), ".jsonl", True)
                for e in entries
                if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")
            ]
    except (FileNotFoundError, NotADirectoryError):
        return []
    for folder, suffix, shard in folders:
        try:
            with os.scandir(folder) as entries:
                names = [(e.name, e.path) for e in entries if e.is_file(follow_symlinks=False)]
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name, path in names:
            parsed = parse_temp_name(name)
            owner = _owner(parsed[0], suffix) if parsed is not None else None
            if parsed is not None and owner is not None:
                found.append(TempFile(Path(path), owner, parsed[1], shard))
    found.sort(key=lambda temp: str(temp.path))
    return found


def session_temps(traces: Path, session_id: str) -> list[TempFile]:
    """Every temp file of one session under an agent's ``traces/`` folder."""
    return [temp for temp in agent_temps(traces) if temp.session_id == session_id]


def session_checkpoints(traces: Path, session_id: str) -> list[Path]:
    """Every checkpoint file of a session in ``traces/.checkpoints`` (``<sid>_<NNN>.json``).

    Here rather than in ``checkpoints`` so that delete needs no aggregate imports.
    """
    try:
        with os.scandir(traces / ".checkpoints") as entries:
            names = sorted(e.name for e in entries if e.is_file(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [traces / ".checkpoints" / n for n in names if _owned_by(n, session_id, ".json")]


def remove_stale(traces: Path, session_id: str, *, locked: bool) -> list[Path]:
    """Remove the session's stale temp files; return the paths removed (a vanished one is
    skipped: another cleaner got there first)."""
    removed = []
    for temp in session_temps(traces, session_id):
        if is_stale(temp, locked=locked):
            try:
                temp.path.unlink()
            except FileNotFoundError:
                continue
            removed.append(temp.path)
    return removed


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
