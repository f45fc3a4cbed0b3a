"""What every ``pentrace stats`` command takes, declared once.

Each stat reads the same window (``--since``/``--until`` as UTC days), prints
``--json`` or a table, and may index missing traces first (``--sync``); most
group ``--by`` something, pick ``--fields`` or draw a ``--plot``.
:func:`stat_command` registers a command with those options, in this order
(``--by``, ``--since``, ``--until``, the command's own, ``--json``,
``--fields``, ``--plot``, ``--sync``), and hands the body one :class:`StatCall`.
The body declares only its own options; typer reads the signature built here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from pentrace.cli.options import TIME_HELP, FieldsOption, check_fields, day_bound
from pentrace.cli.output import emit_json, emit_table
from pentrace.cli.sessions.args import JsonOption, data_root
from pentrace.infrastructure.analytics.database import AnalyticsDatabase
from pentrace.infrastructure.operations.stats import prepare

__all__ = ["StatCall", "done", "stat_command"]

ByOption = Annotated[
    str, typer.Option("--by", help="Group by model, provider, agent, project, day or session.")
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
    """The shared options one ``stats`` command was given (the window as UTC days)."""

    ctx: typer.Context
    by: str
    since: str | None
    until: str | None
    as_json: bool
    fields: str | None
    plot: Path | None
    do_sync: bool

    def ready(self, kind: str) -> AnalyticsDatabase:
        """The analytics database, its projections for ``kind`` caught up (``--sync``: the
        ledger first); warnings about incomplete numbers go to stderr."""
        prepared = prepare(data_root(self.ctx).path, kind, sync_first=self.do_sync)
        self.ctx.call_on_close(prepared.db.close)  # a PostgreSQL pool would otherwise linger
        for message in prepared.warnings:  # ADR 0032: numbers incomplete
            typer.echo(f"warning: {message}", err=True)
        return prepared.db

    def done(self, value: Any, columns: tuple[str, ...], rows: list[list[Any]]) -> None:
        """The JSON document with ``--json``, else the table."""
        done(value, self.as_json, columns, rows)


def _option(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


_SHARED = ("by", "since", "until", "as_json", "fields", "plot", "do_sync")


def stat_command(
    app: typer.Typer, name: str, *, by: str | None = None, fields: bool = False, plot: bool = False
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register ``body(call, **own options)`` as ``stats <name>`` with the shared options:
    ``--by`` (default ``by``) when ``by`` is given, ``--fields`` and ``--plot`` when asked."""

    def register(body: Callable[..., None]) -> Callable[..., None]:
        own = list(inspect.signature(body, eval_str=True).parameters.values())[1:]
        context = inspect.Parameter(
            "ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context
        )
        params = [context]
        params += [_option("by", ByOption, by)] if by is not None else []
        params += [_option("since", SinceOption, None), _option("until", UntilOption, None)]
        params += [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
        params.append(_option("as_json", JsonOption, False))
        params += [_option("fields", FieldsOption, None)] if fields else []
        params += [_option("plot", PlotOption, None)] if plot else []
        params.append(_option("do_sync", SyncOption, False))

        def command(ctx: typer.Context, **given: Any) -> None:
            shared = {key: given.pop(key, None) for key in _SHARED}
            check_fields(shared["fields"], bool(shared["as_json"]))
            call = StatCall(
                ctx,
                by=shared["by"] or "",
                since=day_bound(shared["since"], "--since"),
                until=day_bound(shared["until"], "--until"),
                as_json=bool(shared["as_json"]),
                fields=shared["fields"],
                plot=shared["plot"],
                do_sync=bool(shared["do_sync"]),
            )
            body(call, **given)

        command.__name__, command.__doc__ = body.__name__, body.__doc__
        # typer reads the parameters from the signature: the shared ones, then the body's.
        setattr(command, "__signature__", inspect.Signature(params))  # noqa: B010
        app.command(name)(command)
        return command

    return register
