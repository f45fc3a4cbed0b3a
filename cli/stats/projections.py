"""``pentrace projections run|rebuild|status|retry``: the analytics projections themselves.

Events a handler failed on (ADR 0032) show in ``status`` (a count per
projection; ``--failures`` lists them) and are applied again by ``retry``.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from pentrace.cli.sessions.args import JsonOption, data_root
from pentrace.cli.stats.commands import cell, done
from pentrace.errors import AnalyticsError
from pentrace.infrastructure.operations.projections import (
    BUILTINS,
    AnalyticsRunner,
    failures_of,
    projection_status,
    rebuild,
    resolve,
    retry,
    warnings_of,
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
    projection = resolve(name)
    with AnalyticsRunner(projection, data_root=root) as runner:
        typer.echo(f"{name}: following the ledger from position {runner.position() or 0}")
        runner.run_forever(timeout=seconds)
    typer.echo(f"{name}: stopped at position {runner.position() or 0}")
    for message in warnings_of(root, (projection.name,), os.environ):
        typer.echo(f"warning: {message}", err=True)


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


FailuresOption = Annotated[
    bool, typer.Option("--failures", help="List the events a handler failed on instead.")
]


@projections_app.command("status")
def status_command(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="One projection (default: built-ins).")] = None,
    failures: FailuresOption = False,
    as_json: JsonOption = False,
) -> None:
    """Each projection's position, how far the ledger is ahead, and its failed events.

    Example: pentrace projections status tools --failures
    """
    root = data_root(ctx).path
    chosen = [resolve(name)] if name else list(BUILTINS.values())
    if failures:
        found = failures_of(root, chosen)
        done(
            {"failures": [f.as_json() for f in found]},
            as_json,
            ("projection", "session", "sequence", "notification", "event", "error", "attempts"),
            [
                [
                    f.projection,
                    f.session,
                    f.sequence,
                    cell(f.notification_id),
                    f.event_type,
                    f"{f.error_type}: {f.error_message}",
                    f.attempts,
                ]
                for f in found
            ],
        )
        return
    value = projection_status(root, chosen)
    rows = value["projections"]
    columns = ("name", "position", "ledger_newest", "behind", "needs_rebuild", "failed_events")
    done(value, as_json, columns, [[cell(r[c]) for c in columns] for r in rows])


@projections_app.command("retry")
def retry_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A built-in name or package.module:Class.")],
) -> None:
    """Apply again the events a projection's handler failed on (after fixing the handler).

    Example: pentrace projections retry mypkg.projections:ToolFailures
    """
    report = retry(resolve(name), data_root=data_root(ctx).path)
    typer.echo(
        f"{name}: {report.applied} failed event(s) applied, {len(report.failing)} still "
        f"failing, {len(report.missing)} no longer in the ledger"
    )
    if report.missing:
        typer.echo(
            f"warning: ledger retention pruned {len(report.missing)} of them; "
            f"`pentrace projections rebuild {name}` reads them from the traces",
            err=True,
        )
    if report.failing:
        first = report.failing[0]
        raise AnalyticsError(
            f"projection {name!r}: {len(report.failing)} event(s) still fail; the first, "
            f"{first.describe()}",
            hint=f"`pentrace projections status {name} --failures` lists them all",
        )
