"""Output helpers: rich tables on a terminal, plain text when piped, JSON on request.

The ``--json`` output of every read command is a documented contract
(``docs/cli-json.md``): fields are only ever added, never renamed or removed.
JSON is indented on a terminal and compact (one line) when piped; ``--jsonl``
streams one compact object per line.  Values are plain text: no markup.

Text output shows each kind of value one way (ADR 0093), through the
formatters here: :func:`count` (``12,345``), :func:`percent` (``18.9%``),
:func:`utc_time` (``2026-12-07T15:31:01.124Z``), :func:`byte_size`
(``256.0 MiB``) and :func:`duration` (``14 d``, ``3 h 5 min``).  A table cell
is never a Python repr: ``None`` is ``-``, a flag ``yes``/``no``.  On a
terminal counts get thousands separators and numeric columns are right-aligned;
piped (tab-separated) cells keep the machine form scripts read: bare integers
for counts and bytes, the same text for the rest (:class:`Cell`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal, TypeVar

from pentrace.domain.json_codec import JsonEncoder, json_format

T = TypeVar("T")

_json_encoder = JsonEncoder(order="deterministic")
# Error handlers that fail on some lone surrogate: surrogateescape only takes U+DC80..U+DCFF.
_FAILING = frozenset(("strict", "surrogateescape"))


def escape_unencodable_text() -> None:
    """Make stdout and stderr write text they cannot encode as escapes instead of failing.

    A lone surrogate (``'\\ud800'`` from a trace, ``'\\udcff'`` from a file
    name) has no UTF-8 form; with ``backslashreplace`` it prints as its JSON
    escape ``\\ud800`` (ADR 0015).  On a terminal that cannot show some
    character, that character is escaped the same way rather than crashing.
    """
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) in _FAILING:
            reconfigure(errors="backslashreplace")


def stdout_is_tty() -> bool:
    """True when standard output is an interactive terminal."""
    return sys.stdout.isatty()


def json_bytes(value: Any) -> bytes:
    """``value`` as one JSON document: indented on a terminal, compact when piped."""
    text = _json_encoder.encode(value)
    return json_format(text, indent=2) if stdout_is_tty() else text


def emit_json(value: Any) -> None:
    """Write ``value`` as one JSON document to stdout, newline-terminated."""
    sys.stdout.buffer.write(json_bytes(value) + b"\n")
    sys.stdout.flush()


def emit_json_lines(values: Iterable[Any]) -> None:
    """Write one compact JSON document per line (``--jsonl``; streams such as ``ledger tail``)."""
    out = sys.stdout.buffer
    for value in values:
        out.write(_json_encoder.encode(value) + b"\n")
        out.flush()


_BINARY: Final = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def count(value: int) -> str:
    """A count for a person: ``12,345``."""
    return f"{value:,}"


def percent(ratio: float | None) -> str:
    """A ratio (0.1892) as a percentage with one decimal: ``18.9%``; ``-`` when unknown."""
    if ratio is None or not math.isfinite(ratio):
        return "-"
    return f"{ratio * 100:.1f}%"


def money(value: float | None) -> str:
    """An amount of money with four decimals (token prices are small): ``1,234.5678``."""
    return "-" if value is None or not math.isfinite(value) else f"{value:,.4f}"


def byte_size(size: int | None) -> str:
    """A size in binary units (``--max-size`` reads them): ``512 B``, ``8.2 KiB``, ``256.0 MiB``."""
    if size is None:
        return "-"
    value, unit = float(size), 0
    while abs(value) >= 1024 and unit < len(_BINARY) - 1:
        value, unit = value / 1024, unit + 1
    return f"{size} B" if unit == 0 else f"{value:.1f} {_BINARY[unit]}"


def duration(seconds: float | None) -> str:
    """An age or a duration with units: ``19.2 s``, ``5 min 3 s``, ``3 h 5 min``, ``14 d``."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if abs(seconds) < 60:
        return f"{seconds:.1f} s" if seconds % 1 else f"{int(seconds)} s"
    whole = round(seconds)
    for big, big_unit, small, small_unit in (
        (86400, "d", 3600, "h"),
        (3600, "h", 60, "min"),
        (60, "min", 1, "s"),
    ):
        if whole >= big:
            high, rest = divmod(whole, big)
            low = rest // small
            return f"{high} {big_unit}" + (f" {low} {small_unit}" if low else "")
    return f"{whole} s"  # a negative age (a clock set back) stays in seconds


def utc_time(value: datetime | str | None, *, minutes: bool = False) -> str:
    """A moment in UTC as the traces write it, ``2026-12-07T15:31:01.124Z``; with ``minutes``
    the short form a narrow terminal shows, ``2026-12-07 15:31``.  Text that is not an ISO
    time is shown as it is (a trace may hold anything); ``-`` for none."""
    if value is None:
        return "-"
    moment = value
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return value
    assert isinstance(moment, datetime)
    utc = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    if minutes:
        return f"{utc:%Y-%m-%d %H:%M}"
    return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"


# How deep a nested value is spelled out in text; a hostile trace may nest thousands deep.
_MAX_DEPTH: Final = 8


