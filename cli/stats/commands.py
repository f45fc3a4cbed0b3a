"""``pentrace stats ...``: analytics from the built-in read models.

Every command is made from a row of the kinds table,
:data:`pentrace.infrastructure.operations.stats.KINDS`: its help, its ``--by``,
``--fields`` and ``--prices``, and the document it prints - the same function,
and the same table of which projections each stat needs, that the HTTP routes
use.  ``stats`` first catches the built-in projections up with the ledger
(``--sync`` also indexes traces the ledger is missing; a read model never
built, over a ledger that never held an event, is built from the traces
instead, in worker processes: ADR 0050).

The options every stat shares are declared once (:func:`stat_command`): in
this order ``--by``, ``--since``, ``--until``, the kind's own (``--prices``),
``--json``, ``--fields``, ``--plot``, ``--sync``.  ``--json`` output is a
documented contract (``docs/projections.md``): fields are only ever added.
The text table of a kind is its row in :data:`TABLES` (a kind without one
shows its document's list as it is), its picture its row in :data:`PLOTS`
(else one bar per row); every value in them is formatted by :func:`cell`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final

import typer

from pentrace.cli.options import (
    TIME_HELP,
    FieldsOption,
    check_fields,
    command_with,
    day_window,
    keyword,
    pick_fields,
    unshown,
)
from pentrace.cli.output import emit_json, emit_table
from pentrace.cli.sessions.args import JsonOption, data_root
from pentrace.infrastructure.operations.documents import load_prices
from pentrace.infrastructure.operations.projections import AnalyticsDatabase
from pentrace.infrastructure.operations.stats import (
    KINDS,
    TOKEN_COLUMNS,
    StatKind,
    StatsQuery,
    document,
    plots,
    prepare,
    queries,
)
from pentrace.projections.session_summary import model_name

__all__ = ["PLOTS", "TABLES", "StatCall", "cell", "done", "stat_command", "stats_app"]

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
PricesOption = Annotated[
    Path | None, typer.Option("--prices", help="Price table (TOML); default PENTRACE_PRICES.")
]


def done(
    value: Any,
    as_json: bool,
    columns: tuple[str, ...],
    rows: list[list[Any]],
    title: str | None = None,
) -> None:
    """The JSON document, or the table (``title`` above it on a terminal)."""
    if as_json:
        emit_json(value)
    else:
        emit_table(columns, rows, title=title)


# -- one format per kind of value ------------------------------------------------------
def cell(value: Any, kind: str = "") -> Any:
    """A value as the stats tables show it: ``rate`` a percentage, ``money`` four decimals,
    a yes/no for a flag, "-" for nothing; other values as they are.  The one place the
    stats and projections tables format values (the CLI's shared formatters may take it)."""
    if value is None or value == "":
        return "-" if value is None else ""
    if kind == "rate":
        return f"{float(value) * 100:.1f}%"
    if kind == "money":
        return f"{float(value):.4f}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return value


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

    def done(
        self,
        value: Any,
        columns: tuple[str, ...],
        rows: list[list[Any]],
        title: str | None = None,
    ) -> None:
        """The JSON document with ``--json``, else the table."""
        done(value, self.as_json, columns, rows, title)


def _call(ctx: typer.Context, given: dict[str, Any]) -> tuple[StatCall]:
    check_fields(given.get("fields"), bool(given["as_json"]))
    since, until = day_window(given["since"], given["until"])  # a reversed window: 2
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


# -- the text table of each kind --------------------------------------------------------
Table = Callable[[StatCall, dict[str, Any]], tuple[tuple[str, ...], list[list[Any]]]]
_TOOL_COUNTS: Final = ("calls", "failures", "aborts", "timeouts", "truncations", "unanswered")
# The sessions table's columns are its kind's fields after the key.
_SESSION_COUNTS: Final = KINDS["sessions"].fields[1:]


def _tokens_table(call: StatCall, value: dict[str, Any]) -> tuple[tuple[str, ...], list[list[Any]]]:
    return (call.by, *TOKEN_COLUMNS), [
        [row["key"], *(cell(row[c]) for c in TOKEN_COLUMNS)] for row in value["rows"]
    ]


def _cost_table(call: StatCall, value: dict[str, Any]) -> tuple[tuple[str, ...], list[list[Any]]]:
    rows = [
        [
            row["key"],
            cell(row["cost"], "money"),
            row["total"],
            ", ".join(row["unpriced"]),
            ", ".join(row["fallback"]),
        ]
        for row in value["rows"]
    ]
    return (call.by, "cost", "total tokens", "unpriced models", "fallback-priced models"), rows


def _tools_table(call: StatCall, value: dict[str, Any]) -> tuple[tuple[str, ...], list[list[Any]]]:
    names = _TOOL_COUNTS
    rows = [
        [row["tool"], *(row[n] for n in names), cell(row["failure_rate"], "rate")]
        for row in value["tools"]
    ]
    rows += [[f"approval: {d}", n, "", "", "", "", "", ""] for d, n in value["approvals"].items()]
    rows += [
        [f"{row['key']}: {row['tool']}", *(row[n] for n in names[:-1]), "", _rate(row)]
        for row in value.get("rows", ())
    ]
    return ("tool", *names, "failure_rate"), rows


def _requests_table(
    call: StatCall, value: dict[str, Any]
) -> tuple[tuple[str, ...], list[list[Any]]]:
    # Requests *ended*, by status (``stats tokens`` counts requests begun).
    rows: list[list[Any]] = [["request ended", s, n] for s, n in value["requests"].items()]
    rows.append(["retries", "", value["retries"]])
    rows += [
        [
            "compaction",
            f"{cell(c['mode'])}/{cell(c['outcome'])} (max context {cell(c['max_context'])})",
            c["count"],
        ]
        for c in value["compactions"]
    ]
    rows += [["goal", outcome, n] for outcome, n in value["goals"].items()]
    rows += [
        [f"{call.by}: {row['key']}", f"{row['completed']} completed, {_rate(row)}", row["requests"]]
        for row in value.get("rows", ())
    ]
    return ("what", "which", "count"), rows


def _rate(row: dict[str, Any]) -> str:
    """A row's success or failure rate as a percentage; "-" where nothing was counted."""
    return str(cell(row.get("success_rate", row.get("failure_rate")), "rate"))


def _sessions_table(
    call: StatCall, value: dict[str, Any]
) -> tuple[tuple[str, ...], list[list[Any]]]:
    names = _SESSION_COUNTS
    return (call.by, *names), [[row["key"], *(row[n] for n in names)] for row in value["rows"]]


def _tree_table(call: StatCall, value: dict[str, Any]) -> tuple[tuple[str, ...], list[list[Any]]]:
    rows: list[list[Any]] = []

    def walk(node: dict[str, Any], depth: int) -> None:
        # provider/model, as every other command names a model.
        name = model_name(node.get("provider"), node["model"]) or node["model"]
        rows.append(
            ["  " * depth + node["session_id"], name, node["tokens"], node["subtree_tokens"]]
        )
        for child in node["children"]:
            walk(child, depth + 1)

    for root in value["trees"]:
        walk(root, 0)
    return ("session", "model", "tokens", "subtree_tokens"), rows


def _any_table(call: StatCall, value: dict[str, Any]) -> tuple[tuple[str, ...], list[list[Any]]]:
    """A kind without a table of its own: its document's list, one column per field."""
    listing = value.get(KINDS[call.ctx.info_name or ""].listing, [])
    columns = tuple(dict.fromkeys(name for row in listing for name in row))
    return columns, [[cell(row.get(c)) for c in columns] for row in listing]


TITLES: Final[Mapping[str, str]] = {
    # Two counts of requests that differ for a day whose requests are still open (#31).
    "tokens": "requests: requests begun (`stats requests` counts requests ended)",
    "requests": "requests ended, by status (`stats tokens` counts requests begun)",
}
"""What a kind's table says above it on a terminal."""

TABLES: Final[Mapping[str, Table]] = {
    "tokens": _tokens_table,
    "cost": _cost_table,
    "tools": _tools_table,
    "requests": _requests_table,
    "sessions": _sessions_table,
    "tree": _tree_table,
}


# -- the picture of each kind (--plot) ----------------------------------------------------
Plot = Callable[[AnalyticsDatabase, StatCall, dict[str, Any], Path], Path]


def _when(call: StatCall, days: list[str]) -> str:
    """``2026-11-01 to 2026-11-30 (UTC)``: the asked range, else the days in the data."""
    first = call.since or (min(days) if days else None)
    last = call.until or (max(days) if days else None)
    if first is None and last is None:
        return "all days"
    if first == last:
        return f"{first} (UTC)"
    return f"{first or '…'} to {last or '…'} (UTC)"


def _days_of(db: AnalyticsDatabase, call: StatCall) -> list[str]:
    daily = queries.tokens_by_day_and_model(db, call.since, call.until)
    return sorted({str(day) for day, _, _ in daily})


def _tokens_plot(db: AnalyticsDatabase, call: StatCall, value: dict[str, Any], path: Path) -> Path:
    """Total tokens per day stacked by model, or per group of ``--by``."""
    daily = queries.tokens_by_day_and_model(db, call.since, call.until)
    when = _when(call, sorted({str(d) for d, _, _ in daily}))
    if call.by == "day":
        return plots.plot_daily(
            daily, path, title=f"Tokens per day by model, {when}", ylabel="total tokens"
        )
    return plots.plot_groups(
        [(row["key"], row["total"]) for row in value["rows"]],
        path,
        title=f"Total tokens by {call.by}, {when}",
        xlabel="total tokens",
        group_label=call.by,
    )


def _cost_plot(db: AnalyticsDatabase, call: StatCall, value: dict[str, Any], path: Path) -> Path:
    """Cost per day on a time axis, or per group of ``--by``."""
    rows, currency, by = value["rows"], value["currency"], call.by
    when = _when(call, _days_of(db, call))
    unpriced = sorted({model for row in rows for model in row["unpriced"]})
    fallback = sorted({model for row in rows for model in row["fallback"]})
    note = f" (no price: {', '.join(unpriced)})" if unpriced else ""
    note += f" (fallback rate: {', '.join(fallback)})" if fallback else ""
    if by == "day":
        return plots.plot_daily(
            [(row["key"], "all priced models", row["cost"] or 0.0) for row in rows],
            path,
            title=f"Cost per day, {when}{note}",
            ylabel=f"cost ({currency})",
            series_label="",
        )
    return plots.plot_groups(
        [(row["key"], row["cost"] or 0.0) for row in rows],
        path,
        title=f"Cost by {by}, {when}{note}",
        xlabel=f"cost ({currency})",
        unit=currency,
        group_label=by,
    )


def _tools_plot(db: AnalyticsDatabase, call: StatCall, value: dict[str, Any], path: Path) -> Path:
    """Calls per tool, the failed ones named in the label (the table's main columns)."""
    tools = value["tools"]
    return plots.plot_groups(
        [(row["tool"], row["calls"]) for row in tools],
        path,
        title=f"Tool calls by tool, {_when(call, _days_of(db, call))}",
        xlabel="calls",
        group_label="tool",
        part={row["tool"]: row["failures"] for row in tools},
        part_label="failed",
    )


def _requests_plot(
    db: AnalyticsDatabase, call: StatCall, value: dict[str, Any], path: Path
) -> Path:
    """Requests ended per group of ``--by`` (the failed share marked), else per status."""
    when = _when(call, _days_of(db, call))
    if "rows" in value:
        rows = value["rows"]
        return plots.plot_groups(
            [(str(row["key"]), row["requests"]) for row in rows],
            path,
            title=f"Requests ended by {call.by}, {when}",
            xlabel="requests ended",
            group_label=call.by,
            part={str(row["key"]): row["requests"] - row["completed"] for row in rows},
            part_label="not completed",
        )
    return plots.plot_groups(
        list(value["requests"].items()),
        path,
        title=f"Requests ended by status, {when}",
        xlabel="requests ended",
        group_label="status",
    )


def _sessions_plot(
    db: AnalyticsDatabase, call: StatCall, value: dict[str, Any], path: Path
) -> Path:
    """Sessions per group of ``--by``."""
    return plots.plot_groups(
        [(str(row["key"]), row["sessions"]) for row in value["rows"]],
        path,
        title=f"Sessions by {call.by}, {_when(call, _days_of(db, call))}",
        xlabel="sessions",
        group_label=call.by,
    )


def _tree_plot(db: AnalyticsDatabase, call: StatCall, value: dict[str, Any], path: Path) -> Path:
    """Each root session's whole-subtree tokens, its own marked."""
    roots = value["trees"]
    return plots.plot_groups(
        [(root["session_id"], root["subtree_tokens"]) for root in roots],
        path,
        title=f"Tokens per subagent tree, {_when(call, _days_of(db, call))}",
        xlabel="total tokens of the tree",
        group_label="root session",
        part={root["session_id"]: root["tokens"] for root in roots},
        part_label="the root's own",
    )


PLOTS: Final[Mapping[str, Plot]] = {
    "tokens": _tokens_plot,
    "cost": _cost_plot,
    "tools": _tools_plot,
    "requests": _requests_plot,
    "sessions": _sessions_plot,
    "tree": _tree_plot,
}


def _any_plot(db: AnalyticsDatabase, call: StatCall, value: dict[str, Any], path: Path) -> Path:
    """A kind without a picture of its own: one bar per row, its first count."""
    kind = KINDS[call.ctx.info_name or ""]
    listing = value.get(kind.listing, [])
    first = next(
        (k for row in listing for k, v in row.items() if isinstance(v, int | float)), "count"
    )
    return plots.plot_groups(
        [(str(next(iter(row.values()), "")), float(row.get(first) or 0)) for row in listing],
        path,
        title=f"{kind.name}: {first}, {_when(call, _days_of(db, call))}",
        xlabel=first,
    )


# -- one command per kind -------------------------------------------------------------
def _register(kind: StatKind) -> None:
    """``stats <kind.name>`` from the kind's row."""

    def body(call: StatCall, **own: Any) -> None:
        prices: Path | None = own.get("prices")
        if kind.priced:
            load_prices(prices)  # a bad price table is refused before any catching up
        query = StatsQuery(kind.name, call.by or None, call.since, call.until, prices)
        db = call.ready(query)
        value = document(db, query)
        if call.plot is not None:
            PLOTS.get(kind.name, _any_plot)(db, call, value, call.plot)
        columns, rows = TABLES.get(kind.name, _any_table)(call, value)
        if kind.fields:
            value = {
                **value,
                kind.listing: pick_fields(value[kind.listing], call.fields, kind.fields),
            }
        call.done(value, columns, rows, TITLES.get(kind.name))

    own = [keyword("prices", PricesOption, None)] if kind.priced else []
    first = inspect.Parameter("call", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    setattr(body, "__signature__", inspect.Signature([first, *own]))  # noqa: B010 - typer reads it
    body.__name__ = body.__qualname__ = f"{kind.name}_command"
    body.__doc__ = kind.help
    by_option = Annotated[str | None, unshown("--by", help=kind.by_help)] if kind.by_help else None
    stat_command(
        stats_app,
        kind.name,
        by=kind.default_by,
        by_option=by_option,
        fields=bool(kind.fields),
        plot=True,
    )(body)


for _kind in KINDS.values():
    _register(_kind)
