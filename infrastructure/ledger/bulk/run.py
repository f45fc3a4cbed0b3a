"""``ledger sync``: build each session's rows, write them in batches, in session order.

A session's rows are built in one step (:func:`.build.build_session`), and
written in transactions of :data:`BATCH` rows through the ledger's
:meth:`~..store.RuntimeEventLedger.append_bulk` (the backend's bulk insert),
the rows of consecutive sessions together (a session of a few hundred records
would otherwise be a commit of its own).  With ``workers`` above 1, ``workers
- 1`` worker processes build sessions ahead and this process writes them,
building the next one itself whenever the one due next is not ready (ADR
0060): the building (most of the cost) and SQLite's inserts use both cores,
with no third process competing for them.  The rows, ids and bytes are the
same either way, and so is their order within each session.  What the
ledger's count limit would delete at once is not built or inserted
(:mod:`.skips`, ADR 0047).

One record never stops the others (ADR 0102): a record the ledger cannot
take, when its row is built (the redaction check, a value the mapping cannot
take) or when it is written (a held id with other content), is left out and
reported as one finding (file, line, session, position, reason), and the
session's other records are written; its position stays a gap, as on the live
path.  A session whose shards cannot be read keeps the rows built before and is
reported.  Anything else (the database locked or gone, a bug) stops the run.
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
from collections.abc import Callable, Generator, Iterable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Final

from pentrace.domain.session.key import SessionKey
from pentrace.errors import LedgerConflictError, LedgerError
from pentrace.infrastructure.ledger.backend.codec import RowCodec
from pentrace.infrastructure.ledger.backend.dialect import PackedInsert, PackedInserter
from pentrace.infrastructure.ledger.bulk.build import (
    PackedRows,
    SessionBuild,
    SessionFailure,
    SyncReport,
    build_session,
    large_session,
    pack,
    record_findings,
    session_pieces,
    unpack,
)
from pentrace.infrastructure.ledger.bulk.deferred import indexes_after_rows
from pentrace.infrastructure.ledger.bulk.skips import (
    SessionTask,
    plan_skips,
    session_tasks,
    sync_codec,
)
from pentrace.infrastructure.ledger.rows import ROW_COLUMNS
from pentrace.infrastructure.ledger.store import RuntimeEventLedger
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef, iter_sessions

__all__ = [
    "BATCH",
    "auto_workers",
    "build_session",  # looked up here by _build: a test patches it here
    "die_with_parent",
    "insert_packed",
    "insert_values",
    "sync",
    "sync_sessions",
]

# Rows per write transaction: large enough that a commit (and WAL checkpoint) is
# a small share of the cost, small enough that a reader waits little.
BATCH: Final = 1000
_PARALLEL_BYTES: Final = 8 * 1024 * 1024
_MOST_WORKERS: Final = 4
# Sessions each worker process may have built or be building ahead of the writer.
_AHEAD: Final = 3
_PR_SET_PDEATHSIG: Final = 1
_SEQUENCE: Final = ROW_COLUMNS.index("sequence")


def sync(
    ledger: RuntimeEventLedger,
    data_root: DataRoot | Path,
    *,
    project: str | None = None,
    agent: str | None = None,
    workers: int = 1,
) -> SyncReport:
    """Index every trace record the ledger is missing; running it again changes nothing.

    A position the ledger holds, or one at or below what retention already
    pruned from that stream, is not indexed again.  A session that fails is
    reported in ``failures``, keeps what was indexed before the failure, and
    the others go on (see the module docstring).  ``workers`` above 1 builds
    the rows in that many processes, this one (the writer) included, 0 picks
    by the corpus and the cores (:func:`auto_workers`).
    """
    return sync_sessions(ledger, iter_sessions(data_root, project, agent), workers=workers)


def insert_values(ledger: RuntimeEventLedger, rows: list[tuple[Any, ...]]) -> int:
    """Store rows of :func:`.build.build_session` in one transaction; returns how many were new.

    The batch goes in through the backend's bulk insert (SQLite: one
    ``executemany`` of a prepared INSERT; PostgreSQL: one ``unnest`` of an
    array per column), with no per-row work but the driver's.  A unique key
    another writer filled first rolls the batch back and sends it to the
    ledger's exact path, which skips identical copies and refuses different
    content (:meth:`~..store.RuntimeEventLedger.append_bulk`).
    """
    insert = ledger.db.dialect.bulk_insert(ledger.db.tables.events, ROW_COLUMNS)
    return ledger.append_bulk(lambda conn: insert(conn, rows), lambda: rows, len(rows))


def insert_packed(
    ledger: RuntimeEventLedger, insert: PackedInserter, runs: list[PackedRows]
) -> int:
    """:func:`insert_values` for runs of packed rows, written by ``insert`` (the dialect's
    :meth:`~..backend.dialect.PackedInsert.packed_insert`); a held key sends them, unpacked,
    to the ledger's exact path."""
    width = len(ROW_COLUMNS)
    return ledger.append_bulk(
        lambda conn: insert(conn, runs),
        lambda: [row for run in runs for row in unpack(run, width)],
        sum(run.count for run in runs),
    )


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
    sync inserts them, they are left out (:mod:`.skips`).  ``workers`` 0
    starts :func:`auto_workers` worker processes (one per core for a large
    corpus), and this process builds too when it has nothing to write.
    """
    refs = list(refs)
    if workers == 0:
        # One worker per core, and this process building while it has nothing to write.
        workers = auto_workers(refs)
        workers += 1 if workers > 1 else 0
    plan = plan_skips(ledger, refs)
    if plan is not None and plan.marks:
        ledger.skip_rows(plan.marks)
    tasks = plan.tasks if plan is not None else session_tasks(ledger, refs)
    codec = sync_codec(ledger, refs)  # the rows' stored form (ADR 0058)
    dialect = ledger.db.dialect
    packed = (
        dialect.packed_insert(ledger.db.tables.events, ROW_COLUMNS)
        if isinstance(dialect, PackedInsert)
        else None
    )
    writer = _Writer(ledger, packed)
    sessions = held_total = 0
    failures: list[SessionFailure] = []
    build_one = functools.partial(_build, codec=codec, packing=packed is not None)
    stream_one = functools.partial(_pieces, codec=codec, packing=packed is not None)
    builds = _builds(tasks, workers, build_one, stream_one)
    # Into an empty table, the scoped indexes are made after the rows (ADR 0073).
    with indexes_after_rows(ledger.db, worth_it=bool(refs)), contextlib.closing(builds):
        for task, build in builds:  # closing(): no worker outlives an error
            writer.add(task.ref, build)
            held_total += build.already_held
            failures += build.failures
            if build.final:
                sessions += 1
                held_total -= task.skipped
        writer.finish()
    failures += writer.refused
    skipped = plan.skipped if plan is not None else 0
    return SyncReport(sessions, writer.indexed, held_total, tuple(failures), skipped)


class _Writer:
    """The builds' rows in transactions of about :data:`BATCH`, consecutive sessions together;
    a row the ledger refuses is left out and reported (``refused``), the others are written."""

    def __init__(self, ledger: RuntimeEventLedger, packed: PackedInserter | None) -> None:
        self.ledger = ledger
        self.packed = packed
        self.indexed = 0
        self.refused: list[SessionFailure] = []
        self._rows: deque[tuple[SessionRef, list[tuple[Any, ...]]]] = deque()
        self._row_count = 0
        self._runs: list[tuple[SessionRef, PackedRows]] = []
        self._run_count = 0

    def add(self, ref: SessionRef, build: SessionBuild) -> None:
        """Take a session's build; write whatever makes a whole batch."""
        if build.rows:
            self._rows.append((ref, build.rows))
            self._row_count += len(build.rows)
            while self._row_count >= BATCH:
                self._write_rows(BATCH)
        if build.packed:
            assert self.packed is not None
            self._runs += [(ref, run) for run in build.packed]
            self._run_count += build.count
            if self._run_count >= BATCH:
                self._write_runs()

    def finish(self) -> None:
        """Write what is left."""
        if self._row_count:
            self._write_rows(self._row_count)
        if self._runs:
            self._write_runs()

    def _write_rows(self, count: int) -> None:
        taken: list[tuple[SessionRef, list[tuple[Any, ...]]]] = []
        while count:
            ref, rows = self._rows.popleft()
            if len(rows) > count:
                self._rows.appendleft((ref, rows[count:]))
                rows = rows[:count]
            taken.append((ref, rows))
            count -= len(rows)
            self._row_count -= len(rows)
        self._write(
            taken, lambda part: insert_values(self.ledger, [r for _, rows in part for r in rows])
        )

    def _write_runs(self) -> None:
        taken, self._runs, self._run_count = self._runs, [], 0
        packed = self.packed
        assert packed is not None
        self._write(taken, lambda part: insert_packed(self.ledger, packed, [r for _, r in part]))

    def _write(self, taken: list[tuple[SessionRef, Any]], write: Callable[[Any], int]) -> None:
        """Write ``taken`` in one transaction; when the ledger refuses it, each session's part
        in one of its own, and a part it refuses row by row, so that only the rows it refuses
        are left out (each one finding)."""
        try:
            self.indexed += write(taken)
            return
        except LedgerConflictError:
            pass  # rolled back: find the rows the ledger disagrees with
        by_session: dict[SessionKey, list[tuple[SessionRef, Any]]] = {}
        for ref, part in taken:
            by_session.setdefault(ref.key, []).append((ref, part))
        for parts in by_session.values():
            try:
                self.indexed += write(parts)
            except LedgerConflictError:
                self._write_each(parts)

    def _write_each(self, parts: list[tuple[SessionRef, Any]]) -> None:
        """One session's rows (plain or packed runs), each in a transaction of its own."""
        ref = parts[0][0]
        width = len(ROW_COLUMNS)
        rows = [
            row
            for _, part in parts
            for row in (unpack(part, width) if isinstance(part, PackedRows) else part)
        ]
        refused: list[tuple[int, BaseException]] = []
        for row in rows:
            try:
                self.indexed += insert_values(self.ledger, [row])
            except LedgerConflictError as error:
                refused.append((row[_SEQUENCE], error))
        self.refused += record_findings(ref, refused)


