"""The trace as an eventsourcing event store: the mapper and the recorder.

:class:`TraceMapper` maps Session events to trace lines: the stored state IS
the line.  eventsourcing's stock :class:`~eventsourcing.persistence.Mapper`
serialises an event's ``__dict__`` through a transcoder; here the event
already carries its envelope bytes, so writing is a lookup of the topic, and
reading rebuilds the event from the line without any JSON transcoder (only
the ``timestamp`` field is decoded).  Ciphers and compressors are refused: a
trace is plain JSONL that PenguinHarness must be able to read.

:class:`TraceRecorder` writes over a session's JSONL shards.  A save's lines
go to the trace writer as ONE batch (one ``write(2)``, all or nothing); a
``session_meta`` copy after position 1 starts the next shard and the rest of
the batch is written with it.  A record's position (counted across shards,
see ``docs/architecture.md``) is its ``originator_version``; a save whose
first version is not the next position raises eventsourcing's
:class:`~eventsourcing.persistence.IntegrityError` and writes nothing.  The
trace has no topic column: each StoredEvent's topic is rebuilt from the
line's header (:func:`stored_event_for`).  Notifications are not kept in
traces; the ledger provides them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Final
from uuid import UUID

from eventsourcing.domain import CanInitAggregate
from eventsourcing.persistence import (
    ApplicationRecorder,
    Cipher,
    Compressor,
    IntegrityError,
    Mapper,
    Notification,
    NotSupportedError,
    StoredEvent,
    Transcoder,
)
from eventsourcing.utils import get_topic, resolve_topic

from pentrace.domain.kinds import event_class_for
from pentrace.domain.records import TraceRecord
from pentrace.domain.session.aggregate import Session
from pentrace.domain.session.events import EVENT_CLASSES, HEADER, SessionEvent, ShardOpened
from pentrace.domain.session.lines import read_timestamp
from pentrace.errors import ConfigError, TraceConflictError
from pentrace.infrastructure.storage.layout import DataRoot, ShardRef
from pentrace.infrastructure.trace.checkpoints import load_checkpoint
from pentrace.infrastructure.trace.durability import Durability
from pentrace.infrastructure.trace.reader import read_session
from pentrace.infrastructure.trace.writer import ShardWriter, open_session_writer

__all__ = [
    "SESSION_TOPIC",
    "SHARD_OPENED_TOPIC",
    "TraceIntegrityError",
    "TraceMapper",
    "TraceRecorder",
    "stored_event_for",
    "topic_for",
]

SESSION_TOPIC: Final = get_topic(Session)
SHARD_OPENED_TOPIC: Final = get_topic(ShardOpened)

_TOPIC_OF: Final[dict[type[SessionEvent], str]] = {cls: get_topic(cls) for cls in EVENT_CLASSES}
_CLASS_OF: Final[dict[str, type[SessionEvent]]] = {t: c for c, t in _TOPIC_OF.items()}
_CREATED: Final = frozenset(t for c, t in _TOPIC_OF.items() if issubclass(c, CanInitAggregate))


def topic_for(record: TraceRecord, position: int) -> str:
    """The topic of the event class a record at ``position`` stands for."""
    return _TOPIC_OF[event_class_for(record, position)]


def stored_event_for(session_id: str, record: TraceRecord, position: int) -> StoredEvent:
    """The StoredEvent for a trace record read at ``position`` of ``session_id``.

    The parsed header rides along outside the dataclass fields (so equality
    and the stored state are untouched) and :class:`TraceMapper` hands it to
    the event, so ``apply`` does not parse the line a second time.
    """
    stored = object.__new__(StoredEvent)
    state = {
        "originator_id": session_id,
        "originator_version": position,
        "topic": _TOPIC_OF[event_class_for(record, position)],
        "state": record.raw,
        HEADER: record,
    }
    object.__setattr__(stored, "__dict__", state)
    return stored


class TraceMapper(Mapper[str]):
    """Maps Session events to StoredEvents whose ``state`` is the trace line, and back."""

    def __init__(
        self,
        transcoder: Transcoder | None = None,
        compressor: Compressor | None = None,
        cipher: Cipher | None = None,
    ) -> None:
        if compressor is not None or cipher is not None:
            raise ConfigError(
                "the trace store keeps plain JSONL lines, found a "
                + ("cipher" if cipher is not None else "compressor")
                + " configured (CIPHER_TOPIC / COMPRESSOR_TOPIC)",
                hint="unset CIPHER_TOPIC, CIPHER_KEY and COMPRESSOR_TOPIC for the trace store",
            )
        # The transcoder is never used: lines are already encoded envelopes.
        super().__init__(transcoder or _NoTranscoder())

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        """The event's own line, under its class topic."""
        cls = type(domain_event)
        event_state = domain_event.__dict__
        # Built like the library's Mapper builds events: the frozen dataclass
        # __init__ would cost as much as the rest of a save.
        stored = object.__new__(StoredEvent)
        state = {
            "originator_id": event_state["originator_id"],
            "originator_version": event_state["originator_version"],
            "topic": _TOPIC_OF.get(cls) or get_topic(cls),
            "state": event_state["line"],
        }
        object.__setattr__(stored, "__dict__", state)
        return stored

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        """Rebuild the event from the line; no dataclass ``__init__`` on the hot path."""
        topic = stored_event.topic
        cls = _CLASS_OF.get(topic) or resolve_topic(topic)
        line = stored_event.state
        state: dict[str, Any] = {
            "originator_id": stored_event.originator_id,
            "originator_version": stored_event.originator_version,
            "timestamp": read_timestamp(line),
            "line": line,
        }
        if topic in _CREATED:
            state["originator_topic"] = SESSION_TOPIC
        header = stored_event.__dict__.get(HEADER)
        if header is not None:
            state[HEADER] = header
        event = object.__new__(cls)
        object.__setattr__(event, "__dict__", state)
        return event


