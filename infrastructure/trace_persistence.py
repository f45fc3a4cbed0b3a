"""The trace as an eventsourcing persistence module: select it with
``PERSISTENCE_MODULE=pentrace.infrastructure.trace_persistence``.

:class:`TraceRecorder` stores a session's events as the lines of its JSONL
shards.  A save's lines go to the trace writer as ONE batch (one ``write(2)``,
all or nothing); a ``session_meta`` copy after position 1 starts the next shard
and the rest of the batch is written with it.  A record's position (counted
across shards, see ``docs/architecture.md``) is its ``originator_version``; a
save whose first version is not the next position raises eventsourcing's
:class:`~eventsourcing.persistence.IntegrityError` and writes nothing.

The trace has no topic column: :func:`~pentrace.infrastructure.trace_mapper.topic_for`
rebuilds it from each record's header.  Notifications, tracking and snapshots
are not kept in traces; the ledger provides them (``NotSupportedError`` here).

Environment (read through eventsourcing's ``Environment``, so the
``<APPNAME>_`` prefixed names win): ``PENTRACE_DATA_ROOT`` (default:
``PENGUIN_HOME`` or ``~/.penguin/data``), ``PENTRACE_PROJECT``,
``PENTRACE_AGENT``, ``PENTRACE_DURABILITY`` (``none``, ``per_request``,
``every_record``) and ``PENTRACE_LOCK_WAIT`` (seconds; unset fails at once).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final
from uuid import UUID

from eventsourcing.persistence import (
    ApplicationRecorder,
    InfrastructureFactory,
    IntegrityError,
    Mapper,
    Notification,
    NotSupportedError,
    ProcessRecorder,
    StoredEvent,
    TrackingRecorder,
    Transcoder,
)
from eventsourcing.utils import Environment, EnvType

from pentrace.errors import ConfigError
from pentrace.infrastructure.durability import Durability
from pentrace.infrastructure.layout import DataRoot
from pentrace.infrastructure.trace_mapper import SHARD_OPENED_TOPIC, TraceMapper, stored_event_for
from pentrace.infrastructure.trace_reader import read_session
from pentrace.infrastructure.trace_writer import ShardWriter, open_session_writer

__all__ = ["Factory", "TraceRecorder"]

DATA_ROOT: Final = "PENTRACE_DATA_ROOT"
PROJECT: Final = "PENTRACE_PROJECT"
AGENT: Final = "PENTRACE_AGENT"
DURABILITY: Final = "PENTRACE_DURABILITY"
LOCK_WAIT: Final = "PENTRACE_LOCK_WAIT"

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
        by_session: dict[str, list[StoredEvent]] = {}
        for stored in stored_events:
            by_session.setdefault(str(stored.originator_id), []).append(stored)
        with self._lock:
            for session_id, events in by_session.items():
                self._insert(session_id, events)
        return None

    def _insert(self, session_id: str, events: list[StoredEvent]) -> None:
        first = events[0].originator_version
        for offset, stored in enumerate(events):
            if stored.originator_version != first + offset:
                raise IntegrityError(
                    f"session {session_id}: expected consecutive versions in one save, "
                    f"found {stored.originator_version} after {first + offset - 1}"
                )
        cursor = self._cursor(session_id)
        if first != cursor.count + 1:
            raise IntegrityError(
                f"session {session_id}: expected the next record at position "
                f"{cursor.count + 1}, found version {first} (another save got there first, "
                "or the aggregate is stale: reload it with Repository.get)"
            )
        segment: list[bytes] = []
        rotate = False
        for stored in events:
            if stored.topic == SHARD_OPENED_TOPIC and stored.originator_version > 1:
                self._write(cursor, segment, rotate)
                segment, rotate = [], True
            segment.append(stored.state)
        self._write(cursor, segment, rotate)

    @staticmethod
    def _write(cursor: _Cursor, lines: list[bytes], rotate: bool) -> None:
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
                count = sum(1 for _ in read_session(self._shards(session_id)))
            except BaseException:
                writer.close()
                raise
            cursor = self._cursors[session_id] = _Cursor(writer, count)
        return cursor

    def _shards(self, session_id: str) -> list[Any]:
        return self.root.find_shards(self.project, self.agent, session_id)

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


class Factory(InfrastructureFactory[TrackingRecorder]):
    """Builds the trace recorder and mapper from the environment (see the module docstring)."""

    def __init__(
        self, env: Environment | EnvType | None, *, clock: Callable[[], datetime] = _utc_now
    ) -> None:
        super().__init__(env)
        self.clock = clock
        self._recorder: TraceRecorder | None = None

    def mapper(
        self,
        transcoder: Transcoder | None = None,
        mapper_class: type[Mapper[Any]] | None = None,
    ) -> Mapper[Any]:
        """A :class:`TraceMapper`, unless a class or MAPPER_TOPIC names another."""
        if mapper_class is None and not self.env.get(self.MAPPER_TOPIC):
            mapper_class = TraceMapper
        return super().mapper(transcoder=transcoder, mapper_class=mapper_class)

    def aggregate_recorder(self, purpose: str = "events") -> TraceRecorder:
        """The trace recorder; traces keep no snapshots."""
        if purpose != "events":
            raise NotSupportedError(
                f"the trace store keeps only session events, not {purpose!r} "
                "(aggregate state is small, rebuild from the trace instead)"
            )
        if self._recorder is None:
            self._recorder = TraceRecorder(
                self._data_root(),
                self._required(PROJECT),
                self._required(AGENT),
                durability=self._durability(),
                wait=self._wait(),
                clock=self.clock,
            )
        return self._recorder

    def application_recorder(self) -> TraceRecorder:
        """The same trace recorder (its notification methods say to use the ledger)."""
        return self.aggregate_recorder()

    def tracking_recorder(
        self, tracking_recorder_class: type[TrackingRecorder] | None = None
    ) -> TrackingRecorder:
        """Not kept in traces: the ledger implements tracking."""
        raise NotSupportedError("traces keep no tracking records; use the ledger")

    def process_recorder(self) -> ProcessRecorder:
        """Not kept in traces: the ledger implements process recording."""
        raise NotSupportedError("traces keep no tracking records; use the ledger")

    def close(self) -> None:
        """Close the recorder's writers and release the session locks."""
        if self._recorder is not None:
            self._recorder.close()
        super().close()

    def _required(self, key: str) -> str:
        value = self.env.get(key)
        if not value:
            raise ConfigError(
                f"the trace store needs {key}, found it unset",
                hint=f"set {key} in the application's environment",
            )
        return value

    def _data_root(self) -> DataRoot:
        configured = self.env.get(DATA_ROOT)
        if configured:
            return DataRoot(Path(configured).expanduser().absolute())
        return DataRoot.from_env(self.env)

    def _durability(self) -> Durability:
        value = self.env.get(DURABILITY, Durability.PER_REQUEST.value)
        try:
            return Durability(value)
        except ValueError:
            choices = ", ".join(d.value for d in Durability)
            raise ConfigError(
                f"{DURABILITY} must be one of {choices}, found {value!r}",
                hint=f"set {DURABILITY}=per_request (the default)",
            ) from None

    def _wait(self) -> float | None:
        value = self.env.get(LOCK_WAIT)
        if not value:
            return None
        try:
            return float(value)
        except ValueError:
            raise ConfigError(
                f"{LOCK_WAIT} must be a number of seconds, found {value!r}",
                hint=f"unset {LOCK_WAIT} to fail at once on a locked session",
            ) from None
