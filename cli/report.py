"""``pentrace report SESSION -o report.html``: one self-contained HTML page about a session.

The page holds its CSS and its pictures (inline SVG), runs no script, and
loads nothing from the network: its Content-Security-Policy allows only its
own style block, by hash.  It shows a timeline of requests, tool calls and
approvals with compactions marked, a UTC time axis and a legend, and the
tokens of each request; clicking a bar jumps to its row (a ``#row-N`` link
and ``:target``).  Everything in it comes from the session's *redacted*
RuntimeEvents, so no secret from the trace reaches the page.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from datetime import UTC, datetime
from pathlib import Path
from string import Template
from typing import Annotated, Final

import typer

from pentrace.cli.sessions.args import SessionArgument, resolve
from pentrace.domain.json_codec import escape_surrogates
from pentrace.infrastructure.analytics.trace_events import session_events
from pentrace.infrastructure.storage.atomic import publish_file
from pentrace.projections.analytics.events import iso_of
from pentrace.projections.analytics.timeline import Span, Timeline, build_timeline

__all__ = ["render_report", "report"]

_TEMPLATE: Final = Path(__file__).with_name("report_template.html")
_WIDTH: Final = 1000
_LANES: Final = (("requests", 30), ("tools", 70), ("approvals", 110))
_AXIS_Y: Final = 140
_HEIGHT: Final = 215
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


def _x(timeline: Timeline, moment: int) -> float:
    span = max(timeline.end_ms - timeline.start_ms, 1)
    return 90 + (moment - timeline.start_ms) / span * (_WIDTH - 100)


def _rect(timeline: Timeline, span: Span, y: int, height: int, row: int | None) -> str:
    x0 = _x(timeline, span.start_ms)
    x1 = max(_x(timeline, span.end_ms or span.start_ms), x0 + 2)
    tip = f"{span.label}: {span.status}" + (f", {span.tokens} tokens" if span.tokens else "")
    data = f' data-row="{row}"' if row is not None else ""
    shape = (
        f'<rect class="{span.kind} {html.escape(span.status)}" x="{x0:.1f}" y="{y}" '
        f'width="{x1 - x0:.1f}" height="{height}"{data}><title>{html.escape(tip)}</title></rect>'
    )
    return shape if row is None else f'<a href="#row-{row}">{shape}</a>'


def _clock(moment: int, step: int) -> str:
    shown = datetime.fromtimestamp(moment / 1000, UTC)
    return shown.strftime("%H:%M:%S" if step < 60_000 else "%H:%M")


def _axis(timeline: Timeline) -> list[str]:
    """Ticks at round UTC times, labelled with the clock; the dates under the axis."""
    start, end = timeline.start_ms, max(timeline.end_ms, timeline.start_ms + 1)
    step = next((s for s in _STEPS if (end - start) / s <= 8), _STEPS[-1])
    parts = [f'<line class="axis" x1="90" y1="{_AXIS_Y}" x2="{_WIDTH - 10}" y2="{_AXIS_Y}"/>']
    tick = -(-start // step) * step
    while tick <= end:
        x = _x(timeline, tick)
        parts.append(
            f'<line class="axis" x1="{x:.1f}" y1="{_AXIS_Y}" x2="{x:.1f}" y2="{_AXIS_Y + 5}"/>'
            f'<text class="tick" x="{x:.1f}" y="{_AXIS_Y + 17}">{_clock(tick, step)}</text>'
        )
        tick += step
    first, last = iso_of(start)[:10], iso_of(end)[:10]
    days = first if first == last else f"{first} to {last}"
    parts.append(f'<text class="lane" x="4" y="{_AXIS_Y + 17}">UTC, {days}</text>')
    return parts


def _legend() -> list[str]:
    parts = []
    x, y = 90, _AXIS_Y + 32
    for shape, css, label in _LEGEND:
        mark = (
            f'<rect class="key-{css}" x="{x}" y="{y}" width="12" height="10"/>'
            if shape == "rect"
            else f'<circle class="key-{css}" cx="{x + 6}" cy="{y + 5}" r="5"/>'
        )
        parts.append(f'{mark}<text class="lane" x="{x + 16}" y="{y + 9}">{label}</text>')
        x += 16 + 6 * len(label) + 14
        if x > _WIDTH - 150:
            x, y = 90, y + 16
    return parts


def _timeline_svg(timeline: Timeline) -> str:
    parts = [
        f'<svg id="timeline" width="{_WIDTH}" height="{_HEIGHT}" role="img" '
        'aria-label="timeline of requests, tool calls and approvals">'
    ]
    for compaction in timeline.compactions:
        context = compaction.detail.get("context")
        compaction.label = f"compaction {compaction.label} (context {context})"
        parts.append(_rect(timeline, compaction, 10, 120, None))
    parts += [f'<text class="lane" x="4" y="{y + 14}">{name}</text>' for name, y in _LANES]
    parts += [_rect(timeline, s, 30, 20, n) for n, s in enumerate(timeline.requests)]
    offset = len(timeline.requests)
    parts += [_rect(timeline, s, 70, 20, offset + n) for n, s in enumerate(timeline.tools)]
    for marker in timeline.markers:
        x = _x(timeline, marker.time_ms)
        css = f"approval-{marker.label}" if marker.kind == "approval" else "marker"
        parts.append(
            f'<circle class="{html.escape(css)}" cx="{x:.1f}" cy="120" r="5">'
            f"<title>{html.escape(marker.kind)}: {html.escape(marker.label)}</title></circle>"
        )
    parts += _axis(timeline)
    parts += _legend()
    parts.append("</svg>")
    return "".join(parts)


def _tokens_svg(timeline: Timeline) -> str:
    requests = timeline.requests
    top = max((r.tokens for r in requests), default=0) or 1
    width = max(len(requests) * 40 + 60, 200)
    parts = [f'<svg id="tokens" width="{width}" height="180" role="img">']
    for number, request in enumerate(requests):
        height = request.tokens / top * 140
        x = 40 + number * 40
        parts.append(
            f'<a href="#row-{number}"><rect class="bar" x="{x}" y="{160 - height:.1f}" width="28" '
            f'height="{height:.1f}" data-row="{number}"><title>{html.escape(request.label)}: '
            f"{request.tokens} tokens</title></rect></a>"
            f'<text class="lane" x="{x + 8}" y="175">{number + 1}</text>'
            f'<text class="tick" x="{x + 14}" y="{156 - height:.1f}">{request.tokens or ""}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _rows(timeline: Timeline) -> str:
    rows = []
    for number, span in enumerate((*timeline.requests, *timeline.tools)):
        seconds = ((span.end_ms or span.start_ms) - span.start_ms) / 1000
        cells = (
            number + 1, span.kind, span.label, span.status,
            iso_of(span.start_ms), f"{seconds:.2f}", span.tokens or "",
        )  # fmt: skip
        body = "".join(f"<td>{html.escape(str(cell))}</td>" for cell in cells)
        rows.append(f'<tr id="row-{number}">{body}</tr>')
    return "\n".join(rows)


def render_report(timeline: Timeline) -> str:
    """The whole HTML page for a timeline."""
    template = Template(_TEMPLATE.read_text(encoding="utf-8"))
    page = template.substitute(
        style_hash="$style_hash",
        session_id=html.escape(timeline.session_id),
        model=html.escape(timeline.model),
        start=iso_of(timeline.start_ms),
        end=iso_of(timeline.end_ms),
        request_count=len(timeline.requests),
        tool_count=len(timeline.tools),
        compaction_count=len(timeline.compactions),
        tokens=timeline.tokens,
        timeline_svg=_timeline_svg(timeline),
        tokens_svg=_tokens_svg(timeline),
        rows=_rows(timeline),
    )
    return page.replace("$style_hash", _style_hash(page), 1)


def _style_hash(page: str) -> str:
    """The CSP source of the page's one style block, so no 'unsafe-inline' is needed."""
    match = re.search(r"<style>(.*?)</style>", page, re.S)
    body = match.group(1) if match else ""
    digest = base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode()
    return f"'sha256-{digest}'"


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
    page = escape_surrogates(render_report(build_timeline(ref.key.reference, events))).encode()
    # Atomic and 0600 like every export: the page shows what the session did.
    publish_file(output.absolute(), [page], overwrite=True)
    typer.echo(f"wrote {output}")
