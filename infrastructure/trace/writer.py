"""Writing a session's trace: the public API of the trace writer.

:class:`ShardWriter` (in ``shard_writer``) appends records to one session's
current shard with one ``write(2)`` per record, all-or-nothing batches,
torn-tail healing, an fsync policy (:class:`Durability`, ADR 0004) and rotation.
:func:`open_session_writer` is how an application opens it: it takes the
session's one writer lock (ADR 0005) and finds the latest shard.
``docs/trace-format.md`` ("Writing: durability, locking and rotation") has the
rules in prose.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path

from pentrace.infrastructure.storage.atomic import remove_stale
from pentrace.infrastructure.storage.layout import DataRoot, validate_name
from pentrace.infrastructure.storage.modes import repair_below
from pentrace.infrastructure.trace.durability import Durability, FsyncFn, make_dirs_durably
from pentrace.infrastructure.trace.locking import SessionLock
from pentrace.infrastructure.trace.shard_writer import ShardWriter, is_request_end, refuse_record

logger = logging.getLogger(__name__)

__all__ = [
    "Durability",
    "ShardWriter",
    "is_request_end",
    "open_session_writer",
    "refuse_record",
    "session_lock_path",
]


def session_lock_path(root: DataRoot, project: str, agent: str, session_id: str) -> Path:
    """``<agent>/traces/.locks/<session_id>.lock``: the one writer lock of a session (ADR 0005).

    Anything that changes a session's shards (writer, import, delete) takes this
    lock with :class:`~pentrace.infrastructure.trace.locking.SessionLock`.
    """
    sid = validate_name("session id", session_id)
    return root.traces_dir(project, agent) / ".locks" / f"{sid}.lock"


def open_session_writer(
    root: DataRoot,
    project: str,
    agent: str,
    session_id: str,
    *,
    durability: Durability = Durability.PER_REQUEST,
    wait: float | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    today: Callable[[], date] | None = None,
    fsync: FsyncFn = os.fsync,
) -> ShardWriter:
    """Lock a session and open a writer on its latest shard (``_001`` for a new session).

    The lock is ``traces/.locks/<session_id>.lock``: ONE lock per session, held
    across rotations, taken BEFORE the latest shard is looked up so a writer
    that waited never appends to a shard another writer has rotated away from.
    Rotation names the next shard's date folder with ``today()`` (default:
    ``clock().date()``), so a rotated shard may land in a newer folder (PR #271).
    """
    lock_path = session_lock_path(root, project, agent, session_id)
    make_dirs_durably(lock_path.parent, None if durability is Durability.NONE else fsync)
    lock = SessionLock(
        lock_path,
        label=f"session {session_id}",
        wait=wait,
        clock=clock,
    )
    day = today if today is not None else (lambda: clock().date())
    try:
        latest = root.latest_shard(project, agent, session_id)
        path = latest.path if latest else root.shard_path(project, agent, session_id, 1, day())
        _tidy(root, project, agent, session_id, path)
        return ShardWriter(
            path,
            durability=durability,
            lock=lock,
            next_shard=lambda index: root.shard_path(project, agent, session_id, index, day()),
            index=latest.index if latest else 1,
            fsync=fsync,
        )
    except BaseException:
        lock.release()
        raise


def _tidy(root: DataRoot, project: str, agent: str, session_id: str, shard: Path) -> None:
    """Under the session lock: repair loose modes on the way to the shard, and remove the
    temp files a killed writer of this session left (see ``temp_files``)."""
    traces = root.traces_dir(project, agent)
    repair_below(root.path, traces / ".locks", shard)
    removed = remove_stale(traces, session_id, locked=True)
    if removed:
        logger.info(
            "removed %d stale temp file(s) of session %s left by a killed writer",
            len(removed),
            session_id,
        )
