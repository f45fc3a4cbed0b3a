"""``pentrace stats ...``: analytics from the built-in read models.

``stats`` first catches the built-in projections up with the ledger (``--sync``
also indexes traces the ledger is missing; a read model never built, over a
ledger that never held an event, is built from the traces instead, in worker
processes: ADR 0050), then builds the document with
:mod:`pentrace.infrastructure.operations.stats` - the same function, and the
same table of which projections each stat needs, that the HTTP routes use.
``--json`` output is a documented contract (``docs/projections.md``): fields
are only ever added.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from pentrace.cli.options import (
    TIME_HELP,
    FieldsOption,
    check_fields,
    day_bound,
    pick_fields,
    unshown,
)
from pentrace.cli.output import emit_json, emit_table
from pentrace.cli.sessions.args import JsonOption, data_root
from pentrace.cli.stats.plots import cost_plot, tokens_plot, tools_plot
from pentrace.infrastructure.analytics.database import AnalyticsDatabase
from pentrace.infrastructure.analytics.prices import load_prices
from pentrace.infrastructure.analytics.queries import TOKEN_COLUMNS
from pentrace.infrastructure.operations.stats import StatsQuery, document, prepare

__all__ = ["stats_app"]

stats_app = typer.Typer(
    name="stats",
    no_args_is_help=True,
    help="Token use, cost, tools, requests, sessions and subagent trees.\n\n"
    "Example: pentrace stats cost --by day --since 2026-11-01",
)

ByOption = Annotated[
    str,
    typer.Option(
        "--by",
        help="Group by model, provider, agent, project, day, hour, minute (UTC) or session.",
    ),
]
RequestsByOption = Annotated[
    str | None,
    unshown(
        "--by",
        help="Also list requests and success rate per model, provider, agent, project, "
        "day, hour or minute (UTC).",
    ),
]
ToolsByOption = Annotated[
    str | None,
    unshown("--by", help="Also list each tool per agent, project, day, hour or minute (UTC)."),
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


def days(since: str | None, until: str | None) -> tuple[str | None, str | None]:
    """``--since``/``--until`` (any time form) as the inclusive UTC days the read models use."""
    return day_bound(since, "--since"), day_bound(until, "--until")


def _ready(ctx: typer.Context, kind: str, do_sync: bool) -> AnalyticsDatabase:
    # workers=0: a large cold build folds the traces on every core (ADR 0050).
    prepared = prepare(data_root(ctx).path, kind, sync_first=do_sync, workers=0)
    ctx.call_on_close(prepared.db.close)  # a PostgreSQL pool would otherwise outlive the command
    for message in prepared.warnings:  # ADR 0032: numbers incomplete
        typer.echo(f"warning: {message}", err=True)
    return prepared.db


def done(value: Any, as_json: bool, columns: tuple[str, ...], rows: list[list[Any]]) -> None:
    """The JSON document, or the table."""
    if as_json:
        emit_json(value)
    else:
        emit_table(columns, rows)


@stats_app.command("tokens")
def tokens_command(
    ctx: typer.Context,
    by: ByOption = "model",
    since: SinceOption = None,
    until: UntilOption = None,
    as_json: JsonOption = False,
    fields: FieldsOption = None,
    plot: PlotOption = None,
    do_sync: SyncOption = False,
) -> None:
    """Token use per group (input, output, cache read/write, total, requests).

    Example: pentrace stats tokens --by agent --since 2026-11-01 --plot tokens.png
    """
    check_fields(fields, as_json)
    since, until = days(since, until)
    db = _ready(ctx, "tokens", do_sync)
    rows = document(db, StatsQuery("tokens", by, since, until))["rows"]
    if plot is not None:
        tokens_plot(db, by, since, until, rows, plot)
    done(
        {"by": by, "rows": pick_fields(rows, fields, ("key", *TOKEN_COLUMNS))},
        as_json,
        (by, *TOKEN_COLUMNS),
        [[row["key"], *(row[c] for c in TOKEN_COLUMNS)] for row in rows],
    )


@stats_app.command("cost")
def cost_command(
    ctx: typer.Context,
    by: ByOption = "model",
    since: SinceOption = None,
    until: UntilOption = None,
    prices: Annotated[
        Path | None, typer.Option("--prices", help="Price table (TOML); default PENTRACE_PRICES.")
    ] = None,
    as_json: JsonOption = False,
    fields: FieldsOption = None,
    plot: PlotOption = None,
    do_sync: SyncOption = False,
) -> None:
    """Cost per group from the editable price table (prices per million tokens).

    Example: pentrace stats cost --by day --prices ~/prices.toml --plot cost.svg
    """
    check_fields(fields, as_json)
    since, until = days(since, until)
    load_prices(prices)  # a bad price table is refused before any catching up
    db = _ready(ctx, "cost", do_sync)
    value = document(db, StatsQuery("cost", by, since, until, prices))
    rows = value["rows"]
    if plot is not None:
        cost_plot(db, by, since, until, rows, value["currency"], plot)
    picked = pick_fields(rows, fields, ("key", "cost", "currency", "total", "unpriced"))
    done(
        {**value, "rows": picked},
        as_json,
        (by, "cost", "total tokens", "unpriced models"),
        [
            [row["key"], f"{row['cost']:.4f}", row["total"], ", ".join(row["unpriced"])]
            for row in rows
        ],
    )


@stats_app.command("tools")
def tools_command(
    ctx: typer.Context,
    by: ToolsByOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    as_json: JsonOption = False,
    fields: FieldsOption = None,
    plot: PlotOption = None,
    do_sync: SyncOption = False,
) -> None:
    """Tool calls by name: failures, aborts, timeouts, truncations, unanswered; approvals.

    Example: pentrace stats tools --by hour --since today --json
    """
    check_fields(fields, as_json)
    since, until = days(since, until)
    db = _ready(ctx, "tools", do_sync)
    value = document(db, StatsQuery("tools", by, since, until))
    if plot is not None:
        tools_plot(db, since, until, value["tools"], plot)
    names = ("calls", "failures", "aborts", "timeouts", "truncations", "unanswered")
    rows = [[row["tool"], *(row[n] for n in names), row["failure_rate"]] for row in value["tools"]]
    rows += [[f"approval: {d}", n, "", "", "", "", "", ""] for d, n in value["approvals"].items()]
    rows += [
        [f"{row['key']}: {row['tool']}", *(row[n] for n in names[:-1]), "", _rate(row)]
        for row in value.get("rows", ())
    ]
    picked = pick_fields(value["tools"], fields, ("tool", *names, "failure_rate"))
    done({**value, "tools": picked}, as_json, ("tool", *names, "failure_rate"), rows)


@stats_app.command("requests")
def requests_command(
    ctx: typer.Context,
    by: RequestsByOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    as_json: JsonOption = False,
    do_sync: SyncOption = False,
) -> None:
    """Requests by status and retries, compactions (mode, outcome, context), goal outcomes.

    Example: pentrace stats requests --by model --since 2026-11-28
    """
    since, until = days(since, until)
    db = _ready(ctx, "requests", do_sync)
    value = document(db, StatsQuery("requests", by, since, until))
    rows: list[list[Any]] = [["request", s, n] for s, n in value["requests"].items()]
    rows.append(["retries", "", value["retries"]])
    rows += [
        ["compaction", f"{c['mode']}/{c['outcome']} (max context {c['max_context']})", c["count"]]
        for c in value["compactions"]
    ]
    rows += [["goal", outcome, n] for outcome, n in value["goals"].items()]
    rows += [
        [f"{by}: {row['key']}", f"{row['completed']} completed, {_rate(row)}", row["requests"]]
        for row in value.get("rows", ())
    ]
    done(value, as_json, ("what", "which", "count"), rows)


def _rate(row: dict[str, Any]) -> str:
    """A row's success or failure rate as a percentage; "-" where nothing was counted."""
    rate = row.get("success_rate", row.get("failure_rate"))
    return "-" if rate is None else f"{rate * 100:.1f}%"


