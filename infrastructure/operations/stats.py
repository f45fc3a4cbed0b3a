"""Stats documents: which projections each stat reads, catching them up, and the document
that ``pentrace stats <kind> --json`` prints and ``GET /api/v1/stats/{kind}`` returns.

:data:`NEEDS` is the one table of the built-in projections each stat reads.
:func:`prepare` brings them up to date with the ledger (optionally syncing the
traces the ledger is missing first, with retention held until the projections
have read them) and opens the analytics database; :func:`document` builds the
JSON document from it (``docs/projections.md``: fields are only ever added);
:func:`stats_document` does both.  The CLI formats the document as a table or
a plot, the service serializes it (ADR 0036).

The numbers are drawn here too (ADR 0103): the chart model and its one engine
(``Chart``, ``render_chart``), the ``stats --plot`` pictures (``plots``), the Usage
page's time axis, and the query functions the pages read (``queries``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pentrace.errors import UsageError
from pentrace.infrastructure.analytics import plots, queries
from pentrace.infrastructure.analytics.activity_queries import (
    OUTCOME_GROUPS,
    SESSION_GROUPS,
    TOOL_GROUPS,
)
from pentrace.infrastructure.analytics.charts import (
    Chart,
    number,
    render_chart,
    rendered,
    template_environment,
)
from pentrace.infrastructure.analytics.cold import cold_build
from pentrace.infrastructure.analytics.database import (
    GROUPS,
    AnalyticsDatabase,
    analytics_owner,
    analytics_url,
    column_of,
)
from pentrace.infrastructure.analytics.failures import failure_warnings
from pentrace.infrastructure.analytics.plots import (
    QUERY_BY,
    RANGES,
    Window,
    axis,
    bucket_of,
    custom_range,
    label,
    moment,
    window,
)
from pentrace.infrastructure.analytics.prices import dataset_version, load_prices
from pentrace.infrastructure.analytics.queries import TOKEN_COLUMNS
from pentrace.infrastructure.analytics.rebuild import rebuild
from pentrace.infrastructure.analytics.registry import BUILTINS
from pentrace.infrastructure.analytics.runner import (
    catch_up,
    open_ledger,
    open_projection,
    pruned_through,
)
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.storage.layout import iter_sessions

__all__ = [
    "DEFAULT_BY",
    "GROUPINGS",
    "KINDS",
    "NEEDS",
    "QUERY_BY",
    "RANGES",
    "TOKEN_COLUMNS",
    "Chart",
    "Prepared",
    "StatKind",
    "StatsQuery",
    "Window",
    "axis",
    "bucket_of",
    "custom_range",
    "document",
    "label",
    "moment",
    "number",
    "plots",
    "prepare",
    "queries",
    "read_models",
    "render_chart",
    "rendered",
    "stats_document",
    "template_environment",
    "window",
]


@dataclass(frozen=True, slots=True)
class StatKind:
    """One kind of ``pentrace stats``: a row of :data:`KINDS`.

    The CLI registers ``stats <name>`` from it (help, ``--by``, ``--fields``,
    ``--prices``, ``--plot``), ``GET /api/v1/stats/{name}`` serves its
    document, and the web reads the kinds through the API: adding a kind is
    adding a row (and, for a table of its own, a row in the CLI's table).

    * ``needs``: the built-in projections (``registry.BUILTINS``) it reads;
    * ``build(db, query)``: its JSON document (``docs/projections.md``);
    * ``groupings``: what ``--by`` takes (empty: it does not group), and
      ``default_by`` when none is given; ``ungrouped``: why the groupings it
      lacks are missing (the error of a ``--by`` it refuses says so);
    * ``listing``: the list of the document that ``--fields`` picks from,
      ``fields`` its field names (empty: no ``--fields``);
    * ``priced``: it takes ``--prices``; ``help``: the command's help;
      ``by_help``: the help of a ``--by`` that is not given by default.
    """

    name: str
    needs: tuple[str, ...]
    build: Callable[[AnalyticsDatabase, StatsQuery], dict[str, Any]]
    help: str
    groupings: tuple[str, ...] = ()
    default_by: str | None = None
    ungrouped: str = ""
    listing: str = "rows"
    fields: tuple[str, ...] = ()
    priced: bool = False
    by_help: str | None = None


def _tokens(db: AnalyticsDatabase, query: StatsQuery) -> dict[str, Any]:
    by = query.by or "model"
    return {"by": by, "rows": queries.tokens(db, by, query.since, query.until)}


def _cost(db: AnalyticsDatabase, query: StatsQuery) -> dict[str, Any]:
    table, by = load_prices(query.prices), query.by or "model"
    rows = queries.cost(db, table, by, query.since, query.until)
    dataset = f"genai-prices {dataset_version()}" if table.dataset else None
    return {"by": by, "currency": table.currency, "dataset": dataset, "rows": rows}


def _tools(db: AnalyticsDatabase, query: StatsQuery) -> dict[str, Any]:
    return queries.tools(db, query.since, query.until, by=query.by)


def _requests(db: AnalyticsDatabase, query: StatsQuery) -> dict[str, Any]:
    value = queries.requests(db, query.since, query.until)
    if query.by is not None:  # per group, with the success rate (act_minutes)
        value.update(by=query.by, rows=queries.outcomes(db, query.by, query.since, query.until))
    return value


def _sessions(db: AnalyticsDatabase, query: StatsQuery) -> dict[str, Any]:
    by = query.by or "day"
    return {"by": by, "rows": queries.sessions(db, by, query.since, query.until)}


def _tree(db: AnalyticsDatabase, query: StatsQuery) -> dict[str, Any]:
    return {"trees": queries.tree(db, query.since, query.until)}


_PER_MINUTE: Final = (
    "they are counted per minute and model, not per session: "
    "`stats tokens --by session` and `stats sessions --by session` group by session"
)
_TOKEN_FIELDS: Final = ("key", *queries.TOKEN_COLUMNS)

KINDS: Final[Mapping[str, StatKind]] = {
    kind.name: kind
    for kind in (
        StatKind(
            "tokens",
            ("tokens",),
            _tokens,
            "Token use per group (input, output, cache read/write, total, requests).\n\n"
            "Example: pentrace stats tokens --by agent --since 2026-11-01 --plot tokens.png",
            tuple(GROUPS),
            "model",
            fields=_TOKEN_FIELDS,
        ),
        StatKind(
            "cost",
            ("tokens",),
            _cost,
            "Cost per group: your price table over the bundled genai-prices dataset.\n\n"
            "Each model is priced by your table (TOML, per million tokens), else by the "
            "dataset; models priced by the table's [default] rate are listed as fallback, "
            "models with no price as unpriced (docs/cost.md).\n\n"
            "Example: pentrace stats cost --by day --prices ~/prices.toml --plot cost.svg",
            tuple(GROUPS),
            "model",
            fields=("key", "cost", "currency", "total", "unpriced", "fallback"),
            priced=True,
        ),
        StatKind(
            "tools",
            ("tools",),
            _tools,
            "Tool calls by name: failures, aborts, timeouts, truncations, unanswered; "
            "approvals.\n\nExample: pentrace stats tools --by hour --since today --json",
            TOOL_GROUPS,
            ungrouped=f"tool calls: {_PER_MINUTE}",
            listing="tools",
            fields=(
                "tool",
                "calls",
                "failures",
                "aborts",
                "timeouts",
                "truncations",
                "unanswered",
                "failure_rate",
            ),
            by_help="Also list each tool per model, agent, project, day, hour or minute (UTC).",
        ),
        StatKind(
            "requests",
            ("sessions",),
            _requests,
            "Requests by status and retries, compactions (mode, outcome, context), goal "
            "outcomes.\n\nExample: pentrace stats requests --by model --since 2026-11-28",
            OUTCOME_GROUPS,
            ungrouped=f"requests ended: {_PER_MINUTE}",
            by_help="Also list requests and success rate per model, provider, agent, project, "
            "day, hour or minute (UTC).",
        ),
        StatKind(
            "sessions",
            ("sessions",),
            _sessions,
            "Sessions per group: count, turns, requests, model switches, durations.\n\n"
            "Example: pentrace stats sessions --by agent",
            SESSION_GROUPS,
            "day",
            ungrouped="a session is kept whole, with its start day, not per hour or minute",
            fields=(
                "key",
                "sessions",
                "turns",
                "requests",
                "model_switches",
                "mean_duration_s",
                "max_duration_s",
            ),
        ),
        StatKind(
            "tree",
            ("sessions", "tokens"),
            _tree,
            "Subagent trees: each session with its children and the tokens of its whole "
            "subtree.\n\nExample: pentrace stats tree --json",
            listing="trees",
        ),
    )
}
"""Every stats kind, in the order the CLI lists them (see :class:`StatKind`)."""

NEEDS: Final[Mapping[str, tuple[str, ...]]] = {name: k.needs for name, k in KINDS.items()}
"""The built-in projections (``registry.BUILTINS``) each stat kind reads."""

DEFAULT_BY: Final[Mapping[str, str]] = {
    name: k.default_by for name, k in KINDS.items() if k.default_by is not None
}
"""The grouping of the kinds that group, when none is asked for."""

GROUPINGS: Final[Mapping[str, tuple[str, ...]]] = {
    name: k.groupings for name, k in KINDS.items() if k.groupings
}
"""The groupings (``--by``) of the kinds that group (``tree`` does not)."""


@dataclass(frozen=True, slots=True)
class StatsQuery:
    """One stat: its kind, grouping, inclusive UTC days and (``cost``) the price table; a
    kind or grouping that does not exist is a :class:`~pentrace.errors.UsageError`."""

    kind: str
    by: str | None = None
    since: str | None = None
    until: str | None = None
    prices: Path | None = None

    def __post_init__(self) -> None:
        kind = KINDS.get(self.kind)
        if kind is None:
            raise UsageError(
                f"stats kind: expected one of {', '.join(KINDS)}, found {self.kind[:30]!r}",
                hint="for example: tokens, grouped by model",
            )
        if self.by is not None and kind.groupings:
            # Checked here, before any catching up, which can take long on a big data root.
            if self.by in GROUPS and self.by not in kind.groupings and kind.ungrouped:
                raise UsageError(
                    f"--by: expected one of {', '.join(kind.groupings)}, found {self.by!r}",
                    hint=f"for example --by {kind.groupings[0]}; `stats {kind.name}` is not "
                    f"grouped by {self.by} because {kind.ungrouped}",
                )
            column_of(self.by, kind.groupings, minutes=True)


@dataclass(frozen=True, slots=True)
class Prepared:
    """The analytics database with the needed read models ready; the caller closes ``db``.

    ``warnings`` name the sessions a ``sync_first`` had to leave out, and the
    projections whose numbers leave out events their handler failed on (ADR 0032).
    """

    db: AnalyticsDatabase
    warnings: tuple[str, ...] = ()


def _catch_up(names: tuple[str, ...], root: Path, env: Mapping[str, str] | None) -> None:
    for name in names:
        catch_up(BUILTINS[name], data_root=root, env=env)


def prepare(
    root: Path,
    kind: str,
    *,
    catch_up_first: bool = True,
    sync_first: bool = False,
    env: Mapping[str, str] | None = None,
    workers: int = 1,
) -> Prepared:
    """Ready the read models ``kind`` needs and open the analytics database.

    ``catch_up_first=False`` serves the read models as the runners left them
    (their tables are created once, empty).  ``sync_first`` indexes the traces
    the ledger is missing before catching up.  Otherwise a read model that was
    never built, over a ledger that never held an event, is built straight
    from the traces (:func:`~pentrace.infrastructure.analytics.cold.cold_build`,
    in ``workers`` processes; 0 picks them) before the catch-up.
    """
    names = NEEDS[StatsQuery(kind).kind]
    # One preparer at a time per data root (threads of the service, other processes): the
    # others wait, then find the read models current (issue #32).
    with analytics_owner(root):
        return _prepare(root, names, catch_up_first, sync_first, env, workers)


def _prepare(
    root: Path,
    names: tuple[str, ...],
    catch_up_first: bool,
    sync_first: bool,
    env: Mapping[str, str] | None,
    workers: int,
) -> Prepared:
    left_out: list[str] = []
    if catch_up_first and not sync_first:
        for name in names:
            report = cold_build(BUILTINS[name], data_root=root, env=env, workers=workers)
            left_out += [
                f"{f.project}/{f.agent}/{f.session_id}: cut short in {name}: {f.message}"
                for f in (report.failures if report is not None else ())
            ]
    if sync_first:
        ledger = open_ledger(root, env)
        try:
            # Retention waits until the projections have read what this sync indexed.
            with ledger.retention_held():
                left_out = [
                    f"{f.project}/{f.agent}/{f.session_id}: in the sync: {f.message}"
                    for f in sync(ledger, root).failures
                ]
                _catch_up(names, root, env)
        finally:
            ledger.close()
        db = read_models(root, names, catch_up_first=False, env=env)
    else:
        db = read_models(root, names, catch_up_first=catch_up_first, env=env)
    return Prepared(db, (*left_out, *failure_warnings(db, names)))


def read_models(
    root: Path,
    names: tuple[str, ...],
    *,
    catch_up_first: bool = True,
    env: Mapping[str, str] | None = None,
) -> AnalyticsDatabase:
    """The analytics database with the ``names`` projections' tables in place, caught up with
    the ledger first unless ``catch_up_first`` is False (their tables are then created once)."""
    with analytics_owner(root):
        for name in names:
            if catch_up_first:
                if _pruned_before_first_read(name, root, env):
                    rebuild(BUILTINS[name], data_root=root, env=env)
                catch_up(BUILTINS[name], data_root=root, env=env)
            else:
                open_projection(BUILTINS[name], root, env).view.db.close()
    return AnalyticsDatabase(analytics_url(root, os.environ if env is None else env))


def _pruned_before_first_read(name: str, root: Path, env: Mapping[str, str] | None) -> bool:
    """True when read model ``name`` has never committed while ledger retention has already
    deleted rows, and this root's traces hold every stream the ledger has seen: its
    catch-up could only refuse with a gap, and a model that holds nothing loses nothing by
    being built from those traces, as a rebuild does (a large first import into a fresh
    root, issue #28).  A ledger that also indexes other hosts' traces keeps the loud gap
    (docs/deployment.md): the traces here could not give their numbers back."""
    view = open_projection(BUILTINS[name], root, env).view
    try:
        if view.max_tracking_id(name) is not None:
            return False
    finally:
        view.db.close()
    ledger = open_ledger(root, env)
    try:
        if pruned_through(ledger) == 0:
            return False
        streams = ledger.stream_limits(ledger.head())
    finally:
        ledger.close()
    local = {ref.key.stream_id for ref in iter_sessions(root)}
    return streams.keys() <= local


def document(db: AnalyticsDatabase, query: StatsQuery) -> dict[str, Any]:
    """The JSON document of one stat over a prepared analytics database."""
    return KINDS[query.kind].build(db, query)


def stats_document(
    root: Path,
    query: StatsQuery,
    *,
    catch_up_first: bool = True,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """:func:`prepare` then :func:`document`, closing the database."""
    prepared = prepare(root, query.kind, catch_up_first=catch_up_first, env=env)
    try:
        return document(prepared.db, query)
    finally:
        prepared.db.close()
