"""The Usage page's charts and its table of figures, over one shared time axis.

:class:`UsageSeries` holds each bucket's figures as read for the page; the
charts draw only the active buckets (:func:`~pentrace.service.web.usage_axis.axis`),
all on the same columns, with the same break marks.  Rates are ``None`` where a
bucket has nothing to divide, and are then not drawn.
"""

from __future__ import annotations

from datetime import date
from typing import Any, Final

from pentrace.service.web.layout import esc, number
from pentrace.service.web.svg import Chart, render_chart
from pentrace.service.web.usage_axis import QUERY_BY, Window, axis, bucket_of, label

__all__ = ["KINDS", "Counts", "UsageSeries", "rate", "usage_charts"]

Counts = dict[str, list[float]]  # bucket -> [requests, completed]
KINDS: Final = ("input", "output", "cache_read", "cache_write")
_TOP_TOOLS: Final = 4


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
    )


def _table(data: UsageSeries, keys: list[str], currency: str) -> str:
    """Every kept bucket's figures as a table (for reading, and for checking the charts)."""
    rows = []
    for key in keys:
        requests, completed = data.requests.get(key, [0.0, 0.0])
        kinds = data.tokens.get(key, {})
        tools = data.tools.get(key, {}).values()
        calls, failures = sum(c[0] for c in tools), sum(c[1] for c in tools)
        success = rate(completed, requests)
        rows.append(
            f'<tr data-bucket="{esc(key)}" data-requests="{requests:.0f}" '
            f'data-completed="{completed:.0f}" data-tokens="{kinds.get("total", 0):.0f}" '
            f'data-cost="{data.cost.get(key, 0.0):.6f}" data-calls="{calls:.0f}" '
            f'data-failures="{failures:.0f}"><th scope="row">{esc(key)}</th>'
            f"<td>{number(int(requests))}</td>"
            f"<td>{'-' if success is None else f'{success * 100:.1f}%'}</td>"
            f"<td>{number(int(kinds.get('total', 0)))}</td>"
            f"<td>{data.cost.get(key, 0.0):.4f}</td><td>{number(int(calls))}</td>"
            f"<td>{number(int(failures))}</td></tr>"
        )
    head = "".join(
        f'<th scope="col">{esc(name)}</th>'
        for name in (
            data.win.size,
            "requests",
            "completed",
            "tokens",
            f"cost ({currency})",
            "tool calls",
            "tool failures",
        )
    )
    return (
        f'<details class="buckets"><summary>Figures per {esc(data.win.size)} '
        f"({len(keys)} active)</summary>"
        f'<div class="scroll"><table class="buckets"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div></details>"
    )


def usage_charts(data: UsageSeries | None, range_name: str, currency: str) -> list[str]:
    """The charts and the table of one window, or a note when the range holds no day."""
    if data is None:
        return ['<p class="meta" data-size="">No data in this range.</p>']
    size = data.win.size
    keys, breaks = axis(data.win.keys, data.active())
    labels = [label(size, k, keys[n - 1] if n else None) for n, k in enumerate(keys)]
    figs = [data.tokens.get(k, {}) for k in keys]
    agent_series, agent_rates = _by_name(data.agents, data.requests, keys, "other agents")
    model_series, model_rates = _by_name(data.models, data.requests, keys, "other models")
    ended = [data.requests.get(k, [0.0, 0.0]) for k in keys]  # [requests, completed]
    success = ("completed (share of requests)", [rate(done, n) for n, done in ended])
    charts = [
        Chart(
            f"Requests per {size} by agent, and success rate",
            labels,
            agent_series,
            breaks,
            success,
            True,
            rates=agent_rates,
            rate_name="completed",
        ),
        Chart(
            f"Requests per {size} by model, and success rate",
            labels,
            model_series,
            breaks,
            success,
            True,
            rates=model_rates,
            rate_name="completed",
        ),
        Chart(
            f"Tokens per {size} by kind, and cache hit rate",
            labels,
            [(k.replace("_", " "), [f.get(k, 0.0) for f in figs]) for k in KINDS],
            breaks,
            (
                "cache hit rate",
                [
                    rate(f.get("cache_read", 0), f.get("input", 0) + f.get("cache_read", 0))
                    for f in figs
                ],
            ),
            True,
        ),
        Chart(
            f"Cost per {size} ({currency})",
            labels,
            [("cost", [data.cost.get(k, 0.0) for k in keys])],
            breaks,
            unit="cost",
        ),
    ]
    tools = _tools(data, keys)
    tools.labels, tools.breaks = labels, breaks
    charts.append(tools)
    shown = len(data.win.keys)
    return [
        f'<p class="meta axis" data-size="{esc(size)}" data-buckets="{shown}" '
        f'data-active="{len(keys)}" data-since="{esc(data.win.since)}" '
        f'data-until="{esc(data.win.until)}">{esc(range_name)}: {shown} buckets of one {esc(size)} '
        f"(UTC), {len(keys)} with activity; a dashed line marks skipped empty buckets.</p>",
        *(render_chart(chart) for chart in charts),
        _table(data, keys, currency),
    ]
