"""Following the ledger: a subscription that catches up, then waits for new rows.

eventsourcing's SQLite recorder offers no ``subscribe()``; ours reads the
next page of the notification-id index whenever the ledger's
:class:`~.follower.HeadFollower` wakes it: at once when a writer in this
process commits, through any ledger object on the same database
(:func:`waker_for`), at once on PostgreSQL's ``NOTIFY`` (sent in the writing
transaction, so writers on other hosts are seen without waiting), and
otherwise every ``poll_interval``.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from eventsourcing.persistence import Notification, Subscription

from pentrace.infrastructure.ledger.live.follower import HeadFollower

if TYPE_CHECKING:
    from pentrace.infrastructure.ledger.recorder import LedgerRecorder

__all__ = ["LedgerSubscription", "Waker", "waker_for"]

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


class LedgerSubscription(Subscription["LedgerRecorder"]):
    """Iterator of Notifications after ``gt``; blocks at the end until more arrive or stop()."""

    def __init__(
        self, recorder: LedgerRecorder, gt: int | None = None, topics: Sequence[str] = ()
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
