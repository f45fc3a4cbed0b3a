"""The follower: index every new complete record of every shard into the ledger.

A session's positions run across its shards in index order, so a shard is
read only after the ones before it, and its cursor remembers the position it
starts after (``base``).  Each batch of lines is one ledger transaction that
also stores the shard's new cursor (:class:`LedgerSink`).  What the follower
meets besides records is logged on ``pentrace.ingest`` with structured
``fields``: skipped fragments, replaced or truncated shards, deleted
sessions, refused batches, and records the ledger cannot take (one finding
each, with the shard, line, session and reason; the record is left out and
the others go on).

A shard is read by :func:`read_tail`: a line is complete when its ``\\n`` has
arrived; the bytes after the last ``\\n`` wait for the next read.  A *sealed*
shard (one with a later shard of the same session beside it, so its writer has
moved on) gives its unterminated tail as a last line too, as the trace reader
does.

The cursors are durable, one row per follower ``source`` (host and data root,
so several agent hosts can share one PostgreSQL ledger) and shard in the
ledger's ``ingest_cursors`` table: where the follower stopped (``offset``, the
byte just after the last complete line it consumed), the session position of
the last record before that offset (``position``), the position the shard
starts after (``base``) and the file's identity (device and inode) when it was
read.  A cursor row is written by the same transaction as the ledger rows it
covers (:meth:`RuntimeEventLedger.extend` with ``before_commit``), so after a
crash both are there or neither is: the follower never skips a record and,
because event ids come from positions, never stores one twice.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Connection, delete

from pentrace.domain.json_codec import is_object_prefix
from pentrace.domain.records import MalformedLine, TraceRecord, decode_line
from pentrace.domain.runtime import SessionEvents, record_workspace
from pentrace.domain.session.key import SessionKey as Owner
from pentrace.errors import (
    LedgerConflictError,
    NotRegularFileError,
    PentraceError,
    RedactionError,
    TraceError,
)
from pentrace.infrastructure.ingest.logs import IngestStats, report
from pentrace.infrastructure.ledger.indexer import session_directory
from pentrace.infrastructure.ledger.rows import MAPPING_ERRORS, encoded_row, refusal
from pentrace.infrastructure.ledger.store import RuntimeEventLedger
from pentrace.infrastructure.storage.inputs import open_regular
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef, ShardRef, iter_sessions

__all__ = [
    "READ_LIMIT",
    "Cursor",
    "CursorStore",
    "Follower",
    "IngestStats",
    "LedgerSink",
    "SessionKey",
    "TailLine",
    "change_reason",
    "file_identity",
    "read_tail",
    "report",
]

SessionKey = tuple[str, str, str]  # (project, agent, session id)


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where the follower stands in one shard."""

    shard: str  # the path relative to the data root
    session: SessionKey
    index: int
    device: int
    inode: int
    offset: int
    line: int
    base: int
    position: int


class CursorStore:
    """Reads and writes the cursor table next to one ledger's tables."""

    def __init__(self, ledger: RuntimeEventLedger, source: str) -> None:
        self.ledger = ledger
        self.source = source
        self.table = ledger.db.tables.ingest_cursors

    def load(self) -> dict[str, Cursor]:
        """Every cursor, by shard path."""
        with self.ledger.db.reading("read the ingest cursors") as conn:
            rows = conn.execute(self.table.select().where(self.table.c.source == self.source)).all()
        return {row.shard: _cursor(row) for row in rows}

    def writer(self, cursor: Cursor) -> Any:
        """A function that stores ``cursor`` on a connection (for ``extend(before_commit=...)``)."""

        def write(conn: Connection) -> None:
            conn.execute(delete(self.table).where(self._mine(), self.table.c.shard == cursor.shard))
            conn.execute(self.table.insert().values(source=self.source, **_values(cursor)))

        return write

    def forget(self, shards: list[str]) -> None:
        """Drop the cursors of shards that are gone."""
        if not shards:
            return
        with self.ledger.db.writing("forget ingest cursors") as conn:
            conn.execute(delete(self.table).where(self._mine(), self.table.c.shard.in_(shards)))

    def _mine(self) -> Any:
        return self.table.c.source == self.source


# Cursor field -> ingest_cursors column, besides the session key (three columns).
_COLUMNS: Final = (
    ("shard", "shard"),
    ("index", "shard_index"),
    ("device", "device"),
    ("inode", "inode"),
    ("offset", "byte_offset"),
    ("line", "line"),
    ("base", "base"),
    ("position", "position"),
)


