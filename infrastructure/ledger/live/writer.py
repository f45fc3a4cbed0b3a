"""The live path's ledger writer: a background thread, so a trace save never waits on the ledger.

A save hands its batch of rows to :meth:`LiveWriter.submit`, which queues it
without blocking and returns: the save never waits on the ledger.  A reader
that needs the rows of its own saves calls :meth:`LiveWriter.flush` (or
``Recording.flush``).  A writer may instead let each save wait for its commit,
``wait_seconds`` at most (keep it within 50 ms): a healthy ledger commits
well within that, a slow, locked or hung one holds the save no longer, and
once a wait has run out later saves do not wait at all until the writer has
caught up.  The writer commits what has queued up in one transaction (up to
64 saves).  Batches are dropped (and counted) when

* the queue is full (``capacity`` batches): one log line per run of drops;
* the :class:`CircuitBreaker` is open after failures in a row: one line when
  it opens, one when writes work again.

``pentrace ledger sync`` indexes whatever was dropped, from the traces.  The
thread is a daemon that ends after ``idle_seconds`` without work (the next
save starts another); an ``atexit`` hook gives queued batches a bounded time
to commit, so a process never hangs at exit on a dead ledger.

The circuit breaker: after ``threshold`` failures in a row it opens, and
writes are skipped (dropped, for ``pentrace ledger sync`` to fill in) for
``base_seconds``.  Then one trial write is let through (the others stay
paused while it runs); when it fails the pause doubles, up to
``max_seconds``; when it succeeds the breaker closes.  Opening and closing
each return True once, so the writer logs one line per outage, not one per
write.  The clock is injected: tests step it by hand.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pentrace.errors import LedgerConflictError, PentraceError
from pentrace.infrastructure.ledger.store import RuntimeEventLedger

__all__ = ["CircuitBreaker", "LiveBatch", "LiveWriter"]

log = logging.getLogger("pentrace.infrastructure.ledger.live.hook")
_GROUP: Final = 64  # batches one transaction may take from the queue at once
_EXIT_SECONDS: Final = 2.0
_writers: weakref.WeakSet[LiveWriter] = weakref.WeakSet()


class CircuitBreaker:
    """Consecutive-failure breaker with capped exponential back-off (thread-safe)."""

    def __init__(
        self,
        *,
        threshold: int = 3,
        base_seconds: float = 1.0,
        max_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = threshold
        self.base_seconds = base_seconds
        self.max_seconds = max_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._pause = 0.0
        self._until: float | None = None
        self.skipped = 0

    @property
    def is_open(self) -> bool:
        """Whether writes are being skipped (or the next one is the trial)."""
        with self._lock:
            return self._until is not None

    @property
    def pause_seconds(self) -> float:
        """The current pause (0 while closed)."""
        with self._lock:
            return self._pause if self._until is not None else 0.0

    def paused(self) -> bool:
        """Whether writes are paused now (it does not start a trial); True counts the
        write as skipped."""
        with self._lock:
            if self._until is None or self._clock() >= self._until:
                return False
            self.skipped += 1
            return True

    def allow(self) -> bool:
        """Whether to try a write now: always while closed; after a pause, once (the trial,
        until :meth:`succeeded` or :meth:`failed`).  False counts the write as skipped."""
        with self._lock:
            if self._until is None:
                return True
            now = self._clock()
            if now >= self._until:
                self._until = now + self._pause  # the others wait for the trial's outcome
                return True
            self.skipped += 1
            return False

    def succeeded(self) -> bool:
        """Record a write that worked; True when this closed the breaker."""
        with self._lock:
            was_open = self._until is not None
            self._failures = 0
            self._pause = 0.0
            self._until = None
            return was_open

    def failed(self) -> bool:
        """Record a write that failed; True when this opened the breaker."""
        with self._lock:
            self._failures += 1
            if self._until is not None:  # the trial after a pause failed: pause longer
                self._pause = min(self._pause * 2, self.max_seconds)
                self._until = self._clock() + self._pause
                return False
            if self._failures < self.threshold:
                return False
            self._pause = min(self.base_seconds, self.max_seconds)
            self._until = self._clock() + self._pause
            return True


@dataclass(slots=True, eq=False)
class LiveBatch:
    """The ledger rows of one save (positions ``first``..``last`` of a session), made by
    :func:`~.rows.envelope_row` in the saving thread; ``done`` is set once they are handled."""

    session_id: str
    first: int
    last: int
    rows: Sequence[dict[str, Any]]
    done: threading.Event = field(default_factory=threading.Event)


class LiveWriter:
    """Writes live batches into one ledger from a background thread."""

    def __init__(
        self,
        ledger: RuntimeEventLedger,
        *,
        wait_seconds: float = 0.0,
        capacity: int = 1024,
        breaker: CircuitBreaker | None = None,
        idle_seconds: float = 10.0,
    ) -> None:
        self.ledger = ledger
        self.wait_seconds = wait_seconds
        # A writer nobody closes costs no thread once it has been idle this long.
        self.idle_seconds = idle_seconds
        self.breaker = breaker if breaker is not None else CircuitBreaker()
        self.written = 0  # events committed
        self.dropped = 0  # events not written (queue full, breaker open, write failed)
        self._queue: queue.Queue[LiveBatch | None] = queue.Queue(capacity)
        self._idle = threading.Condition()
        self._counts = threading.Lock()
        self._pending = 0
        self._lagging = False
        self._full = False
        self._dropped_in_outage = 0
        self._thread: threading.Thread | None = None
        self._closed = False
        _writers.add(self)

    def submit(self, batch: LiveBatch) -> None:
        """Queue a batch; wait for its commit at most ``wait_seconds`` (never raises)."""
        if self._closed or self.breaker.paused():
            self._drop(len(batch.rows))
            return
        with self._idle:
            try:
                self._queue.put_nowait(batch)
            except queue.Full:
                if not self._full:
                    log.warning(
                        "live ledger queue full (%d saves waiting): dropping ledger writes "
                        "until it drains; run `pentrace ledger sync` to fill the gap",
                        self._queue.maxsize,
                    )
                self._full = True
                self._drop(len(batch.rows))
                return
            self._full = False
            self._pending += 1
            self._start()
        if self._lagging or self.wait_seconds <= 0:
            return
        if not batch.done.wait(self.wait_seconds):
            with self._idle:
                # Unless the writer finished it meanwhile (and found the queue empty).
                self._lagging = not batch.done.is_set()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued batch is written or dropped; False when ``timeout`` ran out."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self, timeout: float = 5.0) -> bool:
        """Flush for at most ``timeout`` seconds, then stop the thread; True when nothing
        was left behind.  Later submissions are dropped."""
        flushed = self.flush(timeout)
        self._closed = True
        thread = self._thread
        if thread is not None:
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                pass  # a daemon thread stuck on a hung ledger: abandoned, never joined
            else:
                thread.join(timeout if flushed else 0)
        return flushed

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="pentrace-live-ledger", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        stopping = False
        while not stopping:
            try:
                first = self._queue.get(timeout=self.idle_seconds)
            except queue.Empty:
                with self._idle:  # submit() queues and starts a thread under this lock
                    if self._queue.empty():
                        self._thread = None  # idle: end; the next submit starts another
                        return
                continue
            if first is None:
                return
            group = [first]
            while len(group) < _GROUP:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stopping = True  # after this group
                    break
                group.append(more)
            try:
                self._write(group)
            except Exception as error:  # noqa: BLE001  # a dead writer would stall every save
                log.error("live ledger writer failed unexpectedly: %s", type(error).__name__)
                self._drop(sum(len(batch.rows) for batch in group))
            for batch in group:
                batch.done.set()
            with self._idle:
                self._pending -= len(group)
                if self._queue.empty():
                    self._lagging = False
                self._idle.notify_all()

    def _write(self, group: list[LiveBatch]) -> None:
        count = sum(len(batch.rows) for batch in group)
        if not self.breaker.allow():
            self._drop(count)
            return
        try:
            self.ledger.append_rows([row for batch in group for row in batch.rows])
        except LedgerConflictError as error:
            if len(group) == 1:
                self._failed(group, error, available=True)
                return
            for batch in group:  # find the batch the ledger disagrees with; keep the rest
                self._write([batch])
            return
        except PentraceError as error:
            self._failed(group, error, available=False)
            return
        with self._counts:
            self.written += count
            missed, self._dropped_in_outage = self._dropped_in_outage, 0
        if self.breaker.succeeded():
            log.warning(
                "ledger writes resumed; %d live event(s) were dropped while it was "
                "unavailable: run `pentrace ledger sync` to index them",
                missed,
            )

    def _failed(self, group: list[LiveBatch], error: PentraceError, *, available: bool) -> None:
        self._drop(sum(len(batch.rows) for batch in group))
        first = group[0]
        more = f" and {len(group) - 1} more save(s)" if len(group) > 1 else ""
        if not self.breaker.is_open:
            log.warning(
                "ledger write failed for session %s positions %d-%d%s (%s): %s",
                first.session_id,
                first.first,
                first.last,
                more,
                type(error).__name__,
                error.message,
            )
        if available:  # the ledger answered (a conflict): not an outage
            return
        if self.breaker.failed():
            log.warning(
                "ledger unavailable after %d failed writes in a row: live ledger writes "
                "paused for %g s, then retried (pauses double up to %g s); "
                "`pentrace ledger sync` fills the gap",
                self.breaker.threshold,
                self.breaker.pause_seconds,
                self.breaker.max_seconds,
            )

    def _drop(self, count: int) -> None:
        with self._counts:
            self.dropped += count
            self._dropped_in_outage += count


def _flush_at_exit() -> None:
    """Give queued live batches a bounded time, in all, to commit before the process exits."""
    deadline = time.monotonic() + _EXIT_SECONDS
    for writer in list(_writers):
        writer.close(max(0.0, deadline - time.monotonic()))


atexit.register(_flush_at_exit)
