"""Bulk indexing for ``ledger sync``: build rows per session, write them in batches.

A session's rows are built in one step (:func:`build_session`: read its
shards, map each record the ledger lacks through
:class:`~pentrace.domain.runtime.SessionEvents`, encode it once, take its
columns), and written in transactions of :data:`BATCH` rows by
:func:`insert_values`, the rows of consecutive sessions together (a session
of a few hundred records would otherwise be a commit of its own).  With
``workers`` above 1, worker processes build sessions while this process
writes, so the building (most of the cost) and SQLite's inserts use both
cores; the rows, ids and bytes are the same either way, and so is their
order within each session.  What the ledger's count limit would delete at
once is not built or inserted (:mod:`.retention_skip`, ADR 0047).

A session that fails while being built (its trace unreadable, a record the
redaction check refuses) keeps the rows built before the failure, which are
written, and is reported; the others go on.  Anything else (the database
locked or gone, a bug) stops the run.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

from pentrace.domain.runtime import SessionEvents
from pentrace.errors import (
    LedgerConflictError,
    PentraceError,
    RedactionError,
    TraceError,
)
from pentrace.infrastructure.ledger.backend.codec import RowCodec
from pentrace.infrastructure.ledger.backend.errors import LedgerIntegrityError
from pentrace.infrastructure.ledger.dictionary import sync_codec
from pentrace.infrastructure.ledger.retention_skip import (
    SessionTask,
    plan_skips,
    record_skips,
    session_tasks,
)
from pentrace.infrastructure.ledger.rows import ROW_COLUMNS, encoded_values
from pentrace.infrastructure.ledger.store import RuntimeEventLedger
from pentrace.infrastructure.storage.layout import SessionRef
from pentrace.infrastructure.trace.reader import read_session

__all__ = [
    "BATCH",
    "SESSION_ERRORS",
    "SessionBuild",
    "SessionFailure",
    "SyncReport",
    "auto_workers",
    "build_session",
    "insert_values",
    "sync_sessions",
]

# Rows per write transaction: large enough that a commit (and WAL checkpoint) is
# a small share of the cost, small enough that a reader waits little.
BATCH: Final = 1000
# Errors that belong to one session's trace or rows; anything else (the database
# locked or gone) stops the whole run.
SESSION_ERRORS: Final = (LedgerConflictError, RedactionError, TraceError, OSError)
_PARALLEL_BYTES: Final = 8 * 1024 * 1024
_MOST_WORKERS: Final = 4


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
    """What a sync or rebuild did; ``failures`` lists the sessions it had to leave out, and
    ``retention_skipped`` the new rows it did not insert because retention drops them."""

    sessions: int = 0
    indexed: int = 0
    already_held: int = 0
    failures: tuple[SessionFailure, ...] = ()
    retention_skipped: int = 0


@dataclass(frozen=True)
class SessionBuild:
    """A session's new rows (tuples in ``ROW_COLUMNS`` order), and what it skipped or hit."""

    rows: list[tuple[Any, ...]]
    already_held: int
    failure: SessionFailure | None


def build_session(
    ref: SessionRef,
    held: frozenset[int],
    pruned_through: int,
    inserted_at: int,
    codec: RowCodec | None = None,
) -> SessionBuild:
    """The rows of every record of ``ref`` but the ``held`` positions and those retention pruned."""
    mapper = SessionEvents(ref.key)
    rows: list[tuple[Any, ...]] = []
    skipped = 0
    try:
        for position, record in enumerate(read_session(ref.shards), start=1):
            if position in held or position <= pruned_through:
                skipped += 1
                mapper.skip(position, record)
                continue
            rows.append(encoded_values(mapper.encoded(position, record), inserted_at, codec))
    except SESSION_ERRORS as error:
        return SessionBuild(rows, skipped, SessionFailure.of(ref, error))
    return SessionBuild(rows, skipped, None)


