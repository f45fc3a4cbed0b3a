"""Full-text search over every session: a derived SQLite FTS5 index in ``<root>/.pentrace``.

The index is derived from the traces and can be deleted at any time;
:meth:`SearchIndex.refresh` brings it up to date and :meth:`SearchIndex.rebuild`
recreates it.  Traces are append-only, so a refresh reads only the bytes added
since the last one: each shard's byte offset, line count, size, mtime and the
last bytes before the offset are stored, and a session whose shards changed in
any other way (truncated, replaced, renumbered) is dropped and indexed again.
A final line without its newline is left for a later refresh, so a torn or
half-written line is never indexed.

A document's rowid is ``session_key << 32 | position``, so a session's
documents are one rowid range (cheap to delete) and the position comes back
from the rowid.  What is indexed, and the redaction that keeps secrets out,
is :mod:`pentrace.projections.search_docs`.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from pentrace.domain.json_codec import escape_surrogates
from pentrace.domain.records import MalformedLine, decode_line
from pentrace.errors import SearchIndexError
from pentrace.infrastructure.redaction_policy import activate_policy
from pentrace.infrastructure.search.query import SearchHit, SearchQuery, run_query
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef
from pentrace.infrastructure.storage.sqlite import SideStore, delete_files, owner
from pentrace.projections.search_docs import SearchDoc, SearchDocFold

__all__ = [
    "RefreshReport",
    "SearchHit",
    "SearchIndex",
    "SearchQuery",
    "search_index_path",
]

_CHUNK: Final = 4 * 1024 * 1024
_TAIL: Final = 32


@dataclass
class ShardState:
    """What the index knows about one shard: offset and line count read, size, mtime, last bytes."""

    path: str
    idx: int
    size: int
    mtime_ns: int
    offset: int = 0
    lines: int = 0
    tail: bytes = b""


def stat_shards(ref: SessionRef) -> list[ShardState] | None:
    """The session's shards as they are on disk now; ``None`` if one vanished meanwhile."""
    shards = []
    for shard in sorted(ref.shards, key=lambda s: (s.index, str(s.path))):
        try:
            stat = os.stat(shard.path)
        except FileNotFoundError:
            return None  # deleted while we looked: the next refresh sees the new state
        shards.append(ShardState(str(shard.path), shard.index, stat.st_size, stat.st_mtime_ns))
    return shards


def unchanged(stored: list[ShardState], disk: list[ShardState]) -> bool:
    """True when every shard has the path, size and mtime the index stored."""
    return [(s.path, s.size, s.mtime_ns) for s in stored] == [
        (s.path, s.size, s.mtime_ns) for s in disk
    ]


def appendable(stored: list[ShardState], disk: list[ShardState]) -> bool:
    """Only the last stored shard grew and new shards follow it; its indexed bytes are intact."""
    if not stored or len(disk) < len(stored):
        return False
    for old, new in zip(stored[:-1], disk, strict=False):
        if (old.path, old.size, old.mtime_ns) != (new.path, new.size, new.mtime_ns):
            return False
    last, now = stored[-1], disk[len(stored) - 1]
    if last.path != now.path or now.size < last.offset:
        return False
    return _tail_of(Path(now.path), last.offset) == last.tail


def _tail_of(path: Path, offset: int) -> bytes:
    start = max(0, offset - _TAIL)
    try:
        with path.open("rb") as handle:
            handle.seek(start)
            return handle.read(offset - start)
    except OSError:
        return b"\0"  # unreadable now: never equal to a stored tail


def read_docs(shard: ShardState, fold: SearchDocFold) -> Iterator[SearchDoc]:
    """Documents from ``shard.offset`` up to its last newline; updates offset, lines and tail."""
    path = Path(shard.path)
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    with handle:
        handle.seek(shard.offset)
        remaining = shard.size - shard.offset
        carry = b""
        while remaining > 0:
            chunk = handle.read(min(_CHUNK, remaining))
            if not chunk:
                break
            remaining -= len(chunk)
            pieces = (carry + chunk).split(b"\n")
            carry = pieces.pop()
            for piece in pieces:
                shard.lines += 1
                shard.offset += len(piece) + 1
                try:
                    record = decode_line(piece, shard.lines)
                except MalformedLine:
                    continue  # not a record: positions skip it, as the reader does
                if record is None:
                    continue
                doc = fold.record(record)
                if doc is not None:
                    yield doc
    shard.tail = _tail_of(path, shard.offset)


_BATCH: Final = 2000
SCHEMA_VERSION: Final = "1"
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS sessions(id INTEGER PRIMARY KEY AUTOINCREMENT, project TEXT NOT "
    "NULL, agent TEXT NOT NULL, session_id TEXT NOT NULL, position INTEGER NOT NULL, turns "
    "INTEGER NOT NULL, in_compaction INTEGER NOT NULL, UNIQUE(project, agent, session_id))",
    "CREATE TABLE IF NOT EXISTS shards(session INTEGER NOT NULL, path TEXT NOT NULL, idx INTEGER "
    "NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, offset INTEGER NOT NULL, lines "
    "INTEGER NOT NULL, tail BLOB NOT NULL, PRIMARY KEY(session, path))",
    "CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(body, kind UNINDEXED, role UNINDEXED, "
    "turn UNINDEXED, time UNINDEXED, shard UNINDEXED, line UNINDEXED, "
    "tokenize='unicode61 remove_diacritics 2')",
)
_WHAT: Final = "the search index"


