"""``pentrace ledger ...``: tail, replay, sync, rebuild, cleanup, forget, stats and import-penguin.

The ledger is derived from the traces; ``sync`` and ``rebuild`` make it agree
with them.  ``--wait`` bounds how long a command waits for another process's
write lock before it fails with a clean "locked" error.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Annotated, Any

import typer

from pentrace.cli.ledger.penguin import import_penguin
from pentrace.cli.ledger.view import COLUMNS, iso, json_entry, print_entries, table_row
from pentrace.cli.output import emit_json, emit_table, progress
from pentrace.cli.sessions.args import (
    AgentOption,
    JsonOption,
    ProjectOption,
    confirm_or_refuse,
    data_root,
)
from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.ledger import RuntimeEventLedger
from pentrace.infrastructure.ledger.admin import (
    entries_after,
    ledger_session,
    ledger_stats,
    newest_entries,
    open_ledger,
    rebuild_ledger,
    retention_plan,
    untraced_sessions,
)
from pentrace.infrastructure.ledger.indexer import SyncReport
from pentrace.infrastructure.ledger.indexer import sync as sync_traces

__all__ = ["ledger_app"]

ledger_app = typer.Typer(
    name="ledger",
    no_args_is_help=True,
    help="Inspect and maintain the RuntimeEvent ledger.\n\nExample: pentrace ledger tail -n 20",
)


class _Options:
    def __init__(self, wait: float) -> None:
        self.wait = wait


@ledger_app.callback()
def _group(
    ctx: typer.Context,
    wait: Annotated[
        float, typer.Option(help="Seconds to wait for another process's lock before failing.")
    ] = 5.0,
) -> None:
    """Inspect and maintain the RuntimeEvent ledger (derived from the traces).

    Example: pentrace ledger --wait 1 sync
    """
    ctx.obj = _Options(wait)


def _open(
    ctx: typer.Context, *, must_exist: bool = True, keep: bool = False, read_only: bool = False
) -> RuntimeEventLedger:
    options: _Options = ctx.obj
    return open_ledger(
        data_root(ctx),
        wait_seconds=options.wait,
        must_exist=must_exist,
        keep_everything=keep,
        read_only=read_only,
    )


@ledger_app.command()
def tail(
    ctx: typer.Context,
    lines: Annotated[
        int, typer.Option("-n", "--lines", help="How many of the newest events.")
    ] = 20,
    follow: Annotated[
        bool, typer.Option("-f", "--follow", help="Keep printing new events as they arrive.")
    ] = False,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Only this session (id, prefix or project/agent/id).",
            show_default=False,
        ),
    ] = None,
    interval: Annotated[float, typer.Option(help="Seconds between polls with -f.")] = 0.5,
    as_json: JsonOption = False,
) -> None:
    """Show the newest ledger events; -f follows new ones (polls the ledger; Ctrl-C stops).

    With --json, one JSON document per line: {"notification_id", "event"}.

    Example: pentrace ledger tail -n 50 -f --session demo/assistant/3f8a1c2d
    """
    ledger = _open(ctx, read_only=True)
    try:
        key = None if session is None else ledger_session(ledger, session)
        entries = newest_entries(ledger, lines, session=key)
        print_entries(entries, as_json, header=True)
        cursor = entries[-1].notification_id or 0 if entries else _head(ledger)
        while follow:
            time.sleep(interval)
            fresh = entries_after(ledger, cursor, session=key)
            if fresh:
                print_entries(fresh, as_json, header=False)
                cursor = fresh[-1].notification_id or cursor
    finally:
        ledger.close()


def _head(ledger: RuntimeEventLedger) -> int:
    newest = newest_entries(ledger, 1)
    return newest[-1].notification_id or 0 if newest else 0


@ledger_app.command()
def replay(
    ctx: typer.Context,
    after: Annotated[
        str,
        typer.Option("--after", help="Event id to replay after (exclusive).", show_default=False),
    ],
    limit: Annotated[int, typer.Option("--limit", "-n", help="Most events to show.")] = 100,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Only this session (id, prefix or project/agent/id) and unscoped events.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Replay the events after an event id, in global order, with honest gap info.

    When the cursor is no longer retained the gap says whether retention
    evicted it or the id never existed here, the retained range in scope, and
    the replay continues from the oldest retained event.

    Example: pentrace ledger replay --after evt:session:demo/assistant/ses_1:00000042
    """
    ledger = _open(ctx, read_only=True)
    try:
        key = None if session is None else ledger_session(ledger, session)
        owned = key if isinstance(key, SessionKey) else None
        bare = key if isinstance(key, str) else None
        result = ledger.replay_after(
            after,
            limit,
            session_id=owned.session_id if owned else bare,
            agent_id=owned.agent if owned else None,
            project_id=owned.project if owned else None,
        )
    finally:
        ledger.close()
    gap = result.gap
    if as_json:
        emit_json(
            {
                "found": result.found,
                "gap": None
                if gap is None
                else {
                    "last_event_id": gap.last_event_id,
                    "reason": gap.reason,
                    "oldest_event_id": gap.oldest_event_id,
                    "newest_event_id": gap.newest_event_id,
                },
                "events": [json_entry(entry) for entry in result.events],
                "next_cursor": result.next_cursor,
            }
        )
        return
    if gap is not None:
        why = "was evicted by retention" if gap.reason == "evicted" else "is not in this ledger"
        typer.echo(
            f"gap: {gap.last_event_id} {why}; retained: {gap.oldest_event_id or '-'} .. "
            f"{gap.newest_event_id or '-'}; continuing from the oldest retained event",
            err=True,
        )
    emit_table(COLUMNS, (table_row(entry) for entry in result.events))


