"""``GET /web/usage``: summary cards and charts over time from the analytics read models.

Every figure comes from :mod:`pentrace.infrastructure.analytics.queries`, the
functions behind ``pentrace stats`` (``tokens``, ``cost``, ``requests``,
``tools``, with ``--by minute|hour|day``), so the page and the CLI always agree.
The bucket size follows the range (:func:`~pentrace.infrastructure.analytics.plots.window`):
minutes for the last hour, hours for the last 24 hours or one day, then days,
weeks and months.  :class:`UsageSeries` holds each bucket's figures as read;
every chart draws only the active buckets, all on the same columns with the
same break marks where buckets with no activity were skipped; a rate with
nothing to divide is ``None``, left out of the line, never drawn as 0%.  A
table of every kept bucket's figures follows the charts.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response

from pentrace.errors import UsageError
from pentrace.infrastructure.operations.documents import PriceTable, load_prices
from pentrace.infrastructure.operations.projections import AnalyticsDatabase, failure_warnings
from pentrace.infrastructure.operations.stats import (
    QUERY_BY,
    RANGES,
    Chart,
    Window,
    axis,
    bucket_of,
    custom_range,
    label,
    moment,
    queries,
    rendered,
    window,
)
from pentrace.service.analytics_routes import open_read_models
from pentrace.service.context import ServiceContext
from pentrace.service.edge import params
from pentrace.service.web.layout import TEMPLATES, page

__all__ = ["KINDS", "Counts", "UsageSeries", "figures", "rate", "usage_charts", "usage_page"]

Counts = dict[str, list[float]]  # bucket -> [requests, completed]
KINDS: Final = ("input", "output", "cache_read", "cache_write")
_TOP_TOOLS: Final = 4

_Bounds = tuple[datetime | None, datetime | None]  # a custom range's start and end
_TOP: Final = 4  # series drawn by name per chart; the rest are summed as one
_PROJECTIONS: Final = ("tokens", "tools", "sessions")
_RANGE_NAMES: Final = {
    "1h": "last hour",
    "24h": "last 24 hours",
    "7d": "last 7 days",
    "30d": "last 30 days",
    "90d": "last 90 days",
    "all": "all time",
    "custom": "custom range",
}


def rate(part: float, whole: float) -> float | None:
    """``part / whole``, or None when there is nothing to divide (shown as no rate)."""
    return part / whole if whole else None


class UsageSeries:
    """Each bucket's figures, folded from the query rows of the window's grouping."""

    def __init__(self, win: Window) -> None:
        self.win = win
        self.first = date.fromisoformat(win.since[:10])
        self.by = QUERY_BY[win.size]
        self.requests: Counts = {}
        self.tokens: dict[str, dict[str, float]] = {}
        self.cost: dict[str, float] = {}
        self.tools: dict[str, dict[str, list[float]]] = {}
        self.agents: list[tuple[str, Counts]] = []
        self.models: list[tuple[str, Counts]] = []

    def bucket(self, key: object) -> str:
        """The bucket of a query row's key."""
        return bucket_of(self.win.size, str(key), self.first)

    def outcomes(self, rows: list[dict[str, Any]]) -> Counts:
        """``queries.outcomes`` rows as requests and completed per bucket."""
        out: Counts = {}
        for row in rows:
            entry = out.setdefault(self.bucket(row["key"]), [0.0, 0.0])
            entry[0] += row["requests"]
            entry[1] += row["completed"]
        return out

    def active(self) -> set[str]:
        """Buckets with a request, a token or a tool call in them."""
        busy = {b for b, (n, _) in self.requests.items() if n}
        busy |= {b for b, kinds in self.tokens.items() if kinds["total"] or kinds["requests"]}
        return busy | {b for b, tools in self.tools.items() if any(c for c, _ in tools.values())}


