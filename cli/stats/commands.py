"""``pentrace stats ...``: analytics from the built-in read models.

``stats`` first catches the built-in projections up with the ledger (``--sync``
also indexes traces the ledger is missing; a read model never built, over a
ledger that never held an event, is built from the traces instead, in worker
processes: ADR 0050), then builds the document with
:mod:`pentrace.infrastructure.operations.stats` - the same function, and the
same table of which projections each stat needs, that the HTTP routes use.
The options every stat shares are declared once, in :mod:`pentrace.cli.stats.shared`.
``--json`` output is a documented contract (``docs/projections.md``): fields
are only ever added.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from pentrace.cli.options import pick_fields, unshown
from pentrace.cli.stats.shared import StatCall, stat_command
from pentrace.infrastructure.analytics.plots import cost_plot, tokens_plot, tools_plot
from pentrace.infrastructure.analytics.prices import load_prices
from pentrace.infrastructure.analytics.queries import TOKEN_COLUMNS
from pentrace.infrastructure.operations.stats import StatsQuery, document

__all__ = ["stats_app"]

stats_app = typer.Typer(
    name="stats",
    no_args_is_help=True,
    help="Token use, cost, tools, requests, sessions and subagent trees.\n\n"
    "Example: pentrace stats cost --by day --since 2026-11-01",
)

PricesOption = Annotated[
    Path | None, typer.Option("--prices", help="Price table (TOML); default PENTRACE_PRICES.")
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
    unshown(
        "--by", help="Also list each tool per model, agent, project, day, hour or minute (UTC)."
    ),
]


@stat_command(stats_app, "tokens", by="model", fields=True, plot=True)
def tokens_command(call: StatCall) -> None:
    """Token use per group (input, output, cache read/write, total, requests).

    Example: pentrace stats tokens --by agent --since 2026-11-01 --plot tokens.png
    """
    query = StatsQuery("tokens", call.by, call.since, call.until)
    db = call.ready(query)
    rows = document(db, query)["rows"]
    if call.plot is not None:
        tokens_plot(db, call.by, call.since, call.until, rows, call.plot)
    call.done(
        {"by": call.by, "rows": pick_fields(rows, call.fields, ("key", *TOKEN_COLUMNS))},
        (call.by, *TOKEN_COLUMNS),
        [[row["key"], *(row[c] for c in TOKEN_COLUMNS)] for row in rows],
    )


@stat_command(stats_app, "cost", by="model", fields=True, plot=True)
def cost_command(call: StatCall, prices: PricesOption = None) -> None:
    """Cost per group from the editable price table (prices per million tokens).

    Example: pentrace stats cost --by day --prices ~/prices.toml --plot cost.svg
    """
    load_prices(prices)  # a bad price table is refused before any catching up
    query = StatsQuery("cost", call.by, call.since, call.until, prices)
    db = call.ready(query)
    value = document(db, query)
    rows = value["rows"]
    if call.plot is not None:
        cost_plot(db, call.by, call.since, call.until, rows, value["currency"], call.plot)
    picked = pick_fields(rows, call.fields, ("key", "cost", "currency", "total", "unpriced"))
    call.done(
        {**value, "rows": picked},
        (call.by, "cost", "total tokens", "unpriced models"),
        [
            [row["key"], f"{row['cost']:.4f}", row["total"], ", ".join(row["unpriced"])]
            for row in rows
        ],
    )


@stat_command(stats_app, "tools", by_option=ToolsByOption, fields=True, plot=True)
def tools_command(call: StatCall) -> None:
    """Tool calls by name: failures, aborts, timeouts, truncations, unanswered; approvals.

    Example: pentrace stats tools --by hour --since today --json
    """
    query = StatsQuery("tools", call.by or None, call.since, call.until)
    db = call.ready(query)
    value = document(db, query)
    if call.plot is not None:
        tools_plot(db, call.since, call.until, value["tools"], call.plot)
    names = ("calls", "failures", "aborts", "timeouts", "truncations", "unanswered")
    rows = [[row["tool"], *(row[n] for n in names), row["failure_rate"]] for row in value["tools"]]
    rows += [[f"approval: {d}", n, "", "", "", "", "", ""] for d, n in value["approvals"].items()]
    rows += [
        [f"{row['key']}: {row['tool']}", *(row[n] for n in names[:-1]), "", _rate(row)]
        for row in value.get("rows", ())
    ]
    picked = pick_fields(value["tools"], call.fields, ("tool", *names, "failure_rate"))
    call.done({**value, "tools": picked}, ("tool", *names, "failure_rate"), rows)


@stat_command(stats_app, "requests", by_option=RequestsByOption)
def requests_command(call: StatCall) -> None:
    """Requests by status and retries, compactions (mode, outcome, context), goal outcomes.

    Example: pentrace stats requests --by model --since 2026-11-28
    """
    query = StatsQuery("requests", call.by or None, call.since, call.until)
    db = call.ready(query)
    value = document(db, query)
    rows: list[list[Any]] = [["request", s, n] for s, n in value["requests"].items()]
    rows.append(["retries", "", value["retries"]])
    rows += [
        ["compaction", f"{c['mode']}/{c['outcome']} (max context {c['max_context']})", c["count"]]
        for c in value["compactions"]
    ]
    rows += [["goal", outcome, n] for outcome, n in value["goals"].items()]
    rows += [
        [f"{call.by}: {row['key']}", f"{row['completed']} completed, {_rate(row)}", row["requests"]]
        for row in value.get("rows", ())
    ]
    call.done(value, ("what", "which", "count"), rows)


def _rate(row: dict[str, Any]) -> str:
    """A row's success or failure rate as a percentage; "-" where nothing was counted."""
    rate = row.get("success_rate", row.get("failure_rate"))
    return "-" if rate is None else f"{rate * 100:.1f}%"


@stat_command(stats_app, "sessions", by="day", fields=True)
def sessions_command(call: StatCall) -> None:
    """Sessions per group: count, turns, requests, model switches, durations.

    Example: pentrace stats sessions --by agent
    """
    query = StatsQuery("sessions", call.by, call.since, call.until)
    db = call.ready(query)
    rows = document(db, query)["rows"]
    names = ("sessions", "turns", "requests", "model_switches", "mean_duration_s", "max_duration_s")
    call.done(
        {"by": call.by, "rows": pick_fields(rows, call.fields, ("key", *names))},
        (call.by, *names),
        [[row["key"], *(row[n] for n in names)] for row in rows],
    )


@stat_command(stats_app, "tree")
def tree_command(call: StatCall) -> None:
    """Subagent trees: each session with its children and the tokens of its whole subtree.

    Example: pentrace stats tree --json
    """
    query = StatsQuery("tree", since=call.since, until=call.until)
    db = call.ready(query)
    roots = document(db, query)["trees"]
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
    call.done({"trees": roots}, ("session", "model", "tokens", "subtree_tokens"), rows)
