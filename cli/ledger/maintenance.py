"""``pentrace ledger sync``, ``rebuild``, ``cleanup``, ``forget`` and ``import-penguin``: the
commands that write.

The ledger is derived from the traces; ``sync`` and ``rebuild`` make it agree
with them.
"""

from __future__ import annotations

import dataclasses
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any

import typer

from pentrace.cli.ledger.reading import open_for_command
from pentrace.cli.output import (
    Cell,
    byte_progress,
    byte_size,
    count,
    duration,
    emit_json,
    emit_table,
    progress,
)
from pentrace.cli.sessions.args import (
    AgentOption,
    JsonOption,
    ProjectOption,
    confirm_or_refuse,
    data_root,
)
from pentrace.infrastructure.operations.ledger import (
    SyncReport,
    import_penguin_ledger,
    open_ledger,
    penguin_row_count,
    penguin_source,
    rebuild_sessions,
)
from pentrace.infrastructure.operations.ledger import sync as sync_traces

__all__ = ["cleanup", "forget", "import_penguin", "rebuild", "sync"]


def sync(
    ctx: typer.Context,
    project: ProjectOption = None,
    agent: AgentOption = None,
    workers: Annotated[
        int,
        typer.Option(
            min=0,
            help="Processes building rows, this one included (it builds when it has nothing "
            "to write); 1 builds here alone, 0 starts one worker per core for a large "
            "corpus.",
        ),
    ] = 0,
    as_json: JsonOption = False,
) -> None:
    """Index every trace record the ledger is missing (idempotent: a second run adds nothing).

    The ledger's limits apply once the sync is done; rows the count limit would delete
    at once are not inserted (JSON: retention_skipped).  Which indexing command to use
    when: `pentrace ledger -h`.

    Example: pentrace ledger sync --project default_project
    """
    root = data_root(ctx)
    # The configured limits apply: what the count limit would delete right after is
    # not inserted, and retention runs when the sync is done.
    with closing(open_for_command(ctx, must_exist=False)) as ledger:
        report = sync_traces(ledger, root, project=project, agent=agent, workers=workers)
        ledger.cleanup()
    counts = {
        "sessions": report.sessions,
        "indexed": report.indexed,
        "already_held": report.already_held,
        "retention_skipped": report.retention_skipped,
        **_failures(report),
    }
    if as_json:
        emit_json(counts)
    else:
        skipped = report.retention_skipped
        typer.echo(
            f"synced {report.sessions} session(s): indexed {report.indexed} missing event(s), "
            f"{report.already_held} already held"
            + (f", {skipped} left out that retention drops (max events)" if skipped else "")
        )
    _warn_failures(report)


def rebuild(
    ctx: typer.Context,
    project: ProjectOption = None,
    agent: AgentOption = None,
    as_json: JsonOption = False,
) -> None:
    """Index all traces again, with the same event ids, one session per transaction.

    Rows of sessions that have no trace are deleted at the end; a session that cannot be read
    keeps its rows and is reported; a record the ledger cannot take is left out and reported,
    and its session's other records are rebuilt.  Which indexing command to use when:
    `pentrace ledger -h`.

    Example: pentrace ledger rebuild
    """
    root = data_root(ctx)
    refs = list(root.iter_sessions(project, agent)) if root.path.is_dir() else []
    ledger = open_for_command(ctx, must_exist=False, keep=True)
    try:
        report = rebuild_sessions(ledger, progress(refs, total=len(refs), label="rebuilding"))
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
    """One stderr line per finding (a record or a session left out), then exit 1: everything
    else was done (ADR 0102)."""
    for failure in report.failures:
        what = "" if failure.position is not None else "left out: "
        typer.echo(
            f"warning: {failure.project}/{failure.agent}/{failure.session_id}: "
            f"{what}{failure.message}",
            err=True,
        )
    if report.failures:
        typer.echo(
            f"hint: {len(report.failures)} record(s) or session(s) were left out; "
            "run `pentrace audit` on them, then sync again",
            err=True,
        )
        raise typer.Exit(1)


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
    ledger = open_for_command(ctx, read_only=dry_run)
    try:
        if dry_run:
            plan = ledger.retention_plan()
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
    # Each limit with its unit (the column mixes days, events and bytes).
    shown = {
        "age": None if policy.max_age_days is None else duration(policy.max_age_days * 86400),
        "count": None if policy.max_events is None else f"{count(policy.max_events)} events",
        "size": None if policy.max_bytes is None else byte_size(policy.max_bytes),
    }
    emit_table(
        ("rule", "limit", verb),
        (
            (rule, Cell(limit, limit.replace(",", ""), numeric=False) if limit else "off", rows)
            for rule, rows in rules.items()
            for limit in (shown[rule],)
        ),
    )
    typer.echo(
        f"{verb} {sum(rules.values())} row(s) in total"
        + (" (size is an estimate)" if dry_run else "")
    )


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
    ledger = open_for_command(ctx)
    try:
        held = ledger.untraced_sessions(data_root(ctx), sessions)
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


def import_penguin(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="Penguin's ledger file (runtime_events.db).")],
    as_json: JsonOption = False,
) -> None:
    """Import a Penguin-format ledger into the pentrace ledger, keeping every event id.

    Old clients' Last-Event-ID cursors keep resuming.  Rows whose id (or
    stream position) the ledger already holds with other content are left out
    and reported; secrets Penguin missed are redacted on the way in.  When
    PATH is the configured ledger file itself, it is first renamed to
    runtime_events.penguin.db (stop Penguin first).  Running it again imports
    nothing new.

    Example: pentrace ledger import-penguin ~/penguin_workspace/runtime_events/runtime_events.db
    """
    source, moved = penguin_source(path.expanduser(), data_root(ctx, must_exist=False))
    total = penguin_row_count(source)  # also checks that it is a Penguin ledger
    ledger = open_ledger(
        data_root=data_root(ctx, must_exist=False),
        wait_seconds=ctx.obj.wait,
        keep_everything=True,  # the rows keep Penguin's inserted_at; later writes age them
        redaction_policy=False,
    )
    with closing(ledger), byte_progress(total, "importing") as advance:
        report = import_penguin_ledger(source, ledger, on_rows=advance)
    notes = {
        "collisions": report.collisions,
        "redacted": report.redacted,
        "invalid": report.invalid,
    }
    if as_json:
        emit_json(
            {
                "source": report.source,
                "ledger": report.target,
                "moved_to": str(moved) if moved is not None else None,
                "read": report.read,
                "imported": report.imported,
                "already_held": report.already_held,
                **{key: [vars(note) for note in value] for key, value in notes.items()},
            }
        )
        return
    if moved is not None:
        typer.echo(f"moved the Penguin ledger aside to {moved}")
    typer.echo(
        f"read {report.read} event(s) from {report.source}: imported {report.imported}, "
        f"{report.already_held} already held, {len(report.collisions)} collision(s), "
        f"{len(report.redacted)} redacted on import, {len(report.invalid)} invalid"
    )
    for key, value in notes.items():
        for note in value:
            typer.echo(
                f"{key[:-1] if key.endswith('s') else key}: {note.event_id} "
                f"(Penguin row {note.rowid}): {note.reason}",
                err=True,
            )
