"""The one chart engine: a chart model, laid out here and drawn as SVG by one template.

Two shapes share the model (:class:`Chart`):

* **columns**: stacked bars over columns (time buckets, days, requests), with
  an optional line on a second axis (a rate 0-100 %, or a running total),
  dashed break marks where empty columns were skipped, a link per column, and a
  ``<title>`` on every bar and point so hovering (or a screen reader) gives the
  value;
* **rows** (``horizontal=True``): one bar per group, in the order given, each
  labelled with its value; a second series stacks a part of each bar (failed
  calls) in another colour.

The same layout is drawn two ways (``templates/chart.svg``):
:func:`render_chart` gives a ``<figure>`` for the viewer's pages and the
report (the SVG scales to its box; caption and legend are HTML; the page's
stylesheet colours it), and :func:`chart_svg` a standalone SVG file with its
title, legend and style inside (``pentrace stats --plot``; PNG is converted
from it).  Values read in human units (:func:`human`): never a ``1e7``
offset, never a small cost shown as ``0.00``.  A line value of ``None`` means
"no value" (a rate with nothing to divide): it is not drawn, never drawn as 0.

The templates are Jinja with autoescaping (:func:`template_environment`,
shared with the viewer): every value is HTML-escaped, quotes included, unless
it is markup already.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from pentrace.domain.json_codec import escape_surrogates

__all__ = [
    "Chart",
    "chart_svg",
    "human",
    "number",
    "render_chart",
    "rendered",
    "template_environment",
]

_PALETTE: Final = 10  # series colours s0..s9, then again
_MAX_BAR: Final = 56
_CHAR: Final = 7.0  # about how wide a character of 12 px text is, in user units
_NARROW_CHAR: Final = 12.0  # ... and of the 20 px text narrow screens get (web.css)
# Characters neither HTML nor XML may hold (C0 controls but tab and newlines, the two
# non-characters): a trace can carry them, a page or an SVG file must not.  A lone surrogate
# is spelled as its JSON escape first, as everywhere (ADR 0015).
_UNWRITABLE: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def rendered(text: str) -> Markup:
    """``text`` marked as HTML: only for what an autoescaping template rendered, or what was
    escaped just before (the one place the engine and the viewer trust a string)."""
    return Markup(text)  # noqa: S704  # rendered by autoescaping templates, or escaped


def _escape(value: object) -> Markup:
    """Every value a template writes: markup as it is, anything else HTML-escaped with quotes
    (``html.escape``), nothing (None) as '', a lone surrogate as its JSON escape, and a control
    character no document may hold as U+FFFD."""
    if hasattr(value, "__html__"):
        return rendered(value.__html__())
    text = escape_surrogates("" if value is None else str(value))
    return rendered(_UNWRITABLE.sub("\ufffd", html.escape(text, quote=True)))


def template_environment(folder: Path) -> Environment:
    """A Jinja environment over the templates in ``folder``: autoescaping, every output through
    :func:`_escape`, undefined names an error, block tags leaving no blank lines."""
    environment = Environment(
        loader=FileSystemLoader(folder),
        autoescape=True,
        finalize=_escape,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    environment.filters["number"] = number
    return environment


def number(value: object) -> str:
    """A count with thin grouping (``1 234 567``), a fraction with four places, or ``-``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    if isinstance(value, float):
        return f"{value:,.4f}".replace(",", " ")
    return f"{value:,}".replace(",", " ")


def human(value: float, unit: str = "") -> str:
    """``950``, ``12k``, ``3.4M``, ``1.2G``; fractions keep what matters (``0.0023``, ``2.5``)."""
    size = abs(value)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if size >= limit:
            text = f"{value / limit:.1f}".rstrip("0").rstrip(".") + suffix
            break
    else:
        if float(value).is_integer():
            text = f"{value:.0f}"
        elif size < 1:
            text = f"{value:.3g}"  # small money: 0.0023, never 0.00
        else:
            text = f"{value:.2f}".rstrip("0").rstrip(".")
    return f"{text} {unit}".rstrip() if unit else text


_TEMPLATES: Final = template_environment(Path(__file__).with_name("templates"))


