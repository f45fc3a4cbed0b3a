"""Following the ledger's head: one follower for every reader, and the subscription.

A :class:`HeadFollower` is woken when the ledger may have moved:

* at once when a writer in this process commits, through any ledger object
  on the same database (the shared :class:`Waker`, :func:`waker_for`);
* at once when another process commits, on a backend that announces commits
  (a listener thread runs the dialect's ``listen``: PostgreSQL ``NOTIFY``), or
  when asked to listen (``listen=True``) on one that can watch for them (SQLite:
  a change of the ledger's file or WAL, ADR 0081);
* otherwise after ``poll_interval`` seconds, so a lost notification, or a
  backend without any (SQLite), costs one poll of latency, never an event.

It holds no events; its users read what they need after a wake-up: the
subscription a page of notifications, the SSE service the head, ``ledger
tail -f`` the rows after its cursor, the analytics runner (through the
subscription) its projection's topics.

eventsourcing's SQLite recorder offers no ``subscribe()``; ours,
:class:`LedgerSubscription`, reads the next page of the notification-id index
whenever its follower wakes it.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from eventsourcing.persistence import Notification, Subscription

if TYPE_CHECKING:
    from pentrace.infrastructure.ledger.reads import LedgerReader
    from pentrace.infrastructure.ledger.store import RuntimeEventLedger

__all__ = ["HeadFollower", "LedgerSubscription", "Waker", "waker_for"]

log = logging.getLogger(__name__)
# A listener that failed waits this long (at least) before it connects again.
_RETRY_SECONDS: Final = 1.0


class HeadFollower:
    """Wake-ups for one reader of a ledger; ``start()`` it, ``stop()`` it (or use ``with``).

    ``poll_interval`` is the wait on a backend without notifications,
    ``listening_poll`` the safety-net wait on one with them; both default to
    the dialect's (:attr:`LedgerReader.poll_interval`).  ``listen`` takes the
    backend's announcements of other processes' commits; by default where the
    backend sends them to every listener (PostgreSQL), and on SQLite when asked
    (it watches the ledger's file: a thread and an inotify watch per follower,
    worth it for the SSE service).  Polling stays the fallback either way.
    """

    def __init__(
        self,
        recorder: LedgerReader,
        *,
        poll_interval: float | None = None,
        listening_poll: float | None = None,
        listen: bool | None = None,
    ) -> None:
        self.recorder = recorder
        self.notifies = recorder.db.dialect.notifies
        self.listens = self.notifies if listen is None else listen
        chosen = listening_poll if self.notifies else poll_interval
        self.poll_interval = chosen if chosen is not None else recorder.poll_interval
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._listener: threading.Thread | None = None

    def start(self) -> HeadFollower:
        """Start taking wake-ups (in-process commits, and the backend's announcements)."""
        self.recorder.waker.register(self._wake)
        if self.listens:
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
                # (LISTEN or, on SQLite, the watch of the ledger's file)
                log.warning("LISTEN on the ledger failed (%s); polling only", type(error).__name__)
                self._stopped.wait(max(_RETRY_SECONDS, self.poll_interval))

    def __enter__(self) -> HeadFollower:
        return self.start()

    def __exit__(self, *args: object) -> None:
        self.stop()


_PAGE = 500


class Waker:
    """In-process fan-out of "something was committed" to waiting subscriptions."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: set[threading.Event] = set()

    def register(self, event: threading.Event) -> None:
        """Start waking ``event`` on every commit."""
        with self._lock:
            self._events.add(event)

    def unregister(self, event: threading.Event) -> None:
        """Stop waking ``event``."""
        with self._lock:
            self._events.discard(event)

    def wake(self) -> None:
        """Wake every registered waiter."""
        with self._lock:
            waiting = list(self._events)
        for event in waiting:
            event.set()


_wakers: weakref.WeakValueDictionary[tuple[str, str], Waker] = weakref.WeakValueDictionary()
_wakers_lock = threading.Lock()


def waker_for(database: str, table: str) -> Waker:
    """The one Waker of a ledger table in this process, shared by every ledger object on it.

    So a commit through any ledger object wakes the subscriptions of all the
    others on the same database at once (a server's SSE ledger and an
    analytics runner, say), instead of at their next poll.
    """
    key = (database, table)
    with _wakers_lock:
        waker = _wakers.get(key)
        if waker is None:
            waker = Waker()
            _wakers[key] = waker
        return waker


class LedgerSubscription(Subscription["RuntimeEventLedger"]):
    """Iterator of Notifications after ``gt``; blocks at the end until more arrive or stop()."""

    def __init__(
        self, recorder: RuntimeEventLedger, gt: int | None = None, topics: Sequence[str] = ()
    ) -> None:
        super().__init__(recorder=recorder, gt=gt, topics=topics)
        self._buffer: deque[Notification] = deque()
        self._follower = HeadFollower(recorder).start()

    def __next__(self) -> Notification:
        while not self._has_been_stopped:
            if self._buffer:
                return self._buffer.popleft()
            self._follower.clear()
            batch = self._recorder.select_notifications(
                start=self._last_notification_id or 0,
                limit=_PAGE,
                topics=self._topics,
                inclusive_of_start=False,
            )
            if batch:
                self._last_notification_id = batch[-1].id
                self._buffer.extend(batch)
            else:
                self._follower.wait()
        raise StopIteration

    def stop(self) -> None:
        """Stop the iteration; a blocked ``next()`` returns promptly."""
        super().stop()
        self._follower.stop(timeout=0)

    def __exit__(self, *args: object, **kwargs: Any) -> None:
        try:
            super().__exit__(*args, **kwargs)
        finally:
            self._follower.stop()
