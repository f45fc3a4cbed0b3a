"""What the routes share: settings, the ledger, its head follower, the frame cache."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import anyio
import anyio.to_thread

from pentrace.infrastructure.operations.ledger import RuntimeEventLedger
from pentrace.infrastructure.operations.sessions import DataRoot
from pentrace.service.events.follower import LedgerFollower
from pentrace.service.events.frames import FrameCache
from pentrace.service.settings import ServiceSettings

__all__ = ["ServiceContext"]

T = TypeVar("T")
# Ledger reads run in worker threads; this caps how many at once (the SQLite pool holds 8+10).
_DB_THREADS = 16


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

    @property
    def root(self) -> DataRoot:
        """The data root the session endpoints read."""
        return DataRoot(self.settings.data_root)

    async def run(self, function: Callable[..., T], *args: object) -> T:
        """Run blocking I/O in a worker thread, within the database thread limit."""
        return await anyio.to_thread.run_sync(function, *args, limiter=self.limiter)
