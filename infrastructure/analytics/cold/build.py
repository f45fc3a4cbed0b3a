"""Cold analytics: build a read model straight from the traces, without the ledger (ADR 0050).

On a data root with no derived stores, ``pentrace stats`` would first have to
index every record into the ledger and then read it back.  A cold build
skips both: worker processes read each session's trace and map its records
of the projection's types to the very envelopes ``ledger sync`` would store
(:func:`~pentrace.infrastructure.analytics.trace_events.fold_session`), and
this process feeds them to the projection's handlers, session by session, in
one transaction that also writes:

* the tracking position ``0``: the runner will read the whole ledger once it
  exists;
* per session, the highest trace position folded (its *trace mark*,
  :mod:`~pentrace.infrastructure.analytics.readmodel`): the runner skips the
  ledger events at or below it, so each record counts once.

A projection that declares a bulk fold (:mod:`~pentrace.infrastructure.analytics.cold.bulkfold`,
ADR 0062) is folded in memory by the workers instead and its rows written
once; when the fold raises, or the database refuses its rows, the handlers
build it as above.

A cold build runs only for a read model that has never committed (no
tracking row) while the ledger has never held an event (nothing stored,
nothing pruned): then every ledger event yet to come is either at or below
its session's mark (folded here) or above it (not folded), and the runner
delivers all of them.  For a bulk fold the ledger is read once its workers
have their first sessions, so that they fold while it opens; when it has
held events, what they folded is dropped and nothing is written.  A crash
(SIGKILL included) leaves nothing committed: the next ``stats`` builds
again.  When a runner commits first (its tracking row wins the race), the
cold build is rolled back and reports None; the caller catches up from the
ledger instead.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Final, NamedTuple, TypeVar

from pentrace.errors import AnalyticsError
from pentrace.infrastructure.analytics.api import AnalyticsProjection
from pentrace.infrastructure.analytics.cold.bulkfold import BulkFold, bulk_fold_of, fold_in_bulk
from pentrace.infrastructure.analytics.database import TRACKING_TABLE, analytics_owner
from pentrace.infrastructure.analytics.readmodel import ReadModel, write_marks
from pentrace.infrastructure.analytics.rebuild import (
    feed,
    replace_read_model,
    reset_read_model,
    trace_envelopes,
)
from pentrace.infrastructure.analytics.runner import open_ledger, open_projection, pruned_through
from pentrace.infrastructure.ledger.bulk import (
    SESSION_ERRORS,
    SessionFailure,
    auto_workers,
    die_with_parent,
)
from pentrace.infrastructure.ledger.bulk.build import STREAM_BYTES, large_session, record_findings
from pentrace.infrastructure.storage.layout import SessionRef, iter_sessions
from pentrace.projections.analytics.events import decode_event

__all__ = [
    "STREAM_BYTES",
    "ColdReport",
    "SessionFold",
    "SessionStream",
    "cold_build",
    "fold_session",
    "fold_sessions",
]

# Sessions per worker task: enough to make a hand-over cheap, few enough to keep both busy.
_CHUNK: Final = 8
T = TypeVar("T")


@dataclass(frozen=True)
class ColdReport:
    """What a cold build read: sessions folded, events fed, its findings (records left out,
    sessions cut short where their traces failed), and
    whether the projection's bulk fold built it (ADR 0062) rather than its handlers."""

    sessions: int
    events: int
    failures: tuple[SessionFailure, ...] = ()
    bulk: bool = False


class _NotCold(Exception):
    """The read model has a tracking row, or the ledger has held events: it is not cold."""


def _tracked(view: ReadModel) -> bool:
    """Whether a tracking row exists, read in the open write transaction (SQLite: locked)."""
    sql = f"SELECT 1 FROM {TRACKING_TABLE} WHERE application_name = :n"
    return view.transaction().execute(sql, {"n": view.name}).first() is not None


def _ledger_never_held(data_root: Path, env: Mapping[str, str] | None) -> bool:
    ledger = open_ledger(data_root, env)
    try:
        return ledger.head() == 0 and pruned_through(ledger) == 0
    finally:
        ledger.close()


