"""``pentrace audit --fix``: the only repairs that are safe, each reported exactly.

* **Heal a torn tail.** The torn bytes (the last, unparseable line and any
  blank lines after it) are first copied to a ``<shard>.torn`` sidecar and
  fsynced; only then is the shard cut back to its last whole record.  Nothing
  is ever truncated blind.  A latest shard holding nothing but a torn line is
  renamed to its sidecar instead, so no empty shard is left behind.
* **Close a dangling compaction** with the ``compaction_end(status="failed")``
  record :meth:`SessionApplication.resume_session` writes (same message), after
  forgetting a request left open, exactly as resume does.  A second run finds
  nothing to close.
* **Ledger sync**: index the trace records the ledger is missing.
* **Remove stale temp files** (``.<shard or checkpoint>.<pid>.tmp``) a writer
  killed while rotating or writing a checkpoint left behind; see
  :mod:`~pentrace.infrastructure.storage.atomic` for when one is stale.

Every repair takes the session's writer lock, so it never races a live writer
(a held lock is a clean :class:`~pentrace.errors.TraceLockedError`).  History
is never rewritten: whole records are never changed, moved or removed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from pentrace.domain.records import MalformedLine, decode_line
from pentrace.domain.session.key import key_of_reference
from pentrace.infrastructure.audit.run import SessionAudit
from pentrace.infrastructure.eventstore.application import (
    DANGLING_COMPACTION_ERROR,
    SessionApplication,
)
from pentrace.infrastructure.ledger import RuntimeEventLedger
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.storage.atomic import remove_stale
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef
from pentrace.infrastructure.storage.modes import make_private_dirs, write_new_private
from pentrace.infrastructure.trace.durability import fsync_directory
from pentrace.infrastructure.trace.locking import SessionLock
from pentrace.infrastructure.trace.writer import session_lock_path
from pentrace.projections.audit import Problem

__all__ = [
    "Change",
    "close_dangling_compaction",
    "fix_sessions",
    "heal_torn_tail",
    "remove_stale_temps",
]


@dataclass(frozen=True)
class Change:
    """One thing ``--fix`` changed: what, in which session and file, described exactly."""

    action: str
    session_id: str
    path: str | None
    detail: str


def _torn_start(data: bytes) -> int | None:
    """Byte offset where the torn last line starts, or ``None`` when the last line is whole."""
    end = len(data)
    while True:
        newline = data.rfind(b"\n", 0, end)
        start = newline + 1
        try:
            record = decode_line(data[start:end])
        except MalformedLine:
            return start
        if record is not None or newline < 0:
            return None
        end = newline


def _free_sidecar(shard: Path) -> Path:
    candidate = shard.with_name(shard.name + ".torn")
    number = 2
    while os.path.lexists(candidate):
        candidate = shard.with_name(f"{shard.name}.{number}.torn")
        number += 1
    return candidate


def heal_torn_tail(root: DataRoot, ref: SessionRef, shard: Path) -> Change | None:
    """Quarantine a shard's torn last line to a ``.torn`` sidecar, then cut it off.

    Returns ``None`` when the shard's last line is whole (nothing to heal), and
    when a shard holding nothing but a torn line has later shards (moving it
    aside would open a gap; the audit keeps reporting it).
    """
    with _session_lock(root, ref):
        data = shard.read_bytes()
        start = _torn_start(data)
        if start is None:
            return None
        sidecar = _free_sidecar(shard)
        torn = len(data) - start
        line = data.count(b"\n", 0, start) + 1
        if start == 0:
            if any(other.index > _index_of(ref, shard) for other in ref.shards):
                return None  # moving it would open a gap in the shard numbering
            os.rename(shard, sidecar)
            fsync_directory(shard.parent)
            detail = f"the shard held only a torn line ({torn} bytes): renamed it to {sidecar.name}"
            return Change("heal_torn_tail", ref.session_id, str(shard), detail)
        _write_durably(sidecar, data[start:])
        with shard.open("r+b") as handle:
            handle.truncate(start)
            os.fsync(handle.fileno())
        detail = (
            f"moved {torn} torn bytes from line {line} to {sidecar.name}; "
            f"the shard now ends at byte {start}, after its last whole record"
        )
        return Change("heal_torn_tail", ref.session_id, str(shard), detail)


def _index_of(ref: SessionRef, shard: Path) -> int:
    return next((s.index for s in ref.shards if s.path == shard), 0)


def _write_durably(path: Path, data: bytes) -> None:
    write_new_private(path, data, durable=True)
    fsync_directory(path.parent)


def _session_lock(root: DataRoot, ref: SessionRef) -> SessionLock:
    lock_path = session_lock_path(root, ref.project, ref.agent, ref.session_id)
    make_private_dirs(lock_path.parent)
    return SessionLock(lock_path, label=f"session {ref.session_id} (audit --fix)")


def remove_stale_temps(root: DataRoot, ref: SessionRef) -> list[Change]:
    """Under the session lock, remove the temp files a killed writer of ``ref`` left."""
    traces = root.traces_dir(ref.project, ref.agent)
    with _session_lock(root, ref) as lock:
        removed = remove_stale(traces, ref.session_id, locked=True)
        if not root.find_shards(ref.project, ref.agent, ref.session_id):
            lock.path.unlink()  # a session with no shard keeps no lock file either
    return [
        Change("remove_temp", ref.session_id, str(path), "removed a stale temp file")
        for path in removed
    ]


def close_dangling_compaction(root: DataRoot, ref: SessionRef) -> Change | None:
    """Append resume's ``compaction_end(failed)`` to an open compaction; ``None`` if none."""
    app = SessionApplication(root, ref.project, ref.agent)
    try:
        handle = app.open_session(ref.session_id)
        session = handle.session
        if session.compaction is None:
            return None
        reason, mode = session.compaction
        session.abandon_open_request()
        session.end_compaction("failed", now=app.clock(), error_message=DANGLING_COMPACTION_ERROR)
        handle.save()
        path = str(app.trace_path(ref.session_id))
        app.release(ref.session_id)
    finally:
        app.close()
    detail = (
        f"appended compaction_end(status=failed, reason={reason}, mode={mode}) "
        "closing the dangling compaction, as resume does"
    )
    return Change("close_compaction", ref.session_id, path, detail)


