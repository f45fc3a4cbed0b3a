"""``pentrace prune``: delete sessions by age or total size, with an exact ``--dry-run``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from pentrace.cli.options import now
from pentrace.cli.output import Cell, byte_size, emit_json, emit_table
from pentrace.cli.sessions.args import JsonOption, confirm_or_refuse, data_root, forget_in_ledger
from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.operations.sessions import (
    PruneCandidate,
    PruneOutcome,
    apply_prune,
    plan_prune,
)
from pentrace.values import AGE_FORMS, SIZE_FORMS, parse_age, parse_size

__all__ = ["prune", "register"]


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


def register(app: typer.Typer) -> None:
    """Add ``prune`` to the ``pentrace`` app."""
    app.command()(prune)
