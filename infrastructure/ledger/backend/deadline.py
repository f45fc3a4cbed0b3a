"""A client-side deadline for PostgreSQL statements: cut the socket of a server that went quiet.

``statement_timeout`` is enforced by the server, so it does nothing when the
server (or a proxy, or a half-dead network path) accepts bytes and never
answers: psycopg then waits on the socket for ever.  :class:`Deadlines` runs
one daemon thread per process that shuts down the socket of a connection whose
armed deadline passed.  The blocked call wakes at once with "server closed the
connection", SQLAlchemy drops that connection from its pool, and the thread
that was blocked can ask :meth:`Deadlines.expired` to say why.

Connections are armed before each statement, commit, rollback and pool ping,
disarmed when a statement returns, and disarmed before they are checked in
or closed, so a socket number is never touched after the connection that
owned it let it go.
"""

from __future__ import annotations

import heapq
import os
import socket
import threading
import time
from typing import Any, Final

__all__ = ["DEADLINES", "Deadlines"]


class Deadlines:
    """Armed deadlines of driver connections, each cut by shutting its socket down."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        # id(connection) -> (deadline, socket fd, seconds, thread id)
        self._armed: dict[int, tuple[float, int, float, int]] = {}
        self._heap: list[tuple[float, int]] = []
        # The earliest heap entry of each connection: re-arming a connection (every
        # statement) pushes nothing new unless its deadline moves earlier.
        self._queued: dict[int, float] = {}
        self._expired: dict[int, float] = {}
        self._thread: threading.Thread | None = None
        self.cut = 0

    def arm(self, connection: Any, seconds: float) -> None:
        """Cut ``connection`` (a psycopg connection) unless disarmed within ``seconds``."""
        try:
            fd = int(connection.fileno())
        except Exception:  # noqa: BLE001  # a closed connection has no socket to watch
            return
        deadline = time.monotonic() + seconds
        with self._cond:
            key = id(connection)
            self._armed[key] = (deadline, fd, seconds, threading.get_ident())
            queued = self._queued.get(key)
            if queued is None or deadline < queued:
                self._queued[key] = deadline
                heapq.heappush(self._heap, (deadline, key))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="pentrace-db-deadlines", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def disarm(self, connection: Any) -> None:
        """Forget the deadline of ``connection`` (harmless when none is armed)."""
        if connection is None:
            return
        with self._cond:
            self._armed.pop(id(connection), None)

    def expired(self) -> float | None:
        """The seconds of a deadline that cut a connection of this thread since the last
        call (and forget it), or None."""
        with self._cond:
            return self._expired.pop(threading.get_ident(), None)

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    deadline, key = heapq.heappop(self._heap)
                    if self._queued.get(key) == deadline:
                        del self._queued[key]
                    armed = self._armed.get(key)
                    if armed is None:
                        continue  # disarmed
                    if armed[0] > now:  # armed again since: wait for the new deadline
                        if key not in self._queued:
                            self._queued[key] = armed[0]
                            heapq.heappush(self._heap, (armed[0], key))
                        continue
                    del self._armed[key]
                    # Recorded first: the woken thread asks expired() at once.
                    self._expired[armed[3]] = armed[2]
                    self.cut += 1
                    _shut_down(armed[1])
                wait = self._heap[0][0] - now if self._heap else None
                self._cond.wait(wait)


def _shut_down(fd: int) -> None:
    # shutdown() acts on the socket, not on the descriptor, so a duplicate reaches the
    # connection's socket while the driver keeps its own descriptor (and closes it).
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()


DEADLINES: Final = Deadlines()