@dataclass
class Chart:
    """What one chart shows (see the module docstring).

    ``labels`` name the columns (or rows) in hover titles; ``ticks``, when given,
    is the text under each column ('' for none), else as many labels are shown as
    fit.  ``rates`` is a share per series and column shown when hovering its bar
    (``rate_name`` says what share; None shows none, never 0 %).  ``unit`` follows
    values in hover titles and value labels (``USD``).  ``bar_class`` gives every
    bar one CSS class instead of a colour per series.  ``value_labels`` (rows) are
    written beside each bar."""

    title: str
    labels: list[str]
    series: list[tuple[str, list[float]]]
    breaks: list[bool] = field(default_factory=list)
    line: tuple[str, list[float | None]] | None = None
    line_is_rate: bool = False
    unit: str = ""
    links: list[str] | None = None
    rates: list[list[float | None]] | None = None
    rate_name: str = ""
    x_title: str = ""
    y_title: str = ""
    line_title: str = ""
    ticks: list[str] | None = None
    bar_class: str = ""
    horizontal: bool = False
    value_labels: list[str] | None = None
    legend_title: str = ""


@dataclass(frozen=True, slots=True)
class _Text:
    x: str
    y: str
    text: str
    css: str = "tick"
    anchor: str = ""
    turn: int = 0  # degrees rotated about the origin (a y-axis title: -90, or 90 on the right)


@dataclass(slots=True)
class _Frame:
    """Where things go: the drawing's size and the plot area inside it."""

    width: float
    height: float
    left: float
    right: float
    top: float
    bottom: float

    @property
    def plot_w(self) -> float:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> float:
        return self.bottom - self.top


def _f(value: float) -> str:
    return f"{value:.1f}"


def _nice_step(top: float, lines: int = 4) -> float:
    """A round step (1, 2 or 5 times a power of ten) giving about ``lines`` grid lines."""
    raw = top / lines
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _scale(top: float, lines: int = 4) -> tuple[float, list[float]]:
    """The axis maximum (a multiple of the step) and its ticks."""
    if top <= 0 or not math.isfinite(top):
        return 1.0, [0.0]
    step = _nice_step(top, lines)
    count = math.ceil(top / step - 1e-9)
    return step * count, [step * n for n in range(count + 1)]


def _shown(value: float, unit: str) -> str:
    """A value in a hover title: a grouped count, or a fraction with its unit."""
    if not unit and float(value).is_integer():
        return number(int(value))
    return f"{number(float(value))} {unit}".rstrip()


def _css(chart: Chart, index: int) -> str:
    return chart.bar_class or f"s{index % _PALETTE}"


def _legend(chart: Chart) -> list[dict[str, str]]:
    # One colour for every bar (``bar_class``) needs no key.
    entries = [
        {"css": _css(chart, n), "name": name}
        for n, (name, _) in enumerate(chart.series)
        if not chart.bar_class
    ]
    if chart.line is not None:
        entries.append({"css": "line", "name": chart.line[0]})
    if any(chart.breaks):
        entries.append({"css": "break", "name": "skipped buckets (no activity)"})
    return entries


def _x_ticks(chart: Chart, x_of: list[float], slot: float, y: float) -> list[_Text]:
    """The text under the columns: the given ticks, else every label that fits at 12 px, the
    ones that also fit at the narrow screens' 20 px marked major (the others are hidden
    there)."""
    count = len(x_of)
    if chart.ticks is not None:
        return [
            _Text(_f(x_of[i]), _f(y), text, "tick", "middle")
            for i, text in enumerate(chart.ticks[:count])
            if text
        ]
    longest = max((len(label) for label in chart.labels), default=1)
    every = max(1, math.ceil((longest * _CHAR + 12) / slot))
    major = every * max(1, math.ceil((longest * _NARROW_CHAR + 16) / (slot * every)))
    return [
        _Text(
            _f(x_of[i]),
            _f(y),
            chart.labels[i],
            "tick" if i % major == 0 else "tick minor",
            "middle",
        )
        for i in range(0, count, every)
    ]


def _line(chart: Chart, frame: _Frame, x_of: list[float]) -> dict[str, Any]:
    assert chart.line is not None
    name, values = chart.line
    top = (
        1.0
        if chart.line_is_rate
        else _scale(max((v for v in values if v is not None), default=0))[0]
    )
    runs: list[str] = []
    run: list[str] = []
    points = []
    for index, value in enumerate(values[: len(x_of)]):
        if value is None or (chart.breaks and chart.breaks[index]):
            if len(run) > 1:
                runs.append(" ".join(run))
            run = []
        if value is None:
            continue
        x, y = x_of[index], frame.bottom - value / top * frame.plot_h
        run.append(f"{x:.1f},{y:.1f}")
        shown = f"{value * 100:.1f}%" if chart.line_is_rate else human(value)
        points.append({"x": _f(x), "y": _f(y), "tip": f"{chart.labels[index]}: {name} {shown}"})
    if len(run) > 1:
        runs.append(" ".join(run))
    ticks = [
        _Text(
            _f(frame.width - frame.right + 6),
            _f(frame.bottom - share * frame.plot_h + 4),
            f"{share * 100:.0f}%" if chart.line_is_rate else human(share * top),
        )
        for share in (0.0, 0.5, 1.0)
    ]
    return {"runs": runs, "points": points, "ticks": ticks}


