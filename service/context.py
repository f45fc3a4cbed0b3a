"""What the routes share: settings, the ledger, its head follower, the frame cache.

Every blocking call of a route goes through :meth:`ServiceContext.run`.  When none has
been running for :data:`QUIET_SECONDS`, the server gives back what the busy period left
(ADR 0101): the ledger's pooled connections (the next read opens one again) and the
memory the allocator kept, so descriptors and resident memory come back near their idle
figures after a burst of clients.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, TypeVar

import anyio
import anyio.to_thread

from pentrace.infrastructure.operations.ledger import RuntimeEventLedger
from pentrace.infrastructure.operations.sessions import DataRoot
from pentrace.service.events.follower import LedgerFollower
from pentrace.service.events.frames import FrameCache
from pentrace.service.settings import ServiceSettings

__all__ = ["QUIET_SECONDS", "ServiceContext", "give_back_memory"]

log = logging.getLogger(__name__)
T = TypeVar("T")
# Ledger reads run in worker threads; this caps how many at once (the SQLite pool holds 8+10).
_DB_THREADS = 16
# Seconds without a blocking call before pooled connections and kept memory are given back.
QUIET_SECONDS: Final = 2.0


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None elsewhere (musl, macOS, Windows)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_TRIM: Final = _malloc_trim()


def give_back_memory() -> None:
    """Collect cycles, then hand the allocator's free pages back to the system."""
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)


@dataclass
class ServiceContext:
    """Shared state of one running service (see :func:`pentrace.service.app.create_app`)."""

    settings: ServiceSettings
    ledger: RuntimeEventLedger
    follower: LedgerFollower
    frames: FrameCache = field(default_factory=FrameCache)
    limiter: anyio.CapacityLimiter = field(
        default_factory=lambda: anyio.CapacityLimiter(_DB_THREADS)
    )
    quiet_seconds: float = QUIET_SECONDS
    _busy: int = field(default=0, init=False)
    _quiet: asyncio.TimerHandle | None = field(default=None, init=False)

    @property
    def root(self) -> DataRoot:
        """The data root the session endpoints read."""
        return DataRoot(self.settings.data_root)

    async def run(self, function: Callable[..., T], *args: object) -> T:
        """Run blocking I/O in a worker thread, within the database thread limit."""
        self._busy += 1
        if self._quiet is not None:
            self._quiet.cancel()
            self._quiet = None
        try:
            return await anyio.to_thread.run_sync(function, *args, limiter=self.limiter)
        finally:
            self._busy -= 1
            if self._busy == 0:
                loop = asyncio.get_running_loop()
                self._quiet = loop.call_later(self.quiet_seconds, self._give_back)

    def _give_back(self) -> None:
        """On the loop, when no blocking call ran for a while: no call can start while this
        runs, so no route holds a pooled connection being closed."""
        self._quiet = None
        if self._busy:
            return
        self.ledger.db.engine.dispose()
        give_back_memory()
        log.debug("quiet: pooled ledger connections closed, free memory given back")

    def close(self) -> None:
        """Cancel a pending give-back (shutdown)."""
        if self._quiet is not None:
            self._quiet.cancel()
            self._quiet = None
