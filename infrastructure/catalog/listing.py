"""The session catalog: list, filter, sort and resolve the sessions of a data root.

Each session's row is its :class:`~pentrace.projections.session_summary.SessionSummary`
plus what the reader saw on disk (shards, bytes, malformed lines, torn tails).
Rows are kept in a derived cache, ``<root>/.pentrace/catalog.db`` (SQLite),
keyed by every shard's ``(name, size, mtime_ns)``: a session whose shards did
not change is never read again, so a warm listing costs one folder walk, one
``stat`` per shard and one query.  The cache can be deleted at any time; a
corrupt or foreign file is replaced, and when the root is read-only the
catalog works without a cache.

A row (:class:`SessionRow`) is read from a session's shards by
:func:`read_row`; :class:`SessionFilter` is the ``sessions list`` filter set
and :func:`parse_time_bound` reads ``--since`` / ``--until`` values.

Short ids: :func:`resolve_session` accepts a session id, any unique prefix of
one, or a prefix of its 8-hex token (``3f8a1c2d``, ``3f8a``), each also behind
its owner, ``project/agent/`` (ADR 0023).
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final

import msgspec

from pentrace.errors import NoMatchError, PentraceError, UsageError
from pentrace.infrastructure.sessions.refs import ambiguous, match_sessions, owner_of
from pentrace.infrastructure.storage.layout import (
    DataRoot,
    SessionRef,
    is_session_id,
    iter_sessions,
)
from pentrace.infrastructure.storage.sqlite import SideStore, owner
from pentrace.infrastructure.trace.reader import ParseReport, read_session
from pentrace.projections.session_summary import (
    SessionSummary,
    model_name,
    parse_timestamp,
    summarize_session,
)
from pentrace.values import parse_time

__all__ = [
    "CACHE_VERSION",
    "SORT_KEYS",
    "STATUS_CHOICES",
    "CatalogCache",
    "CatalogCacheError",
    "SessionFilter",
    "SessionRow",
    "cache_path",
    "list_sessions",
    "open_cache",
    "parse_time_bound",
    "read_row",
    "resolve_session",
    "short_id",
]


STATUS_CHOICES: Final = (
    "completed",
    "failed",
    "aborted",
    "timeout",
    "malformed",
    "auth",
    "open",
    "none",
)


class SessionRow(msgspec.Struct, kw_only=True):
    """One session of the catalog: where it lives, its files and its summary.

    ``problem`` names why the session could not be read (an unreadable
    shard, two shards with one index); its summary is then empty.
    """

    project: str
    agent: str
    session_id: str
    shards: int
    bytes: int
    skipped_lines: int
    torn_tails: int
    summary: SessionSummary
    problem: str | None = None

    @property
    def start(self) -> str | None:
        """The first record's timestamp, as written."""
        return self.summary.first_timestamp

    @property
    def has_errors(self) -> bool:
        """Errors in the session's history, or damage in its files."""
        return (
            self.summary.has_errors
            or self.skipped_lines > 0
            or self.torn_tails > 0
            or self.problem is not None
        )

    @property
    def status(self) -> str:
        """The last request's status; ``none`` when the session made no request."""
        return self.summary.last_request_status or "none"


@dataclass(frozen=True, slots=True)
class SessionFilter:
    """Which sessions :func:`list_sessions` keeps; ``None`` means any."""

    project: str | None = None
    agent: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    model: str | None = None
    status: str | None = None
    has_errors: bool | None = None

    def keeps(self, row: SessionRow) -> bool:
        """True when ``row`` passes every filter."""
        if self.model is not None and self.model not in (
            row.summary.model_id,
            model_name(row.summary.provider, row.summary.model_id),
        ):
            return False
        if self.status is not None and row.status != self.status:
            return False
        if self.has_errors is not None and row.has_errors != self.has_errors:
            return False
        if self.since is not None or self.until is not None:
            start = parse_timestamp(row.start)
            if start is None:
                return False
            if self.since is not None and start < self.since:
                return False
            if self.until is not None and start > self.until:
                return False
        return True


