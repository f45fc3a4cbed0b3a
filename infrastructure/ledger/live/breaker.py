"""A circuit breaker for the live ledger path: stop trying a ledger that keeps failing.

After ``threshold`` failures in a row the breaker opens: writes are skipped
(dropped, for ``pentrace ledger sync`` to fill in) for ``base_seconds``.  Then
one trial write is let through (the others stay paused while it runs); when
it fails the pause doubles, up to ``max_seconds``; when it succeeds the
breaker closes.  Opening and closing
each return True once, so the caller logs one line per outage, not one per
write.  The clock is injected: tests step it by hand.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["CircuitBreaker"]


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
