"""Server-side SVG charts: stacked bars over columns (time buckets or requests), with an
optional line on a second axis, break marks where columns were skipped, a legend, and a
``<title>`` on every bar and point so hovering (or a screen reader) gives the value.

A value of ``None`` on the line means "no value" (a rate with nothing to divide):
the line is not drawn there, never drawn as 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pentrace.service.web.layout import esc, number

__all__ = ["Chart", "render_chart"]

_W, _H = 900, 226
_LEFT, _RIGHT, _TOP, _BOTTOM = 70, 60, 14, 200
_MAX_LABELS = 10
_MAX_BAR = 56


@dataclass
class Chart:
    """What one chart shows (see the module docstring)."""

    title: str
    labels: list[str]
    series: list[tuple[str, list[float]]]
    breaks: list[bool] = field(default_factory=list)
    line: tuple[str, list[float | None]] | None = None
    line_is_rate: bool = False
    unit: str = ""
    links: list[str] | None = None
    # Per series and column, a share shown when hovering its bar (``rate_name`` says what
    # share); None shows none, never 0%.
    rates: list[list[float | None]] | None = None
    rate_name: str = ""


def _nice_step(top: float) -> float:
    """A round step (1, 2 or 5 times a power of ten) giving about four grid lines to ``top``."""
    raw = top / 4
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _scale(top: float) -> tuple[float, list[float]]:
    """The axis maximum (a multiple of the step) and its ticks."""
    if top <= 0:
        return 1.0, [0.0]
    step = _nice_step(top)
    count = math.ceil(top / step - 1e-9)
    return step * count, [step * n for n in range(count + 1)]


def _label(value: float, unit: str) -> str:
    if abs(value) >= 1e6:
        return f"{value / 1e6:.3g}M"
    if abs(value) >= 1e3:
        return f"{value / 1e3:.3g}k"
    if unit == "cost" or value != int(value):
        return f"{value:.3g}"
    return f"{value:.0f}"


def _line_parts(chart: Chart, x_of: list[float], plot_h: float) -> list[str]:
    assert chart.line is not None
    name, values = chart.line
    top = (
        1.0
        if chart.line_is_rate
        else _scale(max((v for v in values if v is not None), default=0))[0]
    )
    parts: list[str] = []
    run: list[str] = []
    for index, value in enumerate(values):
        if value is None or (chart.breaks and chart.breaks[index]):
            if len(run) > 1:
                parts.append(f'<polyline class="line" points="{" ".join(run)}"/>')
            run = []
        if value is None:
            continue
        x, y = x_of[index], _BOTTOM - value / top * plot_h
        run.append(f"{x:.1f},{y:.1f}")
        shown = f"{value * 100:.1f}%" if chart.line_is_rate else _label(value, chart.unit)
        parts.append(
            f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="3">'
            f"<title>{esc(chart.labels[index])}: {esc(name)} {shown}</title></circle>"
        )
    if len(run) > 1:
        parts.append(f'<polyline class="line" points="{" ".join(run)}"/>')
    for tick in (0.0, 0.5, 1.0):
        y = _BOTTOM - tick * plot_h
        text = f"{tick * 100:.0f}%" if chart.line_is_rate else _label(tick * top, chart.unit)
        parts.append(f'<text class="tick" x="{_W - _RIGHT + 6}" y="{y + 4:.1f}">{text}</text>')
    return parts


def render_chart(chart: Chart) -> str:
    """The chart as an ``<figure>`` holding an inline SVG and its legend."""
    count = len(chart.labels)
    if count == 0:
        return (
            f'<figure class="chart"><figcaption>{esc(chart.title)}</figcaption>'
            "<p>No data in this range.</p></figure>"
        )
    plot_w, plot_h = _W - _LEFT - _RIGHT, _BOTTOM - _TOP
    slot = plot_w / count
    x_of = [_LEFT + slot * (i + 0.5) for i in range(count)]
    totals = [sum(values[i] for _, values in chart.series) for i in range(count)]
    top, ticks = _scale(max(totals, default=0))
    parts = [
        # With links inside it is a group of links, not one image (axe: nested-interactive).
        f'<svg viewBox="0 0 {_W} {_H}" role="{"group" if chart.links else "img"}" '
        f'aria-label="{esc(chart.title)}">',
        f'<line class="axis" x1="{_LEFT}" y1="{_BOTTOM}" x2="{_W - _RIGHT}" y2="{_BOTTOM}"/>',
    ]
    for tick in ticks:
        y = _BOTTOM - tick / top * plot_h
        parts.append(
            f'<line class="grid" x1="{_LEFT}" y1="{y:.1f}" x2="{_W - _RIGHT}" y2="{y:.1f}"/>'
            f'<text class="tick" x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{_label(tick, chart.unit)}</text>"
        )
    every = max(1, -(-count // _MAX_LABELS))
    for index in range(count):
        base = float(_BOTTOM)
        width = min(max(slot * 0.7, 1), _MAX_BAR)
        x = x_of[index] - width / 2
        bars = []
        for number_of_series, (name, values) in enumerate(chart.series):
            height = values[index] / top * plot_h
            base -= height
            value = values[index]
            shown = (
                number(int(value))
                if chart.unit != "cost" and float(value).is_integer()
                else number(value)
            )
            tip = f"{chart.labels[index]}: {name} {shown}"
            rate = chart.rates[number_of_series][index] if chart.rates else None
            if rate is not None:
                tip += f", {rate * 100:.1f}% {chart.rate_name}"
            bars.append(
                f'<rect class="s{number_of_series % 5}" x="{x:.1f}" y="{base:.1f}" '
                f'width="{width:.1f}" height="{height:.1f}"><title>{esc(tip)}</title></rect>'
            )
        shapes = "".join(bars)
        if chart.links:
            shapes = f'<a href="{esc(chart.links[index])}">{shapes}</a>'
        parts.append(shapes)
        if index % every == 0:
            parts.append(
                f'<text class="tick" x="{x_of[index]:.1f}" y="{_BOTTOM + 16}" '
                f'text-anchor="middle">{esc(chart.labels[index])}</text>'
            )
        if chart.breaks and chart.breaks[index]:
            bx = x_of[index] - slot / 2
            parts.append(
                f'<g class="break"><title>no activity between these buckets</title>'
                f'<line x1="{bx:.1f}" y1="{_TOP}" x2="{bx:.1f}" y2="{_BOTTOM}"/>'
                f'<path d="M{bx - 5:.1f},{_BOTTOM + 4} l4,-8 M{bx + 1:.1f},{_BOTTOM + 4} l4,-8"/>'
                "</g>"
            )
    if chart.line is not None:
        parts += _line_parts(chart, x_of, plot_h)
    parts.append("</svg>")
    legend = [
        f'<li><span class="swatch s{n % 5}"></span>{esc(name)}</li>'
        for n, (name, _) in enumerate(chart.series)
    ]
    if chart.line is not None:
        legend.append(f'<li><span class="swatch line"></span>{esc(chart.line[0])}</li>')
    if any(chart.breaks):
        legend.append('<li><span class="swatch break"></span>skipped buckets (no activity)</li>')
    return (
        f'<figure class="chart"><figcaption>{esc(chart.title)}</figcaption>{"".join(parts)}'
        f'<ul class="legend">{"".join(legend)}</ul></figure>'
    )