def _by_name(
    named: list[tuple[str, Counts]], total: Counts, keys: list[str], other: str
) -> tuple[list[tuple[str, list[float]]], list[list[float | None]]]:
    """Stacked request series of the named agents (or models) plus the rest, with each one's
    success rate per bucket."""
    series, rates = [], []
    rest = {k: list(total.get(k, [0.0, 0.0])) for k in keys}
    for name, counts in named:
        values = [counts.get(k, [0.0, 0.0]) for k in keys]
        series.append((name, [v[0] for v in values]))
        rates.append([rate(v[1], v[0]) for v in values])
        for k, v in zip(keys, values, strict=True):
            rest[k][0] -= v[0]
            rest[k][1] -= v[1]
    if any(rest[k][0] for k in keys):
        series.append((other, [rest[k][0] for k in keys]))
        rates.append([rate(rest[k][1], rest[k][0]) for k in keys])
    return series, rates


def _tools(data: UsageSeries, keys: list[str]) -> Chart:
    calls: dict[str, float] = {}
    for bucket in keys:
        for tool, (count, _) in data.tools.get(bucket, {}).items():
            calls[tool] = calls.get(tool, 0) + count
    top = sorted(calls, key=lambda t: (-calls[t], t))[:_TOP_TOOLS]
    series, rates = [], []
    for tool in top:
        cells = [data.tools.get(k, {}).get(tool, [0.0, 0.0]) for k in keys]
        series.append((tool, [c[0] for c in cells]))
        rates.append([rate(c[1], c[0]) for c in cells])
    rest = [
        [sum(c[i] for t, c in data.tools.get(k, {}).items() if t not in top) for i in (0, 1)]
        for k in keys
    ]
    if any(r[0] for r in rest):
        series.append(("other tools", [r[0] for r in rest]))
        rates.append([rate(r[1], r[0]) for r in rest])
    overall = []
    for k in keys:
        counts = data.tools.get(k, {}).values()
        overall.append(rate(sum(c[1] for c in counts), sum(c[0] for c in counts)))
    return Chart(
        f"Tool calls per {data.win.size} by tool, and tool failure rate",
        [],
        series,
        line=("tool failure rate", overall),
        line_is_rate=True,
        rates=rates,
        rate_name="failed",
        y_title="tool calls",
        line_title="failure rate",
    )


def figures(
    db: AnalyticsDatabase,
    prices: PriceTable,
    since: str | None,
    until: str | None,
    agent: str | None,
    model: str | None,
) -> dict[str, Any]:
    """Requests, success rate, token kinds and cost of one range (a card), from the stats
    queries."""
    statuses = queries.requests(db, since, until, agent=agent, model=model)["requests"]
    tokens = queries.tokens(db, "model", since, until, agent=agent, model=model)
    costs = queries.cost(db, prices, "model", since, until, agent=agent, model=model)
    sums = {kind: sum(row[kind] for row in tokens) for kind in (*KINDS, "total")}
    total = sum(statuses.values())
    return {
        "requests": total,
        "statuses": statuses,
        "success_rate": rate(statuses.get("completed", 0), total),
        "tokens": sums,
        "cache_hit_rate": rate(sums["cache_read"], sums["input"] + sums["cache_read"]),
        # None when tokens were used and no model of them has a price (never a bare 0).
        "cost": None
        if costs and all(row["cost"] is None for row in costs)
        else sum(row["cost"] or 0.0 for row in costs),
        # Models priced by a fallback rate or not at all, shown beside the cost (ADR 0099).
        "unpriced": sorted({name for row in costs for name in row["unpriced"]}),
        "fallback": sorted({name for row in costs for name in row["fallback"]}),
    }


def _split(
    db: AnalyticsDatabase, series: UsageSeries, by: str, agent: str | None, model: str | None
) -> list[tuple[str, Counts]]:
    """Requests per bucket of the ``_TOP`` busiest agents (or models), by name."""
    win = series.win
    totals = queries.outcomes(db, by, win.since, win.until, agent=agent, model=model)
    ranked = sorted(totals, key=lambda row: (-row["requests"], str(row["key"])))[:_TOP]
    out = []
    for row in ranked:
        chosen = {"agent": agent, "model": model, by: row["key"]}  # this agent (or model)
        rows = queries.outcomes(db, series.by, win.since, win.until, **chosen)
        out.append((str(row["key"]), series.outcomes(rows)))
    return out


