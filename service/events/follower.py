"""One watcher per server of the ledger's head (its newest notification id).

A daemon thread reads the head (one index probe) whenever the ledger's
:class:`~pentrace.infrastructure.ledger.live.follower.HeadFollower` wakes it:
at once when a writer in this process commits, at once on PostgreSQL's
``NOTIFY`` from a writer in any process or, on SQLite, when another process
writes the ledger's file (ADR 0081), and otherwise every ``poll_interval``
seconds.  When the head moves, every SSE stream waiting on
:meth:`LedgerFollower.wait_past` wakes and reads its next page from the
ledger.  The follower holds no events, only the head.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Final

from pentrace.errors import PentraceError
from pentrace.infrastructure.operations.ledger import HeadFollower, RuntimeEventLedger

__all__ = ["LedgerFollower"]

log = logging.getLogger(__name__)
# With NOTIFY doing the waking, polling on PostgreSQL is only a safety net.
_LISTENING_POLL: Final = 1.0


class LedgerFollower:
    """Tracks the ledger head and wakes waiting coroutines when it moves."""

    def __init__(self, ledger: RuntimeEventLedger, poll_interval: float = 0.05) -> None:
        self.ledger = ledger
        # Listening: NOTIFY on PostgreSQL, the ledger file's changes on SQLite (ADR 0081).
        self._heads = HeadFollower(
            ledger, poll_interval=poll_interval, listening_poll=_LISTENING_POLL, listen=True
        )
        self.poll_interval = self._heads.poll_interval
        self.head = 0
        # Counts ledger replacements (the head went down: a new database restarted the ids).
        self.epoch = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._moved = asyncio.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Read the head now and start following (call from the event loop)."""
        self._loop = asyncio.get_running_loop()
        self._moved = asyncio.Event()
        self.head = self._heads.head()
        self._heads.start()
        self._thread = threading.Thread(target=self._poll, name="pentrace-sse-head", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 0.5) -> None:
        """Stop following and join the threads, waiting at most about ``timeout`` seconds
        for each (they are daemons: a head read stuck on a hung database must not hold up
        the server's exit, ADR 0101)."""
        self._heads.stop(timeout)
        if self._thread is not None:
            self._thread.join(timeout)

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
        while not self._heads.stopped:
            try:
                head = self._heads.head()
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
            self._heads.wait()
            self._heads.clear()