class _NoTranscoder(Transcoder):
    """Stands in for the transcoder the base class expects; traces never need one."""

    def encode(self, obj: Any) -> bytes:
        """Never called: trace lines are encoded by the domain."""
        raise NotImplementedError

    def decode(self, data: bytes) -> Any:
        """Never called: trace lines are decoded by the mapper itself."""
        raise NotImplementedError


class TraceIntegrityError(TraceConflictError, IntegrityError):
    """A version clash on a trace: a pentrace error with a hint, and eventsourcing's
    ``IntegrityError``, which its ``Application`` and ``Repository`` callers expect."""


_NO_NOTIFICATIONS: Final = (
    "traces keep one sequence per session, not an application-wide notification log"
)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class _Cursor:
    """The open writer of one session and how many records its trace holds."""

    __slots__ = ("count", "writer")

    def __init__(self, writer: ShardWriter, count: int) -> None:
        self.writer = writer
        self.count = count


class TraceRecorder(ApplicationRecorder):
    """Aggregate recorder over the JSONL shards of one (data root, project, agent).

    The first insert for a session locks it (one writer per session) and
    counts its records; the writer stays open until :meth:`release` or
    :meth:`close`.
    """

    def __init__(
        self,
        root: DataRoot,
        project: str,
        agent: str,
        *,
        durability: Durability = Durability.PER_REQUEST,
        wait: float | None = None,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.root = root
        self.project = project
        self.agent = agent
        self.durability = durability
        self.wait = wait
        self.clock = clock
        self._cursors: dict[str, _Cursor] = {}
        self._lock = threading.Lock()

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Append each session's events as one atomic batch; IntegrityError on a version clash.

        Returns ``None``: traces have no application-wide notification ids.
        """
        if not stored_events:
            return None
        first_id = stored_events[0].originator_id
        if all(stored.originator_id == first_id for stored in stored_events):
            by_session = {str(first_id): list(stored_events)}
        else:
            by_session = {}
            for stored in stored_events:
                by_session.setdefault(str(stored.originator_id), []).append(stored)
        with self._lock:
            for session_id, events in by_session.items():
                self._insert(session_id, events)
        return None

    def insert_lines(
        self,
        session_id: str,
        first: int,
        lines: Sequence[bytes],
        rotations: Sequence[int] = (),
    ) -> None:
        """Append ``lines`` at positions ``first``, ``first + 1``, ... as one atomic batch.

        What :meth:`insert_events` does for one session, without StoredEvents
        (``SessionApplication.save`` hands over its events' lines directly).
        ``rotations`` are the offsets in ``lines`` of the ``session_meta``
        copies that open the next shard.  IntegrityError when ``first`` is not
        the session's next position.
        """
        if not lines:
            return
        with self._lock:
            self._append(session_id, first, lines, rotations)

    def _insert(self, session_id: str, events: list[StoredEvent]) -> None:
        first = events[0].originator_version
        for offset, stored in enumerate(events):
            if stored.originator_version != first + offset:
                raise TraceIntegrityError(
                    f"session {session_id}: expected consecutive versions in one save, "
                    f"found {stored.originator_version} after {first + offset - 1}",
                    hint="save the events of one aggregate in version order",
                )
        rotations = [
            offset
            for offset, stored in enumerate(events)
            if stored.topic == SHARD_OPENED_TOPIC and stored.originator_version > 1
        ]
        self._append(session_id, first, [stored.state for stored in events], rotations)

    def _append(
        self, session_id: str, first: int, lines: Sequence[bytes], rotations: Sequence[int]
    ) -> None:
        cursor = self._cursor(session_id)
        if first != cursor.count + 1:
            raise TraceIntegrityError(
                f"session {session_id}: expected the next record at position "
                f"{cursor.count + 1}, found version {first}: another save got there first "
                "(perhaps while this writer waited for the trace lock), or the aggregate is stale",
                hint="reload the session (Repository.get, or open it again) and repeat the "
                "command; the trace holds everything written so far",
            )
        if not rotations:
            cursor.writer.append_many(lines)
            cursor.count += len(lines)
            return
        start, rotate = 0, False
        for offset in rotations:
            self._write(cursor, lines[start:offset], rotate)
            start, rotate = offset, True
        self._write(cursor, lines[start:], rotate)

    @staticmethod
    def _write(cursor: _Cursor, lines: Sequence[bytes], rotate: bool) -> None:
        if not lines:
            return
        if rotate:
            # The new shard appears with its headers and the rest of the save at once.
            cursor.writer.rotate(lines)
        else:
            cursor.writer.append_many(lines)
        cursor.count += len(lines)

    def _cursor(self, session_id: str) -> _Cursor:
        cursor = self._cursors.get(session_id)
        if cursor is None:
            writer = open_session_writer(
                self.root,
                self.project,
                self.agent,
                session_id,
                durability=self.durability,
                wait=self.wait,
                clock=self.clock,
            )
            try:
                # Counted under the session lock, so no other writer can move it.
                count = self._count(session_id)
            except BaseException:
                writer.close()
                raise
            cursor = self._cursors[session_id] = _Cursor(writer, count)
        return cursor

    def _shards(self, session_id: str) -> list[ShardRef]:
        return self.root.find_shards(self.project, self.agent, session_id)

    def _count(self, session_id: str) -> int:
        shards = self._shards(session_id)
        checkpoint = load_checkpoint(self.root, self.project, self.agent, session_id, shards)
        if checkpoint is not None:
            # A valid checkpoint counts the older shards: only the newest is read.
            shards, start = shards[-1:], checkpoint.before
        else:
            start = 0
        return start + sum(1 for _ in read_session(shards))

    def select_shard_events(
        self, session_id: str, shards: Sequence[ShardRef], before: int
    ) -> list[StoredEvent]:
        """The records of ``shards`` (a run of a session's shards) positioned after ``before``.

        ``before`` must be the number of records in the session's earlier
        shards (a checkpoint's ``before``); positions are ``before + 1`` on.
        """
        return [
            stored_event_for(session_id, record, position)
            for position, record in enumerate(read_session(list(shards)), before + 1)
        ]

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        """Read a session's records with their positions, filtered like the SQL recorders."""
        session_id = str(originator_id)
        shards = self._shards(session_id)
        selected: list[StoredEvent] = []
        if not shards:
            return selected
        low = gt if gt is not None else 0
        early = limit if limit is not None and not desc else None
        position = 0
        for record in read_session(shards):
            position += 1
            if position <= low:
                continue
            if lte is not None and position > lte:
                break
            selected.append(stored_event_for(session_id, record, position))
            if early is not None and len(selected) >= early:
                break
        if desc:
            selected.reverse()
            if limit is not None:
                del selected[limit:]
        return selected

    def release(self, session_id: str) -> None:
        """Close a session's writer and release its lock (a later save reopens it)."""
        with self._lock:
            cursor = self._cursors.pop(session_id, None)
        if cursor is not None:
            cursor.writer.close()

    def close(self) -> None:
        """Close every open writer (fsync per the durability policy) and release the locks."""
        with self._lock:
            cursors, self._cursors = list(self._cursors.values()), {}
        for cursor in cursors:
            cursor.writer.close()

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> list[Notification]:
        """Not kept in traces: read the ledger for an application-wide sequence."""
        raise NotSupportedError(_NO_NOTIFICATIONS)

    def max_notification_id(self) -> int | None:
        """Not kept in traces: read the ledger for an application-wide sequence."""
        raise NotSupportedError(_NO_NOTIFICATIONS)

    def subscribe(self, gt: int | None = None, topics: Sequence[str] = ()) -> Any:
        """Not kept in traces: subscribe to the ledger instead."""
        raise NotSupportedError(_NO_NOTIFICATIONS)
