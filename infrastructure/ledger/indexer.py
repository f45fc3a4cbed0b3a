"""From trace records to ledger rows on the exact path: index records, and rebuild.

The trace is the source of truth.  A record's RuntimeEvent id comes from its
position in the session trace, so indexing the same record twice gives the
same envelope (an idempotent no-op in the ledger), a restart continues with
new ids, and ``rebuild`` recreates every row with the ids it had.  These build
each row with every check of :mod:`.rows`, the reference the bulk sync
(:mod:`.bulk`) is tied to; ``ledger sync`` is :func:`.bulk.sync`.

A session's ``directory`` is the ``workspace`` of its *first* ``session_meta``
record, so the live path and a later sync build byte-identical envelopes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pentrace.domain.records import MalformedLine, TraceRecord, decode_line
from pentrace.domain.runtime import EncodedEvent, RuntimeEvent, SessionEvents, record_workspace
from pentrace.domain.session.key import SessionKey
from pentrace.errors import LedgerConflictError, LedgerError, TraceError
from pentrace.infrastructure.ledger.bulk.build import (
    RECORD_ERRORS,
    SessionFailure,
    SyncReport,
    numbered,
    record_findings,
)
from pentrace.infrastructure.ledger.rows import encoded_row
from pentrace.infrastructure.ledger.store import RuntimeEventLedger
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef, ShardRef, iter_sessions
from pentrace.infrastructure.trace.reader import read_session, read_shard

__all__ = [
    "build_events",
    "decode_records",
    "index_records",
    "rebuild",
    "rebuild_sessions",
    "session_directory",
]


def decode_records(
    session_id: str, lines: Iterable[tuple[int, bytes]]
) -> Iterator[tuple[int, TraceRecord]]:
    """``(position, line bytes)`` pairs of one session as ``(position, record)`` pairs."""
    for position, raw in lines:
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
        yield position, record


def build_events(
    session_id: str,
    records: Iterable[tuple[int, bytes]],
    *,
    project: str,
    agent: str,
    directory: str | None,
) -> list[RuntimeEvent]:
    """RuntimeEvents for ``(position, line bytes)`` pairs of one session (pure, no I/O)."""
    mapper = SessionEvents(SessionKey(project, agent, session_id), directory)
    return [mapper.event(*item) for item in decode_records(session_id, records)]


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
    mapper = SessionEvents(SessionKey(project, agent, session_id), directory)
    now = ledger.now_ms()
    rows = [encoded_row(mapper.encoded(*item), now) for item in decode_records(session_id, records)]
    return ledger.append_rows(rows)


def session_directory(shards: Iterable[ShardRef]) -> str | None:
    """The ``workspace`` of the session's first record when it is a ``session_meta``."""
    ordered = sorted(shards, key=lambda shard: shard.index)
    if not ordered:
        return None
    for record in read_shard(ordered[0].path):
        return record_workspace(record)
    return None


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
    stay until its new ones commit, and a session whose trace cannot be read
    keeps its old rows and is reported in ``failures``.  A record the ledger
    cannot take is left out, its position a gap, and reported as one finding
    naming the record (ADR 0102); the session's other records are rebuilt.
    Rows of other streams are deleted only once every session is done.
    """
    sessions = indexed = 0
    kept: set[str] = set()
    failures: list[SessionFailure] = []
    for ref in refs:
        sessions += 1
        stream = ref.key.stream_id  # its own stream, whoever else holds the id (ADR 0023)
        refused: list[tuple[int, BaseException]] = []

        def row_of(
            event: object, now: int, refused: list[tuple[int, BaseException]] = refused
        ) -> dict[str, Any] | None:
            assert isinstance(event, EncodedEvent)
            try:
                return encoded_row(event, now)
            except RECORD_ERRORS as error:
                refused.append((event.event.sequence, error))
                return None

        try:
            indexed += ledger.replace_stream(stream, _encoded(ref, refused), row_of)
        except (TraceError, OSError, LedgerConflictError) as error:
            failures.append(SessionFailure.of(ref, error))
            refused.clear()  # nothing of the session was replaced
        failures += record_findings(ref, sorted(refused, key=lambda item: item[0]))
        kept.add(stream)
    ledger.keep_streams(kept)
    return SyncReport(sessions, indexed, 0, tuple(failures))


def _encoded(ref: SessionRef, refused: list[tuple[int, BaseException]]) -> Iterator[EncodedEvent]:
    """The session's records mapped; one the mapping cannot take is noted in ``refused``."""
    mapper = SessionEvents(ref.key)
    for position, record in numbered(read_session(ref.shards)):
        try:
            yield mapper.encoded(position, record)
        except RECORD_ERRORS as error:
            mapper.skip(position, record)  # a first record still names the workspace
            refused.append((position, error))