def index_store(path: Path) -> SideStore:
    """How the search index at ``path`` is opened, and what its errors become."""
    return SideStore(
        path=path,
        what=_WHAT,
        schema=_SCHEMA,
        error=SearchIndexError,
        hint="run `pentrace search --rebuild` to recreate it from the traces",
        meta_version=SCHEMA_VERSION,
        pragmas=("journal_mode=WAL", "synchronous=NORMAL"),
    )


def search_index_path(root: DataRoot) -> Path:
    """``<root>/.pentrace/search.db``."""
    return root.path / ".pentrace" / "search.db"


@dataclass
class RefreshReport:
    """What a refresh did: sessions seen, (re)indexed and removed, documents added."""

    sessions: int = 0
    updated: int = 0
    reset: int = 0
    removed: int = 0
    documents: int = 0
    # Sessions left out because a shard could not be read: "project/agent/id: why".
    failures: list[str] = field(default_factory=list)


class SearchIndex:
    """The search index of one data root (see the module docstring)."""

    def __init__(self, root: DataRoot, path: Path | None = None) -> None:
        self.root = root
        activate_policy(root.path)
        self.path = path if path is not None else search_index_path(root)
        self.store = index_store(self.path)
        self.conn = self.store.open()

    def close(self) -> None:
        """Close the database."""
        self.conn.close()

    def __enter__(self) -> SearchIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- building ----------------------------------------------------------------
    def rebuild(self, refs: Iterable[SessionRef] | None = None) -> RefreshReport:
        """Delete the index and build it again from the traces."""
        with owner(self.path, _WHAT, error=SearchIndexError):
            self.conn.close()
            delete_files(self.path)
            self.conn = self.store.open()
            return self.refresh(refs)

    def refresh(self, refs: Iterable[SessionRef] | None = None) -> RefreshReport:
        """Index what changed since the last refresh; sessions no longer on disk are dropped.

        ``refs`` defaults to every session of the root (pass them to draw a progress bar).
        """
        with owner(self.path, _WHAT, error=SearchIndexError):
            return self._refresh(refs)

    def _refresh(self, refs: Iterable[SessionRef] | None) -> RefreshReport:
        """:meth:`refresh` as the index's one owner: a refresh in another thread or process
        waits, then finds what this one indexed current (issue #32)."""
        report = RefreshReport()
        if refs is None:
            refs = self.root.iter_sessions() if self.root.path.is_dir() else iter(())
        known = {
            (row[1], row[2], row[3]): int(row[0])
            for row in self._execute("SELECT id, project, agent, session_id FROM sessions")
        }
        stored = self._all_stored_shards()
        for ref in refs:
            report.sessions += 1
            key = known.pop((ref.project, ref.agent, ref.session_id), None)
            try:
                self._refresh_session(
                    ref, key, stored.get(key, []) if key is not None else [], report
                )
            except OSError as error:
                # One unreadable session never stops the others; its old documents stay.
                where = f"{ref.project}/{ref.agent}/{ref.session_id}"
                report.failures.append(f"{where}: {error.strerror or error} ({error.filename})")
        for key in known.values():
            self._write(functools.partial(self._drop, key, forget=True))
            report.removed += 1
        return report

    def forget(self, project: str, agent: str, session_id: str) -> bool:
        """Drop one session's documents now (``delete`` calls this); False if none were held."""
        row = self._execute(
            "SELECT id FROM sessions WHERE project=? AND agent=? AND session_id=?",
            (project, agent, session_id),
        ).fetchone()
        if row is not None:
            with owner(self.path, _WHAT, error=SearchIndexError):
                self._write(functools.partial(self._drop, int(row[0]), forget=True))
        return row is not None

    def _refresh_session(
        self, ref: SessionRef, key: int | None, stored: list[ShardState], report: RefreshReport
    ) -> None:
        disk = stat_shards(ref)
        if disk is None:
            return
        state = (0, 0, False)
        if key is not None:
            if unchanged(stored, disk):
                return
            if appendable(stored, disk):
                row = self._execute(
                    "SELECT position, turns, in_compaction FROM sessions WHERE id=?", (key,)
                ).fetchone()
                state = (int(row[0]), int(row[1]), bool(row[2]))
            else:
                self._write(lambda: self._drop(key, forget=False))
                stored = []
                report.reset += 1
        report.updated += 1
        self._write(lambda: self._index(ref, key, disk, stored, state, report))

    def _index(
        self,
        ref: SessionRef,
        key: int | None,
        disk: list[ShardState],
        stored: list[ShardState],
        state: tuple[int, int, bool],
        report: RefreshReport,
    ) -> None:
        if key is None:
            cursor = self.conn.execute(
                "INSERT INTO sessions(project, agent, session_id, position, turns, in_compaction)"
                " VALUES (?, ?, ?, 0, 0, 0)",
                (ref.project, ref.agent, ref.session_id),
            )
            key = int(cursor.lastrowid or 0)
        fold = SearchDocFold(*state)
        base = key << 32
        done = {shard.path: shard for shard in stored}
        for shard in disk:
            before = done.get(shard.path)
            if before is not None:
                shard.offset, shard.lines, shard.tail = before.offset, before.lines, before.tail
            batch: list[tuple[object, ...]] = []
            for doc in read_docs(shard, fold):
                batch.append(_doc_row(base, shard.idx, doc))
                if len(batch) >= _BATCH:
                    report.documents += self._insert(batch, ref, shard, report)
                    batch = []
            report.documents += self._insert(batch, ref, shard, report)
            self.conn.execute(
                "INSERT OR REPLACE INTO shards VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    shard.path,
                    shard.idx,
                    shard.size,
                    shard.mtime_ns,
                    shard.offset,
                    shard.lines,
                    shard.tail,
                ),
            )
        self.conn.execute(
            "UPDATE sessions SET position=?, turns=?, in_compaction=? WHERE id=?",
            (fold.position, fold.turns, int(fold.in_compaction), key),
        )

    def _insert(
        self,
        rows: list[tuple[object, ...]],
        ref: SessionRef,
        shard: ShardState,
        report: RefreshReport,
    ) -> int:
        """Insert a batch of documents; when the index refuses one, insert them one by one
        and report each refused record as a finding (session, file, line, reason), skipped."""
        if not rows:
            return 0
        conn = self.conn
        conn.execute("SAVEPOINT docs_batch")
        try:
            conn.executemany(_INSERT_DOC, rows)
        except (sqlite3.IntegrityError, sqlite3.InterfaceError, sqlite3.DataError):
            conn.execute("ROLLBACK TO docs_batch")
        else:
            conn.execute("RELEASE docs_batch")
            return len(rows)
        conn.execute("RELEASE docs_batch")
        kept = 0
        for row in rows:
            try:
                conn.execute(_INSERT_DOC, row)
                kept += 1
            except (sqlite3.IntegrityError, sqlite3.InterfaceError, sqlite3.DataError) as error:
                where = f"{ref.project}/{ref.agent}/{ref.session_id}"
                reason = (str(error).splitlines() or [type(error).__name__])[0][:160]
                report.failures.append(
                    f"{where}: {shard.path} line {row[-1]}: the index refused the record "
                    f"({reason}); left out"
                )
        return kept

    def _drop(self, key: int, *, forget: bool) -> None:
        self.conn.execute(
            "DELETE FROM docs WHERE rowid BETWEEN ? AND ?", (key << 32, (key << 32) | 0xFFFFFFFF)
        )
        self.conn.execute("DELETE FROM shards WHERE session=?", (key,))
        if forget:
            self.conn.execute("DELETE FROM sessions WHERE id=?", (key,))
        else:
            self.conn.execute(
                "UPDATE sessions SET position=0, turns=0, in_compaction=0 WHERE id=?", (key,)
            )

    def _all_stored_shards(self) -> dict[int, list[ShardState]]:
        """Every session's stored shards in one query (a refresh checks them all)."""
        rows = self._execute(
            "SELECT session, path, idx, size, mtime_ns, offset, lines, tail FROM shards "
            "ORDER BY session, idx, path"
        )
        stored: dict[int, list[ShardState]] = {}
        for r in rows:
            shard = ShardState(r[1], r[2], r[3], r[4], r[5], r[6], bytes(r[7]))
            stored.setdefault(int(r[0]), []).append(shard)
        return stored

    # -- plumbing ----------------------------------------------------------------
    def _execute(self, sql: str, params: tuple[object, ...] = ()) -> sqlite3.Cursor:
        return self.store.execute(self.conn, sql, params)

    def _write(self, work: Callable[[], None]) -> None:
        self.store.write(self.conn, work)

    # -- searching ---------------------------------------------------------------
    def search(self, query: SearchQuery) -> list[SearchHit]:
        """The best hits for ``query`` (see :class:`SearchQuery`); refresh first to be current."""
        return run_query(self.conn, self.path, query)


_INSERT_DOC: Final = (
    "INSERT INTO docs(rowid, body, kind, role, turn, time, shard, line) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def _doc_row(base: int, shard: int, doc: SearchDoc) -> tuple[object, ...]:
    # sqlite3 binds text as UTF-8: lone surrogates go in as their JSON escapes (ADR 0015).
    return (
        base | doc.position,
        escape_surrogates(doc.body),
        escape_surrogates(doc.kind),
        None if doc.role is None else escape_surrogates(doc.role),
        doc.turn,
        doc.time_ms,
        shard,
        doc.line,
    )
