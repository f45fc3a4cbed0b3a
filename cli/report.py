"""``pentrace report SESSION -o report.html``: one self-contained HTML page about a session.

The page holds its CSS, its script and its pictures (inline SVG) and loads
nothing from the network (its Content-Security-Policy forbids it).  It shows
a timeline of requests, tool calls and approvals with compactions marked,
and the tokens of each request.  Everything in it comes from the session's
*redacted* RuntimeEvents, so no secret from the trace reaches the page.
"""

from __future__ import annotations

import html
from pathlib import Path
from string import Template
from typing import Annotated, Final

import typer

from pentrace.cli.session_args import SessionArgument, resolve
from pentrace.infrastructure.analytics.trace_events import session_events
from pentrace.infrastructure.atomic_files import publish_file
from pentrace.projections.analytics.events import iso_of
from pentrace.projections.analytics.timeline import Span, Timeline, build_timeline

__all__ = ["render_report", "report"]

_TEMPLATE: Final = Path(__file__).with_name("report_template.html")
_WIDTH: Final = 1000
_LANES: Final = (("requests", 30), ("tools", 70), ("approvals", 110))


def _x(timeline: Timeline, moment: int) -> float:
    span = max(timeline.end_ms - timeline.start_ms, 1)
    return 90 + (moment - timeline.start_ms) / span * (_WIDTH - 100)


def _rect(timeline: Timeline, span: Span, y: int, height: int, row: int | None) -> str:
    x0 = _x(timeline, span.start_ms)
    x1 = max(_x(timeline, span.end_ms or span.start_ms), x0 + 2)
    tip = f"{span.label}: {span.status}" + (f", {span.tokens} tokens" if span.tokens else "")
    data = f' data-row="{row}"' if row is not None else ""
    return (
        f'<rect class="{span.kind} {html.escape(span.status)}" x="{x0:.1f}" y="{y}" '
        f'width="{x1 - x0:.1f}" height="{height}"{data}><title>{html.escape(tip)}</title></rect>'
    )


def _timeline_svg(timeline: Timeline) -> str:
    parts = [f'<svg id="timeline" width="{_WIDTH}" height="140" role="img">']
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
            f'<rect class="bar" x="{x}" y="{160 - height:.1f}" width="28" height="{height:.1f}" '
            f'data-row="{number}"><title>{html.escape(request.label)}: {request.tokens} tokens'
            f'</title></rect><text class="lane" x="{x + 8}" y="175">{number + 1}</text>'
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
    return template.substitute(
        session_id=html.escape(timeline.session_id),
        model=html.escape(timeline.model),
        start=iso_of(timeline.start_ms),
        end=iso_of(timeline.end_ms),
        request_count=len(timeline.requests),
        tool_count=len(timeline.tools),
        compaction_count=len(timeline.compactions),
        tokens=sum(r.tokens for r in timeline.requests),
        timeline_svg=_timeline_svg(timeline),
        tokens_svg=_tokens_svg(timeline),
        rows=_rows(timeline),
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
    page = render_report(build_timeline(ref.session_id, events)).encode("utf-8")
    # Atomic and 0600 like every export: the page shows what the session did.
    publish_file(output.absolute(), [page], overwrite=True)
    typer.echo(f"wrote {output}")
