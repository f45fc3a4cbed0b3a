"""Session commands: ``list`` (once ``sessions list``), ``show``, ``delete`` and ``prune``
(delete sessions by age or total size, with an exact ``--dry-run``).

Thin wrappers over :mod:`pentrace.infrastructure.operations.sessions` (the catalog
listing, session files, pruning).  ``--json`` shapes are documented in
``docs/cli-json.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final

import typer

from pentrace.cli.options import (
    TIME_HELP,
    FieldsOption,
    JsonLinesOption,
    check_fields,
    emit_records,
    now,
    time_window,
)
from pentrace.cli.output import (
    Cell,
    byte_size,
    duration,
    emit_json,
    emit_table,
    money,
    progress,
    stdout_is_tty,
    text,
    utc_time,
)
from pentrace.cli.sessions.args import (
    AgentOption,
    JsonOption,
    ProjectOption,
    SessionOrFileArgument,
    confirm_or_refuse,
    data_root,
    forget_in_ledger,
    one_session,
    session_or_file,
)
from pentrace.domain.session.key import SessionKey
from pentrace.errors import PentraceError
from pentrace.infrastructure.operations.documents import (
    CLI_ALIASES,
    FIELDS,
    CostTally,
    PriceTable,
    cost_fields,
    cost_flag,
    load_prices,
    session_cost,
    session_detail,
    session_document,
    with_aliases,
)
from pentrace.infrastructure.operations.sessions import (
    SORT_KEYS,
    STATUS_CHOICES,
    DataRoot,
    PruneCandidate,
    PruneOutcome,
    SessionFilter,
    SessionRef,
    SessionRow,
    apply_prune,
    delete_session,
    list_sessions,
    plan_prune,
    read_row,
)
from pentrace.projections.session_summary import SessionSummary, model_name, numbers_of
from pentrace.values import AGE_FORMS, SIZE_FORMS, parse_age, parse_size

__all__ = ["list_command", "prune", "register", "register_prune", "row_json"]


def _number(value: object) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


ROW_FIELDS: Final = (*(name for name, _, _ in FIELDS), *CLI_ALIASES)


def row_json(row: SessionRow, prices: PriceTable | None = None) -> dict[str, Any]:
    """The ``list --json`` object of one session: the session document, with the
    CLI's old names as aliases (``docs/cli-json.md``)."""
    return with_aliases(session_document(row, prices or _prices()), CLI_ALIASES)


def _cost_cell(document: dict[str, Any]) -> Cell:
    """A session's cost with its flag (``0.3172 fallback``, ``unpriced``): never a bare guess."""
    amount, flag = Cell.amount(document["cost"]), cost_flag(document)
    if document["cost"] is None:
        return Cell(flag or "-", flag or "-")
    return Cell(f"{amount.shown} {flag}", f"{amount.plain} {flag}") if flag else amount


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
    """List sessions with their model, tokens, cost and last status.

    One row per session: id, owner (project/agent), start, model, turns,
    tokens, cost (priced as `stats cost --by session` prices it, marked
    fallback or unpriced when a model had no real price) and the last
    request's status.  Was `sessions list` (still answered).

    Rows come from a cache (<root>/.pentrace/catalog.db) rebuilt from the traces
    whenever a shard changes; deleting it is always safe.

    Example: pentrace list --agent default_agent --since 7d --errors --sort tokens -r

    Example: pentrace list --json --fields short_id,model_id,tokens
    """
    check_fields(fields, as_json or as_jsonl)
    start, end = time_window(since, until)
    filters = SessionFilter(
        project=project,
        agent=agent,
        since=start,
        until=end,
        model=model,
        status=status,
        has_errors=errors,
    )

    def bar(refs: Any) -> Any:
        return progress(refs, total=len(refs), label="reading sessions")

    rows = list_sessions(data_root(ctx), filters, sort, reverse=reverse, progress=bar)
    rows = rows[:limit] if limit is not None else rows
    prices = _prices()
    if as_json or as_jsonl:
        sessions = (row_json(row, prices) for row in rows)
        emit_records(sessions, fields, ROW_FIELDS, jsonl=as_jsonl, under="sessions")
        return
    owners = {(row.project, row.agent) for row in rows}
    emit_table(
        _LIST_COLUMNS,
        [
            (
                row.session_id,
                f"{row.project}/{row.agent}",
                utc_time(row.start, minutes=stdout_is_tty()),
                model_name(row.summary.provider, row.summary.model_id),
                row.summary.turns,
                row.summary.total_tokens,
                _cost_cell(cost_fields(session_cost(row.summary, prices))),
                row.status,
                row.has_errors,
            )
            for row in rows
        ],
        title=_title(rows, owners, prices.currency),
        keep=("session",),
        # The owner tells sessions with a shared id apart: it goes first only when every
        # row has the same one (the title names it), else last.
        droppable=_droppable(len(owners) == 1),
    )