@stats_app.command("sessions")
def sessions_command(
    ctx: typer.Context,
    by: ByOption = "day",
    since: SinceOption = None,
    until: UntilOption = None,
    as_json: JsonOption = False,
    fields: FieldsOption = None,
    do_sync: SyncOption = False,
) -> None:
    """Sessions per group: count, turns, requests, model switches, durations.

    Example: pentrace stats sessions --by agent
    """
    check_fields(fields, as_json)
    since, until = days(since, until)
    db = _ready(ctx, "sessions", do_sync)
    rows = document(db, StatsQuery("sessions", by, since, until))["rows"]
    names = ("sessions", "turns", "requests", "model_switches", "mean_duration_s", "max_duration_s")
    done(
        {"by": by, "rows": pick_fields(rows, fields, ("key", *names))},
        as_json,
        (by, *names),
        [[row["key"], *(row[n] for n in names)] for row in rows],
    )


@stats_app.command("tree")
def tree_command(
    ctx: typer.Context,
    since: SinceOption = None,
    until: UntilOption = None,
    as_json: JsonOption = False,
    do_sync: SyncOption = False,
) -> None:
    """Subagent trees: each session with its children and the tokens of its whole subtree.

    Example: pentrace stats tree --json
    """
    since, until = days(since, until)
    db = _ready(ctx, "tree", do_sync)
    roots = document(db, StatsQuery("tree", since=since, until=until))["trees"]
    rows: list[list[Any]] = []

    def walk(node: dict[str, Any], depth: int) -> None:
        rows.append(
            [
                "  " * depth + node["session_id"],
                node["model"],
                node["tokens"],
                node["subtree_tokens"],
            ]
        )
        for child in node["children"]:
            walk(child, depth + 1)

    for root in roots:
        walk(root, 0)
    done({"trees": roots}, as_json, ("session", "model", "tokens", "subtree_tokens"), rows)
