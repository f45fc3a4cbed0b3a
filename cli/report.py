"""``pentrace report SESSION -o report.html``: one self-contained HTML page about a session.

The page is the viewer's ``report.html`` template with the viewer's stylesheet
inside it, so it looks like the Session page, light or dark, and fits a 390 px
screen.  It holds its CSS and its pictures (inline SVG), runs no script, and
loads nothing from the network: its Content-Security-Policy allows only its own
style block, by hash.  It shows a timeline of requests, tool calls and
approvals with compactions marked, a UTC time axis and a legend, and the
tokens of each request on the chart engine's axes; clicking a bar jumps to its
row (a ``#row-N`` link and ``:target``).  Everything in it comes from the
session's *redacted* RuntimeEvents, so no secret from the trace reaches the
page.
"""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Final

import typer

from pentrace.cli.sessions.args import SessionArgument, resolve
from pentrace.domain.json_codec import escape_surrogates
from pentrace.infrastructure.operations.documents import cost_fields, load_prices, session_cost
from pentrace.infrastructure.operations.exports import publish_file
from pentrace.infrastructure.operations.projections import session_events
from pentrace.infrastructure.operations.sessions import read_row, short_id
from pentrace.infrastructure.operations.stats import Chart, render_chart, rendered
from pentrace.projections.analytics.events import iso_of
from pentrace.projections.analytics.timeline import Span, Timeline, build_timeline
from pentrace.service.web.layout import TEMPLATES
from pentrace.service.web.routes import STATIC

__all__ = ["render_report", "report"]

_WIDTH: Final = 1000
_LEFT: Final = 10
_LANES: Final = (("requests", 34), ("tools", 84), ("approvals", 134))
_LANE_H: Final = 20
_AXIS_Y: Final = 172
# Tick steps (ms) from a second to a day; the first that gives at most 8 ticks is used.
_STEPS: Final = tuple(
    s * 1000 for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
)
_LEGEND: Final = (
    ("rect", "completed", "request or tool call completed"),
    ("rect", "failed", "failed, timed out or malformed"),
    ("rect", "aborted", "aborted"),
    ("rect", "open", "never ended"),
    ("rect", "compaction", "compaction"),
    ("circle", "approval-allow", "approval: allow"),
    ("circle", "approval-deny", "approval: deny"),
    ("circle", "marker", "subagent or goal"),
)
_COLUMNS: Final = ("#", "kind", "what", "status", "start", "seconds", "tokens")
# A tool's outcome is kept as the counter it adds to; people read the state.
_WORDS: Final = {"failures": "failed", "aborts": "aborted", "timeouts": "timed out"}
# The report's own rules, after the viewer's stylesheet.
_REPORT_CSS: Final = """
svg#timeline { background: var(--panel); border: 1px solid var(--line); }
#timeline .completed, .key-completed { fill: var(--ok); }
#timeline .failed, #timeline .failures, #timeline .error, #timeline .timeout, #timeline .timeouts,
#timeline .malformed, #timeline .auth, .key-failed { fill: var(--bad); }
#timeline .aborted, #timeline .aborts, .key-aborted { fill: var(--warn); }
#timeline .open, #timeline .other, .key-open { fill: var(--s4); } #timeline .tool { opacity: .85; }
#timeline .compaction, .key-compaction { fill: var(--accent); opacity: .18; }
.approval-allow, .key-approval-allow { fill: var(--ok); }
.approval-deny, .approval-forbidden, .key-approval-deny { fill: var(--bad); }
.marker, .key-marker { fill: var(--s3); } .lane { fill: var(--muted); font-size: 12px; }
#tokens .bar { fill: var(--s0); } svg a rect { cursor: pointer; }
tr:target { background: var(--mark); }
dl.facts { grid-template-columns: repeat(auto-fill, minmax(min(100%, 9rem), max-content) 1fr); }
@media (max-width: 560px) { svg .lane { font-size: 26px; } }
"""


def _x(timeline: Timeline, moment: int) -> float:
    span = max(timeline.end_ms - timeline.start_ms, 1)
    return _LEFT + (moment - timeline.start_ms) / span * (_WIDTH - 2 * _LEFT)


def _status(span: Span) -> str:
    return _WORDS.get(span.status, span.status)


def _rect(timeline: Timeline, span: Span, y: int, height: int, row: int | None) -> dict[str, Any]:
    x0 = _x(timeline, span.start_ms)
    x1 = max(_x(timeline, span.end_ms or span.start_ms), x0 + 2)
    tip = f"{span.label}: {_status(span)}" + (f", {span.tokens} tokens" if span.tokens else "")
    return {
        "css": f"{span.kind} {span.status}",
        "x": f"{x0:.1f}",
        "y": y,
        "w": f"{x1 - x0:.1f}",
        "h": height,
        "row": row,
        "tip": tip,
    }


def _clock(moment: int, step: int) -> str:
    shown = datetime.fromtimestamp(moment / 1000, UTC)
    return shown.strftime("%H:%M:%S" if step < 60_000 else "%H:%M")