def fix_sessions(
    root: DataRoot,
    audits: Iterable[SessionAudit],
    ledger: RuntimeEventLedger | None,
    on_change: Callable[[Change], None] | None = None,
    orphans: Iterable[Problem] = (),
) -> list[Change]:
    """Apply every safe fix the audits call for, in a safe order; return what changed.

    Torn tails go first (the writer would otherwise keep the fragment as a
    malformed line), then compactions, then one ledger sync per agent, then
    the removal of ledger events whose session has no trace any more.
    ``on_change`` hears of each change as soon as it is made, so a caller can
    report what was done even when a later fix fails (a live writer's lock).
    """
    changes = _Changes(on_change)
    to_sync: set[tuple[str, str]] = set()
    for audit in audits:
        fixes = {problem.fix for problem in audit.problems}
        torn = sorted({p.path for p in audit.problems if p.fix == "heal_torn_tail" and p.path})
        for path in torn:
            change = heal_torn_tail(root, audit.ref, Path(path))
            if change is not None:
                changes.append(change)
        if "remove_temp" in fixes:
            for change in remove_stale_temps(root, audit.ref):
                changes.append(change)
        if "close_compaction" in fixes:
            change = close_dangling_compaction(root, audit.ref)
            if change is not None:
                changes.append(change)
        if "ledger_sync" in fixes or "close_compaction" in fixes:
            to_sync.add((audit.ref.project, audit.ref.agent))
    for orphan in orphans:
        if orphan.fix == "remove_temp" and orphan.path is not None:
            # A session with no shard: where it lives comes from the temp file's path.
            traces = Path(orphan.path).parent.parent
            ref = SessionRef(
                traces.parent.parent.parent.name, traces.parent.name, orphan.session_id, ()
            )
            for change in remove_stale_temps(root, ref):
                changes.append(change)
    if ledger is not None:
        for project, agent in sorted(to_sync):
            result = sync(ledger, root, project=project, agent=agent)
            if result.indexed:
                detail = (
                    f"ledger sync of {project}/{agent}: indexed {result.indexed} missing "
                    f"event(s) over {result.sessions} session(s)"
                )
                changes.append(Change("ledger_sync", "*", ledger.db.where, detail))
        for orphan in orphans:
            if orphan.fix == "ledger_forget":
                removed = ledger.forget_stream(key_of_reference(orphan.session_id).stream_id)
                detail = f"removed {removed} ledger event(s) of a session with no trace"
                changes.append(Change("ledger_forget", orphan.session_id, ledger.db.where, detail))
    return list(changes)


class _Changes(list[Change]):
    """A list of changes that tells a listener about each one as it is appended."""

    def __init__(self, listener: Callable[[Change], None] | None) -> None:
        super().__init__()
        self.listener = listener

    def append(self, change: Change) -> None:
        super().append(change)
        if self.listener is not None:
            self.listener(change)