@ledger_app.command()
def sync(
    ctx: typer.Context,
    project: ProjectOption = None,
    agent: AgentOption = None,
    workers: Annotated[
        int,
        typer.Option(
            min=0,
            help="Processes building rows while this one writes; 0 picks by corpus size and cores.",
        ),
    ] = 0,
    as_json: JsonOption = False,
) -> None:
    """Index every trace record the ledger is missing (idempotent: a second run adds nothing).

    Example: pentrace ledger sync --project default_project
    """
    root = data_root(ctx)
    ledger = _open(ctx, must_exist=False, keep=True)
    try:
        report = sync_traces(ledger, root, project=project, agent=agent, workers=workers)
    finally:
        ledger.close()
    counts = {
        "sessions": report.sessions,
        "indexed": report.indexed,
        "already_held": report.already_held,
        **_failures(report),
    }
    if as_json:
        emit_json(counts)
    else:
        typer.echo(
            f"synced {report.sessions} session(s): indexed {report.indexed} missing event(s), "
            f"{report.already_held} already held"
        )
    _warn_failures(report)


@ledger_app.command()
def rebuild(
    ctx: typer.Context,
    project: ProjectOption = None,
    agent: AgentOption = None,
    as_json: JsonOption = False,
) -> None:
    """Index all traces again, with the same event ids, one session per transaction.

    Rows of sessions that have no trace are deleted at the end; a session that cannot be read
    keeps its rows and is reported.

    Example: pentrace ledger rebuild
    """
    root = data_root(ctx)
    refs = list(root.iter_sessions(project, agent)) if root.path.is_dir() else []
    ledger = _open(ctx, must_exist=False, keep=True)
    try:
        report = rebuild_ledger(ledger, progress(refs, total=len(refs), label="rebuilding"))
    finally:
        ledger.close()
    if as_json:
        emit_json({"sessions": report.sessions, "indexed": report.indexed, **_failures(report)})
    else:
        typer.echo(
            f"rebuilt the ledger: {report.indexed} event(s) from {report.sessions} session(s)"
        )
    _warn_failures(report)


def _failures(report: SyncReport) -> dict[str, Any]:
    """The ``failures`` field of the JSON output (only when a session failed)."""
    if not report.failures:
        return {}
    return {"failures": [dataclasses.asdict(failure) for failure in report.failures]}