#: Builds one task's session; a worker gets it when it is forked (nothing is pickled).
Builder = Callable[[SessionTask], SessionBuild]
#: Builds one task's session in pieces of bounded size, in this process.
Streamer = Callable[[SessionTask], Iterator[SessionBuild]]
# Rows a piece of a large session holds (a session larger than STREAM_BYTES is built in
# pieces by the writer itself: its rows are never all in memory, nor sent between processes).
_PIECE: Final = 8 * BATCH


def _build(
    task: SessionTask, codec: RowCodec | None = None, *, packing: bool = False
) -> SessionBuild:
    if not task.build:
        return SessionBuild([], task.already_held + task.skipped)
    built = build_session(task.ref, task.held, task.pruned_through, task.inserted_at, codec)
    return _packed(built) if packing else built


def _pieces(
    task: SessionTask, codec: RowCodec | None = None, *, packing: bool = False
) -> Iterator[SessionBuild]:
    """:func:`_build` of a large session, in pieces of :data:`_PIECE` rows."""
    if not task.build:
        yield SessionBuild([], task.already_held + task.skipped)
        return
    pieces = session_pieces(
        task.ref, task.held, task.pruned_through, task.inserted_at, codec, _PIECE
    )
    for built in pieces:
        yield _packed(built) if packing else built


