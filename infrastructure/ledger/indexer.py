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
from pentrace.domain.runtime_events import runtime_event_from_record
from pentrace.errors import LedgerError
from pentrace.infrastructure.layout import DataRoot, ShardRef, iter_sessions
from pentrace.infrastructure.ledger.store import RuntimeEventLedger
from pentrace.infrastructure.trace_reader import read_session, read_shard

__all__ = [
    "SyncReport",
    "build_events",
    "index_records",
    "rebuild",
    "record_workspace",
    "session_directory",
    "sync",
]

_BATCH: Final = 1000


@dataclass(frozen=True)
class SyncReport:
    """What a sync or rebuild did."""

    sessions: int = 0
    indexed: int = 0
    already_held: int = 0


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
    pruned from that stream, is not indexed again.
    """
    sessions = indexed = held_total = 0
    for ref in iter_sessions(data_root, project, agent):
        sessions += 1
        held, pruned_through = ledger.held_sequences(ref.key.stream_id)
        records = _numbered(read_session(ref.shards))
        directory: str | None = None
        batch: list[Any] = []
        for position, record in records:
            if position == 1:
                directory = record_workspace(record)
            if position in held or position <= pruned_through:
                held_total += 1
                continue
            batch.append(
                runtime_event_from_record(
                    record,
                    session_id=ref.session_id,
                    position=position,
                    project=ref.project,
                    agent=ref.agent,
                    directory=directory,
                )
            )
            if len(batch) >= _BATCH:
                indexed += ledger.extend(batch)
                batch = []
        if batch:
            indexed += ledger.extend(batch)
    return SyncReport(sessions, indexed, held_total)


def rebuild(
    ledger: RuntimeEventLedger,
    data_root: DataRoot | Path,
    *,
    project: str | None = None,
    agent: str | None = None,
) -> SyncReport:
    """Delete every ledger row, then index all traces again (same event ids)."""
    ledger.clear()
    return sync(ledger, data_root, project=project, agent=agent)


def _numbered(records: Iterable[TraceRecord]) -> Iterator[tuple[int, TraceRecord]]:
    return enumerate(records, start=1)


def record_workspace(record: TraceRecord) -> str | None:
    """The ``workspace`` of a ``session_meta`` record (the events' directory), else None."""
    if record.kind != "session_meta":
        return None
    workspace = record.payload().get("workspace")
    return workspace if isinstance(workspace, str) and workspace else None