def _tasks(
    refs: list[SessionRef],
    task: Callable[[list[SessionRef]], T],
    workers: int,
    first: Callable[[], None] | None = None,
) -> Iterator[T]:
    """``task`` of each chunk of ``refs``, in order; in ``workers`` forked processes above 1.

    ``first`` (if any) runs in this process before the first result is taken:
    once the workers have their first chunks, so that they fold meanwhile.
    """
    chunks = [refs[start : start + _CHUNK] for start in range(0, len(refs), _CHUNK)]
    if workers <= 1:
        if first is not None:
            first()
        yield from map(task, chunks)
        return
    # fork: the workers inherit the redaction policy this process installed.
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=die_with_parent,
        initargs=(os.getpid(),),
    ) as pool:
        pending: deque[Future[T]] = deque()
        for chunk in chunks:
            pending.append(pool.submit(task, chunk))
            if first is not None and len(pending) == workers:
                first()
                first = None
            if len(pending) > 2 * workers:
                yield pending.popleft().result()
        if first is not None:
            first()
        while pending:
            yield pending.popleft().result()


def _folds(
    refs: list[SessionRef], types: Collection[str], workers: int
) -> Iterator[SessionFold | SessionStream]:
    """Each session's fold (its envelopes), in ``refs`` order: streamed in this process, or
    folded by a worker (a session too large to hold is streamed here instead)."""
    if workers <= 1:
        for ref in refs:
            yield SessionStream(ref, types)
        return
    chunks = _tasks(refs, partial(fold_sessions, types=types), workers)
    for folds in chunks:
        for fold in folds:
            yield fold if isinstance(fold, SessionFold) else SessionStream(fold, types)


def _bulk(
    fold_class: type[BulkFold],
    refs: list[SessionRef],
    types: Collection[str],
    workers: int,
    first: Callable[[], None],
) -> tuple[BulkFold, int, dict[str, int], list[SessionFailure]] | None:
    """The merged bulk fold of every session, the records it folded, the trace marks and the
    findings; None when the fold failed on a record (the handlers then decide).
    ``first`` runs once the workers have their first sessions (what it raises, this raises)."""
    merged = fold_class()
    fed = 0
    marks: dict[str, int] = {}
    failures: list[SessionFailure] = []
    task_of = partial(fold_in_bulk, fold_class, types=types)
    try:
        for task in _tasks(refs, task_of, workers, first):
            for ref, events, folded, found in task.sessions:
                fed += events
                if folded:
                    marks[ref.key.stream_id] = folded
                failures += found
            merged.merge(task.partial)
    except _NotCold:
        raise
    except Exception:  # noqa: BLE001 - the per-event path isolates a handler's failure (ADR 0032)
        return None
    return merged, fed, marks, failures


def cold_build(
    projection_class: type[AnalyticsProjection],
    *,
    data_root: Path,
    env: Mapping[str, str] | None = None,
    workers: int = 1,
) -> ColdReport | None:
    """Build the read model from the traces when it is cold (module docstring), else None.

    ``workers`` 0 picks one per core for a large corpus (as ``ledger sync``
    does); the library default builds in this process, which suits a process
    with threads (the service) that should not fork.  Builds run one at a time per
    data root (:func:`~pentrace.infrastructure.analytics.database.analytics_owner`).
    """
    with analytics_owner(data_root):
        return _cold_build(projection_class, data_root, env, workers)


