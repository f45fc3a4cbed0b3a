"""From trace records to ledger rows: the live indexer, catch-up sync and rebuild.

The trace is the source of truth.  A record's RuntimeEvent id comes from its
position in the session trace, so indexing the same record twice gives the
same envelope (an idempotent no-op in the ledger), a restart continues with
new ids, and ``rebuild`` recreates every row with the ids it had.

A session's ``directory`` is the ``workspace`` of its *first* ``session_meta``
record, so the live path and a later sync build byte-identical envelopes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pentrace.domain.records import MalformedLine, TraceRecord, decode_line
from pentrace.domain.runtime import runtime_event_from_record
from pentrace.errors import (
    LedgerConflictError,
    LedgerError,
    PentraceError,
    RedactionError,
    TraceError,
)
from pentrace.infrastructure.ledger.store import RuntimeEventLedger
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef, ShardRef, iter_sessions
from pentrace.infrastructure.trace.reader import read_session, read_shard

__all__ = [
    "SESSION_ERRORS",
    "SessionFailure",
    "SyncReport",
    "build_events",
    "index_records",
    "rebuild",
    "rebuild_sessions",
    "record_workspace",
    "session_directory",
    "sync",
]

_BATCH: Final = 1000


# Errors that belong to one session's trace or rows; anything else (the database
# locked or gone) stops the whole run.
SESSION_ERRORS: Final = (LedgerConflictError, RedactionError, TraceError, OSError)


@dataclass(frozen=True)
class SessionFailure:
    """A session a sync or rebuild could not index, and why (the message names where)."""

    project: str
    agent: str
    session_id: str
    message: str

    @classmethod
    def of(cls, ref: SessionRef, error: Exception) -> SessionFailure:
        """The failure of ``ref`` with ``error``'s message."""
        message = error.message if isinstance(error, PentraceError) else str(error)
        return cls(ref.project, ref.agent, ref.session_id, message)


@dataclass(frozen=True)
class SyncReport:
    """What a sync or rebuild did; ``failures`` lists the sessions it had to leave out."""

    sessions: int = 0
    indexed: int = 0
    already_held: int = 0
    failures: tuple[SessionFailure, ...] = ()


def build_events(
    session_id: str,
    records: Iterable[tuple[int, bytes]],
    *,
    project: str,
    agent: str,
    directory: str | None,
) -> list[Any]:
    """RuntimeEvents for ``(position, line bytes)`` pairs of one session (pure, no I/O)."""
    events = []
    for position, raw in records:
        try:
            record = decode_line(raw, position)
        except MalformedLine as error:
            raise LedgerError(
                f"session {session_id}, position {position}: the trace line is not JSON ({error})",
                hint="run `pentrace audit` on the session",
            ) from None
        if record is None:
            raise LedgerError(
                f"session {session_id}, position {position}: expected a record, found a blank line",
                hint="positions count records only; pass the line of a record",
            )
        events.append(
            runtime_event_from_record(
                record,
                session_id=session_id,
                position=position,
                project=project,
                agent=agent,
                directory=directory,
            )
        )
    return events


def index_records(
    ledger: RuntimeEventLedger,
    session_id: str,
    records: Iterable[tuple[int, bytes]],
    *,
    project: str,
    agent: str,
    directory: str | None = None,
) -> int:
    """Index freshly written records into the ledger; returns how many were new."""
    events = build_events(session_id, records, project=project, agent=agent, directory=directory)
    return ledger.extend(events)


def session_directory(shards: Iterable[ShardRef]) -> str | None:
    """The ``workspace`` of the session's first record when it is a ``session_meta``."""
    ordered = sorted(shards, key=lambda shard: shard.index)
    if not ordered:
        return None
    for record in read_shard(ordered[0].path):
        return record_workspace(record)
    return None


def sync(
    ledger: RuntimeEventLedger,
    data_root: DataRoot | Path,
    *,
    project: str | None = None,
    agent: str | None = None,
) -> SyncReport:
    """Index every trace record the ledger is missing; running it again changes nothing.

    A position the ledger holds, or one at or below what retention already
    pruned from that stream, is not indexed again.  A session that fails
    (its trace unreadable, a held id whose trace changed) is reported in
    ``failures`` and the others go on.
    """
    sessions = indexed = held_total = 0
    failures: list[SessionFailure] = []
    for ref in iter_sessions(data_root, project, agent):
        sessions += 1
        try:
            new, held = _sync_session(ledger, ref)
        except SESSION_ERRORS as error:
            failures.append(SessionFailure.of(ref, error))
            continue
        indexed += new
        held_total += held
    return SyncReport(sessions, indexed, held_total, tuple(failures))


def _sync_session(ledger: RuntimeEventLedger, ref: SessionRef) -> tuple[int, int]:
    held, pruned_through = ledger.held_sequences(ref.key.stream_id)
    indexed = held_total = 0
    batch: list[Any] = []
    for position, record, directory in _positioned(ref):
        if position in held or position <= pruned_through:
            held_total += 1
            continue
        batch.append(_event(ref, position, record, directory))
        if len(batch) >= _BATCH:
            indexed += ledger.extend(batch)
            batch = []
    if batch:
        indexed += ledger.extend(batch)
    return indexed, held_total


def _positioned(ref: SessionRef) -> Iterator[tuple[int, TraceRecord, str | None]]:
    """Each record with its position and the session's directory (from its first record)."""
    directory: str | None = None
    for position, record in _numbered(read_session(ref.shards)):
        if position == 1:
            directory = record_workspace(record)
        yield position, record, directory


def _event(ref: SessionRef, position: int, record: TraceRecord, directory: str | None) -> Any:
    return runtime_event_from_record(
        record,
        session_id=ref.session_id,
        position=position,
        project=ref.project,
        agent=ref.agent,
        directory=directory,
    )


def rebuild(
    ledger: RuntimeEventLedger,
    data_root: DataRoot | Path,
    *,
    project: str | None = None,
    agent: str | None = None,
) -> SyncReport:
    """Index all traces again (same event ids) and drop every row no trace holds.

    See :func:`rebuild_sessions`.
    """
    return rebuild_sessions(ledger, iter_sessions(data_root, project, agent))


def rebuild_sessions(ledger: RuntimeEventLedger, refs: Iterable[SessionRef]) -> SyncReport:
    """Replace each session's rows in its own transaction, then drop streams no trace holds.

    The ledger is never emptier than the traces allow: a session's old rows
    stay until its new ones commit, and a session that fails keeps its old
    rows and is reported in ``failures``.  Rows of other streams are deleted
    only once every session is done.
    """
    sessions = indexed = 0
    kept: set[str] = set()
    failures: list[SessionFailure] = []
    for ref in refs:
        sessions += 1
        stream = ref.key.stream_id  # its own stream, whoever else holds the id (ADR 0023)
        try:
            events = (_event(ref, *item) for item in _positioned(ref))
            indexed += ledger.replace_stream(stream, events)
        except SESSION_ERRORS as error:
            failures.append(SessionFailure.of(ref, error))
        kept.add(stream)
    ledger.keep_streams(kept)
    return SyncReport(sessions, indexed, 0, tuple(failures))


def _numbered(records: Iterable[TraceRecord]) -> Iterator[tuple[int, TraceRecord]]:
    return enumerate(records, start=1)


def record_workspace(record: TraceRecord) -> str | None:
    """The ``workspace`` of a ``session_meta`` record (the events' directory), else None."""
    if record.kind != "session_meta":
        return None
    workspace = record.payload().get("workspace")
    return workspace if isinstance(workspace, str) and workspace else None
