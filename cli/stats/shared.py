"""What every ``pentrace stats`` command takes, declared once.

Each stat reads the same window (``--since``/``--until`` as UTC days), prints
``--json`` or a table, and may index missing traces first (``--sync``); most
group ``--by`` something, pick ``--fields`` or draw a ``--plot``.
:func:`stat_command` registers a command with those options, in this order
(``--by``, ``--since``, ``--until``, the command's own, ``--json``,
``--fields``, ``--plot``, ``--sync``; built by
:func:`pentrace.cli.options.command_with`), and hands the body one
:class:`StatCall`.  The body declares only its own options.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from pentrace.cli.options import (
    TIME_HELP,
    FieldsOption,
    check_fields,
    command_with,
    day_window,
    keyword,
)
from pentrace.cli.output import emit_json, emit_table
from pentrace.cli.sessions.args import JsonOption, data_root
from pentrace.infrastructure.analytics.database import AnalyticsDatabase
from pentrace.infrastructure.operations.stats import StatsQuery, prepare

__all__ = ["StatCall", "done", "stat_command"]

ByOption = Annotated[
    str,
    typer.Option(
        "--by",
        help="Group by model, provider, agent, project, day, hour, minute (UTC) or session.",
    ),
]
SinceOption = Annotated[
    str | None,
    typer.Option(
        "--since",
        metavar="<when>",
        help=f"First UTC day to include: {TIME_HELP}.",
        show_default=False,
    ),
]
UntilOption = Annotated[
    str | None,
    typer.Option(
        "--until",
        metavar="<when>",
        help="Last UTC day to include (same forms).",
        show_default=False,
    ),
]
PlotOption = Annotated[
    Path | None,
    typer.Option("--plot", help="Also draw the table as a picture: a .png or .svg file."),
]
SyncOption = Annotated[
    bool, typer.Option("--sync", help="Index traces the ledger is missing before catching up.")
]


def done(value: Any, as_json: bool, columns: tuple[str, ...], rows: list[list[Any]]) -> None:
    """The JSON document, or the table."""
    if as_json:
        emit_json(value)
    else:
        emit_table(columns, rows)


@dataclass(frozen=True, slots=True)
class StatCall:
    """The shared options one ``stats`` command was given (the window as UTC days;
    ``by`` is ``""`` where the command has no ``--by`` or it was not given)."""

    ctx: typer.Context
    by: str
    since: str | None
    until: str | None
    as_json: bool
    fields: str | None
    plot: Path | None
    do_sync: bool

    def ready(self, query: StatsQuery) -> AnalyticsDatabase:
        """The analytics database, its projections for ``query`` caught up (``--sync``: the
        ledger first); warnings about incomplete numbers go to stderr.  Building ``query``
        first refused a bad ``--by``, so nothing waits for a catch-up only to fail."""
        # workers=0: a large cold build folds the traces on every core (ADR 0050).
        root = data_root(self.ctx).path
        prepared = prepare(root, query.kind, sync_first=self.do_sync, workers=0)
        self.ctx.call_on_close(prepared.db.close)  # a PostgreSQL pool would otherwise linger
        for message in prepared.warnings:  # ADR 0032: numbers incomplete
            typer.echo(f"warning: {message}", err=True)
        return prepared.db

    def done(self, value: Any, columns: tuple[str, ...], rows: list[list[Any]]) -> None:
        """The JSON document with ``--json``, else the table."""
        done(value, self.as_json, columns, rows)


def _call(ctx: typer.Context, given: dict[str, Any]) -> tuple[StatCall]:
    check_fields(given.get("fields"), bool(given["as_json"]))
    since, until = day_window(given["since"], given["until"])
    return (
        StatCall(
            ctx,
            by=given.get("by") or "",
            since=since,
            until=until,
            as_json=bool(given["as_json"]),
            fields=given.get("fields"),
            plot=given.get("plot"),
            do_sync=bool(given["do_sync"]),
        ),
    )


def stat_command(
    app: typer.Typer,
    name: str,
    *,
    by: str | None = None,
    by_option: Any = None,
    fields: bool = False,
    plot: bool = False,
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register ``body(call, **own options)`` as ``stats <name>`` with the shared options:
    ``--by`` (:data:`ByOption` with default ``by``, or the command's own ``by_option``,
    not given by default), ``--fields`` and ``--plot`` when asked."""
    lead = [keyword("by", ByOption, by)] if by is not None else []
    lead += [keyword("by", by_option, None)] if by_option is not None else []
    lead += [keyword("since", SinceOption, None), keyword("until", UntilOption, None)]
    tail = [keyword("as_json", JsonOption, False)]
    tail += [keyword("fields", FieldsOption, None)] if fields else []
    tail += [keyword("plot", PlotOption, None)] if plot else []
    tail.append(keyword("do_sync", SyncOption, False))

    def register(body: Callable[..., None]) -> Callable[..., None]:
        command = command_with(body, fills=1, lead=lead, tail=tail, bind=_call)
        app.command(name)(command)
        return command

    return register
