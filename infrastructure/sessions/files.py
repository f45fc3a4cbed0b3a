"""Session files: archive, import and delete.

Exports (one shard verbatim or redacted, or an archive) are made by
:mod:`pentrace.infrastructure.operations.exports`, which the CLI and the
service share.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from pentrace.errors import NotFoundError, PentraceError, TraceError, UsageError
from pentrace.infrastructure.sessions.archive import ArchiveResult, export_archive
from pentrace.infrastructure.sessions.trace_import import ImportResult, import_session
from pentrace.infrastructure.storage.atomic import session_checkpoints, session_temps
from pentrace.infrastructure.storage.layout import DataRoot, validate_name
from pentrace.infrastructure.storage.modes import make_private_dirs
from pentrace.infrastructure.trace.locking import SessionLock
from pentrace.infrastructure.trace.writer import session_lock_path

__all__ = [
    "ArchiveResult",
    "DeleteResult",
    "ImportResult",
    "delete_session",
    "export_archive",
    "import_session",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DeleteResult:
    """The session that was deleted and every path removed (shards, checkpoints, temp
    files, scratchpad, lock file)."""

    session_id: str
    removed: tuple[Path, ...]


def delete_session(root: DataRoot, project: str, agent: str, session_id: str) -> DeleteResult:
    """Remove everything of a session: its shards (in every date folder), its shard
    checkpoints, the hidden temp files a killed writer left, its scratchpad (tool-output
    archives included) and its lock file.

    Refuses with :class:`~pentrace.errors.TraceLockedError` while a writer
    holds the session, and with :class:`~pentrace.errors.NotFoundError` when
    there is nothing to delete.  Subagent children are separate sessions and
    are left alone.  The ledger is not touched: remove the session's events
    with :func:`pentrace.infrastructure.ledger.opener.forget_sessions` (as
    ``pentrace delete`` and ``prune`` do, once for all they deleted), or they
    stay replayable until ``pentrace audit --fix`` / ``ledger forget``.
    """
    sid = validate_name("session id", session_id)
    shards = root.find_shards(project, agent, sid)
    scratchpad = root.scratchpad_dir(project, agent, sid)
    if not shards and not scratchpad.exists():
        raise NotFoundError(
            f"session {sid} has no trace and no scratchpad under {project}/{agent}",
            hint="list sessions with `pentrace list`",
        )
    has_scratchpad = scratchpad.is_dir() and not scratchpad.is_symlink()
    if not has_scratchpad and (scratchpad.exists() or scratchpad.is_symlink()):
        # rmtree would follow nothing, but a link or file here is not ours to judge.
        raise UsageError(
            f"scratchpad {scratchpad} of session {sid} is not a folder; nothing was deleted",
            hint="remove it by hand after checking what it is, then delete again",
        )
    lock_path = session_lock_path(root, project, agent, sid)
    removed: list[Path] = []
    try:
        make_private_dirs(lock_path.parent)
        with SessionLock(lock_path, label=f"session {sid}"):
            # Look again under the lock: a writer may have rotated before we got it.
            for shard in root.find_shards(project, agent, sid):
                shard.path.unlink()
                removed.append(shard.path)
                _rmdir_if_empty(shard.path.parent)
            # Temp files before checkpoints: a checkpoint renamed into place meanwhile
            # is then still found below, and a later rename finds its temp gone.
            traces = root.traces_dir(project, agent)
            for temp in session_temps(traces, sid):
                temp.path.unlink(missing_ok=True)
                removed.append(temp.path)
            for checkpoint in session_checkpoints(traces, sid):
                checkpoint.unlink(missing_ok=True)
                removed.append(checkpoint)
            if has_scratchpad:
                shutil.rmtree(scratchpad)
                removed.append(scratchpad)
            lock_path.unlink()
            removed.append(lock_path)
    except OSError as exc:
        raise TraceError(
            f"cannot delete session {sid} under {project}/{agent}: "
            f"{exc.strerror or type(exc).__name__} ({exc.filename})",
            hint="check the permissions of the traces and scratchpad folders; "
            "run the delete again to finish",
        ) from exc
    _forget_text(root, project, agent, sid)
    return DeleteResult(sid, tuple(removed))


def _forget_text(root: DataRoot, project: str, agent: str, sid: str) -> None:
    """Drop the session's conversation text from the search index, if there is one.

    Best-effort: a busy index keeps it until its next refresh, which drops
    sessions that are no longer on disk.
    """
    # Imported here: the session commands load eagerly (ADR 0008).
    from pentrace.infrastructure.search.index import SearchIndex, search_index_path

    if not search_index_path(root).is_file():
        return
    try:
        with SearchIndex(root) as index:
            index.forget(project, agent, sid)
    except (PentraceError, sqlite3.Error, OSError) as exc:
        logger.warning(
            "the search index still holds text of deleted session %s until its next refresh (%s)",
            sid,
            type(exc).__name__,
        )


def _rmdir_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        # Other sessions' shards still live in this date folder.
        return