def _cold_build(
    projection_class: type[AnalyticsProjection],
    data_root: Path,
    env: Mapping[str, str] | None,
    workers: int,
) -> ColdReport | None:
    projection = open_projection(projection_class, data_root, env)
    view = projection.view
    try:
        if view.max_tracking_id(view.name) is not None:
            return None
        refs = list(iter_sessions(data_root))
        wanted = frozenset(projection.topics)
        count = auto_workers(refs) if workers == 0 else workers
        bulk = bulk_fold_of(projection_class)
        # A bulk fold's workers start on the traces while this process reads the ledger's state
        # (opening a ledger takes a while): what they fold is dropped if the ledger held events.
        checked = bulk is None
        if checked and not _ledger_never_held(data_root, env):
            return None

        def check_ledger() -> None:
            nonlocal checked
            if not checked:
                if not _ledger_never_held(data_root, env):
                    raise _NotCold
                checked = True

        def build(strict: bool) -> tuple[ColdReport, int]:
            if _tracked(view):
                raise _NotCold
            tx = reset_read_model(projection, tracked=False)
            marks: dict[str, int] = {}
            failures: list[SessionFailure] = []
            fed = 0
            merged = None
            if bulk is not None and not strict:
                merged = _bulk(bulk, refs, wanted, count, check_ledger)
            check_ledger()  # before anything commits (the strict pass, the handlers' path)
            if merged is not None:
                fold_all, fed, marks, failures = merged
                fold_all.write(tx)
            else:
                # Also the strict pass of a bulk fold whose merged write the database refused:
                # which event's values it refused, the per-event path tells.
                for fold in _folds(refs, wanted, count):
                    fed = feed(projection, map(decode_event, fold.envelopes), strict, fed)
                    if fold.folded:
                        marks[fold.ref.key.stream_id] = fold.folded
                    failures += fold.failures
            write_marks(view.open_connection(), view.name, marks)
            return ColdReport(len(marks), fed, tuple(failures), merged is not None), fed

        try:
            return replace_read_model(projection, build, 0)
        except _NotCold:
            return None
        except AnalyticsError:
            if view.max_tracking_id(view.name) is not None:
                return None  # a runner committed first: its position stands, ours is gone
            raise
    finally:
        view.db.close()


class SessionFold(NamedTuple):
    """A session's envelopes of the wanted types, how many records were read, and its findings.

    ``folded`` is the highest trace position the envelopes cover (its trace
    mark); after a failure it is the last position read before it.
    """

    ref: SessionRef
    envelopes: list[bytes]
    folded: int
    failures: tuple[SessionFailure, ...]


def fold_session(ref: SessionRef, types: Collection[str]) -> SessionFold:
    """Every record of ``ref`` as :func:`session_events` maps it, as bytes (a worker's task).

    A record the ledger cannot take is left out and is one finding, as ``ledger
    sync`` leaves it out (ADR 0102); a session whose trace cannot be read keeps
    the envelopes before the failure, as ``ledger sync`` keeps the rows before it.
    """
    envelopes: list[bytes] = []
    folded = 0
    refused: list[tuple[int, BaseException]] = []
    cut: tuple[SessionFailure, ...] = ()
    try:
        for position, data in trace_envelopes(ref, None, types, refused):
            if data is not None:
                envelopes.append(data)
            folded = position
    except SESSION_ERRORS as error:
        cut = (SessionFailure.of(ref, error),)
    return SessionFold(ref, envelopes, folded, (*record_findings(ref, refused), *cut))


def fold_sessions(refs: list[SessionRef], types: Collection[str]) -> list[SessionFold | SessionRef]:
    """:func:`fold_session` of each session (one worker task holds a few); a session whose
    shards exceed :data:`STREAM_BYTES` comes back as its ref, for the parent to stream, so
    that no process holds a large session's envelopes at once (issue #32)."""
    # A worker lives for one build and makes no cycles: collecting only slows it.
    gc.disable()
    return [ref if large_session(ref) else fold_session(ref, types) for ref in refs]


class SessionStream:
    """One session's envelopes read as they are fed (memory bounded by one record, whatever the
    session's length): ``folded`` and ``failures`` are :class:`SessionFold`'s once it is read."""

    def __init__(self, ref: SessionRef, types: Collection[str]) -> None:
        self.ref = ref
        self.folded = 0
        self.failures: tuple[SessionFailure, ...] = ()
        self._types = types

    @property
    def envelopes(self) -> Iterator[bytes]:
        """The envelopes in trace order, a record the ledger cannot take left out (a finding);
        a failure of the session's own ends them (kept)."""
        refused: list[tuple[int, BaseException]] = []
        cut: tuple[SessionFailure, ...] = ()
        try:
            for position, data in trace_envelopes(self.ref, None, self._types, refused):
                if data is not None:
                    yield data
                self.folded = position
        except SESSION_ERRORS as error:
            cut = (SessionFailure.of(self.ref, error),)
        self.failures = (*record_findings(self.ref, refused), *cut)
