"""``pentrace projections run|rebuild|status``: the analytics projections themselves."""

from __future__ import annotations

from typing import Annotated

import typer

from pentrace.cli.sessions.args import JsonOption, data_root
from pentrace.cli.stats.commands import done
from pentrace.infrastructure.analytics.rebuild import rebuild
from pentrace.infrastructure.analytics.registry import BUILTINS, resolve
from pentrace.infrastructure.analytics.runner import (
    AnalyticsRunner,
    open_ledger,
    open_projection,
    pruned_through,
)

__all__ = ["projections_app"]

projections_app = typer.Typer(
    name="projections",
    no_args_is_help=True,
    help="Run, rebuild and inspect analytics projections.\n\nExample: pentrace projections status",
)


@projections_app.command("run")
def run_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A built-in name or package.module:Class.")],
    seconds: Annotated[
        float | None, typer.Option("--seconds", help="Stop after this long (default: never).")
    ] = None,
) -> None:
    """Catch a projection up with the ledger, then follow new events until stopped.

    Example: pentrace projections run tokens --seconds 60
    """
    root = data_root(ctx).path
    with AnalyticsRunner(resolve(name), data_root=root) as runner:
        typer.echo(f"{name}: following the ledger from position {runner.position() or 0}")
        runner.run_forever(timeout=seconds)
    typer.echo(f"{name}: stopped at position {runner.position() or 0}")


@projections_app.command("rebuild")
def rebuild_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A built-in name or package.module:Class.")],
) -> None:
    """Drop a read model and rebuild it from the traces (the ledger may be pruned).

    Example: pentrace projections rebuild tools
    """
    report = rebuild(resolve(name), data_root=data_root(ctx).path)
    typer.echo(
        f"{name}: rebuilt from {report.sessions} session(s), {report.events} event(s); "
        f"position {report.position}"
    )


@projections_app.command("status")
def status_command(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="One projection (default: built-ins).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Each projection's position and how far the ledger is ahead of it.

    Example: pentrace projections status --json
    """
    root = data_root(ctx).path
    ledger = open_ledger(root)
    try:
        newest = ledger.max_notification_id() or 0
        pruned = pruned_through(ledger)
    finally:
        ledger.close()
    rows = []
    for each in [resolve(name)] if name else list(BUILTINS.values()):
        projection = open_projection(each, root)
        try:
            position = projection.view.max_tracking_id(each.name) or 0
            stale = projection.view.stale_identity()  # built before ADR 0023's session keys
        finally:
            projection.view.db.close()
        rows.append(
            {
                "name": each.name,
                "position": position,
                "ledger_newest": newest,
                "behind": max(newest - position, 0),
                "needs_rebuild": pruned > position or stale,
            }
        )
    done(
        {"projections": rows},
        as_json,
        ("name", "position", "ledger_newest", "behind", "needs_rebuild"),
        [
            [r["name"], r["position"], r["ledger_newest"], r["behind"], r["needs_rebuild"]]
            for r in rows
        ],
    )