def _warn_failures(report: SyncReport) -> None:
    """One stderr line per session left out, then exit 1: the other sessions were done."""
    for failure in report.failures:
        typer.echo(
            f"warning: {failure.project}/{failure.agent}/{failure.session_id}: "
            f"left out: {failure.message}",
            err=True,
        )
    if report.failures:
        typer.echo(
            f"hint: {len(report.failures)} session(s) were left out; "
            "run `pentrace audit` on them, then sync again",
            err=True,
        )
        raise typer.Exit(1)


@ledger_app.command()
def cleanup(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what each rule would delete; delete nothing.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Apply retention now: by age, then count, then size (PENGUIN_RUNTIME_EVENT_LEDGER_*).

    Example: pentrace ledger cleanup --dry-run
    """
    ledger = _open(ctx, read_only=dry_run)
    try:
        if dry_run:
            plan = retention_plan(ledger)
            rules = {"age": plan.by_age, "count": plan.by_count, "size": plan.by_size}
        else:
            done = ledger.cleanup()
            rules = {"age": done.by_age, "count": done.by_count, "size": done.by_size}
        policy = ledger.policy
    finally:
        ledger.close()
    limits = {"age": policy.max_age_days, "count": policy.max_events, "size": policy.max_bytes}
    if as_json:
        emit_json({"dry_run": dry_run, "deleted": rules, "limits": limits})
        return
    verb = "would delete" if dry_run else "deleted"
    emit_table(
        ("rule", "limit", verb),
        (
            (rule, limits[rule] if limits[rule] is not None else "off", rows)
            for rule, rows in rules.items()
        ),
    )
    typer.echo(
        f"{verb} {sum(rules.values())} row(s) in total"
        + (" (size is an estimate)" if dry_run else "")
    )


@ledger_app.command()
def forget(
    ctx: typer.Context,
    sessions: Annotated[
        list[str],
        typer.Argument(
            help="Sessions whose traces are gone: ids, unique prefixes or project/agent/id."
        ),
    ],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Remove the events of sessions whose traces were deleted by hand.

    `pentrace audit` reports such sessions (ledger_orphan_stream); on a ledger
    shared by several data roots, check that no other root still holds the
    session first.  Sessions that still have traces here are refused.

    Example: pentrace ledger forget session-2026-11-29-10-00-00-3f8a2c1d --yes
    """
    ledger = _open(ctx)
    try:
        held = untraced_sessions(ledger, data_root(ctx), sessions)
        question = (
            f"Remove {sum(held.values())} ledger event(s) of {len(held)} session(s) "
            f"({', '.join(key.reference for key in held)})?"
        )
        what = f"remove the ledger events of {len(held)} session(s)"
        if not confirm_or_refuse(question, yes=yes, what=what):
            typer.echo("nothing removed")
            raise typer.Exit(1)
        removed = {key.reference: ledger.forget_stream(key.stream_id) for key in held}
    finally:
        ledger.close()
    if as_json:
        emit_json({"removed": removed})
        return
    for sid, rows in removed.items():
        typer.echo(f"removed {rows} ledger event(s) of {sid}")


@ledger_app.command()
def stats(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Rows, bytes, oldest and newest events, streams and rows by category.

    Example: pentrace ledger stats --json
    """
    ledger = _open(ctx, read_only=True)
    try:
        figures = ledger_stats(ledger)
    finally:
        ledger.close()
    value = {
        "ledger": figures.where,
        "rows": figures.rows,
        "bytes": figures.bytes,
        "oldest_event_id": figures.oldest_event_id,
        "newest_event_id": figures.newest_event_id,
        "oldest_inserted_at": iso(figures.oldest_inserted_ms),
        "newest_inserted_at": iso(figures.newest_inserted_ms),
        "streams": figures.streams,
        "pruned_rows": figures.pruned_rows,
        "by_category": figures.by_category,
        "format": figures.format,
    }
    if as_json:
        emit_json(value)
        return
    for key in (
        "ledger",
        "format",
        "rows",
        "bytes",
        "streams",
        "pruned_rows",
        "oldest_event_id",
        "oldest_inserted_at",
        "newest_event_id",
        "newest_inserted_at",
    ):
        typer.echo(f"{key}: {'-' if value[key] is None else value[key]}")
    emit_table(("category", "rows"), sorted(figures.by_category.items()))


ledger_app.command("import-penguin")(import_penguin)