def parse_time_bound(text: str, now: datetime, *, option: str = "--since") -> datetime:
    """A time bound in any form that :func:`pentrace.values.parse_time` reads (``7d`` ...)."""
    return parse_time(text, now, option=option)


def read_row(ref: SessionRef) -> SessionRow:
    """Read one session from its shards (no cache) into a :class:`SessionRow`."""
    report = ParseReport(max_kept=0)
    problem: str | None = None
    try:
        summary = summarize_session(read_session(ref.shards, report=report))
    except PentraceError as exc:
        summary, problem = SessionSummary(session_id=ref.session_id), exc.message
    size = 0
    for shard in ref.shards:
        try:
            size += os.stat(shard.path).st_size
        except OSError:
            continue  # gone since the walk (a concurrent delete): it adds nothing
    return SessionRow(
        project=ref.project,
        agent=ref.agent,
        session_id=ref.session_id,
        shards=len(ref.shards),
        bytes=size,
        skipped_lines=report.skipped_count,
        torn_tails=len(report.torn_tails),
        summary=summary,
        problem=problem,
    )


logger = logging.getLogger(__name__)

SORT_KEYS: Final = ("start", "tokens", "turns", "id")
Progress = Callable[[Sequence[SessionRef]], Iterable[SessionRef]]


def cache_path(root: DataRoot) -> Path:
    """Where the catalog cache of ``root`` lives (``<root>/.pentrace/catalog.db``)."""
    return _cache_file(root.path)


def short_id(session_id: str) -> str:
    """The 8-hex token of a native id (what an operator types); other ids as they are."""
    return session_id[-8:] if is_session_id(session_id) else session_id


def _signature(ref: SessionRef) -> bytes:
    """Every shard's identity and state; any append, rotation or rewrite changes it."""
    parts = []
    for shard in ref.shards:
        stat = os.stat(shard.path)
        parts.append(f"{shard.day.isoformat()}/{shard.path.name}:{stat.st_size}:{stat.st_mtime_ns}")
    return "|".join(parts).encode()


def _decode(blob: bytes) -> SessionRow | None:
    try:
        row = msgspec.msgpack.decode(blob, type=SessionRow)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None  # written by another version: read the session again
    # A row cached before the summary kept tokens per model: read the session again.
    return row if row.summary.model_tokens is not None else None


def _rows(
    root: DataRoot, refs: list[SessionRef], scope: SessionFilter, progress: Progress | None
) -> list[SessionRow]:
    """Rows for ``refs``: from the cache when the shards are unchanged, else read and cached."""
    with _cache_owner(root.path):
        return _cached_rows(root, refs, scope, progress)


def _cached_rows(
    root: DataRoot, refs: list[SessionRef], scope: SessionFilter, progress: Progress | None
) -> list[SessionRow]:
    cache = open_cache(root.path)
    try:
        cached = cache.load()
        rows: dict[Key, SessionRow] = {}
        stale: list[tuple[SessionRef, bytes]] = []
        for ref in refs:
            key = (ref.project, ref.agent, ref.session_id)
            try:
                signature = _signature(ref)
            except OSError:
                signature = b""  # a shard vanished or is unreadable: read it, never cache it
            hit = cached.get(key)
            row = _decode(hit[1]) if hit is not None and signature == hit[0] else None
            if row is not None and signature:
                rows[key] = row
            else:
                stale.append((ref, signature))
        fresh: list[tuple[Key, bytes, bytes]] = []
        signatures = {(r.project, r.agent, r.session_id): sig for r, sig in stale}
        scan = [ref for ref, _ in stale]
        for ref in progress(scan) if progress is not None and scan else scan:
            key = (ref.project, ref.agent, ref.session_id)
            row = rows[key] = read_row(ref)
            packed = _packed(row) if signatures[key] and row.problem is None else None
            if packed is not None:
                fresh.append((key, signatures[key], packed))
        present = {(r.project, r.agent, r.session_id) for r in refs}
        gone = [
            key
            for key in cached
            if key not in present
            and scope.project in (None, key[0])
            and scope.agent in (None, key[1])
        ]
        cache.store(fresh, gone)
    finally:
        cache.close()
    return [rows[(r.project, r.agent, r.session_id)] for r in refs]