def _values(cursor: Cursor) -> dict[str, Any]:
    project, agent, session_id = cursor.session
    values = {column: getattr(cursor, name) for name, column in _COLUMNS}
    values.update(project=project, agent=agent, session_id=session_id)
    return values


def _cursor(row: Any) -> Cursor:
    fields = {name: getattr(row, column) for name, column in _COLUMNS}
    return Cursor(session=(row.project, row.agent, row.session_id), **fields)


def change_reason(cursor: Cursor, device: int, inode: int, size: int, base: int) -> str | None:
    """Why ``cursor`` no longer fits its shard (new inode, shorter file, moved start), or None."""
    if (cursor.device, cursor.inode) != (device, inode):
        return "replaced (new inode)"
    if size < cursor.offset:
        return f"truncated ({size} bytes, cursor at {cursor.offset})"
    if cursor.base != base:
        return "an earlier shard of the session changed"
    return None


READ_LIMIT: Final = 4 * 2**20

# How a failed pass over a session is logged (level, event, message, default hint).  A
# session is refused when its records conflict with the ledger or cannot be read: it stays
# blocked until its files change.  Any other failure is a write, retried on the next pass.
_REFUSED: Final = (
    logging.ERROR,
    "refused",
    "session refused; it is retried when its files change",
    "run `pentrace audit` on the session",
)
_WRITE_FAILED: Final = (
    logging.WARNING,
    "write_failed",
    "ledger write failed; retried on the next pass",
    "the follower retries on the next pass; check that the ledger can be written",
)


def _named(key: SessionKey) -> dict[str, str]:
    """The fields that name a session in every event: its id, project and agent (ADR 0023)."""
    return {"session": key[2], "project": key[0], "agent": key[1]}


