"""The live exporter: follows a data root and sends each span once it is finished (ADR 0098).

It runs on a thread of its own, beside the ingest follower or alone, reads the
traces itself and keeps its own durable cursor per session in
``<root>/.pentrace/otel.db``, one set per receiver: ``acked``, the position up
to which every finished span has been **acknowledged** by the receiver, and
``settled``, where the session was last settled (its open spans closed).  The
cursor is written only after the SDK exporter returned success for the batch,
so a receiver that is down or slow costs delay, never a span; the follower that
drives it (:meth:`LiveExporter.notify`) never waits for it.  After a SIGKILL the
batch between the acknowledgement and the cursor's commit is sent again with
the same ids (ids come from positions), which a receiver that keeps one span per
id holds once.

A session whose records stopped for ``settle`` seconds (its newest shard's
modification time) is settled: its last task and anything still running are
closed at its last record and sent, as a batch export of the same files does.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pentrace.domain.records import MalformedLine, TraceRecord, decode_line
from pentrace.domain.session.key import SessionKey
from pentrace.errors import ExportError, PentraceError
from pentrace.infrastructure.ingest.follower import file_identity, read_tail
from pentrace.infrastructure.ingest.runner import changed_sessions
from pentrace.infrastructure.otel.export import Lineage, SpanSender, open_sender, settled
from pentrace.infrastructure.otel.mapping import SessionFold
from pentrace.infrastructure.otel.spans import Span
from pentrace.infrastructure.redaction_policy import activate_policy
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef, ShardRef
from pentrace.infrastructure.storage.sqlite import SideStore

__all__ = [
    "CONTENT_ENV",
    "Cursor",
    "CursorStore",
    "LiveExporter",
    "cursor_path",
    "open_live_export",
]

log = logging.getLogger("pentrace.otel")
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS otel_cursors (receiver TEXT NOT NULL, project TEXT NOT NULL,"
    " agent TEXT NOT NULL, session_id TEXT NOT NULL, acked INTEGER NOT NULL,"
    " settled INTEGER NOT NULL, size INTEGER NOT NULL,"
    " PRIMARY KEY (receiver, project, agent, session_id)) WITHOUT ROWID"
)
_BACKOFF: Final = (0.5, 30.0)  # first and longest wait after a refused batch, seconds
_BATCH: Final = 512
_DEBOUNCE_MS: Final = 20
CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def cursor_path(root: Path) -> Path:
    """Where the live exporter's cursors live."""
    return root / ".pentrace" / "otel.db"


def _report(level: int, message: str, **fields: Any) -> None:
    log.log(level, message, extra={"fields": fields})


@dataclass(frozen=True, slots=True)
class Cursor:
    """How far a receiver holds a session: spans finished at or before ``acked`` were
    acknowledged; ``settled`` is where the session was last settled (0: never); ``size`` is
    its bytes on disk then (an idle session of that size needs no reading on a restart)."""

    acked: int = 0
    settled: int = 0
    size: int = -1


class CursorStore:
    """The cursors of one receiver in a small SQLite side store (0600, WAL).

    A file that cannot be read is made again (``SideStore``): the live export then
    sends every span again, with the same ids, which a receiver keeping one span per
    id holds once."""

    def __init__(self, path: Path, receiver: str) -> None:
        self.path = path
        self.receiver = receiver
        self._store = SideStore(
            path,
            "the OpenTelemetry export cursors",
            (_SCHEMA,),
            ExportError,
            "check the data root's .pentrace folder; deleting the file sends every span again",
            user_version=1,
            busy_seconds=10.0,
        )
        self._db = self._store.open()

    def load(self) -> dict[SessionKey, Cursor]:
        """Every session's cursor for this receiver."""
        rows = self._store.execute(
            self._db,
            "SELECT project, agent, session_id, acked, settled, size FROM otel_cursors"
            " WHERE receiver = ?",
            (self.receiver,),
        ).fetchall()
        return {SessionKey(p, a, s): Cursor(*numbers) for p, a, s, *numbers in rows}

    def save(self, key: SessionKey, cursor: Cursor) -> None:
        """Store one session's cursor (its own transaction, committed on return)."""
        self._store.execute(
            self._db,
            "INSERT OR REPLACE INTO otel_cursors VALUES (?, ?, ?, ?, ?, ?, ?)",
            (self.receiver, *key, cursor.acked, cursor.settled, cursor.size),
        )

    def forget(self, key: SessionKey) -> None:
        """Drop the cursor of a session that is gone."""
        self._store.execute(
            self._db,
            "DELETE FROM otel_cursors WHERE receiver = ? AND project = ? AND agent = ?"
            " AND session_id = ?",
            (self.receiver, *key),
        )

    def close(self) -> None:
        """Close the file."""
        self._db.close()


