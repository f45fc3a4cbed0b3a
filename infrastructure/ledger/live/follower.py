"""The one follower of the ledger's head: poll on SQLite, LISTEN/NOTIFY on PostgreSQL.

A :class:`HeadFollower` is woken when the ledger may have moved:

* at once when a writer in this process commits, through any ledger object
  on the same database (the shared :class:`~.subscription.Waker`);
* at once when another process commits, on a backend that announces commits
  (a listener thread runs the dialect's ``listen``: PostgreSQL ``NOTIFY``);
* otherwise after ``poll_interval`` seconds, so a lost notification, or a
  backend without any (SQLite), costs one poll of latency, never an event.

It holds no events; its users read what they need after a wake-up: the
subscription a page of notifications, the SSE service the head, ``ledger
tail -f`` the rows after its cursor, the analytics runner (through the
subscription) its projection's topics.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pentrace.infrastructure.ledger.recorder import LedgerRecorder

__all__ = ["HeadFollower"]

log = logging.getLogger(__name__)
# A listener that failed waits this long (at least) before it connects again.
_RETRY_SECONDS: Final = 1.0


class HeadFollower:
    """Wake-ups for one reader of a ledger; ``start()`` it, ``stop()`` it (or use ``with``).

    ``poll_interval`` is the wait on a backend without notifications,
    ``listening_poll`` the safety-net wait on one with them; both default to
    the dialect's (:attr:`LedgerRecorder.poll_interval`).
    """

    def __init__(
        self,
        recorder: LedgerRecorder,
        *,
        poll_interval: float | None = None,
        listening_poll: float | None = None,
    ) -> None:
        self.recorder = recorder
        self.notifies = recorder.db.dialect.notifies
        chosen = listening_poll if self.notifies else poll_interval
        self.poll_interval = chosen if chosen is not None else recorder.poll_interval
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._listener: threading.Thread | None = None

    def start(self) -> HeadFollower:
        """Start taking wake-ups (in-process commits, and NOTIFY where the backend has it)."""
        self.recorder.waker.register(self._wake)
        if self.notifies:
            self._listener = threading.Thread(
                target=self._listen, name="pentrace-ledger-listen", daemon=True
            )
            self._listener.start()
        return self

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop: a blocked :meth:`wait` returns at once; the listener is joined."""
        self._stopped.set()
        self._wake.set()
        self.recorder.waker.unregister(self._wake)
        if self._listener is not None and self._listener is not threading.current_thread():
            self._listener.join(timeout)

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopped.is_set()

    def head(self) -> int:
        """The newest notification id now (0 for an empty ledger)."""
        return self.recorder.head()

    def clear(self) -> None:
        """Forget past wake-ups: call before reading, so a commit during the read wakes
        the next :meth:`wait`."""
        self._wake.clear()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until woken or ``timeout`` (default the poll interval); True when woken."""
        return self._wake.wait(self.poll_interval if timeout is None else timeout)

    def wait_past(self, position: int) -> int | None:
        """Block until the head is beyond ``position`` and return it (None once stopped)."""
        while not self.stopped:
            self.clear()
            head = self.head()
            if head > position:
                return head
            self.wait()
        return None

    def _listen(self) -> None:
        """Turn announced commits into wake-ups; on failure poll only, and try again."""
        db = self.recorder.db
        channel = self.recorder.notify_channel
        while not self._stopped.is_set():
            try:
                db.dialect.listen(db, channel, self._wake, self._stopped)
            except Exception as error:  # noqa: BLE001  # polling covers a failed listener
                log.warning("LISTEN on the ledger failed (%s); polling only", type(error).__name__)
                self._stopped.wait(max(_RETRY_SECONDS, self.poll_interval))

    def __enter__(self) -> HeadFollower:
        return self.start()

    def __exit__(self, *args: object) -> None:
        self.stop()
