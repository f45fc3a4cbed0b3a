"""One watcher per server of the ledger's head (its newest notification id).

A daemon thread reads ``max(notification_id)`` (one index probe) every
``poll_interval`` seconds, and at once when a writer in this process commits
(the ledger's waker) or, on PostgreSQL, when a ``NOTIFY`` arrives from a
writer in any process.  When the head moves, every SSE stream waiting on
:meth:`LedgerFollower.wait_past` wakes and reads its next page from the
ledger.  The follower holds no events, only the head.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Final

import psycopg

from pentrace.errors import PentraceError
from pentrace.infrastructure.ledger import RuntimeEventLedger
from pentrace.infrastructure.ledger.backend.connections import listen_connection, run_guarded
from pentrace.service.events.ledger_tail import ledger_head

__all__ = ["LedgerFollower"]

log = logging.getLogger(__name__)
# With NOTIFY doing the waking, polling on PostgreSQL is only a safety net.
_POSTGRES_POLL: Final = 1.0


class LedgerFollower:
    """Tracks the ledger head and wakes waiting coroutines when it moves."""

    def __init__(self, ledger: RuntimeEventLedger, poll_interval: float = 0.05) -> None:
        self.ledger = ledger
        self.poll_interval = poll_interval if ledger.db.is_sqlite else _POSTGRES_POLL
        self.head = 0
        # Counts ledger replacements (the head went down: a new database restarted the ids).
        self.epoch = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._moved = asyncio.Event()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Read the head now and start following (call from the event loop)."""
        self._loop = asyncio.get_running_loop()
        self._moved = asyncio.Event()
        self.head = ledger_head(self.ledger)
        self.ledger.waker.register(self._wake)
        self._threads = [threading.Thread(target=self._poll, name="pentrace-sse-head", daemon=True)]
        if not self.ledger.db.is_sqlite:
            self._threads.append(
                threading.Thread(target=self._listen, name="pentrace-sse-listen", daemon=True)
            )
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Stop following and join the threads."""
        self._stopped.set()
        self._wake.set()
        self.ledger.waker.unregister(self._wake)
        for thread in self._threads:
            thread.join(timeout=5)

    async def wait_past(self, position: int, epoch: int) -> None:
        """Return once the head is beyond ``position``, or the ledger was replaced since
        ``epoch``; idle streams cost no query."""
        while self.head <= position and self.epoch == epoch:
            await self._moved.wait()

    def _advance(self, head: int) -> None:
        """On the loop: publish the new head and wake every waiter once."""
        if head == self.head:
            return
        if head < self.head:
            self.epoch += 1
        self.head = head
        moved, self._moved = self._moved, asyncio.Event()
        moved.set()

    def _poll(self) -> None:
        last = self.head
        while not self._stopped.is_set():
            try:
                head = ledger_head(self.ledger)
            except PentraceError as error:
                # A locked or unreachable ledger: streams keep their position and retry.
                log.warning("reading the ledger head failed: %s", error.message)
                head = last
            except Exception as error:  # noqa: BLE001  # a dead follower would stall every stream
                log.error("reading the ledger head failed unexpectedly: %s", type(error).__name__)
                head = last
            if head != last and self._loop is not None:
                last = head
                self._loop.call_soon_threadsafe(self._advance, head)
            self._wake.wait(self.poll_interval)
            self._wake.clear()

    def _listen(self) -> None:
        """PostgreSQL: turn NOTIFY into an immediate poll; polling covers any failure."""
        db = self.ledger.db
        while not self._stopped.is_set():
            try:
                with listen_connection(db.url, db.timeouts) as conn:
                    run_guarded(conn, f'LISTEN "{self.ledger.notify_channel}"', db.timeouts)
                    while not self._stopped.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            self._wake.set()
            except psycopg.Error as error:
                log.warning("LISTEN on the ledger failed (%s); polling only", type(error).__name__)
                self._stopped.wait(self.poll_interval)
