"""``pentrace stats ...``: analytics from the built-in read models.

``stats`` first catches the built-in projections up with the ledger (``--sync``
also indexes traces the ledger is missing), then reads their read models
through :mod:`pentrace.infrastructure.analytics.queries` - the same core the
HTTP routes use.  ``--json`` output is a documented contract
(``docs/projections.md``): fields are only ever added.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from pentrace.cli.output import emit_json, emit_table
from pentrace.cli.session_args import JsonOption, data_root
from pentrace.infrastructure.analytics import plots, queries
from pentrace.infrastructure.analytics.database import AnalyticsDatabase, analytics_url
from pentrace.infrastructure.analytics.prices import load_prices
from pentrace.infrastructure.analytics.registry import BUILTINS
from pentrace.infrastructure.analytics.runner import catch_up, open_ledger
from pentrace.infrastructure.ledger.indexer import sync

__all__ = ["stats_app"]

stats_app = typer.Typer(
    name="stats",
    no_args_is_help=True,
    help="Token use, cost, tools, requests, sessions and subagent trees.\n\n"
    "Example: pentrace stats cost --by day --since 2026-11-01",
)
projections_app = typer.Typer(
    name="projections",
    no_args_is_help=True,
    help="Run, rebuild and inspect analytics projections.\n\nExample: pentrace projections status",
)

ByOption = Annotated[
    str, typer.Option("--by", help="Group by model, provider, agent, project, day or session.")
]
SinceOption = Annotated[
    str | None, typer.Option("--since", help="First UTC day to include (YYYY-MM-DD).")
]
UntilOption = Annotated[
    str | None, typer.Option("--until", help="Last UTC day to include (YYYY-MM-DD).")
]
PlotOption = Annotated[
    Path | None, typer.Option("--plot", help="Also draw a picture into this .png or .svg file.")
]
SyncOption = Annotated[
    bool, typer.Option("--sync", help="Index traces the ledger is missing before catching up.")
]
_TOKEN_COLUMNS = ("requests", "input", "output", "cache_read", "cache_write", "total")


def _ready(ctx: typer.Context, names: tuple[str, ...], do_sync: bool) -> AnalyticsDatabase:
    root = data_root(ctx).path
    if not do_sync:
        for name in names:
            catch_up(BUILTINS[name], data_root=root)
        return AnalyticsDatabase(analytics_url(root, os.environ))
    ledger = open_ledger(root)
    try:
        # Retention waits until the projections have read what this sync indexed.
        with ledger.retention_held():
            report = sync(ledger, root)
            for name in names:
                catch_up(BUILTINS[name], data_root=root)
    finally:
        ledger.close()
    for failure in report.failures:
        typer.echo(
            f"warning: {failure.project}/{failure.agent}/{failure.session_id}: "
            f"left out of the sync: {failure.message}",
            err=True,
        )
    return AnalyticsDatabase(analytics_url(root, os.environ))


def done(value: Any, as_json: bool, columns: tuple[str, ...], rows: list[list[Any]]) -> None:
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
    plot: PlotOption = None,
    do_sync: SyncOption = False,
) -> None:
    """Token use per group (input, output, cache read/write, total, requests).

    Example: pentrace stats tokens --by agent --since 2026-11-01 --plot tokens.png
    """
    db = _ready(ctx, ("tokens",), do_sync)
    rows = queries.tokens(db, by, since, until)
    if plot is not None:
        plots.plot_stacked(
            queries.tokens_by_day_and_model(db, since, until),
            plot,
            title="Tokens per day, by model",
            ylabel="tokens",
        )
    done(
        {"by": by, "rows": rows},
        as_json,
        (by, *_TOKEN_COLUMNS),
        [[row["key"], *(row[c] for c in _TOKEN_COLUMNS)] for row in rows],
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
    plot: PlotOption = None,
    do_sync: SyncOption = False,
) -> None:
    """Cost per group from the editable price table (prices per million tokens).

    Example: pentrace stats cost --by day --prices ~/prices.toml --plot cost.svg
    """
    table = load_prices(prices)
    db = _ready(ctx, ("tokens",), do_sync)
    rows = queries.cost(db, table, by, since, until)
    if plot is not None:
        daily = queries.cost(db, table, "day", since, until)
        plots.plot_bars(
            [(row["key"], row["cost"]) for row in daily],
            plot,
            title="Cost per day",
            ylabel=table.currency,
        )
    done(
        {"by": by, "currency": table.currency, "rows": rows},
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
    since: SinceOption = None,
    until: UntilOption = None,
    as_json: JsonOption = False,
    plot: PlotOption = None,
    do_sync: SyncOption = False,
) -> None:
    """Tool calls by name: failures, aborts, timeouts, truncations, unanswered; approvals.

    Example: pentrace stats tools --json
    """
    db = _ready(ctx, ("tools",), do_sync)
    value = queries.tools(db, since, until)
    if plot is not None:
        plots.plot_bars(
            [(row["tool"], row["failure_rate"]) for row in value["tools"]],
            plot,
            title="Tool failure rate",
            ylabel="failed / calls",
        )
    names = ("calls", "failures", "aborts", "timeouts", "truncations", "unanswered")
    rows = [[row["tool"], *(row[n] for n in names), row["failure_rate"]] for row in value["tools"]]
    rows += [[f"approval: {d}", n, "", "", "", "", "", ""] for d, n in value["approvals"].items()]
    done(value, as_json, ("tool", *names, "failure_rate"), rows)


@stats_app.command("requests")
def requests_command(
    ctx: typer.Context,
    since: SinceOption = None,
    until: UntilOption = None,
    as_json: JsonOption = False,
    do_sync: SyncOption = False,
) -> None:
    """Requests by status and retries, compactions (mode, outcome, context), goal outcomes.

    Example: pentrace stats requests --since 2026-11-28
    """
    db = _ready(ctx, ("sessions",), do_sync)
    value = queries.requests(db, since, until)
    rows: list[list[Any]] = [["request", s, n] for s, n in value["requests"].items()]
    rows.append(["retries", "", value["retries"]])
    rows += [
        ["compaction", f"{c['mode']}/{c['outcome']} (max context {c['max_context']})", c["count"]]
        for c in value["compactions"]
    ]
    rows += [["goal", outcome, n] for outcome, n in value["goals"].items()]
    done(value, as_json, ("what", "which", "count"), rows)


@stats_app.command("sessions")
def sessions_command(
    ctx: typer.Context,
    by: ByOption = "day",
    since: SinceOption = None,
    until: UntilOption = None,
    as_json: JsonOption = False,
    do_sync: SyncOption = False,
) -> None:
    """Sessions per group: count, turns, requests, model switches, durations.

    Example: pentrace stats sessions --by agent
    """
    db = _ready(ctx, ("sessions",), do_sync)
    rows = queries.sessions(db, by, since, until)
    names = ("sessions", "turns", "requests", "model_switches", "mean_duration_s", "max_duration_s")
    done(
        {"by": by, "rows": rows},
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
    db = _ready(ctx, ("sessions", "tokens"), do_sync)
    roots = queries.tree(db, since, until)
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