class Follower:
    """Follows one data root into one ledger; not thread-safe (one thread drives it)."""

    def __init__(
        self,
        ledger: RuntimeEventLedger,
        root: DataRoot,
        *,
        stop: threading.Event | None = None,
        source: str | None = None,
    ) -> None:
        self.ledger = ledger
        self.root = root
        self.stop = stop if stop is not None else threading.Event()
        # Cursors are this follower's: its host and data root, unless named.
        self.source = source or f"{socket.gethostname()}:{root.path}"
        self.cursors = CursorStore(ledger, self.source)
        self.stats = IngestStats()
        self.sink = LedgerSink(ledger, self.cursors, self.stats)
        self._known: dict[str, Cursor] = {}
        self._by_session: dict[SessionKey, set[str]] = {}
        for cursor in self.cursors.load().values():
            self._remember(cursor)
        self._lag: dict[str, int] = {}
        self._blocked: dict[SessionKey, tuple[Any, ...]] = {}

    # -- passes ------------------------------------------------------------------
    def scan(self) -> int:
        """One pass over every session of the root; returns how many records were new."""
        before = self.stats.indexed
        seen: set[SessionKey] = set()
        for ref in iter_sessions(self.root):
            if self.stop.is_set():
                break
            seen.add((ref.project, ref.agent, ref.session_id))
            self._follow(ref)
        else:
            gone = set(self._by_session) - seen
            for key in sorted(gone):
                self._forget_session(key)
        self._finish_pass()
        return self.stats.indexed - before

    def follow_session(self, key: SessionKey) -> int:
        """One pass over one session (after a notification about its files)."""
        before = self.stats.indexed
        try:
            shards = self.root.find_shards(*key)
        except PentraceError:
            shards = []
        if shards:
            self._follow(SessionRef(key[0], key[1], key[2], tuple(shards)))
        elif key in self._by_session:
            self._forget_session(key)
        self._finish_pass()
        return self.stats.indexed - before

    def _finish_pass(self) -> None:
        self.stats.passes += 1
        self.stats.sessions = len(self._by_session)
        self.stats.shards = len(self._known)
        self.stats.lag_bytes = sum(self._lag.values())

    # -- one session -------------------------------------------------------------
    def _follow(self, ref: SessionRef) -> None:
        key = (ref.project, ref.agent, ref.session_id)
        identities = tuple(file_identity(shard.path) for shard in ref.shards)
        if self._blocked.get(key) == identities:
            return
        self._blocked.pop(key, None)
        try:
            self._follow_shards(key, ref.shards, identities)
        except PentraceError as error:
            self.stats.errors += 1
            refused = isinstance(error, LedgerConflictError | TraceError)
            if refused:
                self._blocked[key] = identities
            level, event, message, hint = _REFUSED if refused else _WRITE_FAILED
            report(
                level,
                message,
                event=event,
                **_named(key),
                error=error.message,
                hint=error.hint or hint,
            )
        self._forget_missing_shards(key, ref.shards)

    def _follow_shards(
        self,
        key: SessionKey,
        shards: tuple[ShardRef, ...],
        identities: tuple[tuple[int, int, int] | None, ...],
    ) -> None:
        indexes = [shard.index for shard in shards]
        if len(set(indexes)) != len(indexes):
            raise TraceError(
                f"session {key[2]}: two shards with one index, so the order is ambiguous",
                hint="move the stray copy out of the traces folder (as `ledger sync` says)",
            )
        position = 0
        reset = False
        for number, (shard, identity) in enumerate(zip(shards, identities, strict=True)):
            if identity is None or self.stop.is_set():
                return  # deleted while we looked, or shutting down
            device, inode, size = identity
            name = str(shard.path.relative_to(self.root.path))
            cursor = self._known.get(name)
            if cursor is not None and not reset:
                problem = change_reason(cursor, device, inode, size, position)
                if problem is not None:
                    reset = True
                    self.stats.replaced += 1
                    report(
                        logging.WARNING,
                        "shard changed under its cursor; indexing it again from the start",
                        event="reindex",
                        shard=name,
                        **_named(key),
                        reason=problem,
                        offset=cursor.offset,
                        size=size,
                    )
            if cursor is None or reset:
                cursor = Cursor(name, key, shard.index, device, inode, 0, 0, position, position)
            sealed = number < len(shards) - 1
            cursor = self._advance(key, shards, cursor, shard.path, sealed, size)
            self._lag[name] = max(0, size - cursor.offset)
            position = cursor.position

    def _advance(
        self,
        key: SessionKey,
        shards: tuple[ShardRef, ...],
        cursor: Cursor,
        path: Path,
        sealed: bool,
        size: int,
    ) -> Cursor:
        """Index the shard's complete lines after the cursor, one transaction per read."""
        if cursor.offset >= size:
            return cursor  # nothing new: no need to open the file
        while not self.stop.is_set():
            lines = read_tail(path, cursor.offset, cursor.line, sealed=sealed)
            if not lines:
                return cursor
            records: list[tuple[int, TraceRecord]] = []
            position = cursor.position
            for tail in lines:
                try:
                    record = decode_line(tail.raw, tail.line)
                except MalformedLine:
                    self._not_a_record(key, cursor.shard, tail.line, tail.raw)
                    continue
                if record is None:
                    continue
                position += 1
                if position == 1:
                    self.sink.first_record(key, record)
                records.append((position, record))
            after = replace(cursor, offset=lines[-1].end, line=lines[-1].line, position=position)
            self.sink.write(key, shards, records, after)
            cursor = after
            self._remember(cursor)
            if cursor.offset >= size:
                return cursor
        return cursor

    def _not_a_record(self, key: SessionKey, shard: str, line: int, raw: bytes) -> None:
        """Report a complete line that does not parse; it takes no position, as in the reader."""
        if is_object_prefix(raw):
            # A record's first bytes, left by a killed writer and healed by the next (ADR 0014).
            self.stats.healed_fragments += 1
            event, message = "healed", "skipped a healed torn fragment"
        else:
            self.stats.skipped_lines += 1
            event, message = "skipped", "skipped a malformed line"
        report(logging.WARNING, message, event=event, shard=shard, line=line, **_named(key))

    # -- forgetting --------------------------------------------------------------
    def _forget_missing_shards(self, key: SessionKey, shards: tuple[ShardRef, ...]) -> None:
        present = {str(shard.path.relative_to(self.root.path)) for shard in shards}
        missing = sorted(self._by_session.get(key, set()) - present)
        if missing:
            report(
                logging.WARNING,
                "shard deleted; its cursor is forgotten",
                event="shard_gone",
                **_named(key),
                shards=missing,
            )
            self._drop(missing)

    def _forget_session(self, key: SessionKey) -> None:
        names = sorted(self._by_session.get(key, set()))
        self.stats.forgotten_sessions += 1
        report(
            logging.INFO,
            "session deleted; its cursors are forgotten, its ledger rows stay",
            event="session_gone",
            **_named(key),
            hint=f"drop its ledger rows with `pentrace ledger forget {key[2]}`",
        )
        self._drop(names)
        self.sink.forget(key)
        self._blocked.pop(key, None)

    def _drop(self, names: list[str]) -> None:
        self.cursors.forget(names)
        for name in names:
            cursor = self._known.pop(name, None)
            if cursor is not None:
                held = self._by_session.get(cursor.session, set())
                held.discard(name)
                if not held:
                    self._by_session.pop(cursor.session, None)
            self._lag.pop(name, None)

    def _remember(self, cursor: Cursor) -> None:
        self._known[cursor.shard] = cursor
        self._by_session.setdefault(cursor.session, set()).add(cursor.shard)