def _totals(chart: Chart) -> list[float]:
    return [sum(values[i] for _, values in chart.series) for i in range(len(chart.labels))]


def _columns(chart: Chart, frame: _Frame) -> dict[str, Any]:
    count = len(chart.labels)
    slot = frame.plot_w / count
    x_of = [frame.left + slot * (i + 0.5) for i in range(count)]
    top, ticks = _scale(max(_totals(chart), default=0))
    y_ticks, grid = [], []
    for tick in ticks:
        y = frame.bottom - tick / top * frame.plot_h
        grid.append(_f(y))
        y_ticks.append(_Text(_f(frame.left - 6), _f(y + 4), human(tick), "tick", "end"))
    width = min(max(slot * 0.7, 1), _MAX_BAR)
    columns = []
    for index in range(count):
        base = frame.bottom
        bars = []
        for n, (name, values) in enumerate(chart.series):
            value = values[index]
            height = value / top * frame.plot_h
            base -= height
            tip = f"{chart.labels[index]}: {name} {_shown(value, chart.unit)}"
            rate = chart.rates[n][index] if chart.rates else None
            if rate is not None:
                tip += f", {rate * 100:.1f}% {chart.rate_name}"
            bars.append(
                {
                    "css": _css(chart, n),
                    "x": _f(x_of[index] - width / 2),
                    "y": _f(base),
                    "w": _f(width),
                    "h": _f(height),
                    "tip": tip,
                }
            )
        link = chart.links[index] if chart.links else ""
        columns.append({"link": link, "bars": bars})
    breaks = [_f(x_of[i] - slot / 2) for i in range(count) if chart.breaks and chart.breaks[i]]
    titles = _axis_titles(chart, frame, frame.bottom + 44)
    return {
        "grid": grid,
        "grid_x": [],
        "y_ticks": y_ticks,
        "x_ticks": _x_ticks(chart, x_of, slot, frame.bottom + 18),
        "columns": columns,
        "breaks": breaks,
        "line": None if chart.line is None else _line(chart, frame, x_of),
        "titles": titles,
        "value_texts": [],
    }


def _rows(chart: Chart, frame: _Frame, row_h: float) -> dict[str, Any]:
    count = len(chart.labels)
    totals = _totals(chart)
    room = 1.3 if len(chart.series) > 1 else 1.15  # for the value written beside each bar
    top, ticks = _scale(max(totals, default=0) * room, 6)
    x_ticks, grid = [], []
    for tick in ticks:
        x = frame.left + tick / top * frame.plot_w
        grid.append(_f(x))
        x_ticks.append(_Text(_f(x), _f(frame.bottom + 16), human(tick), "tick", "middle"))
    rows, values, y_ticks = [], [], []
    for index in range(count):
        y = frame.top + index * row_h + row_h * 0.2
        start = frame.left
        bars = []
        # The part (a later series) is drawn from the axis, the rest after it.
        for n in range(len(chart.series) - 1, -1, -1):
            name, series = chart.series[n]
            width = series[index] / top * frame.plot_w
            bars.append(
                {
                    "css": _css(chart, n),
                    "x": _f(start),
                    "y": _f(y),
                    "w": _f(width),
                    "h": _f(row_h * 0.6),
                    "tip": f"{chart.labels[index]}: {name} {_shown(series[index], chart.unit)}",
                }
            )
            start += width
        rows.append({"link": "", "bars": bars})
        middle = _f(y + row_h * 0.3 + 4)
        y_ticks.append(_Text(_f(frame.left - 6), middle, chart.labels[index], "tick", "end"))
        if chart.value_labels:
            values.append(_Text(_f(start + 4), middle, chart.value_labels[index], "value"))
    return {
        "grid_x": grid,
        "grid": [],
        "y_ticks": y_ticks,
        "x_ticks": x_ticks,
        "columns": rows,
        "breaks": [],
        "line": None,
        "titles": _axis_titles(chart, frame, frame.bottom + 34),
        "value_texts": values,
    }


