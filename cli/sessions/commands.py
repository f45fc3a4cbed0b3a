"""Session commands: ``sessions list``, ``show`` and ``delete``.

Thin wrappers over :mod:`pentrace.infrastructure.catalog.listing` and
:mod:`pentrace.infrastructure.sessions.files`.  ``--json`` shapes are
documented in ``docs/cli-json.md``.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

import typer

from pentrace.cli.options import (
    TIME_HELP,
    FieldsOption,
    JsonLinesOption,
    check_fields,
    emit_records,
    time_bound,
)
from pentrace.cli.output import emit_json, emit_table, progress, stdout_is_tty
from pentrace.cli.sessions.args import (
    AgentOption,
    JsonOption,
    ProjectOption,
    confirm_or_refuse,
    data_root,
    forget_in_ledger,
    one_session,
)
from pentrace.infrastructure.catalog.listing import (
    SORT_KEYS,
    STATUS_CHOICES,
    SessionFilter,
    SessionRow,
    list_sessions,
    read_row,
)
from pentrace.infrastructure.operations.documents import (
    CLI_ALIASES,
    FIELDS,
    session_detail,
    session_document,
    shard_files,
    with_aliases,
)
from pentrace.infrastructure.sessions.files import delete_session
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef
from pentrace.projections.session_summary import model_name, numbers_of

__all__ = ["register", "row_json", "sessions_app"]

sessions_app = typer.Typer(
    name="sessions",
    no_args_is_help=True,
    help="Session catalog commands.\n\nExample: pentrace sessions list --errors",
)


def _number(value: object) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _start(start: str | None, *, short: bool) -> str | None:
    """The start time; to the minute at a terminal, where width is scarce."""
    return start[:16].replace("T", " ") if short and start else start


ROW_FIELDS: Final = (*(name for name, _, _ in FIELDS), *CLI_ALIASES)


def row_json(row: SessionRow) -> dict[str, Any]:
    """The ``sessions list --json`` object of one session: the session document, with the
    CLI's old names as aliases (``docs/cli-json.md``)."""
    return with_aliases(session_document(row), CLI_ALIASES)


