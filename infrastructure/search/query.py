"""Queries against the search index: filters, ordering, snippets and clean FTS5 errors.

Matches in a snippet are wrapped in :data:`MARK_START` / :data:`MARK_END`
(control characters that never occur in redacted text); the CLI turns them
into colour on a terminal and ``**`` in plain and JSON output.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from pentrace.domain.json_codec import escape_surrogates
from pentrace.domain.omnimessage import format_timestamp
from pentrace.errors import SearchIndexError, SearchQueryError, UsageError
from pentrace.infrastructure.storage.sqlite import is_busy
from pentrace.projections.search_docs import KINDS

__all__ = ["MARK_END", "MARK_START", "SearchHit", "SearchQuery", "run_query"]

MARK_START: Final = "\x02"
MARK_END: Final = "\x03"
_SNIPPET_TOKENS: Final = 24
# What SQLite says about a MATCH expression it cannot parse.
_SYNTAX_SIGNS: Final = (
    "fts5",
    "no such column",
    "unknown special query",
    "unterminated string",
    "syntax error",
    "malformed match",
)
_QUERY_HINT: Final = (
    'quote words that hold punctuation ("foo-bar", "a.b"); AND, OR, NOT and NEAR must be '
    "upper case; end a word with * for a prefix"
)


@dataclass(frozen=True)
class SearchQuery:
    """An FTS5 ``text`` query plus filters; ``since``/``until`` bound the record's time.

    ``kinds`` empty means text, tool calls and tool outputs (and thinking when
    ``thinking`` is true).  ``order`` is ``rank`` (best match first among the
    newest ``window`` matches, so the cost stays bounded however large the
    corpus) or ``recent`` (newest sessions first, then latest position).
    ``sessions`` keeps only those session ids (empty: all).
    """

    text: str
    project: str | None = None
    agent: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    kinds: tuple[str, ...] = ()
    thinking: bool = False
    limit: int = 20
    order: Literal["rank", "recent"] = "rank"
    sessions: tuple[str, ...] = ()
    window: int = 5000


class SearchHit(msgspec.Struct, kw_only=True):
    """One hit; ``snippet`` marks matches with MARK_START/MARK_END; ``time`` is ISO 8601 UTC."""

    session_id: str
    project: str
    agent: str
    turn: int
    position: int
    kind: str
    role: str | None
    time: str | None
    path: str | None
    line: int
    snippet: str


def _kinds(query: SearchQuery) -> tuple[str, ...]:
    for kind in query.kinds:
        if kind not in KINDS:
            raise UsageError(
                f"expected --kind to be one of {', '.join(KINDS)}, found {kind!r}",
                hint="for example --kind tool_call",
            )
    if query.kinds:
        return query.kinds
    return KINDS if query.thinking else tuple(k for k in KINDS if k != "thinking")


def _ms(moment: datetime) -> int:
    return int(moment.astimezone(UTC).timestamp() * 1000)


def run_query(conn: sqlite3.Connection, path: Path, query: SearchQuery) -> list[SearchHit]:
    """Run ``query`` on an open index connection (``path`` names the index in errors)."""
    if not query.text.strip():
        raise SearchQueryError("expected a search query, found an empty one", hint=_QUERY_HINT)
    if query.limit < 1:
        raise UsageError(f"expected --limit >= 1, found {query.limit}", hint="try --limit 20")
    kinds = _kinds(query)
    # The index holds lone surrogates as their JSON escapes (ADR 0015); so does the query.
    text = escape_surrogates(query.text)
    where = ["docs MATCH ?", f"docs.kind IN ({', '.join('?' * len(kinds))})"]
    params: list[object] = [text, *kinds]
    for column, value in (("s.project", query.project), ("s.agent", query.agent)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(escape_surrogates(value))
    if query.since is not None:
        where.append("docs.time >= ?")
        params.append(_ms(query.since))
    if query.until is not None:
        where.append("docs.time < ?")
        params.append(_ms(query.until))
    if query.sessions:
        where.append(f"s.session_id IN ({', '.join('?' * len(query.sessions))})")
        params.extend(escape_surrogates(session) for session in query.sessions)
    # FTS5 must score every match to sort by rank, which grows with the corpus; so
    # the newest ``window`` matches are scored and the best of them are shown.
    window = max(query.window, query.limit) if query.order == "rank" else query.limit
    candidates = (
        "SELECT docs.rowid, bm25(docs) FROM docs JOIN sessions s ON s.id = (docs.rowid >> 32) "
        f"WHERE {' AND '.join(where)} ORDER BY docs.rowid DESC LIMIT ?"
    )
    try:
        found = conn.execute(candidates, [*params, window]).fetchall()
        if query.order == "rank":
            found.sort(key=lambda row: row[1])
        chosen = [int(row[0]) for row in found[: query.limit]]
        rows = conn.execute(_details(len(chosen)), [text, *chosen]).fetchall()
    except sqlite3.OperationalError as error:
        raise _query_error(path, error) from error
    by_rowid = {int(row[0]): row for row in rows}
    return [_hit(by_rowid[rowid]) for rowid in chosen if rowid in by_rowid]


def _details(count: int) -> str:
    return (
        "SELECT docs.rowid, docs.kind, docs.role, docs.turn, docs.time, docs.line, "
        f"snippet(docs, 0, '{MARK_START}', '{MARK_END}', '…', {_SNIPPET_TOKENS}), "
        "s.project, s.agent, s.session_id, sh.path "
        "FROM docs JOIN sessions s ON s.id = (docs.rowid >> 32) "
        "LEFT JOIN shards sh ON sh.session = s.id AND sh.idx = docs.shard "
        f"WHERE docs MATCH ? AND docs.rowid IN ({', '.join('?' * count)})"
    )


def _hit(row: Any) -> SearchHit:
    return SearchHit(
        session_id=row[9],
        project=row[7],
        agent=row[8],
        turn=int(row[3]),
        position=int(row[0]) & 0xFFFFFFFF,
        kind=row[1],
        role=row[2],
        time=_iso(row[4]),
        path=row[10],
        line=int(row[5]),
        snippet=row[6],
    )


def _iso(ms: object) -> str | None:
    if not isinstance(ms, int) or ms <= 0:
        return None
    return format_timestamp(datetime.fromtimestamp(ms / 1000, UTC))


def _query_error(path: Path, error: sqlite3.OperationalError) -> Exception:
    reason = str(error).splitlines()[0][:160]
    lowered = reason.lower()
    if any(sign in lowered for sign in _SYNTAX_SIGNS):
        return SearchQueryError(
            f"the search query is not valid FTS5 syntax ({reason})", hint=_QUERY_HINT
        )
    if is_busy(error):
        return SearchIndexError(
            f"the search index {path} is locked by another process",
            hint="wait for the other search or rebuild to finish, then retry",
        )
    return SearchIndexError(
        f"searching {path} failed ({reason})",
        hint="run `pentrace search --rebuild` to recreate the index",
    )
