"""``pentrace ledger import-penguin``: move a Penguin deployment's ledger history over."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Annotated

import typer

from pentrace.cli.output import byte_progress, emit_json
from pentrace.cli.sessions.args import JsonOption, data_root
from pentrace.infrastructure.ledger.backend.formats import file_format
from pentrace.infrastructure.ledger.opener import ledger_file, open_ledger
from pentrace.infrastructure.ledger.penguin_import import (
    import_penguin_ledger,
    move_aside,
    penguin_row_count,
)

__all__ = ["import_penguin"]


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
    source = path.expanduser()
    moved = None
    configured = ledger_file(data_root=data_root(ctx, must_exist=False))
    if (
        configured is not None
        and _same_file(source, configured)
        and file_format(source, "runtime_events") == "penguin"
    ):
        moved = source = move_aside(source)
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


def _same_file(left: Path, right: Path) -> bool:
    return right.exists() and left.resolve() == right.resolve()