def listed(value: Mapping[str, Any] | Iterable[Any], *, _depth: int = 0) -> str:
    """A mapping as ``key value, key value`` and a sequence as ``a, b``: never a repr.
    Values nested deeper than a few levels read ``…``."""
    if _depth >= _MAX_DEPTH:
        return "…"
    inner = _depth + 1
    if isinstance(value, Mapping):
        return (
            ", ".join(f"{key} {_cell(item, tty=True, depth=inner)}" for key, item in value.items())
            or "none"
        )
    return ", ".join(_cell(item, tty=True, depth=inner) for item in value) or "none"


def text(value: Any) -> str:
    """Any value as a person reads it (the table cell's form on a terminal)."""
    return _cell(value, tty=True)


@dataclass(frozen=True, slots=True)
class Cell:
    """A table cell formatted by its caller: ``shown`` on a terminal, ``plain`` when piped
    (the machine form, such as bare bytes), right-aligned on a terminal when ``numeric``."""

    shown: str
    plain: str
    numeric: bool = True

    @classmethod
    def size(cls, size: int | None) -> Cell:
        """A byte size: ``8.2 KiB`` on a terminal, the bare number of bytes when piped."""
        return cls(byte_size(size), "-" if size is None else str(size))

    @classmethod
    def amount(cls, value: float | None) -> Cell:
        """Money: ``1,234.5678`` on a terminal, ``1234.5678`` when piped."""
        shown = money(value)
        return cls(shown, shown.replace(",", ""))

    @classmethod
    def ratio(cls, ratio: float | None) -> Cell:
        """A ratio as a percentage, both ways."""
        shown = percent(ratio)
        return cls(shown, shown)


def _numeric(value: Any) -> bool:
    if isinstance(value, Cell):
        return value.numeric
    return isinstance(value, int | float) and not isinstance(value, bool)


def _cell(value: Any, *, tty: bool, depth: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, Cell):
        return value.shown if tty else value.plain
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return count(value) if tty else str(value)
    if isinstance(value, float):
        return str(value) if math.isfinite(value) else "-"
    if isinstance(value, datetime):
        return utc_time(value)
    if isinstance(value, str):
        return value
    if isinstance(value, set | frozenset):
        return listed(sorted(map(text, value)), _depth=depth)
    if isinstance(value, Mapping | list | tuple):
        return listed(value, _depth=depth)
    return str(value)


def fit_columns(
    columns: Sequence[str], rows: list[list[str]], width: int, droppable: Sequence[str]
) -> list[int]:
    """Indexes of the columns to show: drop ``droppable`` ones, in order, until the table fits."""
    shown = list(range(len(columns)))

    def natural() -> int:  # rich's default box: "| " + cells joined by " | " + " |"
        cells = [max([len(columns[i]), *(len(row[i]) for row in rows)]) for i in shown]
        return sum(cells) + 3 * len(cells) + 1

    for name in droppable:
        if natural() <= width:
            break
        if name in columns and len(shown) > 1:
            shown.remove(columns.index(name))
    return shown


def emit_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    title: str | None = None,
    keep: Sequence[str] = (),
    droppable: Sequence[str] = (),
) -> None:
    """A rich table on a terminal; tab-separated lines with a header when piped.

    On a terminal, columns named in ``keep`` (ids) are never cut or wrapped:
    when the table is too wide, the ``droppable`` columns go first (in that
    order), then rich wraps the others.
    """
    values = [list(row) for row in rows]
    tty = stdout_is_tty()
    cells = [[_cell(v, tty=tty) for v in row] for row in values]
    if tty:
        # rich loads only for a terminal: piped and --json output do without it.
        from rich.console import Console
        from rich.table import Table

        console = Console()
        shown = fit_columns(columns, cells, console.width, droppable)
        table = Table(title=title, show_lines=False)
        for i in shown:
            # A column of numbers (blanks aside) is right-aligned, so digits line up.
            given = [row[i] for row in values if row[i] is not None]
            justify: Literal["left", "right"] = (
                "right" if given and all(map(_numeric, given)) else "left"
            )
            if columns[i] in keep:
                longest = max([len(columns[i]), *(len(row[i]) for row in cells)])
                table.add_column(columns[i], no_wrap=True, min_width=longest, justify=justify)
            else:
                table.add_column(columns[i], overflow="fold", justify=justify)
        for row in cells:
            table.add_row(*(row[i] for i in shown))
        console.print(table)
        return
    write = sys.stdout.write
    write("\t".join(columns) + "\n")
    for row in cells:
        write("\t".join(row) + "\n")
    sys.stdout.flush()


def progress(items: Iterable[T], *, total: int | None, label: str) -> Iterator[T]:
    """Yield ``items``, drawing a progress bar on stderr only when it is a terminal."""
    if not sys.stderr.isatty():
        yield from items
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        for item in items:
            yield item
            bar.advance(task)


@contextmanager
def byte_progress(total: int, label: str) -> Iterator[Callable[[int], None]]:
    """An ``advance(bytes)`` callable: a bar on stderr at a terminal, a no-op otherwise."""
    if not sys.stderr.isatty():
        yield _ignore
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda done: bar.advance(task, done)


def _ignore(_done: int) -> None:
    return None
