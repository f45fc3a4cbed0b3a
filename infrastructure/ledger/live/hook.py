"""The live path: index new trace records into the ledger and fan them out in-process.

:class:`LedgerHook` is the ``on_recorded`` callback of the session
application.  It is best-effort by design (DESIGN decision 6): it publishes
to in-process subscribers at once and hands the ledger write to a background
:class:`~.writer.LiveWriter`, so a failing ledger (locked, disk full,
server down or hung) is logged, without payloads, and never holds the trace
write (the save only queues the rows) nor stops live delivery; ``pentrace
ledger sync`` closes the gap later.  An envelope that fails the redaction
check, or a record the mapping cannot take (one finding logged: session,
position, reason), is neither stored nor published; the save's other records
are.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pentrace.domain.records import TraceRecord
from pentrace.domain.runtime import SessionEvents
from pentrace.domain.session.key import SessionKey
from pentrace.errors import LedgerError, PentraceError, RedactionError
from pentrace.infrastructure.ledger.indexer import session_directory
from pentrace.infrastructure.ledger.live.writer import LiveBatch, LiveWriter
from pentrace.infrastructure.ledger.replay import LedgerEntry
from pentrace.infrastructure.ledger.rows import MAPPING_ERRORS, encoded_row, refusal
from pentrace.infrastructure.ledger.store import RuntimeEventLedger
from pentrace.infrastructure.storage.layout import DataRoot

__all__ = ["LedgerHook", "LiveFanout", "LiveSubscription"]

log = logging.getLogger(__name__)


class LiveSubscription:
    """A bounded queue of live :class:`LedgerEntry` objects for one consumer.

    When the consumer falls behind, new entries are dropped and counted in
    ``dropped`` (the ledger still has them: replay from the last id seen).
    """

    def __init__(self, fanout: LiveFanout, maxsize: int) -> None:
        self._fanout = fanout
        self._queue: queue.Queue[LedgerEntry] = queue.Queue(maxsize)
        self.dropped = 0

    def get(self, timeout: float | None = None) -> LedgerEntry:
        """The next entry; raises ``queue.Empty`` after ``timeout`` seconds."""
        return self._queue.get(timeout=timeout)

    def get_nowait(self) -> LedgerEntry:
        """The next entry, or ``queue.Empty`` at once."""
        return self._queue.get_nowait()

    def offer(self, entry: LedgerEntry) -> None:
        """Queue an entry without blocking; count it as dropped when full."""
        try:
            self._queue.put_nowait(entry)
        except queue.Full:
            self.dropped += 1

    def close(self) -> None:
        """Stop receiving entries."""
        self._fanout.unsubscribe(self)

    def __enter__(self) -> LiveSubscription:
        return self

    def __exit__(self, *args: object) -> None:
        self.close()


class LiveFanout:
    """Thread-safe publish to every live subscriber in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: list[LiveSubscription] = []

    def subscribe_live(self, maxsize: int = 1000) -> LiveSubscription:
        """A new subscription that receives every entry published from now on."""
        subscription = LiveSubscription(self, maxsize)
        with self._lock:
            self._subscribers.append(subscription)
        return subscription

    def unsubscribe(self, subscription: LiveSubscription) -> None:
        """Remove a subscription (closing twice is harmless)."""
        with self._lock:
            if subscription in self._subscribers:
                self._subscribers.remove(subscription)

    def publish(self, entries: Sequence[LedgerEntry]) -> None:
        """Offer entries, in order, to every subscriber."""
        with self._lock:
            subscribers = list(self._subscribers)
        for subscription in subscribers:
            for entry in entries:
                subscription.offer(entry)


class LedgerHook:
    """``on_recorded(session_id, [(position, TraceRecord), ...])``: publish live, index in the
    background (:class:`~.writer.LiveWriter`; a save waits ``wait_seconds`` for the
    commit at most, by default not at all; :meth:`flush` waits for what was handed over).

    The records are the ones the aggregate just wrote, mapped by the same
    :class:`~pentrace.domain.runtime.SessionEvents` as ``ledger sync``; each
    envelope is encoded once, and the ledger row and the live entry share the bytes."""

    def __init__(
        self,
        ledger: RuntimeEventLedger | None,
        *,
        data_root: DataRoot | Path,
        project: str,
        agent: str,
        fanout: LiveFanout | None = None,
        wait_seconds: float = 0.0,
    ) -> None:
        self.ledger = ledger
        self.root = data_root if isinstance(data_root, DataRoot) else DataRoot(Path(data_root))
        self.project = project
        self.agent = agent
        self.fanout = fanout if fanout is not None else LiveFanout()
        self.writer = LiveWriter(ledger, wait_seconds=wait_seconds) if ledger is not None else None
        self._mappers: dict[str, SessionEvents] = {}
        self._lock = threading.Lock()

    def subscribe_live(self, maxsize: int = 1000) -> LiveSubscription:
        """Live entries published by this hook from now on."""
        return self.fanout.subscribe_live(maxsize)

    def __call__(self, session_id: str, records: Sequence[tuple[int, TraceRecord]]) -> None:
        """Publish records just written to a session's trace, and hand them to the ledger."""
        if not records:
            return
        try:
            mapper = self._mapper(session_id)
        except (PentraceError, OSError) as error:  # the save stands; `ledger sync` fills in
            log.warning("ledger skipped session %s: %s", session_id, refusal(error))
            return
        now = self.ledger.now_ms() if self.ledger is not None else 0
        published: list[LedgerEntry] = []
        rows: list[dict[str, Any]] = []
        for position, record in records:
            try:
                encoded = mapper.encoded(position, record)
            except (PentraceError, *MAPPING_ERRORS) as error:
                _refused(session_id, position, error)
                continue
            try:
                # The ledger's own checks, here in the saving thread (the writer only inserts).
                rows.append(encoded_row(encoded, now))
            except (RedactionError, *MAPPING_ERRORS) as error:  # neither stored nor published
                _refused(session_id, position, error)
                continue
            except LedgerError as error:
                log.warning("ledger refused session %s: %s", session_id, error.message)
            published.append(LedgerEntry(encoded.event.id, encoded.json))
        if self.writer is not None and rows:
            self.writer.submit(LiveBatch(session_id, records[0][0], records[-1][0], rows))
        self.fanout.publish(published)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every batch handed to the ledger is written or dropped (False on timeout)."""
        return self.writer.flush(timeout) if self.writer is not None else True

    def close(self, timeout: float = 5.0) -> bool:
        """Flush for at most ``timeout`` seconds and stop the writer thread."""
        return self.writer.close(timeout) if self.writer is not None else True

    def _mapper(self, session_id: str) -> SessionEvents:
        with self._lock:
            known = self._mappers.get(session_id)
        if known is not None:
            return known
        shards = self.root.find_shards(self.project, self.agent, session_id)
        mapper = SessionEvents(
            SessionKey(self.project, self.agent, session_id), session_directory(shards)
        )
        with self._lock:
            return self._mappers.setdefault(session_id, mapper)


def _refused(session_id: str, position: int, error: BaseException) -> None:
    """One finding for a record the ledger cannot take (neither stored nor published)."""
    log.error("ledger refused session %s, position %d: %s", session_id, position, refusal(error))
