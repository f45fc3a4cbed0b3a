"""Pictures of the read models: tokens over time stacked by model, cost per day, tool failure rate.

matplotlib is an optional extra (``pip install 'pentrace[plots]'``); without
it, :func:`plot` raises a :class:`~pentrace.errors.UsageError` that says so.
The Agg backend is used, so no display is needed.  PNG or SVG by suffix.
"""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path
from typing import Any

from pentrace.errors import UsageError
from pentrace.infrastructure.atomic_files import publish_file

__all__ = ["plot_bars", "plot_stacked"]


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
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


def _save(figure: Any, path: Path) -> None:
    """Render in memory, then publish atomically at 0600 like every file pentrace writes."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format=path.suffix.lstrip(".").lower())
    publish_file(path.absolute(), [buffer.getvalue()], overwrite=True)


def plot_stacked(
    rows: list[tuple[str, str, float]], path: Path, *, title: str, ylabel: str
) -> Path:
    """Stacked bars: ``(x, series, value)`` rows, e.g. (day, model, tokens)."""
    _check(path)
    plt = _pyplot()
    xs = sorted({x for x, _, _ in rows})
    series: dict[str, dict[str, float]] = defaultdict(dict)
    for x, name, value in rows:
        series[name][x] = series[name].get(x, 0.0) + value
    figure, axes = plt.subplots(figsize=(9, 4.5))
    bottom = [0.0] * len(xs)
    for name in sorted(series):
        heights = [series[name].get(x, 0.0) for x in xs]
        axes.bar(xs, heights, bottom=bottom, label=name)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    if series:
        axes.legend(fontsize="small")
    axes.tick_params(axis="x", labelrotation=45)
    figure.tight_layout()
    _save(figure, path)
    plt.close(figure)
    return path


def plot_bars(rows: list[tuple[str, float]], path: Path, *, title: str, ylabel: str) -> Path:
    """Plain bars: ``(label, value)`` rows, e.g. (tool, failure rate)."""
    _check(path)
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(9, 4.5))
    axes.bar([label for label, _ in rows], [value for _, value in rows], color="#c0504d")
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    axes.tick_params(axis="x", labelrotation=45)
    figure.tight_layout()
    _save(figure, path)
    plt.close(figure)
    return path
