"""``GET /web/usage``: summary cards and charts over time from the analytics read models.

Every figure comes from :mod:`pentrace.infrastructure.analytics.queries`, the
functions behind ``pentrace stats`` (``tokens``, ``cost``, ``requests``,
``tools``, with ``--by minute|hour|day``), so the page and the CLI always agree.
The bucket size follows the range (:mod:`~pentrace.service.web.usage_axis`):
minutes for the last hour, hours for the last 24 hours or one day, then days,
weeks and months.  Every chart shares one time axis: buckets with no activity
are skipped and a break mark shows where; a rate with nothing to divide is left
out of the line, never drawn as 0%.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response

from pentrace.errors import UsageError
from pentrace.infrastructure.analytics import queries
from pentrace.infrastructure.analytics.database import AnalyticsDatabase
from pentrace.infrastructure.analytics.failures import failure_warnings
from pentrace.infrastructure.analytics.prices import PriceTable, load_prices
from pentrace.service.analytics_routes import open_read_models
from pentrace.service.context import ServiceContext
from pentrace.service.edge import params
from pentrace.service.web.layout import PREFIX, esc, number, page
from pentrace.service.web.usage_axis import RANGES, Window, custom_range, moment, window
from pentrace.service.web.usage_charts import KINDS, Counts, UsageSeries, rate, usage_charts

__all__ = ["figures", "usage_page"]

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
        "cost": sum(row["cost"] for row in costs),
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
        series.cost[bucket] = series.cost.get(bucket, 0.0) + row["cost"]
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


def _card(name: str, value: dict[str, Any], currency: str) -> str:
    rate, hits = value["success_rate"], value["cache_hit_rate"]
    completed = value["statuses"].get("completed", 0)
    return (
        f'<section class="card" data-card="{esc(name)}" data-requests="{value["requests"]}" '
        f'data-tokens="{value["tokens"]["total"]}" data-cost="{value["cost"]:.6f}" '
        f'data-completed="{completed}"><h2>{esc(name)}</h2>'
        f"<p><b>{number(value['requests'])}</b> requests"
        f"{f', {rate * 100:.1f}% completed' if rate is not None else ''}</p>"
        f"<p><b>{number(value['tokens']['total'])}</b> tokens"
        f"{f', {hits * 100:.1f}% cache hits' if hits is not None else ''}</p>"
        f"<p><b>{value['cost']:.4f}</b> {esc(currency)}</p></section>"
    )


def _form(choice: dict[str, Any], agents: list[str], models: list[str]) -> str:
    def select(name: str, options: list[str], label: str) -> str:
        items = [f'<option value="">any {label}</option>'] + [
            f'<option value="{esc(v)}"{" selected" if v == choice[name] else ""}>{esc(v)}</option>'
            for v in options
        ]
        return f'<label>{label} <select name="{name}">{"".join(items)}</select></label>'

    ranges = "".join(
        f'<option value="{r}"{" selected" if r == choice["range"] else ""}>'
        f"{_RANGE_NAMES[r]}</option>"
        for r in RANGES
    )
    return (
        f'<form class="filters" method="get" action="{PREFIX}/usage">'
        f"{select('agent', agents, 'agent')}{select('model', models, 'model')}"
        f'<label>range <select name="range" data-preset>{ranges}</select></label>'
        + "".join(
            f"<label data-custom>{label} (UTC) {_bound_input(n, choice[n])}</label>"
            for n, label in (("since", "from"), ("until", "to"))
        )
        + '<button type="submit">Apply</button></form>'
    )


def _bound_input(name: str, raw: str | None) -> str:
    """A custom bound's field: a minute picker showing the bound, or, for a value it cannot
    show (one the page refused), a text field keeping it as typed so it can be corrected."""
    try:
        bound = moment(raw, name, end=name == "until")
    except UsageError:
        return f'<input name="{name}" type="text" value="{esc(raw or "")}" aria-invalid="true">'
    value = "" if bound is None else bound.strftime("%Y-%m-%dT%H:%M")
    return f'<input name="{name}" type="datetime-local" step="60" value="{value}">'


def _refused(error: UsageError) -> str:
    """Why a custom range was refused, above the form's kept input."""
    return (
        '<section class="incomplete" role="alert" aria-label="refused range" data-refused>'
        f"<p><b>{esc(error.message)}</b></p><p>{esc(error.hint or '')}</p></section>"
    )


def _warnings(found: list[str]) -> list[str]:
    """The ``pentrace stats`` warnings about events a projection skipped (ADR 0032)."""
    if not found:
        return []
    items = "".join(f"<li>{esc(line)}</li>" for line in found)
    return [
        '<section class="incomplete" role="alert" aria-label="incomplete figures">'
        "<p><b>These figures are incomplete:</b> a projection could not take some events, "
        "so the numbers below leave them out.</p>"
        f"<ul>{items}</ul></section>"
    ]


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
    body = [
        _form(choice, data["agents"], data["models"]),
        *([_refused(refused)] if refused else []),
        *_warnings(data["warnings"]),
        '<p class="meta">Figures from the analytics read models (the same as '
        "<code>pentrace stats</code>), in UTC. The model filter applies to every chart: a "
        "request, its tokens and a tool call count under the session's model at the time.</p>",
        '<div class="cards">',
        *(_card(name, value, data["currency"]) for name, value in data["cards"].items()),
        "</div>",
        *(
            []
            if refused
            else usage_charts(data["series"], _RANGE_NAMES[str(choice["range"])], data["currency"])
        ),
    ]
    return page("Usage", "usage", body, status=400 if refused else 200)