_LIST_COLUMNS: Final = (
    *("session", "project/agent", "start", "model", "turns", "tokens", "cost", "status"),
    "errors",
)


def _prices() -> PriceTable:
    """The price table costs are shown with; a broken one costs the column, not the command."""
    try:
        return load_prices()
    except PentraceError as error:
        typer.echo(f"warning: costs priced by the bundled dataset alone: {error.message}", err=True)
        return PriceTable()


def _title(rows: list[SessionRow], owners: set[tuple[str, str]], currency: str) -> str:
    only = f" of {'/'.join(next(iter(owners)))}" if len(owners) == 1 else ""
    return f"{len(rows)} session(s){only}; cost in {currency}"


def _droppable(one_owner: bool) -> tuple[str, ...]:
    rest = ("errors", "turns", "model", "status", "start", "cost", "tokens")
    return ("project/agent", *rest) if one_owner else (*rest, "project/agent")


def show_json(root: DataRoot, ref: SessionRef, row: SessionRow) -> dict[str, Any]:
    """The ``show --json`` object: the session detail with the CLI's old names; the old
    ``shards`` is the list of files with absolute paths."""
    detail = session_detail(root, ref, row, _prices())
    paths = _paths(ref)
    files = [{**f, "path": str(p)} for f, p in zip(detail["shard_files"], paths, strict=True)]
    return {**with_aliases(detail, CLI_ALIASES), "shards": files}


def _cost_text(tally: CostTally) -> str:
    """The cost, its currency and, when it is not all real prices, which models are not."""
    amount = tally.amount()
    shown = "-" if amount is None else f"{money(amount)} {tally.prices.currency}"
    note = tally.note()
    return f"{shown} ({note})" if note else shown


def _paths(ref: SessionRef) -> list[Path]:
    return [shard.path.absolute() for shard in ref.shards]


def _pairs(counts: Mapping[str, Any]) -> str:
    return ", ".join(f"{key} {text(value)}" for key, value in counts.items()) or "none"


def _origin(summary: SessionSummary) -> list[str]:
    """Where a fork or a copy under a new id came from (``forked_from``/``imported_from``)."""
    lines = []
    if summary.forked_from:
        origin = summary.forked_from
        lines.append(
            f"forked from  {text(origin.get('session_id'))} at turn {text(origin.get('turn'))}, "
            f"position {text(origin.get('position'))}"
        )
    if summary.imported_from:
        origin = summary.imported_from
        lines.append(
            f"imported     from session {text(origin.get('session_id'))} "
            f"in {text(origin.get('file'))}"
        )
    return lines


def _show_text(ref: SessionRef, row: SessionRow, *, alone: bool) -> None:
    summary, prices = row.summary, _prices()
    numbers = numbers_of(summary)
    requests = _pairs(numbers.requests)
    tokens = _pairs(numbers.tokens)
    took = "" if numbers.duration_s is None else f"  ({duration(numbers.duration_s)})"
    compactions = ", ".join(f"{c.mode}/{c.status} {c.count}" for c in summary.compactions)
    owner = "a trace file, read on its own" if alone else f"{ref.project}/{ref.agent}"
    first, last = summary.first_timestamp, summary.last_timestamp
    lines = [
        f"session      {ref.session_id}  ({owner})",
        f"model        {numbers.model or '-'}",
        f"workspace    {summary.workspace or '-'}",
        f"source       {summary.source or 'user'}",
        f"time         {utc_time(first)} .. {utc_time(last)}{took}",
        f"records      {text(summary.records)} in {row.shards} shard(s), {byte_size(row.bytes)}",
        f"turns        {text(summary.turns)}",
        f"requests     {text(numbers.request_total)}: {requests}; last: {row.status}",
        f"tokens       {tokens}",
        f"cost         {_cost_text(session_cost(summary, prices))}",
        f"approvals    {_pairs(summary.approvals)}",
        f"compactions  {compactions or 'none'}; dangling {summary.dangling_compactions}",
        f"aborts       {summary.aborts}",
        f"goals        {_pairs(summary.goals)}",
        f"subagents    {', '.join(summary.subagents) or 'none'}",
    ]
    if summary.total_tokens != _number(summary.tokens.get("total")):
        # Resume carries the harness's running counts over; say so when they differ.
        carried = _pairs(summary.tokens)
        lines.append(f"carried over {carried} (the running session counts resume reads)")
    lines += _origin(summary)
    damage = f"{row.skipped_lines} malformed line(s), {row.torn_tails} torn tail(s)"
    lines.append(f"files        {damage}; errors: {'yes' if row.has_errors else 'no'}")
    if row.problem:
        lines.append(f"problem      {row.problem}")
    typer.echo("\n".join(lines))
    for shard, path in zip(ref.shards, _paths(ref), strict=True):
        size = path.stat().st_size if path.exists() else None
        typer.echo(f"  shard {shard.index:03d}  {path}  ({byte_size(size)})")
    if summary.tool_calls:
        emit_table(
            ("tool", "calls", "failures", "unanswered"),
            [(n, s.calls, s.failures, s.unanswered) for n, s in summary.tool_calls.items()],
            title="tool calls",
        )


