"""Pictures of the read models: what ``pentrace stats ... --plot`` draws next to its table.

Two shapes, chosen by the grouping the table uses:

* per day (:func:`plot_daily`): bars on a real time axis (a gap of weeks is a
  gap), stacked by a series such as the model, with date ticks that never
  crowd and a legend;
* per anything else (:func:`plot_groups`): one horizontal bar per group (model,
  project, agent, tool ...), largest first, each labelled with its value.

Values are shown in human units (``12k``, ``3.4M``; money with its currency),
never with a ``1e7`` offset.  Titles say what is shown and for which days.

matplotlib is an optional extra (``pip install 'pentrace[plots]'``); without
it, a :class:`~pentrace.errors.UsageError` says so.  The Agg backend is used,
so no display is needed.  PNG or SVG by suffix.
"""

from __future__ import annotations

import io
from collections import defaultdict
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Final

from pentrace.errors import UsageError
from pentrace.infrastructure.storage.atomic import publish_file

__all__ = ["MAX_GROUPS", "human", "plot_daily", "plot_groups"]

MAX_GROUPS: Final = 25  # more bars than this do not read; the title counts the rest
_SIZE: Final = (10, 5.2)
_DPI: Final = 110


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        # Text stays text in an SVG: searchable, selectable and smaller than glyph paths.
        matplotlib.rcParams["svg.fonttype"] = "none"
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError(
            "--plot needs matplotlib, found it not installed",
            hint="pip install 'pentrace[plots]'",
        ) from None
    return plt


def _check(path: Path) -> None:
    if path.suffix.lower() not in {".png", ".svg"}:
        raise UsageError(
            f"--plot {path}: expected a .png or .svg file name, found {path.suffix or 'none'}",
            hint="for example --plot tokens.png",
        )


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


def _axis_units(axis: Any, unit: str) -> None:
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    axis.set_major_locator(MaxNLocator(nbins=6))
    axis.set_major_formatter(FuncFormatter(lambda value, _pos: human(value, unit)))


def _save(plt: Any, figure: Any, path: Path) -> Path:
    """Render in memory, then publish atomically at 0600 like every file pentrace writes."""
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format=path.suffix.lstrip(".").lower(), dpi=_DPI)
    plt.close(figure)
    publish_file(path.absolute(), [buffer.getvalue()], overwrite=True)
    return path


def _empty(axes: Any) -> None:
    axes.text(0.5, 0.5, "no data in this range", ha="center", va="center", color="#777")
    axes.set_xticks([])
    axes.set_yticks([])


def plot_daily(
    rows: list[tuple[str, str, float]],
    path: Path,
    *,
    title: str,
    ylabel: str,
    unit: str = "",
    series_label: str = "model",
) -> Path:
    """Bars per UTC day on a time axis, stacked by series: ``(YYYY-MM-DD, series, value)`` rows."""
    _check(path)
    plt = _pyplot()
    import matplotlib.dates

    mdates: Any = matplotlib.dates  # untyped in places

    totals: dict[str, dict[date, float]] = defaultdict(lambda: defaultdict(float))
    for day, name, value in rows:
        totals[str(name)][date.fromisoformat(str(day))] += value
    days = sorted({d for per_day in totals.values() for d in per_day})
    figure, axes = plt.subplots(figsize=_SIZE)
    if not days:
        _empty(axes)
    else:
        # The largest series at the bottom of each stack, where it is easiest to compare.
        order = sorted(totals, key=lambda n: -sum(totals[n].values()))
        bottom = dict.fromkeys(days, 0.0)
        colours = plt.get_cmap("tab20" if len(order) > 10 else "tab10")
        for number, name in enumerate(order):
            heights = [totals[name].get(d, 0.0) for d in days]
            axes.bar(
                days,
                heights,
                width=0.8,
                bottom=[bottom[d] for d in days],
                label=name,
                color=colours(number % colours.N),
            )
            for d, h in zip(days, heights, strict=True):
                bottom[d] += h
        span = (days[-1] - days[0]).days
        # Whole days only: a few days get a tick each, more get months/weeks from matplotlib.
        locator: Any = (
            mdates.DayLocator(interval=max(1, span // 7))
            if span < 21
            else mdates.AutoDateLocator(minticks=3, maxticks=8)
        )
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(
            mdates.DateFormatter("%b %d") if span < 21 else mdates.ConciseDateFormatter(locator)
        )
        axes.set_xlim(days[0] - timedelta(days=1), days[-1] + timedelta(days=1))
        _axis_units(axes.yaxis, unit)
        if len(order) > 1 or series_label:
            handles, labels = (
                axes.get_legend_handles_labels()
            )  # top of the legend = top of the stack
            axes.legend(
                handles[::-1],
                labels[::-1],
                title=series_label,
                fontsize="small",
                loc="upper left",
                frameon=False,
            )
        axes.grid(axis="y", alpha=0.3)
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    axes.set_xlabel("day (UTC)")
    axes.spines[["top", "right"]].set_visible(False)
    return _save(plt, figure, path)


def plot_groups(
    rows: list[tuple[str, float]],
    path: Path,
    *,
    title: str,
    xlabel: str,
    unit: str = "",
    group_label: str = "",
    part: dict[str, float] | None = None,
    part_label: str = "",
) -> Path:
    """One horizontal bar per group, largest on top, each labelled with its value.

    ``part`` marks a share of some bars in red (failed calls of a tool), with a
    legend.  Past :data:`MAX_GROUPS` groups the smallest are left out and the
    title says how many and how much they hold.
    """
    _check(path)
    plt = _pyplot()
    ranked = sorted(((str(k), float(v)) for k, v in rows), key=lambda kv: (-kv[1], kv[0]))
    if len(ranked) > MAX_GROUPS:
        rest = ranked[MAX_GROUPS:]
        ranked = ranked[:MAX_GROUPS]
        left_out = human(sum(v for _, v in rest), unit)
        title += f"\n(top {MAX_GROUPS}; {len(rest)} smaller left out, {left_out} in all)"
    figure, axes = plt.subplots(figsize=(_SIZE[0], max(2.6, 1.5 + 0.34 * len(ranked))))
    if not ranked:
        _empty(axes)
    else:
        labels = [_short(k) for k, _ in ranked][::-1]
        values = [v for _, v in ranked][::-1]
        bars = axes.barh(labels, values, height=0.6, color="#3465a4", label=xlabel)
        texts = [human(v, unit) for v in values]
        if part:
            shares = [part.get(k, 0.0) for k, _ in ranked][::-1]
            axes.barh(labels, shares, height=0.6, color="#cc0000", label=part_label)
            axes.legend(fontsize="small", loc="lower right", frameon=False)
            texts = [
                f"{t} ({human(p, unit)} {part_label})" for t, p in zip(texts, shares, strict=True)
            ]
        axes.bar_label(bars, labels=texts, padding=3, fontsize="small")
        axes.set_xlim(0, max(values) * (1.3 if part else 1.15) or 1)
        _axis_units(axes.xaxis, unit)
        axes.grid(axis="x", alpha=0.3)
        if group_label:
            axes.set_ylabel(group_label)
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.spines[["top", "right"]].set_visible(False)
    return _save(plt, figure, path)


def _short(label: str, width: int = 40) -> str:
    """A group label that fits beside its bar (ids keep their distinctive end)."""
    return label if len(label) <= width else "…" + label[-(width - 1) :]