def _packed(row: SessionRow) -> bytes | None:
    """The row as cached, or None when it holds text with no UTF-8 form (a lone surrogate).

    Such a row is read from its trace every time rather than cached in another spelling.
    """
    try:
        return msgspec.msgpack.encode(row)
    except UnicodeEncodeError:
        return None


def _sort_key(sort: str) -> Callable[[SessionRow], tuple[object, ...]]:
    if sort == "start":
        return lambda row: (row.start or "", row.session_id)
    if sort == "tokens":
        return lambda row: (row.summary.total_tokens, row.session_id)
    if sort == "turns":
        return lambda row: (row.summary.turns, row.session_id)
    if sort == "id":
        return lambda row: (row.session_id, row.project, row.agent)
    raise UsageError(
        f"expected a sort key among {', '.join(SORT_KEYS)}, found {sort!r}",
        hint="for example --sort tokens",
    )


def list_sessions(
    root: DataRoot,
    filters: SessionFilter | None = None,
    sort: str = "start",
    *,
    reverse: bool = False,
    progress: Progress | None = None,
) -> list[SessionRow]:
    """Every session under ``root`` that passes ``filters``, sorted by ``sort``.

    ``sort`` is one of :data:`SORT_KEYS` (ascending; ``reverse`` flips it).
    ``progress`` wraps the sessions that must be read (not cached), for a
    progress bar.
    """
    chosen = filters or SessionFilter()
    key = _sort_key(sort)
    if chosen.status is not None and chosen.status not in STATUS_CHOICES:
        raise UsageError(
            f"expected a status among {', '.join(STATUS_CHOICES)}, found {chosen.status!r}",
            hint="for example --status failed",
        )
    if not root.path.is_dir():
        return []
    refs = list(iter_sessions(root, chosen.project, chosen.agent))
    rows = [row for row in _rows(root, refs, chosen, progress) if chosen.keeps(row)]
    rows.sort(key=key, reverse=reverse)
    return rows


def resolve_session(
    root: DataRoot, id_or_prefix: str, *, project: str | None = None, agent: str | None = None
) -> SessionRef:
    """The one session a reference names: ``[[project/]agent/]id``, where ``id`` is a full
    session id, a unique prefix of one, or a prefix of its 8-hex token
    (:mod:`pentrace.infrastructure.sessions.refs`).

    An exact id wins over longer ids it prefixes; ``project`` / ``agent``
    (``--project`` / ``--agent``) narrow the search like the reference's own
    owner parts.  Raises :class:`~pentrace.errors.AmbiguousIdError` listing the
    candidates as ``project/agent/session-id``, or
    :class:`~pentrace.errors.NoMatchError` (a NotFoundError) when nothing matches.
    """
    wanted = id_or_prefix.strip()
    if not wanted:
        raise UsageError("expected a session id or prefix, found an empty string", hint=_HINT)
    named_project, named_agent = owner_of(wanted)
    for option, named, flag in (
        (project, named_project, "--project"),
        (agent, named_agent, "--agent"),
    ):
        if option is not None and named is not None and option != named:
            raise UsageError(
                f"the reference {wanted!r} names {named!r}, but {flag} says {option!r}",
                hint=f"drop {flag}, or the owner part of the reference",
            )
    project, agent = named_project or project, named_agent or agent
    refs = list(iter_sessions(root, project, agent)) if root.path.is_dir() else []
    by_key = {ref.key: ref for ref in refs}
    found = match_sessions(by_key, wanted)
    if len(found) == 1:
        return by_key[found[0]]
    if not found:
        where = "/".join(p for p in (project, agent) if p) or "any project"
        raise NoMatchError(
            f"no session id or 8-hex token starts with {wanted.rpartition('/')[2]!r} "
            f"under {root.path} ({where})",
            hint=_HINT,
        )
    raise ambiguous(wanted, found)


_HINT: Final = (
    "list sessions with `pentrace list` (use --data-root or PENGUIN_HOME for another root)"
)


