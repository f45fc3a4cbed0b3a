"""``pentrace search``: full-text search across sessions (messages, tool calls, tool outputs).

The index (:mod:`pentrace.infrastructure.search_index`) is refreshed from the
traces before each search, reading only what was appended since the last one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

import msgspec
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pentrace.cli.output import emit_json, emit_table, progress, stdout_is_tty
from pentrace.cli.session_args import AgentOption, JsonOption, ProjectOption, data_root, resolve
from pentrace.errors import UsageError
from pentrace.infrastructure.catalog import parse_time_bound, short_id
from pentrace.infrastructure.layout import DataRoot
from pentrace.infrastructure.search_index import RefreshReport, SearchIndex
from pentrace.infrastructure.search_query import MARK_END, MARK_START, SearchHit, SearchQuery

__all__ = ["search"]


def _plain(snippet: str) -> str:
    return snippet.replace(MARK_START, "**").replace(MARK_END, "**").replace("\n", " ")


def _highlighted(snippet: str) -> Text:
    text = Text()
    for number, part in enumerate(snippet.replace("\n", " ").split(MARK_START)):
        if number == 0:
            text.append(part)
            continue
        match, _, rest = part.partition(MARK_END)
        text.append(match, style="bold yellow")
        text.append(rest)
    return text


def _print_hits(hits: list[SearchHit]) -> None:
    columns = ("session", "turn", "position", "kind", "time", "snippet")
    if stdout_is_tty():
        table = Table(*columns)
        for hit in hits:
            table.add_row(
                Text(f"{hit.project}/{hit.agent}/{short_id(hit.session_id)}"),
                str(hit.turn),
                str(hit.position),
                Text(hit.kind),
                Text(hit.time or "-"),
                _highlighted(hit.snippet),
            )
        Console().print(table)
        return
    emit_table(
        columns,
        (
            (
                f"{hit.project}/{hit.agent}/{hit.session_id}",
                hit.turn,
                hit.position,
                hit.kind,
                hit.time,
                _plain(hit.snippet),
            )
            for hit in hits
        ),
    )


def _refresh(index: SearchIndex, root: DataRoot, rebuild: bool) -> RefreshReport:
    refs = list(root.iter_sessions()) if root.path.is_dir() else []
    shown = progress(refs, total=len(refs), label="indexing")
    return index.rebuild(shown) if rebuild else index.refresh(shown)


def _bound(text: str | None) -> datetime | None:
    return None if text is None else parse_time_bound(text, datetime.now(UTC))


def search(
    ctx: typer.Context,
    query: Annotated[
        str | None,
        typer.Argument(
            help='FTS5 query: words, "exact phrase", prefix*, AND/OR/NOT, NEAR(a b).',
            show_default=False,
        ),
    ] = None,
    project: ProjectOption = None,
    agent: AgentOption = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Only this session (id, unique prefix or project/agent/id).",
            show_default=False,
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            help="Only records at or after: 2026-11-01, an ISO time or 7d.", show_default=False
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            help="Only records before: 2026-11-01, an ISO time or 12h.", show_default=False
        ),
    ] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind",
            help="text, thinking, tool_call or tool_output (repeatable; default: all but "
            "thinking).",
            show_default=False,
        ),
    ] = None,
    thinking: Annotated[bool, typer.Option("--thinking", help="Search thinking too.")] = False,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Most hits to show.")] = 20,
    sort: Annotated[
        str,
        typer.Option(
            help="rank (best match first among the newest 5,000 matches) or recent "
            "(newest sessions first)."
        ),
    ] = "rank",
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Recreate the index from the traces first.")
    ] = False,
    no_refresh: Annotated[
        bool, typer.Option("--no-refresh", help="Search the index as it is (skip the update).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Search user and assistant text, tool calls and tool outputs across sessions.

    Prints session, turn, position, kind, time and a snippet with the match
    highlighted. The index lives in <data root>/.pentrace/search.db, holds
    redacted text only, and is brought up to date from the traces first.

    Example: pentrace search "deploy*" --kind tool_call --since 7d
    """
    if sort not in ("rank", "recent"):
        raise UsageError(f"expected --sort rank or recent, found {sort!r}", hint="--sort rank")
    order: Literal["rank", "recent"] = "rank" if sort == "rank" else "recent"
    if query is None and not rebuild:
        raise UsageError("expected a search QUERY (or --rebuild)", hint='pentrace search "error"')
    root = data_root(ctx)
    only: tuple[str, ...] = ()
    if session is not None:
        # The session's owner too: its id alone may exist under other agents (ADR 0023).
        chosen = resolve(ctx, session, project, agent)[1]
        only, project, agent = (chosen.session_id,), chosen.project, chosen.agent
    request = SearchQuery(
        text=query or "",
        project=project,
        agent=agent,
        since=_bound(since),
        until=_bound(until),
        kinds=tuple(kind or ()),
        thinking=thinking,
        limit=limit,
        order=order,
        sessions=only,
    )
    with SearchIndex(root) as index:
        report = _refresh(index, root, rebuild) if rebuild or not no_refresh else None
        hits = index.search(request) if query is not None else []
    if query is None:
        assert report is not None
        if as_json:
            emit_json(msgspec.to_builtins(report))
        else:
            typer.echo(
                f"rebuilt the search index: {report.sessions} session(s), "
                f"{report.documents} document(s)"
            )
        return
    if as_json:
        emit_json({"query": query, "hits": [_json_hit(hit) for hit in hits]})
        return
    if not hits:
        typer.echo("no matches", err=True)
        return
    _print_hits(hits)


def _json_hit(hit: SearchHit) -> dict[str, object]:
    value: dict[str, object] = msgspec.to_builtins(hit)
    value["snippet"] = _plain(hit.snippet)
    return value
