"""The follower: index every new complete record of every shard into the ledger.

A session's positions run across its shards in index order, so a shard is
read only after the ones before it, and its cursor remembers the position it
starts after (``base``).  Each batch of lines is one ledger transaction that
also stores the shard's new cursor.  What the follower meets besides records
is logged on ``pentrace.ingest`` with structured ``fields``: skipped
fragments, replaced or truncated shards, deleted sessions, refused batches.
"""

from __future__ import annotations

import logging
import socket
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from pentrace.domain.json_codec import is_object_prefix
from pentrace.domain.records import MalformedLine, TraceRecord, decode_line
from pentrace.errors import LedgerConflictError, PentraceError, TraceError
from pentrace.infrastructure.ingest.cursors import Cursor, CursorStore, SessionKey, change_reason
from pentrace.infrastructure.ingest.sink import LedgerSink
from pentrace.infrastructure.ingest.stats import IngestStats, report
from pentrace.infrastructure.ingest.tail import file_identity, read_tail
from pentrace.infrastructure.ledger.store import RuntimeEventLedger
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef, ShardRef, iter_sessions

__all__ = ["Follower", "IngestStats", "report"]

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