@sessions_app.command("list")
def list_command(
    ctx: typer.Context,
    project: ProjectOption = None,
    agent: AgentOption = None,
    since: Annotated[
        str | None,
        typer.Option(
            metavar="<when>", help=f"Started at or after: {TIME_HELP}.", show_default=False
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            metavar="<when>", help="Started at or before (same forms).", show_default=False
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model id, or provider/model_id.", show_default=False)
    ] = None,
    status: Annotated[
        str | None,
        typer.Option(help=f"Last request status: {', '.join(STATUS_CHOICES)}.", show_default=False),
    ] = None,
    errors: Annotated[
        bool | None,
        typer.Option(
            "--errors/--no-errors",
            help="Only sessions with (or without) errors.",
            show_default=False,
        ),
    ] = None,
    sort: Annotated[str, typer.Option(help=f"Sort by {', '.join(SORT_KEYS)}.")] = "start",
    reverse: Annotated[bool, typer.Option("--reverse", "-r", help="Reverse the order.")] = False,
    limit: Annotated[int | None, typer.Option(help="Show at most N sessions.", min=1)] = None,
    as_json: JsonOption = False,
    as_jsonl: JsonLinesOption = False,
    fields: FieldsOption = None,
) -> None:
    """List sessions with id, start, model, turns, tokens and last status.

    Rows come from a cache (<root>/.pentrace/catalog.db) rebuilt from the traces
    whenever a shard changes; deleting it is always safe.

    Example: pentrace sessions list --agent default_agent --since 7d --errors --sort tokens -r

    Example: pentrace sessions list --json --fields short_id,model_id,tokens
    """
    check_fields(fields, as_json or as_jsonl)
    filters = SessionFilter(
        project=project,
        agent=agent,
        since=time_bound(since, "--since"),
        until=time_bound(until, "--until"),
        model=model,
        status=status,
        has_errors=errors,
    )

    def bar(refs: Any) -> Any:
        return progress(refs, total=len(refs), label="reading sessions")

    rows = list_sessions(data_root(ctx), filters, sort, reverse=reverse, progress=bar)
    rows = rows[:limit] if limit is not None else rows
    if as_json or as_jsonl:
        sessions = (row_json(row) for row in rows)
        emit_records(sessions, fields, ROW_FIELDS, jsonl=as_jsonl, under="sessions")
        return
    tty = stdout_is_tty()
    emit_table(
        ("session", "project/agent", "start", "model", "turns", "tokens", "status", "errors"),
        [
            (
                row.session_id,
                f"{row.project}/{row.agent}",
                _start(row.start, short=tty),
                model_name(row.summary.provider, row.summary.model_id),
                row.summary.turns,
                row.summary.total_tokens,
                row.status,
                "yes" if row.has_errors else "no",
            )
            for row in rows
        ],
        title=f"{len(rows)} session(s)",
        keep=("session",),
        droppable=("errors", "turns", "model", "project/agent", "status", "start"),
    )


def show_json(root: DataRoot, ref: SessionRef, row: SessionRow) -> dict[str, Any]:
    """The ``show --json`` object: the session detail with the CLI's old names; the old
    ``shards`` is the list of files with absolute paths."""
    detail = session_detail(root, ref, row)
    files = [{**f, "path": str(root.path / f["path"])} for f in detail["shard_files"]]
    return {**with_aliases(detail, CLI_ALIASES), "shards": files}


def _show_text(root: DataRoot, ref: SessionRef, row: SessionRow) -> None:
    summary = row.summary
    numbers = numbers_of(summary)
    requests = ", ".join(f"{k} {v}" for k, v in numbers.requests.items()) or "none"
    tokens = ", ".join(f"{k} {v}" for k, v in numbers.tokens.items())
    carried = ", ".join(f"{k} {v}" for k, v in summary.tokens.items())
    duration = "" if numbers.duration_s is None else f"  ({numbers.duration_s:g} s)"
    compactions = ", ".join(f"{c.mode}/{c.status} {c.count}" for c in summary.compactions)
    lines = [
        f"session      {ref.session_id}  ({ref.project}/{ref.agent})",
        f"model        {numbers.model or '-'}",
        f"workspace    {summary.workspace or '-'}",
        f"source       {summary.source or 'user'}",
        f"time         {summary.first_timestamp or '-'} .. {summary.last_timestamp or '-'}"
        f"{duration}",
        f"records      {summary.records} in {row.shards} shard(s), {row.bytes} bytes",
        f"turns        {summary.turns}",
        f"requests     {numbers.request_total}: {requests}; last: {row.status}",
        f"tokens       {tokens}",
        f"approvals    {', '.join(f'{k} {v}' for k, v in summary.approvals.items()) or 'none'}",
        f"compactions  {compactions or 'none'}; dangling {summary.dangling_compactions}",
        f"aborts       {summary.aborts}",
        f"goals        {', '.join(f'{k} {v}' for k, v in summary.goals.items()) or 'none'}",
        f"subagents    {', '.join(summary.subagents) or 'none'}",
    ]
    if summary.total_tokens != _number(summary.tokens.get("total")):
        # Resume carries the harness's running counts over; say so when they differ.
        lines.append(f"carried over {carried} (the running session counts resume reads)")
    if summary.forked_from:
        origin = summary.forked_from
        lines.append(
            f"forked from  {origin.get('session_id')} at turn {origin.get('turn')}, "
            f"position {origin.get('position')}"
        )
    damage = f"{row.skipped_lines} malformed line(s), {row.torn_tails} torn tail(s)"
    lines.append(f"files        {damage}; errors: {'yes' if row.has_errors else 'no'}")
    if row.problem:
        lines.append(f"problem      {row.problem}")
    typer.echo("\n".join(lines))
    for shard in shard_files(root, ref):
        where = root.path / shard["path"]
        typer.echo(f"  shard {shard['index']:03d}  {where}  ({shard['bytes']} bytes)")
    if summary.tool_calls:
        emit_table(
            ("tool", "calls", "failures", "unanswered"),
            [(n, s.calls, s.failures, s.unanswered) for n, s in summary.tool_calls.items()],
            title="tool calls",
        )


@one_session
def show(
    root: DataRoot,
    ref: SessionRef,
    as_json: JsonOption = False,
) -> None:
    """Show a session: meta, shard files, counters, tokens, requests, tools, compactions.

    Example: pentrace show 3f8a1c2d
    """
    row = read_row(ref)
    if as_json:
        emit_json(show_json(root, ref, row))
    else:
        _show_text(root, ref, row)


@one_session
def delete(
    root: DataRoot,
    ref: SessionRef,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a session: its shards, checkpoints, leftover temp files, scratchpad (tool
    output archives), lock file and ledger events (subagent children stay).

    Asks for confirmation unless --yes; refuses without a terminal and without --yes.

    Example: pentrace delete 3f8a1c2d --yes
    """
    question = f"Delete {ref.session_id} ({ref.project}/{ref.agent}, {len(ref.shards)} shard(s))?"
    if not confirm_or_refuse(question, yes=yes, what=f"delete session {ref.session_id}"):
        typer.echo("nothing deleted")
        raise typer.Exit(1)
    result = delete_session(root, ref.project, ref.agent, ref.session_id)
    typer.echo(f"deleted {result.session_id}: {len(result.removed)} path(s) removed")
    forgotten = forget_in_ledger(root, [ref.key])
    if forgotten is None:
        raise typer.Exit(1)
    if forgotten:
        typer.echo(f"removed {forgotten} ledger event(s) of {result.session_id}")


def register(app: typer.Typer) -> None:
    """Add these commands to the ``pentrace`` app."""
    app.add_typer(sessions_app)
    app.command()(show)
    app.command()(delete)
