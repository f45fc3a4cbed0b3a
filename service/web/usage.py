"""``GET /web/usage``: summary cards and charts over time from the analytics read models.

Every figure comes from :mod:`pentrace.infrastructure.analytics.queries`, the
functions behind ``pentrace stats``, called once per time bucket, so the page
and the CLI always agree.  The read models count per UTC day, so a bucket is a
day, a week or a month, chosen from the range (a range under a day still shows
whole days).  Buckets with no activity are skipped and a break mark shows
where; a rate with nothing to divide is left out of the line, never drawn as 0%.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response

from pentrace.infrastructure.analytics import queries
from pentrace.infrastructure.analytics.database import AnalyticsDatabase
from pentrace.infrastructure.analytics.failures import failure_warnings
from pentrace.infrastructure.analytics.prices import PriceTable, load_prices
from pentrace.service.analytics_routes import open_read_models
from pentrace.service.context import ServiceContext
from pentrace.service.edge import params
from pentrace.service.web.layout import PREFIX, esc, number, page
from pentrace.service.web.svg import Chart, render_chart

__all__ = ["figures", "usage_page"]

_RANGES: Final = {"1h": 1, "24h": 1, "7d": 7, "30d": 30, "90d": 90, "all": None, "custom": None}
_KINDS: Final = ("input", "output", "cache_read", "cache_write")
_TOP_TOOLS: Final = 4
_PROJECTIONS: Final = ("tokens", "tools", "sessions")


def figures(
    db: AnalyticsDatabase,
    prices: PriceTable,
    since: str | None,
    until: str | None,
    agent: str | None,
    model: str | None,
) -> dict[str, Any]:
    """Requests, token kinds, cost and tool calls of one range, from the stats queries."""
    statuses = queries.requests(db, since, until, agent=agent)["requests"]
    tokens = [
        row
        for row in queries.tokens(db, "model", since, until, agent=agent)
        if model in (None, row["key"])
    ]
    costs = [
        row
        for row in queries.cost(db, prices, "model", since, until, agent=agent)
        if model in (None, row["key"])
    ]
    tools = queries.tools(db, since, until, agent=agent)["tools"]
    sums = {kind: sum(row[kind] for row in tokens) for kind in (*_KINDS, "total")}
    total = sum(statuses.values())
    return {
        "requests": total,
        "success_rate": statuses.get("completed", 0) / total if total else None,
        "tokens": sums,
        "cache_hit_rate": (
            sums["cache_read"] / (sums["input"] + sums["cache_read"])
            if sums["input"] + sums["cache_read"]
            else None
        ),
        "cost": sum(row["cost"] for row in costs),
        "tools": {row["tool"]: (row["calls"], row["failures"]) for row in tools},
    }


def _buckets(first: date, last: date) -> tuple[str, list[tuple[date, date]]]:
    span = (last - first).days + 1
    if span <= 31:
        return "day", [(first + timedelta(n), first + timedelta(n)) for n in range(span)]
    out = []
    if span <= 200:
        start = first - timedelta(first.weekday())
        while start <= last:
            out.append((max(start, first), min(start + timedelta(6), last)))
            start += timedelta(7)
        return "week", out
    start = first.replace(day=1)
    while start <= last:
        following = (start + timedelta(32)).replace(day=1)
        out.append((max(start, first), min(following - timedelta(1), last)))
        start = following
    return "month", out


def _first_day(db: AnalyticsDatabase) -> date | None:
    days = [row["key"] for row in queries.tokens(db, "day") if row["key"]]
    return date.fromisoformat(min(days)) if days else None


def _read(context: ServiceContext, choice: dict[str, Any]) -> dict[str, Any]:
    db = open_read_models(context, _PROJECTIONS, True)
    try:
        prices, today = load_prices(), datetime.now(UTC).date()
        agent, model = choice["agent"], choice["model"]
        days = _RANGES[choice["range"]]
        last = date.fromisoformat(choice["until"]) if choice["until"] else today
        if choice["since"]:
            first: date | None = date.fromisoformat(choice["since"])
        elif days is not None:
            first = today - timedelta(days - 1)
        else:
            first = _first_day(db)
        cards = {
            name: figures(db, prices, start, today.isoformat(), agent, model)
            for name, start in (
                ("today", today.isoformat()),
                ("last 7 days", (today - timedelta(6)).isoformat()),
                ("all time", None),
            )
        }
        size, spans = _buckets(first, last) if first is not None and first <= last else ("day", [])
        rows = [
            (a, b, figures(db, prices, a.isoformat(), b.isoformat(), agent, model))
            for a, b in spans
        ]
        return {
            "warnings": failure_warnings(db, _PROJECTIONS),  # ADR 0032: numbers incomplete
            "cards": cards,
            "size": size,
            "rows": rows,
            "currency": prices.currency,
            "agents": sorted(r["key"] for r in queries.tokens(db, "agent") if r["key"]),
            "models": [r["key"] for r in queries.tokens(db, "model")],
        }
    finally:
        db.close()


def _card(name: str, value: dict[str, Any], currency: str) -> str:
    rate = value["success_rate"]
    return (
        f'<section class="card" data-card="{esc(name)}" data-requests="{value["requests"]}" '
        f'data-tokens="{value["tokens"]["total"]}" data-cost="{value["cost"]:.6f}">'
        f"<h2>{esc(name)}</h2>"
        f"<p><b>{number(value['requests'])}</b> requests"
        f"{f', {rate * 100:.1f}% completed' if rate is not None else ''}</p>"
        f"<p><b>{number(value['tokens']['total'])}</b> tokens</p>"
        f"<p><b>{value['cost']:.4f}</b> {esc(currency)}</p></section>"
    )


def _others(figs: list[dict[str, Any]], top: list[str]) -> list[tuple[str, list[float]]]:
    """The calls of the tools past the top ones, as one series (none when there are none)."""
    values = [float(sum(c for n, (c, _) in f["tools"].items() if n not in top)) for f in figs]
    return [("other tools", values)] if any(values) else []


def _charts(rows: list[tuple[date, date, dict[str, Any]]], size: str, currency: str) -> list[str]:
    active = [
        (a, b, f)
        for a, b, f in rows
        if f["requests"] or f["tokens"]["total"] or any(c for c, _ in f["tools"].values())
    ]
    index = {a: n for n, (a, _, _) in enumerate(rows)}
    breaks = [
        n > 0 and index[a] != index[active[n - 1][0]] + 1 for n, (a, _, _) in enumerate(active)
    ]
    labels = [a.isoformat() if size == "day" else f"{a.isoformat()} ({size})" for a, _, _ in active]
    figs = [f for _, _, f in active]
    calls: dict[str, int] = {}
    for f in figs:
        for tool, (count, _) in f["tools"].items():
            calls[tool] = calls.get(tool, 0) + count
    top = sorted(calls, key=lambda t: -calls[t])[:_TOP_TOOLS]

    def tool_rate(f: dict[str, Any]) -> float | None:
        count = sum(c for c, _ in f["tools"].values())
        return sum(x for _, x in f["tools"].values()) / count if count else None

    charts = [
        Chart(
            f"Requests per {size} and success rate",
            labels,
            [("requests", [float(f["requests"]) for f in figs])],
            breaks,
            ("completed (share of requests)", [f["success_rate"] for f in figs]),
            True,
        ),
        Chart(
            f"Tokens per {size} by kind, and cache hit rate",
            labels,
            [(k.replace("_", " "), [float(f["tokens"][k]) for f in figs]) for k in _KINDS],
            breaks,
            ("cache hit rate", [f["cache_hit_rate"] for f in figs]),
            True,
        ),
        Chart(
            f"Cost per {size} ({currency})",
            labels,
            [("cost", [f["cost"] for f in figs])],
            breaks,
            unit="cost",
        ),
        Chart(
            f"Tool calls per {size} by tool, and tool failure rate",
            labels,
            [(t, [float(f["tools"].get(t, (0, 0))[0]) for f in figs]) for t in top]
            + _others(figs, top),
            breaks,
            ("tool failure rate", [tool_rate(f) for f in figs]),
            True,
        ),
    ]
    return [render_chart(chart) for chart in charts]


def _form(choice: dict[str, Any], agents: list[str], models: list[str]) -> str:
    def select(name: str, options: list[str], label: str) -> str:
        items = [f'<option value="">any {label}</option>'] + [
            f'<option value="{esc(v)}"{" selected" if v == choice[name] else ""}>{esc(v)}</option>'
            for v in options
        ]
        return f'<label>{label} <select name="{name}">{"".join(items)}</select></label>'

    ranges = "".join(
        f'<option value="{r}"{" selected" if r == choice["range"] else ""}>{r}</option>'
        for r in _RANGES
    )
    return (
        f'<form class="filters" method="get" action="{PREFIX}/usage">'
        f"{select('agent', agents, 'agent')}{select('model', models, 'model')}"
        f'<label>range <select name="range" data-preset>{ranges}</select></label>'
        + "".join(
            f'<label data-custom>{n} <input name="{n}" type="date" '
            f'value="{esc(choice[n] or "")}"></label>'
            for n in ("since", "until")
        )
        + '<button type="submit">Apply</button></form>'
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
        "range": params.choice(request, "range", tuple(_RANGES)) or "30d",
        "since": params.day(request, "since"),
        "until": params.day(request, "until"),
    }
    data = await context.run(_read, context, choice)
    body = [
        _form(choice, data["agents"], data["models"]),
        *_warnings(data["warnings"]),
        '<p class="meta">Figures from the analytics read models (the same as '
        "<code>pentrace stats</code>), counted per UTC day. The model filter applies to "
        "tokens and cost; requests and tool calls are not kept per model.</p>",
        '<div class="cards">',
        *(_card(name, value, data["currency"]) for name, value in data["cards"].items()),
        "</div>",
        *_charts(data["rows"], data["size"], data["currency"]),
    ]
    return page("Usage", "usage", body)