# -- the derived cache ----------------------------------------------------------------
# Bump when SessionRow or SessionSummary change meaning: old rows are then dropped.
CACHE_VERSION: Final = 2  # 2: summaries carry token_totals (issue #13)
Key = tuple[str, str, str]
_CACHE: Final = "the catalog cache"
_CACHE_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS sessions ("
    " project TEXT NOT NULL, agent TEXT NOT NULL, session_id TEXT NOT NULL,"
    " signature BLOB NOT NULL, row BLOB NOT NULL,"
    " PRIMARY KEY (project, agent, session_id)) WITHOUT ROWID"
)


def _cache_store(root: Path) -> SideStore:
    return SideStore(
        path=_cache_file(root),
        what=_CACHE,
        schema=(_CACHE_SCHEMA,),
        error=CatalogCacheError,
        hint="delete it: the catalog cache is rebuilt from the traces",
        user_version=CACHE_VERSION,
        busy_seconds=5.0,
        parents=False,
    )


def _cache_file(root: Path) -> Path:
    return root / ".pentrace" / "catalog.db"


class CatalogCacheError(PentraceError):
    """The catalog cache could not be used (the catalog then lists from the traces)."""


class CatalogCache:
    """Signatures and rows by ``(project, agent, session_id)``; no database means no cache.

    The cache is derived from the traces and may be deleted at any time; damage
    never fails a command: a file that is not a database, a malformed one or
    one of another version is recreated (:class:`SideStore`), and a locked or
    read-only cache makes this run work without it (logged).
    """

    def __init__(self, connection: sqlite3.Connection | None, store: SideStore | None = None):
        self._db = connection
        self._store = store

    @property
    def enabled(self) -> bool:
        """True when rows are read from and written to a file."""
        return self._db is not None

    def load(self) -> dict[Key, tuple[bytes, bytes]]:
        """Every cached ``(signature, row)``; empty when the cache is off or unreadable."""
        if self._db is None:
            return {}
        try:
            found = self._db.execute(
                "SELECT project, agent, session_id, signature, row FROM sessions"
            ).fetchall()
        except sqlite3.Error as exc:
            self._disable("read", exc)
            return {}
        return {(p, a, s): (bytes(sig), bytes(row)) for p, a, s, sig, row in found}

    def store(self, fresh: Iterable[tuple[Key, bytes, bytes]], gone: Iterable[Key]) -> None:
        """Upsert freshly read rows and forget sessions that no longer exist, in one transaction."""
        fresh, gone = list(fresh), list(gone)
        db, store = self._db, self._store
        if db is None or store is None or not (fresh or gone):
            return

        def work() -> None:
            db.executemany(
                "INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, ?, ?)",
                [(*key, signature, row) for key, signature, row in fresh],
            )
            db.executemany(
                "DELETE FROM sessions WHERE project = ? AND agent = ? AND session_id = ?", gone
            )

        try:
            store.write(db, work)
        except CatalogCacheError as exc:
            self._disable("update", exc)

    def close(self) -> None:
        """Close the database (a no-op without one)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def _disable(self, step: str, exc: Exception) -> None:
        # The cache is derived: listing from the traces is slower but still right.
        logger.warning("catalog cache %s failed (%s); continuing without it", step, exc)
        self.close()


def open_cache(root: Path) -> CatalogCache:
    """The cache of data root ``root``, rebuilt when damaged, disabled when unusable."""
    store = _cache_store(root)
    try:
        return CatalogCache(store.open(), store)
    except (OSError, CatalogCacheError) as exc:
        # Locked, read-only or out of space: nothing to repair, just go without.
        logger.warning("catalog cache %s unusable (%s); listing without it", store.path, exc)
        return CatalogCache(None)


@contextmanager
def _cache_owner(root: Path) -> Iterator[None]:
    """One thread and process at a time reads and refreshes the cache (issue #32): the
    others wait, then find the rows it wrote; a root where no lock can be made goes on
    without one (no cache will be written there either)."""
    with ExitStack() as stack:
        try:
            stack.enter_context(owner(_cache_file(root), _CACHE, error=CatalogCacheError))
        except (OSError, CatalogCacheError) as exc:
            logger.warning("catalog cache of %s not locked (%s); listing without it", root, exc)
        yield
