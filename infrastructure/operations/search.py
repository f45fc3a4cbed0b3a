"""Full-text search over the sessions, for ``pentrace search`` and the viewer's search box
(ADR 0103): the derived FTS5 index brought up to date with the traces, then queried.

Its own module because the index loads more than a session listing needs
(``operations/sessions.py`` stays light for every command that names a session).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pentrace.infrastructure.search.index import RefreshReport, SearchIndex
from pentrace.infrastructure.search.query import MARK_END, MARK_START, SearchHit, SearchQuery
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef

__all__ = [
    "MARK_END",
    "MARK_START",
    "RefreshReport",
    "SearchHit",
    "SearchQuery",
    "search_sessions",
]


def search_sessions(
    root: DataRoot,
    query: SearchQuery | None,
    *,
    refresh: bool = True,
    rebuild: bool = False,
    shown: Callable[[list[SessionRef]], Iterable[SessionRef]] = lambda refs: refs,
) -> tuple[RefreshReport | None, list[SearchHit]]:
    """The index refreshed from the traces (or rebuilt from scratch), then ``query``'s hits.

    ``shown`` wraps the sessions as the index reads them (a progress bar); the report is
    None when neither ``refresh`` nor ``rebuild`` asked to read them, and there are no
    hits without a query.
    """
    report = None
    with SearchIndex(root) as index:
        if refresh or rebuild:
            refs = shown(list(root.iter_sessions()) if root.path.is_dir() else [])
            report = index.rebuild(refs) if rebuild else index.refresh(refs)
        hits = index.search(query) if query is not None else []
    return report, hits
