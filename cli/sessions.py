"""Session commands: ``sessions list``, ``show`` and ``delete``.

Thin wrappers over :mod:`pentrace.infrastructure.catalog` and
:mod:`pentrace.infrastructure.session_files`.  ``--json`` shapes are
documented in ``docs/cli-json.md``.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec
import typer

from pentrace.cli.output import emit_json, emit_table, progress
from pentrace.cli.session_args import (
    AgentOption,
    JsonOption,
    ProjectOption,
    SessionArgument,
    confirm_or_refuse,
    data_root,
    forget_in_ledger,
    resolve,
)
from pentrace.infrastructure.catalog import (
    SORT_KEYS,
    STATUS_CHOICES,
    SessionFilter,
    SessionRow,
    list_sessions,
    parse_time_bound,
    read_row,
    short_id,
)
from pentrace.infrastructure.layout import SessionRef
from pentrace.infrastructure.session_files import delete_session

__all__ = ["register", "row_json", "sessions_app"]

sessions_app = typer.Typer(
    name="sessions",
    no_args_is_help=True,
    help="Session catalog commands.\n\nExample: pentrace sessions list --errors",
)


def _model(row: SessionRow) -> str | None:
    summary = row.summary
    if summary.model_id is None:
        return None
    return f"{summary.provider}/{summary.model_id}" if summary.provider else summary.model_id


def row_json(row: SessionRow) -> dict[str, Any]:
    """The ``sessions list --json`` object of one session."""
    summary = row.summary
    return {
        "project": row.project,
        "agent": row.agent,
        "session_id": row.session_id,
        "short_id": short_id(row.session_id),
        "start": row.start,
        "last": summary.last_timestamp,
        "provider": summary.provider,
        "model_id": summary.model_id,
        "source": summary.source,
        "turns": summary.turns,
        "tokens": summary.total_tokens,
        "status": row.status,
        "records": summary.records,
        "shards": row.shards,
        "bytes": row.bytes,
        "has_errors": row.has_errors,
        "problem": row.problem,
    }


@sessions_app.command("list")
def list_command(
    ctx: typer.Context,
    project: ProjectOption = None,
    agent: AgentOption = None,
    since: Annotated[
        str | None, typer.Option(help="Started at or after: 2026-11-01, an ISO time, or 7d ago.")
    ] = None,
    until: Annotated[str | None, typer.Option(help="Started at or before (same forms).")] = None,
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
) -> None:
    """List sessions with id, start, model, turns, tokens and last status.

    Rows come from a cache (<root>/.pentrace/catalog.db) rebuilt from the traces
    whenever a shard changes; deleting it is always safe.

    Example: pentrace sessions list --agent default_agent --since 7d --errors --sort tokens -r
    """
    now = datetime.now(UTC)
    filters = SessionFilter(
        project=project,
        agent=agent,
        since=parse_time_bound(since, now) if since is not None else None,
        until=parse_time_bound(until, now) if until is not None else None,
        model=model,
        status=status,
        has_errors=errors,
    )

    def bar(refs: Any) -> Any:
        return progress(refs, total=len(refs), label="reading sessions")

    rows = list_sessions(data_root(ctx), filters, sort, reverse=reverse, progress=bar)
    rows = rows[:limit] if limit is not None else rows
    if as_json:
        emit_json({"sessions": [row_json(row) for row in rows]})
        return
    emit_table(
        ("session", "project/agent", "start", "model", "turns", "tokens", "status", "errors"),
        [
            (
                row.session_id,
                f"{row.project}/{row.agent}",
                row.start,
                _model(row),
                row.summary.turns,
                row.summary.total_tokens,
                row.status,
                "yes" if row.has_errors else "no",
            )
            for row in rows
        ],
        title=f"{len(rows)} session(s)",
    )


def _shards_json(ref: SessionRef) -> list[dict[str, Any]]:
    shards = []
    for shard in ref.shards:
        try:
            size: int | None = os.stat(shard.path).st_size
        except OSError:
            size = None
        day = shard.day.isoformat()
        shards.append({"index": shard.index, "day": day, "path": str(shard.path), "bytes": size})
    return shards


def show_json(ref: SessionRef, row: SessionRow) -> dict[str, Any]:
    """The ``show --json`` object."""
    return {
        "project": ref.project,
        "agent": ref.agent,
        "session_id": ref.session_id,
        "short_id": short_id(ref.session_id),
        "shards": _shards_json(ref),
        "bytes": row.bytes,
        "skipped_lines": row.skipped_lines,
        "torn_tails": row.torn_tails,
        "problem": row.problem,
        "has_errors": row.has_errors,
        "summary": msgspec.to_builtins(row.summary),
    }


def _show_text(ref: SessionRef, row: SessionRow) -> None:
    summary = row.summary
    requests = ", ".join(f"{k} {v}" for k, v in summary.requests.items() if v) or "none"
    tokens = ", ".join(f"{k} {v}" for k, v in summary.tokens.items())
    compactions = ", ".join(f"{c.mode}/{c.status} {c.count}" for c in summary.compactions)
    lines = [
        f"session      {ref.session_id}  ({ref.project}/{ref.agent})",
        f"model        {_model(row) or '-'}",
        f"workspace    {summary.workspace or '-'}",
        f"source       {summary.source or 'user'}",
        f"time         {summary.first_timestamp or '-'} .. {summary.last_timestamp or '-'}",
        f"records      {summary.records} in {row.shards} shard(s), {row.bytes} bytes",
        f"turns        {summary.turns}",
        f"requests     {requests}; last: {row.status}",
        f"tokens       {tokens}",
        f"approvals    {', '.join(f'{k} {v}' for k, v in summary.approvals.items()) or 'none'}",
        f"compactions  {compactions or 'none'}; dangling {summary.dangling_compactions}",
        f"aborts       {summary.aborts}",
        f"goals        {', '.join(f'{k} {v}' for k, v in summary.goals.items()) or 'none'}",
        f"subagents    {', '.join(summary.subagents) or 'none'}",
    ]
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
    for shard in _shards_json(ref):
        typer.echo(f"  shard {shard['index']:03d}  {shard['path']}  ({shard['bytes']} bytes)")
    if summary.tool_calls:
        emit_table(
            ("tool", "calls", "failures", "unanswered"),
            [(n, s.calls, s.failures, s.unanswered) for n, s in summary.tool_calls.items()],
            title="tool calls",
        )


def show(
    ctx: typer.Context,
    session: SessionArgument,
    project: ProjectOption = None,
    agent: AgentOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a session: meta, shard files, counters, tokens, requests, tools, compactions.

    Example: pentrace show 3f8a1c2d
    """
    _, ref = resolve(ctx, session, project, agent)
    row = read_row(ref)
    if as_json:
        emit_json(show_json(ref, row))
    else:
        _show_text(ref, row)