def _ticks(timeline: Timeline) -> tuple[list[tuple[str, str]], str]:
    """Ticks at round UTC times, labelled with the clock; the days they fall on."""
    start, end = timeline.start_ms, max(timeline.end_ms, timeline.start_ms + 1)
    step = next((s for s in _STEPS if (end - start) / s <= 8), _STEPS[-1])
    ticks = []
    tick = -(-start // step) * step
    while tick <= end:
        ticks.append((f"{_x(timeline, tick):.1f}", _clock(tick, step)))
        tick += step
    first, last = iso_of(start)[:10], iso_of(end)[:10]
    return ticks, first if first == last else f"{first} to {last}"


def _timeline(timeline: Timeline) -> dict[str, Any]:
    compactions = []
    for compaction in timeline.compactions:
        context = compaction.detail.get("context")
        compaction.label = f"compaction {compaction.label} (context {context})"
        compactions.append(_rect(timeline, compaction, 14, _AXIS_Y - 14, None))
    offset = len(timeline.requests)
    ticks, days = _ticks(timeline)
    markers = [
        {
            "x": f"{_x(timeline, marker.time_ms):.1f}",
            "y": _LANES[2][1] + _LANE_H // 2,
            "css": f"approval-{marker.label}" if marker.kind == "approval" else "marker",
            "tip": f"{marker.kind}: {marker.label}",
        }
        for marker in timeline.markers
    ]
    legend = [
        {
            "shape": shape,
            "css": css,
            "label": label,
            "x": 10 + 490 * (n % 2),
            "y": _AXIS_Y + 40 + 22 * (n // 2),
        }
        for n, (shape, css, label) in enumerate(_LEGEND)
    ]
    return {
        "width": _WIDTH,
        "height": _AXIS_Y + 40 + 22 * ((len(_LEGEND) + 1) // 2),
        "left": _LEFT,
        "axis_y": _AXIS_Y,
        "lanes": [{"name": name, "y": y - 6} for name, y in _LANES],
        "compactions": compactions,
        "spans": [
            _rect(timeline, s, _LANES[0][1], _LANE_H, n) for n, s in enumerate(timeline.requests)
        ]
        + [
            _rect(timeline, s, _LANES[1][1], _LANE_H, offset + n)
            for n, s in enumerate(timeline.tools)
        ],
        "markers": markers,
        "ticks": ticks,
        "days": days,
        "legend": legend,
    }


def _tokens_chart(timeline: Timeline) -> str:
    """Tokens per request on the chart engine's axes, each bar a link to its row."""
    requests = timeline.requests
    chart = Chart(
        "Tokens per request",
        [span.label for span in requests],
        [("tokens", [float(span.tokens) for span in requests])],
        links=[f"#row-{n}" for n in range(len(requests))],
        ticks=[str(n + 1) for n in range(len(requests))] if len(requests) <= 40 else None,
        bar_class="bar",
        x_title="request",
        y_title="tokens",
    )
    return render_chart(chart)


def _rows(timeline: Timeline) -> list[dict[str, Any]]:
    rows = []
    for number, span in enumerate((*timeline.requests, *timeline.tools)):
        seconds = ((span.end_ms or span.start_ms) - span.start_ms) / 1000
        rows.append(
            {
                "row": number,
                "cells": zip(
                    _COLUMNS,
                    (
                        number + 1,
                        span.kind,
                        span.label,
                        _status(span),
                        iso_of(span.start_ms),
                        f"{seconds:.2f}",
                        span.tokens or "",
                    ),
                    strict=True,
                ),
            }
        )
    return rows


def _style() -> str:
    """The viewer's stylesheet and the report's rules: the page's one style block."""
    return (STATIC / "web.css").read_text(encoding="utf-8") + _REPORT_CSS


def render_report(timeline: Timeline, cost: dict[str, Any] | None = None) -> str:
    """The whole HTML page for a timeline; ``cost`` is the session's (``cost_fields``)."""
    style = _style()
    digest = base64.b64encode(hashlib.sha256(style.encode("utf-8")).digest()).decode()
    project, agent, session_id = (["", "", *timeline.session_id.split("/")])[-3:]
    return TEMPLATES.get_template("report.html").render(
        style=rendered(style),  # our own stylesheet, written as it is (its hash is above)
        style_digest=digest,
        reference=timeline.session_id,
        project=project,
        agent=agent,
        short=short_id(session_id),
        model=timeline.model,
        start=iso_of(timeline.start_ms),
        end=iso_of(timeline.end_ms),
        facts=(
            ("requests", len(timeline.requests)),
            ("tool calls", len(timeline.tools)),
            ("compactions", len(timeline.compactions)),
            ("tokens", timeline.tokens),
        ),
        timeline=_timeline(timeline),
        tokens=_tokens_chart(timeline),
        columns=_COLUMNS,
        rows=_rows(timeline),
        cost=cost,
    )


def report(
    ctx: typer.Context,
    session: SessionArgument,
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write.")],
) -> None:
    """Write one self-contained HTML page about a session (timeline, tokens, compactions).

    Example: pentrace report 3f8a1c2d -o report.html
    """
    _root, ref = resolve(ctx, session)
    events = session_events(ref)
    # The title names the owner too: the same id may exist under other agents (ADR 0023).
    # A lone surrogate in a name or a text is shown as its JSON escape (ADR 0015).
    # The cost every other surface shows for the session (documents.session_cost).
    cost = cost_fields(session_cost(read_row(ref).summary, load_prices()))
    timeline = build_timeline(ref.key.reference, events)
    page = escape_surrogates(render_report(timeline, cost)).encode()
    # Atomic and 0600 like every export: the page shows what the session did.
    publish_file(output.absolute(), [page], overwrite=True)
    typer.echo(f"wrote {output}")
