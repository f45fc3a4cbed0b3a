"""Bulk indexing for ``ledger sync``: build rows per session, write them in batches.

A session's rows are built in one step (:func:`build_session`: read its
shards, map each record the ledger lacks through
:class:`~pentrace.domain.runtime.SessionEvents`, encode it once, take its
columns), and written in transactions of :data:`BATCH` rows by
:func:`insert_values`, the rows of consecutive sessions together (a session
of a few hundred records would otherwise be a commit of its own).  With
``workers`` above 1, ``workers - 1`` worker processes build sessions ahead
and this process writes them, building the next one itself whenever the one
due next is not ready (ADR 0060): the building (most of the cost) and
SQLite's inserts use both cores, with no third process competing for them.
The rows, ids and bytes are the same either way, and so is their order
within each session.  What the ledger's count limit would delete at
once is not built or inserted (:mod:`.retention_skip`, ADR 0047).

A session that fails while being built (its trace unreadable, a record the
redaction check refuses) keeps the rows built before the failure, which are
written, and is reported; the others go on.  Anything else (the database
locked or gone, a bug) stops the run.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import multiprocessing
import os
import pickle
import queue
import signal
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Final

from pentrace.domain.runtime import EncodedEvent, SessionEvents
from pentrace.domain.runtime.candidate import EncodedCandidate
from pentrace.errors import (
    LedgerConflictError,
    LedgerError,
    PentraceError,
    RedactionError,
    TraceError,
)
from pentrace.infrastructure.ledger.backend.codec import RowCodec
from pentrace.infrastructure.ledger.backend.deferred import indexes_after_rows
from pentrace.infrastructure.ledger.backend.dialect import PackedInsert, PackedInserter
from pentrace.infrastructure.ledger.backend.errors import LedgerIntegrityError
from pentrace.infrastructure.ledger.backend.packed import PackedRows, pack, unpack
from pentrace.infrastructure.ledger.dictionary import sync_codec
from pentrace.infrastructure.ledger.retention_skip import (
    SessionTask,
    plan_skips,
    record_skips,
    session_tasks,
)
from pentrace.infrastructure.ledger.rows import (
    ROW_COLUMNS,
    candidate_values,
    checked_values,
    compressed_rows,
)
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
    "die_with_parent",
    "insert_packed",
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
# Sessions each worker process may have built or be building ahead of the writer.
_AHEAD: Final = 3
_PR_SET_PDEATHSIG: Final = 1


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
    """A session's new rows (tuples in ``ROW_COLUMNS`` order), and what it skipped or hit;
    for a backend that takes packed rows, ``packed`` holds them instead (runs of at most
    :data:`BATCH`, in order) and ``rows`` is empty."""

    rows: list[tuple[Any, ...]]
    already_held: int
    failure: SessionFailure | None
    packed: tuple[PackedRows, ...] = ()

    @property
    def count(self) -> int:
        """How many new rows the build holds, packed or not."""
        return len(self.rows) + sum(run.count for run in self.packed)


def build_session(
    ref: SessionRef,
    held: frozenset[int],
    pruned_through: int,
    inserted_at: int,
    codec: RowCodec | None = None,
) -> SessionBuild:
    """The rows of every record of ``ref`` but the ``held`` positions and those retention pruned.

    Each row is checked with its envelope plain, and the session's envelopes are
    then compressed in one call (:func:`.rows.compressed_rows`): the same frames as
    one at a time, with zstd's tables warm for all of them (ADR 0072).
    """
    mapper = SessionEvents(ref.key)
    rows: list[tuple[Any, ...]] = []
    skipped = 0
    failure: SessionFailure | None = None
    try:
        for position, record in enumerate(read_session(ref.shards), start=1):
            if position in held or position <= pruned_through:
                skipped += 1
                mapper.skip(position, record)
                continue
            found = mapper.screened(position, record)
            if type(found) is EncodedCandidate:
                rows.append(candidate_values(found, inserted_at, codec))
            else:
                assert isinstance(found, EncodedEvent)
                rows.append(checked_values(found, inserted_at, codec))
    except SESSION_ERRORS as error:
        failure = SessionFailure.of(ref, error)
    return SessionBuild(compressed_rows(rows, codec), skipped, failure)


def insert_values(ledger: RuntimeEventLedger, rows: list[tuple[Any, ...]]) -> int:
    """Store rows of :func:`build_session` in one transaction; returns how many were new.

    The batch goes in through the backend's bulk insert (SQLite: one
    ``executemany`` of a prepared INSERT; PostgreSQL: one ``unnest`` of an
    array per column), with no per-row work but the driver's.  A unique key
    another writer filled first (the live path, a second sync) rolls the batch
    back and sends it to the ledger's exact path, which skips identical copies
    and refuses different content.
    """
    if not rows:
        return 0
    insert = ledger.db.dialect.bulk_insert(ledger.db.tables.events, ROW_COLUMNS)
    try:
        with ledger.db.writing("append to the ledger") as conn:
            insert(conn, rows)
    except LedgerIntegrityError:
        # Rolled back: the exact path sorts the held ids out.
        return ledger.append_stored(rows, ledger.db.codec)
    ledger.waker.wake()
    ledger.cleanup_if_due()
    return len(rows)


def insert_packed(
    ledger: RuntimeEventLedger, insert: PackedInserter, runs: list[PackedRows]
) -> int:
    """:func:`insert_values` for runs of packed rows, written by ``insert`` (the dialect's
    :meth:`~.dialect.PackedInsert.packed_insert`); a held key sends them, unpacked, to the
    ledger's exact path."""
    if not runs:
        return 0
    try:
        with ledger.db.writing("append to the ledger") as conn:
            insert(conn, runs)
    except LedgerIntegrityError:
        width = len(ROW_COLUMNS)
        return ledger.append_stored(
            [r for run in runs for r in unpack(run, width)], ledger.db.codec
        )
    ledger.waker.wake()
    ledger.cleanup_if_due()
    return sum(run.count for run in runs)


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
    ``workers`` 0 starts :func:`auto_workers` worker processes (one per core
    for a large corpus), and this process builds too when it has nothing to
    write.
    """
    refs = list(refs)
    if workers == 0:
        # One worker per core, and this process building while it has nothing to write.
        workers = auto_workers(refs)
        workers += 1 if workers > 1 else 0
    plan = plan_skips(ledger, refs)
    if plan is not None and plan.marks:
        record_skips(ledger, plan)
    tasks = plan.tasks if plan is not None else session_tasks(ledger, refs)
    codec = sync_codec(ledger, refs)  # the rows' stored form (ADR 0058)
    dialect = ledger.db.dialect
    packed = (
        dialect.packed_insert(ledger.db.tables.events, ROW_COLUMNS)
        if isinstance(dialect, PackedInsert)
        else None
    )
    sessions = indexed = held_total = 0
    failures: list[SessionFailure] = []
    pending: list[tuple[Any, ...]] = []  # rows of consecutive sessions, one transaction
    runs: list[PackedRows] = []  # or their packed runs, and how many rows those hold
    in_runs = 0
    build_one = functools.partial(_build, codec=codec, packing=packed is not None)
    builds = _builds(tasks, workers, build_one)
    # Into an empty table, the scoped indexes are made after the rows (ADR 0073).
    with indexes_after_rows(ledger.db, worth_it=bool(refs)), contextlib.closing(builds):
        for task, build in builds:  # closing(): no worker outlives an error
            sessions += 1
            pending += build.rows
            while len(pending) >= BATCH:
                indexed += insert_values(ledger, pending[:BATCH])
                del pending[:BATCH]
            if build.packed:
                assert packed is not None
                runs += build.packed
                in_runs += build.count
                if in_runs >= BATCH:
                    indexed += insert_packed(ledger, packed, runs)
                    runs, in_runs = [], 0
            held_total += build.already_held - task.skipped
            if build.failure is not None:
                failures.append(build.failure)
        indexed += insert_values(ledger, pending)
        if runs:
            assert packed is not None
            indexed += insert_packed(ledger, packed, runs)
    skipped = plan.skipped if plan is not None else 0
    return SyncReport(sessions, indexed, held_total, tuple(failures), skipped)


#: Builds one task's session; a worker gets it when it is forked (nothing is pickled).
Builder = Callable[[SessionTask], SessionBuild]


def _build(
    task: SessionTask, codec: RowCodec | None = None, *, packing: bool = False
) -> SessionBuild:
    if not task.build:
        return SessionBuild([], task.already_held + task.skipped, None)
    built = build_session(task.ref, task.held, task.pruned_through, task.inserted_at, codec)
    if not packing or not built.rows:
        return built
    rows = built.rows
    runs = tuple(pack(rows[start : start + BATCH]) for start in range(0, len(rows), BATCH))
    return SessionBuild([], built.already_held, built.failure, runs)


def _builds(
    tasks: Iterable[SessionTask], workers: int, build: Builder = _build
) -> Generator[tuple[SessionTask, SessionBuild], None, None]:
    """Each session's build, in ``tasks`` order, from ``workers`` building processes.

    With ``workers`` above 1, ``workers - 1`` forked processes build sessions
    ahead, at most :data:`_AHEAD` each, and this process builds the next one
    itself whenever the session due next is not ready: it writes when there is
    something to write and builds when there is not, so neither core waits
    while the other works (ADR 0060).  This process has no other thread: the
    results are read here, when they are due, so nothing takes the GIL from
    the inserts.
    """
    if workers <= 1:
        for task in tasks:
            yield task, build(task)
        return
    pool = [_Worker(build) for _ in range(workers - 1)]
    try:
        # Each slot holds the worker building a session or the build done here, in order.
        slots: deque[tuple[SessionTask, _Worker | SessionBuild]] = deque()
        remaining = iter(tasks)
        built_here = 0
        while True:
            for worker in pool:
                while worker.pending < _AHEAD:
                    sent = next(remaining, None)
                    if sent is None:
                        break
                    worker.submit(sent)
                    slots.append((sent, worker))
            if not slots:
                return
            due, slot = slots[0]
            if isinstance(slot, _Worker) and not slot.ready() and built_here < _AHEAD:
                spare = next(remaining, None)
                if spare is not None:
                    slots.append((spare, build(spare)))
                    built_here += 1
                    continue
            slots.popleft()
            if isinstance(slot, _Worker):
                yield due, slot.result()
            else:
                built_here -= 1
                yield due, slot
    except BaseException:
        for worker in pool:
            worker.kill()
        raise
    finally:
        for worker in pool:
            worker.close()


class _Worker:
    """A forked process that builds the sessions it is sent with ``build`` and sends each back.

    fork: the worker inherits the redaction policy this process installed
    (``--redaction-rules`` included) and starts without importing anything.
    """

    def __init__(self, build: Builder) -> None:
        context = multiprocessing.get_context("fork")
        task_reader, self._tasks = context.Pipe(duplex=False)
        self._results, result_writer = context.Pipe(duplex=False)
        self._process = context.Process(
            target=_serve, args=(build, task_reader, result_writer, os.getpid()), daemon=True
        )
        self._process.start()
        task_reader.close()
        result_writer.close()
        self.pending = 0

    def submit(self, task: SessionTask) -> None:
        """Queue ``task``: builds come back in the order they were submitted."""
        self._tasks.send(task)
        self.pending += 1

    def ready(self) -> bool:
        """Whether the oldest build asked for has (begun to) come back."""
        return self._results.poll()

    def result(self) -> SessionBuild:
        """The oldest build asked for; an error the worker hit is raised here."""
        try:
            ok, value = pickle.loads(self._results.recv_bytes())  # noqa: S301  # our own fork
        except EOFError:
            raise LedgerError(
                f"a sync worker process (pid {self._process.pid}) stopped before it was done",
                hint="run `pentrace ledger sync` again; it resumes where this one stopped",
            ) from None
        self.pending -= 1
        if not ok:
            raise value
        assert isinstance(value, SessionBuild)
        return value

    def kill(self) -> None:
        """Stop the process at once (the run failed)."""
        self._process.kill()

    def close(self) -> None:
        """Tell the process to stop, then wait for it."""
        with contextlib.suppress(OSError):
            self._tasks.send(None)
        self._tasks.close()
        self._results.close()
        self._process.join()


def _serve(build: Builder, tasks: Connection, results: Connection, parent: int) -> None:
    """A worker's loop: build each task it is sent, until told to stop.

    A thread sends the builds, so the next one is built while this process
    waits for the writer to read the last.  ``gc.freeze`` keeps the cycle
    collector off what the worker inherits: it would only copy those pages
    (each object's header is written) for nothing.
    """
    die_with_parent(parent)
    gc.freeze()
    outgoing: queue.Queue[bytes | None] = queue.Queue(maxsize=_AHEAD)
    sender = threading.Thread(target=_send_all, args=(outgoing, results), daemon=True)
    sender.start()
    while True:
        try:
            task = tasks.recv()
        except EOFError:
            break
        if task is None:
            break
        try:
            reply: tuple[bool, object] = (True, build(task))
        except Exception as error:  # noqa: BLE001  # raised again in the writer
            reply = (False, error)
        try:
            blob = pickle.dumps(reply, pickle.HIGHEST_PROTOCOL)
        except Exception as error:  # noqa: BLE001  # one that cannot be pickled: its text
            blob = pickle.dumps((False, RuntimeError(f"{type(error).__name__}: {error}")))
        outgoing.put(blob)
    outgoing.put(None)
    sender.join()


def _send_all(outgoing: queue.Queue[bytes | None], results: Connection) -> None:
    while (blob := outgoing.get()) is not None:
        results.send_bytes(blob)


def die_with_parent(parent: int) -> None:
    """Run first in a forked worker: it stops when its parent (pid ``parent``) dies (Linux),
    instead of working for nobody; also when the parent died between the fork and this call.
    ``ledger sync``'s workers and the cold analytics build's share it."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)
