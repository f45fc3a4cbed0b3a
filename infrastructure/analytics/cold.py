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
  :mod:`~pentrace.infrastructure.analytics.marks`): the runner skips the
  ledger events at or below it, so each record counts once.

A cold build runs only for a read model that has never committed (no
tracking row) while the ledger has never held an event (nothing stored,
nothing pruned): then every ledger event yet to come is either at or below
its session's mark (folded here) or above it (not folded), and the runner
delivers all of them.  A crash (SIGKILL included) leaves nothing committed:
the next ``stats`` builds again.  When a runner commits first (its tracking
row wins the race), the cold build is rolled back and reports None; the
caller catches up from the ledger instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import signal
from collections import deque
from collections.abc import Collection, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pentrace.errors import AnalyticsError
from pentrace.infrastructure.analytics.api import AnalyticsProjection
from pentrace.infrastructure.analytics.database import TRACKING_TABLE
from pentrace.infrastructure.analytics.marks import write_marks
from pentrace.infrastructure.analytics.readmodel import ReadModel
from pentrace.infrastructure.analytics.rebuild import feed, replace_read_model, reset_read_model
from pentrace.infrastructure.analytics.runner import open_ledger, open_projection, pruned_through
from pentrace.infrastructure.analytics.trace_events import SessionFold, fold_session, fold_sessions
from pentrace.infrastructure.ledger.bulk import SessionFailure, auto_workers
from pentrace.infrastructure.storage.layout import SessionRef, iter_sessions
from pentrace.projections.analytics.events import decode_event

__all__ = ["ColdReport", "cold_build"]

# Sessions per worker task: enough to make a hand-over cheap, few enough to keep both busy.
_CHUNK: Final = 8
_PR_SET_PDEATHSIG: Final = 1


@dataclass(frozen=True)
class ColdReport:
    """What a cold build read: sessions folded, events fed, sessions it had to cut short."""

    sessions: int
    events: int
    failures: tuple[SessionFailure, ...] = ()


class _Tracked(Exception):
    """The read model has a tracking row: it is not cold (any more)."""


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


def _die_with_parent() -> None:
    """A worker of a killed build stops too (Linux), instead of folding for nobody."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _folds(refs: list[SessionRef], types: Collection[str], workers: int) -> Iterator[SessionFold]:
    """Each session's fold, in ``refs`` order; in ``workers`` forked processes when above 1."""
    if workers <= 1:
        for ref in refs:
            yield fold_session(ref, types)
        return
    # fork: the workers inherit the redaction policy this process installed.
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_die_with_parent
    ) as pool:
        pending: deque[Future[list[SessionFold]]] = deque()
        for start in range(0, len(refs), _CHUNK):
            pending.append(pool.submit(fold_sessions, refs[start : start + _CHUNK], types))
            if len(pending) > 2 * workers:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()


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
    with threads (the service) that should not fork.
    """
    projection = open_projection(projection_class, data_root, env)
    view = projection.view
    try:
        if view.max_tracking_id(view.name) is not None or not _ledger_never_held(data_root, env):
            return None
        refs = list(iter_sessions(data_root))
        wanted = frozenset(projection.topics)
        count = auto_workers(refs) if workers == 0 else workers

        def build(strict: bool) -> tuple[ColdReport, int]:
            if _tracked(view):
                raise _Tracked
            reset_read_model(projection, tracked=False)
            marks: dict[str, int] = {}
            failures: list[SessionFailure] = []
            fed = 0
            for fold in _folds(refs, wanted, count):
                fed = feed(projection, map(decode_event, fold.envelopes), strict, fed)
                if fold.folded:
                    marks[fold.ref.key.stream_id] = fold.folded
                if fold.failure is not None:
                    failures.append(fold.failure)
            write_marks(view.open_connection(), view.name, marks)
            return ColdReport(len(marks), fed, tuple(failures)), fed

        try:
            return replace_read_model(projection, build, 0)
        except _Tracked:
            return None
        except AnalyticsError:
            if view.max_tracking_id(view.name) is not None:
                return None  # a runner committed first: its position stands, ours is gone
            raise
    finally:
        view.db.close()