def _axis_titles(chart: Chart, frame: _Frame, x_y: float) -> list[_Text]:
    middle_x = frame.left + frame.plot_w / 2
    middle_y = frame.top + frame.plot_h / 2
    titles = []
    if chart.x_title:
        titles.append(_Text(_f(middle_x), _f(x_y), chart.x_title, "axis-title", "middle"))
    if chart.y_title:
        titles.append(_Text(_f(-middle_y), "22", chart.y_title, "axis-title", "middle", -90))
    if chart.line is not None and (chart.line_title or chart.line[0]):
        titles.append(
            _Text(
                _f(middle_y),
                _f(-(frame.width - 24)),
                chart.line_title or chart.line[0],
                "axis-title",
                "middle",
                90,
            )
        )
    return titles


def _layout(chart: Chart, standalone: bool) -> dict[str, Any]:
    """Everything the template draws, positioned (user units of the SVG's viewBox)."""
    count = len(chart.labels)
    head = (len(chart.title.splitlines()) * 20 + 10) if standalone else 0
    if chart.horizontal:
        longest = max((len(label) for label in chart.labels), default=4)
        row_h = 26.0
        left = min(330.0, 36 + longest * _CHAR)
        bottom = head + 12 + max(count, 1) * row_h
        frame = _Frame(900, bottom + 44, left, 24, head + 12, bottom)
        drawn = _rows(chart, frame, row_h) if count else _empty(frame)
    else:
        # Room for the longest tick at the narrow screens' size, and the axis title beside it.
        ticks = [human(t) for t in _scale(max(_totals(chart), default=0))[1]]
        left = max(44.0, 14 + max((len(t) for t in ticks), default=1) * _NARROW_CHAR) + 24
        right = 84.0 if chart.line is not None else 16.0
        width = 900.0 if standalone else 720.0
        frame = _Frame(width, head + 256, left, right, head + 12, head + 200)
        drawn = _columns(chart, frame) if count else _empty(frame)
    legend = _legend(chart)
    height = frame.height
    lines = []
    if standalone:
        lines = [
            _Text(_f(frame.width / 2), _f(22 + 20 * n), text, "title", "middle")
            for n, text in enumerate(chart.title.splitlines())
        ]
        height += 10 + 18 * math.ceil((len(legend) + bool(chart.legend_title)) / 3)
    return {
        **drawn,
        "frame": frame,
        "height": _f(height),
        "width": _f(frame.width),
        "lines": lines,
        "legend": legend,
        "legend_rows": _legend_rows(chart, legend, frame, frame.height + 12),
        "standalone": standalone,
        "role": "group" if chart.links else "img",
        "title": chart.title.replace("\n", " "),
        "empty": not count,
    }


def _legend_rows(
    chart: Chart, legend: list[dict[str, str]], frame: _Frame, y: float
) -> list[dict[str, Any]]:
    """The legend of a standalone picture: three entries a row, the legend's title first."""
    entries = ([{"css": "", "name": chart.legend_title}] if chart.legend_title else []) + legend
    column = (frame.width - 40) / 3
    return [
        {
            "css": entry["css"],
            "x": _f(20 + column * (n % 3)),
            "y": _f(y + 18 * (n // 3)),
            "text": _Text(
                _f(20 + column * (n % 3) + 18),
                _f(y + 18 * (n // 3) + 9),
                entry["name"],
                "legend-text" if entry["css"] else "legend-title",
            ),
        }
        for n, entry in enumerate(entries)
    ]


def _empty(frame: _Frame) -> dict[str, Any]:
    return {
        "grid": [],
        "grid_x": [],
        "y_ticks": [],
        "x_ticks": [],
        "columns": [],
        "breaks": [],
        "line": None,
        "titles": [
            _Text(
                _f(frame.left + frame.plot_w / 2),
                _f(frame.top + frame.plot_h / 2),
                "no data in this range",
                "empty",
                "middle",
            )
        ],
        "value_texts": [],
    }


def render_chart(chart: Chart) -> Markup:
    """The chart as a ``<figure>``: its caption, an inline SVG that scales to the figure's
    width, and its legend (for the viewer's pages and the report)."""
    template = _TEMPLATES.get_template("chart.svg")
    return rendered(template.render(chart=_layout(chart, False), figure=True))


def chart_svg(chart: Chart) -> str:
    """The chart as a standalone SVG document: title, legend and style inside it."""
    template = _TEMPLATES.get_template("chart.svg")
    return template.render(chart=_layout(chart, True), figure=False)