def show(
    ctx: typer.Context,
    session: SessionOrFileArgument,
    project: ProjectOption = None,
    agent: AgentOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a session, or a trace file: its meta, files and numbers.

    Meta, shard files, counters, tokens, cost, requests, tools and compactions.
    A path (a .jsonl file, or any file that exists) is read as one trace on its
    own, wherever it lies; --project and --agent do not apply to it.

    Example: pentrace show 3f8a1c2d

    Example: pentrace show ./exported.jsonl
    """
    root, ref, alone = session_or_file(ctx, session, project, agent)
    row = read_row(ref)
    if as_json:
        emit_json(show_json(root, ref, row))
    else:
        _show_text(ref, row, alone=alone)


@one_session
def delete(
    root: DataRoot,
    ref: SessionRef,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a session, with its ledger events.

    Its shards, checkpoints, leftover temp files, scratchpad (tool output
    archives), lock file and ledger events go; subagent children stay.

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
    app.command("list")(list_command)
    app.command()(show)
    app.command()(delete)


def _candidate_json(candidate: PruneCandidate, error: str | None = None) -> dict[str, Any]:
    return {
        "project": candidate.project,
        "agent": candidate.agent,
        "session_id": candidate.session_id,
        "last_write": candidate.last_write.isoformat().replace("+00:00", "Z"),  # a contract
        "bytes": candidate.bytes,
        "reason": candidate.reason,
        "error": error,
    }


def prune(
    ctx: typer.Context,
    older_than: Annotated[
        str | None,
        typer.Option(
            metavar="<age>", help=f"Sessions last written longer ago than this: {AGE_FORMS}."
        ),
    ] = None,
    max_size: Annotated[
        str | None,
        typer.Option(
            metavar="<size>",
            help=f"Delete least recently written sessions down to this: {SIZE_FORMS}.",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List exactly what would go; change nothing.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Delete sessions by age or by total size.

    Age counts from a session's last write; --max-size deletes the least
    recently written sessions until the rest fit.

    Exit code 1 when a planned session could not be deleted (for example a live
    writer holds it); the others are still deleted.

    Example: pentrace prune --older-than 30d --dry-run
    """
    root = data_root(ctx)
    plan = plan_prune(
        root,
        older_than=parse_age(older_than, option="--older-than") if older_than is not None else None,
        max_size=parse_size(max_size, option="--max-size") if max_size is not None else None,
        now=now(),
    )
    if dry_run or not plan:
        _report_plan(plan, as_json, dry_run)
        return
    total = sum(c.bytes for c in plan)
    question = f"Delete {len(plan)} session(s), {byte_size(total)}?"
    if not as_json:
        _report_plan(plan, False, True)
    if not confirm_or_refuse(question, yes=yes, what=f"prune {len(plan)} session(s)"):
        typer.echo("nothing deleted")
        raise typer.Exit(1)

    def echo(outcome: PruneOutcome) -> None:
        if not as_json:
            sid = outcome.candidate.session_id
            typer.echo(
                f"deleted {sid}" if outcome.error is None else f"kept {sid}: {outcome.error}"
            )

    outcomes = apply_prune(root, plan, echo)
    deleted = [
        SessionKey(o.candidate.project, o.candidate.agent, o.candidate.session_id)
        for o in outcomes
        if o.error is None
    ]
    forgotten = forget_in_ledger(root, deleted)
    if as_json:
        emit_json(
            {
                "dry_run": False,
                "sessions": [_candidate_json(o.candidate, o.error) for o in outcomes],
                "ledger_events_removed": forgotten,
            }
        )
    elif forgotten:
        typer.echo(f"removed {forgotten} ledger event(s) of the deleted sessions")
    if forgotten is None or any(o.error is not None for o in outcomes):
        raise typer.Exit(1)


def _report_plan(plan: list[PruneCandidate], as_json: bool, dry_run: bool) -> None:
    if as_json:
        emit_json({"dry_run": dry_run, "sessions": [_candidate_json(c) for c in plan]})
        return
    if not plan:
        typer.echo("nothing to prune")
        return
    emit_table(
        ("session", "project/agent", "last write", "bytes", "reason"),
        [
            (c.session_id, f"{c.project}/{c.agent}", c.last_write, Cell.size(c.bytes), c.reason)
            for c in plan
        ],
        title=f"would delete {len(plan)} session(s)" if dry_run else None,
        keep=("session",),
    )


def register_prune(app: typer.Typer) -> None:
    """Add ``prune`` to the ``pentrace`` app (after the replay and file commands, as
    ``pentrace --help`` lists them)."""
    app.command()(prune)