def delete(
    ctx: typer.Context,
    session: SessionArgument,
    project: ProjectOption = None,
    agent: AgentOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a session: its shards, checkpoints, leftover temp files, scratchpad (tool
    output archives), lock file and ledger events (subagent children stay).

    Asks for confirmation unless --yes; refuses without a terminal and without --yes.

    Example: pentrace delete 3f8a1c2d --yes
    """
    root, ref = resolve(ctx, session, project, agent)
    question = f"Delete {ref.session_id} ({ref.project}/{ref.agent}, {len(ref.shards)} shard(s))?"
    if not confirm_or_refuse(question, yes=yes, what=f"delete session {ref.session_id}"):
        typer.echo("nothing deleted")
        raise typer.Exit(1)
    result = delete_session(root, ref.project, ref.agent, ref.session_id)
    typer.echo(f"deleted {result.session_id}: {len(result.removed)} path(s) removed")
    forgotten = forget_in_ledger(root, [result.session_id])
    if forgotten is None:
        raise typer.Exit(1)
    if forgotten:
        typer.echo(f"removed {forgotten} ledger event(s) of {result.session_id}")


def register(app: typer.Typer) -> None:
    """Add these commands to the ``pentrace`` app."""
    app.add_typer(sessions_app)
    app.command()(show)
    app.command()(delete)