def _read_series(
    db: AnalyticsDatabase, prices: PriceTable, win: Window, agent: str | None, model: str | None
) -> UsageSeries:
    series = UsageSeries(win)
    since, until, by = win.since, win.until, series.by
    series.requests = series.outcomes(
        queries.outcomes(db, by, since, until, agent=agent, model=model)
    )
    for row in queries.tokens(db, by, since, until, agent=agent, model=model):
        kinds = series.tokens.setdefault(
            series.bucket(row["key"]), dict.fromkeys((*KINDS, "total", "requests"), 0.0)
        )
        for kind in kinds:
            kinds[kind] += row[kind]
    for row in queries.cost(db, prices, by, since, until, agent=agent, model=model):
        bucket = series.bucket(row["key"])
        series.cost[bucket] = series.cost.get(bucket, 0.0) + (row["cost"] or 0.0)
    for row in queries.tools(db, since, until, agent=agent, model=model, by=by)["rows"]:
        tools = series.tools.setdefault(series.bucket(row["key"]), {})
        entry = tools.setdefault(str(row["tool"]), [0.0, 0.0])
        entry[0] += row["calls"]
        entry[1] += row["failures"]
    series.agents = _split(db, series, "agent", agent, model)
    series.models = _split(db, series, "model", agent, model)
    return series


def _first_day(db: AnalyticsDatabase) -> date | None:
    days = [row["key"] for row in queries.tokens(db, "day") if row["key"]]
    days += [row["key"] for row in queries.outcomes(db, "day") if row["key"]]
    return date.fromisoformat(min(days)) if days else None


def _read(
    context: ServiceContext, choice: dict[str, Any], bounds: _Bounds | None
) -> dict[str, Any]:
    """The page's figures; ``bounds`` is the custom range's start and end, None when the
    range was refused (the cards and filters still show)."""
    db = open_read_models(context, _PROJECTIONS, True)
    try:
        prices, now = load_prices(), datetime.now(UTC)
        today = now.date()
        agent, model = choice["agent"], choice["model"]
        first, last = bounds or (None, None)
        win = (
            None
            if bounds is None
            else window(
                choice["range"],
                now,
                start=first,
                end=last,
                first_active=_first_day(db) if choice["range"] in ("all", "custom") else None,
            )
        )
        cards = {
            name: figures(db, prices, start, today.isoformat(), agent, model)
            for name, start in (
                ("today", today.isoformat()),
                ("last 7 days", (today - timedelta(6)).isoformat()),
                ("all time", None),
            )
        }
        return {
            "warnings": failure_warnings(db, _PROJECTIONS),  # ADR 0032: numbers incomplete
            "cards": cards,
            "series": None if win is None else _read_series(db, prices, win, agent, model),
            "currency": prices.currency,
            "agents": sorted(r["key"] for r in queries.tokens(db, "agent") if r["key"]),
            "models": sorted(
                {r["key"] for r in queries.tokens(db, "model")}
                | {r["key"] for r in queries.outcomes(db, "model")}
            ),
        }
    finally:
        db.close()