def _packed(built: SessionBuild) -> SessionBuild:
    rows = built.rows
    if not rows:
        return built
    runs = tuple(pack(rows[start : start + BATCH]) for start in range(0, len(rows), BATCH))
    return SessionBuild([], built.already_held, built.failures, runs, built.final)


def _local(task: SessionTask, build: Builder, stream: Streamer) -> Iterator[SessionBuild]:
    """A session built in this process: whole, or in pieces when it is large."""
    if task.build and large_session(task.ref):
        return stream(task)
    return iter((build(task),))


def _builds(
    tasks: Iterable[SessionTask],
    workers: int,
    build: Builder = _build,
    stream: Streamer = _pieces,
) -> Generator[tuple[SessionTask, SessionBuild], None, None]:
    """Each session's build, in ``tasks`` order, from ``workers`` building processes; a large
    session (:func:`~.build.large_session`) in pieces built here, whatever ``workers``.

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
            for built in _local(task, build, stream):
                yield task, built
        return
    pool = [_Worker(build) for _ in range(workers - 1)]
    try:
        # Each slot holds the worker building a session, the build done here, or None: a
        # large session, built here in pieces when it is due.
        slots: deque[tuple[SessionTask, _Worker | SessionBuild | None]] = deque()
        remaining = iter(tasks)
        built_here = 0
        while True:
            for worker in pool:
                while worker.pending < _AHEAD:
                    sent = next(remaining, None)
                    if sent is None:
                        break
                    if sent.build and large_session(sent.ref):
                        slots.append((sent, None))
                        continue
                    worker.submit(sent)
                    slots.append((sent, worker))
            if not slots:
                return
            due, slot = slots[0]
            if isinstance(slot, _Worker) and not slot.ready() and built_here < _AHEAD:
                spare = next(remaining, None)
                if spare is not None:
                    large = spare.build and large_session(spare.ref)
                    slots.append((spare, None if large else build(spare)))
                    built_here += 0 if large else 1
                    continue
            slots.popleft()
            if slot is None:
                for built in stream(due):
                    yield due, built
            elif isinstance(slot, _Worker):
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
