"""``pentrace search``: full-text search across sessions (messages, tool calls, tool outputs).

The index (:mod:`pentrace.infrastructure.search.index`) is refreshed from the
traces before each search, reading only what was appended since the last one.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

import msgspec
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pentrace.cli.options import (
    TIME_HELP,
    FieldsOption,
    JsonLinesOption,
    check_fields,
    emit_records,
    time_window,
    unshown,
    unshown_argument,
)
from pentrace.cli.output import (
    emit_json,
    emit_table,
    fit_columns,
    progress,
    stdout_is_tty,
    utc_time,
)
from pentrace.cli.sessions.args import AgentOption, JsonOption, ProjectOption, data_root, resolve
from pentrace.errors import UsageError
from pentrace.infrastructure.operations.search import (
    MARK_END,
    MARK_START,
    SearchHit,
    SearchQuery,
    search_sessions,
)
from pentrace.infrastructure.operations.sessions import short_id

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
        console = Console()
        cells = [
            [
                short_id(h.session_id),
                str(h.turn),
                str(h.position),
                h.kind,
                utc_time(h.time),
                "x" * 30,
            ]
            for h in hits
        ]  # the snippet folds: 30 columns of it are enough to decide what else fits
        shown = fit_columns(columns, cells, console.width, ("time", "position", "turn", "kind"))
        table = Table()
        for i in shown:  # the id is never cut; the snippet folds
            snippet = columns[i] == "snippet"
            width = 8 if columns[i] == "session" else None
            table.add_column(columns[i], no_wrap=not snippet, overflow="fold", min_width=width)
        for hit in hits:
            row: list[Text | str] = [
                Text(f"{hit.project}/{hit.agent}/{short_id(hit.session_id)}"),
                str(hit.turn),
                str(hit.position),
                Text(hit.kind),
                Text(utc_time(hit.time)),
                _highlighted(hit.snippet),
            ]
            table.add_row(*(row[i] for i in shown))
        console.print(table)
        return
    emit_table(
        columns,
        (
            (
                f"{hit.project}/{hit.agent}/{hit.session_id}",
                hit.turn,
                hit.position,
                hit.kind,
                utc_time(hit.time),
                _plain(hit.snippet),
            )
            for hit in hits
        ),
    )


def search(
    ctx: typer.Context,
    query: Annotated[
        str | None,
        unshown_argument('FTS5 query: words, "exact phrase", prefix*, AND/OR/NOT, NEAR(a b).'),
    ] = None,
    project: ProjectOption = None,
    agent: AgentOption = None,
    session: Annotated[
        str | None,
        unshown(
            "--session",
            help="Only this session (id, unique prefix or project/agent/id).",
        ),
    ] = None,
    since: Annotated[
        str | None,
        unshown(help=f"Only records at or after: {TIME_HELP}."),
    ] = None,
    until: Annotated[
        str | None,
        unshown(help="Only records before (same forms)."),
    ] = None,
    kind: Annotated[
        list[str] | None,
        unshown(
            "--kind",
            help="text, thinking, tool_call or tool_output (repeatable; default: all but "
            "thinking).",
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
    refresh: Annotated[
        bool,
        typer.Option(
            "--refresh/--no-refresh",
            help="Bring the index up to date first (--no-refresh: search it as it is).",
        ),
    ] = True,
    as_json: JsonOption = False,
    as_jsonl: JsonLinesOption = False,
    fields: FieldsOption = None,
) -> None:
    """Search the text, tool calls and tool outputs of every session.

    Prints session, turn, position, kind, time and a snippet with the match
    highlighted. The index lives in <data root>/.pentrace/search.db, holds
    redacted text only, and is brought up to date from the traces first.

    Example: pentrace search "deploy*" --kind tool_call --since 7d
    """
    check_fields(fields, as_json or as_jsonl)
    if sort not in ("rank", "recent"):
        raise UsageError(f"expected --sort rank or recent, found {sort!r}", hint="--sort rank")
    order: Literal["rank", "recent"] = "rank" if sort == "rank" else "recent"
    if query is None and not rebuild:
        raise UsageError("expected a search QUERY (or --rebuild)", hint='pentrace search "error"')
    start, end = time_window(since, until)
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
        since=start,
        until=end,
        kinds=tuple(kind or ()),
        thinking=thinking,
        limit=limit,
        order=order,
        sessions=only,
    )
    report, hits = search_sessions(
        root,
        request if query is not None else None,
        refresh=refresh,
        rebuild=rebuild,
        shown=lambda refs: progress(refs, total=len(refs), label="indexing"),
    )
    for failure in report.failures if report is not None else ():
        typer.echo(f"warning: left out of the search index: {failure}", err=True)
    if query is None:
        assert report is not None
        if as_json or as_jsonl:
            emit_json(msgspec.to_builtins(report))
        else:
            typer.echo(
                f"rebuilt the search index: {report.sessions} session(s), "
                f"{report.documents} document(s)"
            )
        return
    if as_json or as_jsonl:
        hits_json = (_json_hit(hit) for hit in hits)
        emit_records(hits_json, fields, HIT_FIELDS, jsonl=as_jsonl, under="hits", query=query)
        return
    if not hits:
        typer.echo("no matches", err=True)
        return
    _print_hits(hits)


HIT_FIELDS: Final = (
    *SearchHit.__struct_fields__,
    "highlights",
)


def plain_snippet(snippet: str) -> tuple[str, list[list[int]]]:
    """The snippet as plain text, and each match as ``[start, end)`` offsets into it."""
    text: list[str] = []
    spans: list[list[int]] = []
    size = 0
    for number, part in enumerate(snippet.split(MARK_START)):
        match, marked, rest = part.partition(MARK_END) if number else ("", "", part)
        if marked:
            spans.append([size, size + len(match)])
            text.append(match)
            size += len(match)
        else:
            rest = match + rest  # a start mark without an end: plain text
        text.append(rest)
        size += len(rest)
    return "".join(text), spans


def _json_hit(hit: SearchHit) -> dict[str, object]:
    value: dict[str, object] = msgspec.to_builtins(hit)
    value["snippet"], value["highlights"] = plain_snippet(hit.snippet)
    return value