def usage_charts(data: UsageSeries | None, range_name: str, currency: str) -> list[str]:
    """The charts and the table of one window, or a note when the range holds no day."""
    template = TEMPLATES.get_template("usage_charts.html")
    if data is None:
        return [template.render(axis=None)]
    size = data.win.size
    keys, breaks = axis(data.win.keys, data.active())
    labels = [label(size, k, keys[n - 1] if n else None) for n, k in enumerate(keys)]
    figs = [data.tokens.get(k, {}) for k in keys]
    ended = [data.requests.get(k, [0.0, 0.0]) for k in keys]  # [requests, completed]
    success = ("completed (share of requests)", [rate(done, n) for n, done in ended])
    x_title = f"{size} (UTC)"
    charts = []
    for by, named in (("agent", data.agents), ("model", data.models)):
        series, rates = _by_name(named, data.requests, keys, f"other {by}s")
        charts.append(
            Chart(
                f"Requests per {size} by {by}, and success rate",
                labels,
                series,
                breaks,
                success,
                True,
                rates=rates,
                rate_name="completed",
                x_title=x_title,
                y_title="requests",
                line_title="completed",
            )
        )
    hit_rate = [
        rate(f.get("cache_read", 0), f.get("input", 0) + f.get("cache_read", 0)) for f in figs
    ]
    charts += [
        Chart(f"Tokens per {size} by kind, and cache hit rate", labels,
              [(k.replace("_", " "), [f.get(k, 0.0) for f in figs]) for k in KINDS], breaks,
              ("cache hit rate", hit_rate), True, x_title=x_title, y_title="tokens"),
        Chart(f"Cost per {size} ({currency})", labels,
              [("cost", [data.cost.get(k, 0.0) for k in keys])], breaks, unit=currency,
              x_title=x_title, y_title=f"cost ({currency})"),
    ]  # fmt: skip
    tools = _tools(data, keys)
    tools.labels, tools.breaks, tools.x_title = labels, breaks, x_title
    charts.append(tools)
    rows = []
    for key in keys:
        requests, completed = data.requests.get(key, [0.0, 0.0])
        tool_counts = data.tools.get(key, {}).values()
        rows.append(
            {
                "key": key,
                "requests": requests,
                "completed": completed,
                "success": rate(completed, requests),
                "tokens": data.tokens.get(key, {}).get("total", 0),
                "cost": data.cost.get(key, 0.0),
                "calls": sum(c[0] for c in tool_counts),
                "failures": sum(c[1] for c in tool_counts),
            }
        )
    shown = {"size": size, "buckets": len(data.win.keys), "active": len(keys),
             "since": data.win.since, "until": data.win.until, "name": range_name}  # fmt: skip
    return [template.render(axis=shown, charts=charts, rows=rows, currency=currency)]


def _bound(name: str, raw: str | None) -> dict[str, str]:
    """A custom bound's field: a minute picker showing the bound, or, for a value it cannot
    show (one the page refused), a text field keeping it as typed so it can be corrected."""
    try:
        bound = moment(raw, name, end=name == "until")
    except UsageError:
        return {"name": name, "type": "text", "value": raw or "", "invalid": "true"}
    value = "" if bound is None else bound.strftime("%Y-%m-%dT%H:%M")
    return {"name": name, "type": "datetime-local", "value": value, "invalid": ""}


async def usage_page(request: Request) -> Response:
    """``GET /web/usage``."""
    context: ServiceContext = request.app.state.context
    choice = {
        "agent": params.text(request, "agent"),
        "model": params.text(request, "model"),
        "range": params.choice(request, "range", RANGES) or "30d",
        "since": params.text(request, "since", max_chars=40),
        "until": params.text(request, "until", max_chars=40),
    }
    refused = None
    bounds: _Bounds | None = (None, None)
    if choice["range"] == "custom":
        try:
            bounds = custom_range(choice["since"], choice["until"], datetime.now(UTC))
        except UsageError as error:
            refused, bounds = error, None
    data = await context.run(_read, context, choice, bounds)
    charts = (
        None
        if refused
        else usage_charts(data["series"], _RANGE_NAMES[str(choice["range"])], data["currency"])
    )
    view = {
        **data,
        "choice": choice,
        "ranges": [(r, _RANGE_NAMES[r]) for r in RANGES],
        "agent_options": [(str(a), str(a)) for a in data["agents"]],
        "model_options": [(str(m), str(m)) for m in data["models"]],
        "bounds": [
            (_bound("since", choice["since"]), "from"),
            (_bound("until", choice["until"]), "to"),
        ],
        "refused": refused,
        "charts": None if charts is None else rendered("".join(charts)),
    }
    return page(request, "usage.html", view, title="Usage", active="usage",
                status=400 if refused else 200)  # fmt: skip