class LedgerSink:
    """Writes the follower's batches; remembers each session's directory and ledger floor."""

    def __init__(
        self, ledger: RuntimeEventLedger, cursors: CursorStore, stats: IngestStats
    ) -> None:
        self.ledger = ledger
        self.cursors = cursors
        self.stats = stats
        self._directories: dict[SessionKey, str | None] = {}
        self._floors: dict[SessionKey, int] = {}

    def first_record(self, key: SessionKey, record: TraceRecord) -> None:
        """The session's first record names its workspace directory."""
        self._directories[key] = record_workspace(record)

    def forget(self, key: SessionKey) -> None:
        """Drop what is remembered about a session that is gone."""
        self._directories.pop(key, None)
        self._floors.pop(key, None)

    def write(
        self,
        key: SessionKey,
        shards: tuple[ShardRef, ...],
        records: list[tuple[int, TraceRecord]],
        cursor: Cursor,
    ) -> None:
        """Append ``(position, record)`` pairs above the floor and store ``cursor`` with them."""
        owner = Owner(*key)
        mapper = SessionEvents(owner, self._directory(key, shards))
        if records and key not in self._floors:
            self._floors[key] = self.ledger.held_sequences(owner.stream_id)[1]
        floor = self._floors.get(key, 0)
        now = self.ledger.now_ms()
        kept = []
        for position, record in records:
            if position <= floor:
                continue
            try:
                kept.append(encoded_row(mapper.encoded(position, record), now))
            except (RedactionError, *MAPPING_ERRORS) as error:
                # One finding; the record is left out and the others go on.
                self.stats.refused_records += 1
                report(
                    logging.ERROR,
                    "record refused; it is left out of the ledger",
                    event="record_refused",
                    shard=cursor.shard,
                    line=record.line,
                    position=position,
                    session=key[2],
                    project=key[0],
                    agent=key[1],
                    error=refusal(error),
                )
        new = self.ledger.append_rows(kept, before_commit=self.cursors.writer(cursor))
        self.stats.indexed += new
        self.stats.already_held += len(kept) - new

    def _directory(self, key: SessionKey, shards: tuple[ShardRef, ...]) -> str | None:
        if key not in self._directories:
            self._directories[key] = session_directory(shards)
        return self._directories[key]


@dataclass(frozen=True, slots=True)
class TailLine:
    """One line: its 1-based number in the shard, its bytes and the offset just after it."""

    line: int
    raw: bytes
    end: int


def read_tail(
    path: Path, offset: int, line: int, *, sealed: bool, limit: int = READ_LIMIT
) -> list[TailLine]:
    """Complete lines from ``offset`` on (the first is line ``line + 1``), about ``limit`` bytes.

    A line longer than ``limit`` is read whole.  A missing file gives no lines.
    """
    try:
        with open_regular(path, "trace file") as handle:
            handle.seek(offset)
            data = handle.read(limit)
            while data and b"\n" not in data:
                more = handle.read(limit)
                if not more:
                    break
                data += more
            at_end = offset + len(data) >= os.fstat(handle.fileno()).st_size
    except FileNotFoundError:
        return []
    except NotRegularFileError as exc:
        raise TraceError(
            f"cannot read trace file {path}: it is {exc.kind}, expected a regular file",
            hint="move it out of the traces folder",
        ) from None
    except OSError as exc:
        raise TraceError(
            f"cannot read trace file {path}: {exc.strerror or type(exc).__name__}",
            hint="check the file's permissions",
        ) from exc
    pieces = data.split(b"\n")
    tail = pieces.pop()
    lines: list[TailLine] = []
    end = offset
    for piece in pieces:
        end += len(piece) + 1
        line += 1
        lines.append(TailLine(line, piece, end))
    if tail and sealed and at_end:
        lines.append(TailLine(line + 1, tail, end + len(tail)))
    return lines


def file_identity(path: Path) -> tuple[int, int, int] | None:
    """``(device, inode, size)`` of a file, or None when it is gone."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino, st.st_size