@dataclass(slots=True, eq=False)
class _Shard:
    device: int
    inode: int
    offset: int = 0
    line: int = 0


@dataclass(slots=True, eq=False)
class _Followed:
    """One session as the live exporter reads it."""

    key: SessionKey
    fold: SessionFold
    cursor: Cursor
    shards: dict[str, _Shard] = field(default_factory=dict)
    position: int = 0
    pending: list[Span] = field(default_factory=list)
    settled_at: int = 0
    remembered: int = -1  # the position the lineage last learned this session's pointers at


@dataclass(slots=True)
class LiveStats:
    """Counters since the exporter started."""

    passes: int = 0
    spans: int = 0
    batches: int = 0
    refused: int = 0
    sessions: int = 0
    waiting_for_parent: int = 0  # subagent sessions held back until their parent is known


class LiveExporter:
    """Sends every span of a data root once it is finished; one thread drives it.

    :meth:`notify` (any thread, never blocking) asks for a look at some sessions,
    or all; :meth:`run` passes over the root every ``interval`` seconds and at
    each notification until ``stop`` is set.  :meth:`run_pass` is one pass."""

    def __init__(
        self,
        root: DataRoot,
        sender: SpanSender,
        store: CursorStore,
        *,
        content: bool = False,
        settle_s: float = 300.0,
        interval: float = 1.0,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = root
        self.sender = sender
        self.store = store
        self.content = content
        self.settle_s = settle_s
        self.interval = interval
        self.stop = stop if stop is not None else threading.Event()
        self.clock = clock
        self.stats = LiveStats()
        self.lineage = Lineage(root)
        self._cursors = store.load()
        self._followed: dict[SessionKey, _Followed] = {}
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._dirty: set[SessionKey] = set()
        self._everything = True
        self._delay = _BACKOFF[0]
        self._down_until = 0.0
        self._threads: list[threading.Thread] = []
        self._waiting: set[SessionKey] = set()  # subagents whose parent's pointer is not in

    # -- driving -----------------------------------------------------------------------
    def notify(self, keys: Iterable[SessionKey] | None = None) -> None:
        """Look at these sessions soon (None: the whole root); returns at once."""
        with self._lock:
            if keys is None:
                self._everything = True
            else:
                self._dirty.update(keys)
        self._wake.set()

    def run(self) -> None:
        """Pass over the root until ``stop`` is set (the batch in flight finishes first)."""
        _report(logging.INFO, "otel export started", event="started", receiver=self.sender.where)
        last_full = 0.0
        while not self.stop.is_set():
            waited = max(self._down_until - time.monotonic(), 0.0)
            if waited and self.stop.wait(waited):
                break
            if time.monotonic() - last_full >= self.interval:
                self.notify()
                last_full = time.monotonic()
            try:
                self.run_pass()
            except (PentraceError, OSError, sqlite3.Error) as error:
                # The exporter is a service: a failing pass is logged and tried again later.
                self._refused(0, error=str(error))
            self._wake.wait(self.interval)
            self._wake.clear()
        _report(logging.INFO, "otel export stopped", event="stopped", spans=self.stats.spans)

    def start(self) -> threading.Thread:
        """Run on a daemon thread of its own, with filesystem notifications on another."""
        self._threads = [
            threading.Thread(target=self.run, name="pentrace-otel", daemon=True),
            threading.Thread(target=self.watch, name="pentrace-otel-watch", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        return self._threads[0]

    def close(self) -> None:
        """Stop (the batch in flight finishes), then close the cursors and the exporter."""
        self.stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=60)
        self.store.close()
        self.sender.close()

    def watch(self) -> None:
        """Notify on every change to a shard (``watchfiles``, ADR 0027) until ``stop``; where
        notifications are unavailable the passes every ``interval`` seconds find the changes."""
        try:
            import watchfiles  # imported here: only a running exporter needs it

            changes_seen = watchfiles.watch(
                self.root.path,
                stop_event=self.stop,
                debounce=_DEBOUNCE_MS,
                step=1,
                rust_timeout=500,
                yield_on_timeout=True,
                raise_interrupt=False,
                ignore_permission_denied=True,
            )
            for changes in changes_seen:
                keys, everything = changed_sessions(self.root.path, (p for _, p in changes))
                if everything:
                    self.notify()
                elif keys:
                    self.notify(SessionKey(*key) for key in keys)
        except (OSError, RuntimeError, ImportError) as error:
            _report(logging.WARNING, "no filesystem notifications; looking every interval",
                    event="fallback", error=f"{type(error).__name__}: {error}")  # fmt: skip

    def run_pass(self) -> int:
        """One pass over the sessions asked for; the spans acknowledged in it."""
        with self._lock:
            everything, self._everything = self._everything, False
            dirty, self._dirty = self._dirty, set()
        before = self.stats.spans
        refs: list[SessionRef] = []
        try:
            if everything:
                refs = list(self.root.iter_sessions())
                present = {ref.key for ref in refs}
                self._forget((set(self._cursors) | set(self._followed)) - present)
                self._waiting &= present
            else:
                for key in sorted(dirty):
                    shards = tuple(self._shards_of(key))
                    if shards:
                        refs.append(SessionRef(*key, shards))
        except PentraceError as error:
            _report(logging.WARNING, "cannot list the sessions", event="list_failed", error=error)
        for ref in refs:
            if self.stop.is_set():
                break
            if not self._step(ref):
                with self._lock:  # the receiver refused: try these again after the backoff
                    self._everything = self._everything or everything
                    self._dirty.update(dirty)
                break
        self.stats.passes += 1
        self.stats.sessions = len(self._followed)
        return self.stats.spans - before

    def _forget(self, gone: set[SessionKey]) -> None:
        """Sessions deleted from disk: a session made again under the same name starts over."""
        for key in sorted(gone):
            self._followed.pop(key, None)
            self._cursors.pop(key, None)
            self.store.forget(key)
            _report(
                logging.INFO,
                "session gone; its cursor is forgotten",
                event="session_gone",
                session=key.reference,
            )

    def _shards_of(self, key: SessionKey) -> list[ShardRef]:
        try:
            return self.root.find_shards(*key)
        except PentraceError:
            return []

    # -- one session -------------------------------------------------------------------
    def _step(self, ref: SessionRef) -> bool:
        """Read, fold and send what is new in one session; False when the receiver refused."""
        key = ref.key
        followed = self._followed.get(key)
        if followed is None:
            followed = self._begin(ref)
            if followed is None:
                return True
        try:
            more = self._read(followed, ref.shards)
        except PentraceError as error:
            _report(
                logging.WARNING,
                "session not readable; retried on the next pass",
                event="unreadable",
                session=key.reference,
                error=error.message,
            )
            return True
        if more:
            self.notify([key])  # a bounded read left more of it: the next pass goes on
        fold = followed.fold
        if not followed.pending and fold.has_open() and settled(ref, self.clock(), self.settle_s):
            followed.pending.extend(fold.settle())
            followed.settled_at = followed.position
        return self._commit(followed, ref.shards)

    def _begin(self, ref: SessionRef) -> _Followed | None:
        """The session's reading state, from its cursor; None when there is nothing to do
        (unchanged since the cursor, or a subagent whose parent is not known yet)."""
        key = ref.key
        cursor = self._cursors.get(key, Cursor())
        if cursor.size == _size(ref.shards) and cursor.settled == cursor.acked:
            return None  # everything it holds was sent and settled
        parent = None
        if self.lineage.is_subagent(ref.shards):
            parent = self.lineage.parent_of(key)
            if parent is None and not settled(ref, self.clock(), self.settle_s):
                self._waiting.add(key)
                self.stats.waiting_for_parent = len(self._waiting)
                return None  # its parent's pointer may not be written yet
        self._waiting.discard(key)
        self.stats.waiting_for_parent = len(self._waiting)
        fold = SessionFold(
            key,
            parent=parent,
            content=self.content,
            switch=self.lineage.switch_resolver(key),
            floor=cursor.acked,
        )
        followed = _Followed(key, fold, cursor, settled_at=cursor.settled)
        self._followed[key] = followed
        return followed

    def _read(self, followed: _Followed, shards: tuple[ShardRef, ...]) -> bool:
        """Feed the session's new complete records to its fold, one bounded read; True when
        more is left to read."""
        if followed.pending:
            return False  # send what is held first: the trace is the buffer
        for number, shard in enumerate(shards):
            identity = file_identity(shard.path)
            if identity is None:
                return False
            name = str(shard.path)
            state = followed.shards.get(name)
            if state is None or (state.device, state.inode) != identity[:2]:
                if state is not None or number < len(followed.shards):
                    self._restart(followed)  # replaced under us: fold it again from the start
                    return True
                state = followed.shards[name] = _Shard(identity[0], identity[1])
            if identity[2] < state.offset:
                self._restart(followed)
                return True
            sealed = number < len(shards) - 1
            lines = read_tail(shard.path, state.offset, state.line, sealed=sealed)
            for tail in lines:
                try:
                    record = decode_line(tail.raw, tail.line)
                except MalformedLine:
                    continue  # not a record: it takes no position (the reader's rule)
                if record is not None:
                    self._feed(followed, record)
            if lines:
                state.offset, state.line = lines[-1].end, lines[-1].line
            if identity[2] > state.offset:
                # The rest of this shard comes before any later shard's records: next time.
                # Lines read: perhaps more than one read's worth; none: a partial last line.
                return bool(lines)
        return False

    def _feed(self, followed: _Followed, record: TraceRecord) -> None:
        followed.position += 1
        followed.pending.extend(followed.fold.feed(followed.position, record))
        if followed.position == followed.cursor.settled:
            followed.fold.settle()  # settled before: those spans were sent then

    def _restart(self, followed: _Followed) -> None:
        _report(
            logging.WARNING,
            "a shard changed under the exporter; the session is read again",
            event="reindex",
            session=followed.key.reference,
        )
        self._followed.pop(followed.key, None)

    def _commit(self, followed: _Followed, shards: tuple[ShardRef, ...]) -> bool:
        """Send the held spans; after the receiver's acknowledgement, move the cursor."""
        if self._down_until > time.monotonic() and followed.pending:
            return False
        pending = followed.pending
        for start in range(0, len(pending), _BATCH):
            if not self.sender.send(pending[start : start + _BATCH]):
                self._refused(len(pending) - start)
                del pending[:start]
                return False
            self.stats.batches += 1
        self.stats.spans += len(pending)
        pending.clear()
        self._delay = _BACKOFF[0]
        cursor = Cursor(followed.position, followed.settled_at, _size(shards))
        if cursor != followed.cursor:
            self.store.save(followed.key, cursor)
            followed.cursor = cursor
            self._cursors[followed.key] = cursor
        followed.fold.floor = followed.position
        if followed.remembered != followed.position:
            followed.remembered = followed.position
            self.lineage.remember(followed.key, shards, followed.fold)
        return True

    def _refused(self, count: int, *, error: str | None = None) -> None:
        """Back off (exponentially, with jitter) after a refused batch or a failed pass."""
        self.stats.refused += 1
        wait = self._delay * random.uniform(0.8, 1.2)
        self._down_until = time.monotonic() + wait
        self._delay = min(self._delay * 2, _BACKOFF[1])
        with self._lock:
            self._everything = True
        if error is not None:
            _report(logging.ERROR, "export pass failed; retrying", event="failed",
                    error=error, retry_in_s=round(wait, 2))  # fmt: skip
            return
        _report(
            logging.WARNING,
            "the receiver did not accept the spans; retrying",
            event="refused",
            receiver=self.sender.where,
            spans=count,
            retry_in_s=round(wait, 2),
        )


def _size(shards: Iterable[ShardRef]) -> int:
    total = 0
    for shard in shards:
        identity = file_identity(shard.path)
        total += identity[2] if identity is not None else 0
    return total


def open_live_export(
    root: DataRoot,
    *,
    endpoint: str | None = None,
    content: bool | None = None,
    settle_s: float = 300.0,
    interval: float = 2.0,
    stop: threading.Event | None = None,
) -> LiveExporter:
    """A live exporter to the configured receiver (``OTEL_EXPORTER_OTLP_*``, ``endpoint``
    over them), its cursors in the data root; not started.  ``content`` None reads the
    GenAI instrumentations' ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``."""
    if content is None:
        content = os.environ.get(CONTENT_ENV, "").strip().lower() == "true"
    activate_policy(root.path)  # the root's redaction rules, as every store derived from it
    sender = open_sender(endpoint)
    try:
        store = CursorStore(cursor_path(root.path), sender.where)
    except BaseException:
        sender.close()
        raise
    return LiveExporter(
        root, sender, store, content=content, settle_s=settle_s, interval=interval, stop=stop
    )