def insert_values(ledger: RuntimeEventLedger, rows: list[tuple[Any, ...]]) -> int:
    """Store rows of :func:`build_session` in one transaction; returns how many were new.

    On SQLite the batch is one ``executemany`` of a prepared INSERT, with no
    per-row work but the driver's; a unique key another writer filled first
    (the live path, a second sync) sends the batch to the ledger's exact path,
    which skips identical copies and refuses different content.  Other
    backends take that exact path at once.  (The backend seam may take this
    function over: it is the one dialect-specific bulk insert.)
    """
    if not rows:
        return 0
    sql = ledger.db.dialect.bulk_insert(ledger.db.tables.events.name, ROW_COLUMNS)
    if sql is not None:
        try:
            with ledger.db.writing("append to the ledger") as conn:
                conn.exec_driver_sql(sql, rows)
        except LedgerIntegrityError:
            pass  # rolled back: the exact path below sorts the held ids out
        else:
            ledger.waker.wake()
            ledger.cleanup_if_due()
            return len(rows)
    return ledger.append_stored(rows, ledger.db.codec)


def auto_workers(refs: list[SessionRef]) -> int:
    """Worker processes worth starting for ``refs``: one per core for a large corpus, else none.

    Starting a worker and handing rows between processes costs more than it
    saves below a few megabytes of traces, or with one core.
    """
    affinity = getattr(os, "sched_getaffinity", None)
    cores = len(affinity(0)) if affinity is not None else os.cpu_count() or 1
    if cores < 2 or len(refs) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    size = 0
    for ref in refs:
        for shard in ref.shards:
            with contextlib.suppress(OSError):  # an unreadable one fails in its own build
                size += shard.path.stat().st_size
    return min(cores, _MOST_WORKERS) if size >= _PARALLEL_BYTES else 1


def sync_sessions(
    ledger: RuntimeEventLedger, refs: Iterable[SessionRef], *, workers: int = 1
) -> SyncReport:
    """Index what the ledger lacks of each session (see the module docstring).

    When the ledger's count limit would delete new rows right after the
    sync inserts them, they are left out (:mod:`.retention_skip`).
    ``workers`` 0 picks the number with :func:`auto_workers`.
    """
    refs = list(refs)
    if workers == 0:
        workers = auto_workers(refs)
    plan = plan_skips(ledger, refs)
    if plan is not None and plan.marks:
        record_skips(ledger, plan)
    tasks = plan.tasks if plan is not None else session_tasks(ledger, refs)
    codec = sync_codec(ledger, refs)  # the rows' stored form (ADR 0058)
    sessions = indexed = held_total = 0
    failures: list[SessionFailure] = []
    pending: list[tuple[Any, ...]] = []  # rows of consecutive sessions, one transaction
    for task, build in _builds(tasks, workers, codec):
        sessions += 1
        pending += build.rows
        while len(pending) >= BATCH:
            indexed += insert_values(ledger, pending[:BATCH])
            del pending[:BATCH]
        held_total += build.already_held - task.skipped
        if build.failure is not None:
            failures.append(build.failure)
    indexed += insert_values(ledger, pending)
    skipped = plan.skipped if plan is not None else 0
    return SyncReport(sessions, indexed, held_total, tuple(failures), skipped)


def _build(task: SessionTask, codec: RowCodec) -> SessionBuild:
    if not task.build:
        return SessionBuild([], task.already_held + task.skipped, None)
    return build_session(task.ref, task.held, task.pruned_through, task.inserted_at, codec)


def _builds(
    tasks: Iterable[SessionTask], workers: int, codec: RowCodec
) -> Iterator[tuple[SessionTask, SessionBuild]]:
    """Each session's build, in ``tasks`` order; in worker processes when ``workers`` > 1."""
    if workers <= 1:
        for task in tasks:
            yield task, _build(task, codec)
        return
    # fork: the workers inherit the redaction policy this process installed
    # (``--redaction-rules`` included) and start without importing anything.
    # ``gc.freeze`` keeps the cycle collector off what they inherit: it would
    # only copy those pages (each object's header is written) for nothing.
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=gc.freeze
    ) as pool:
        pending: deque[tuple[SessionTask, Future[SessionBuild]]] = deque()
        for task in tasks:
            pending.append((task, pool.submit(_build, task, codec)))
            if len(pending) > workers:
                done, future = pending.popleft()
                yield done, future.result()
        while pending:
            done, future = pending.popleft()
            yield done, future.result()
