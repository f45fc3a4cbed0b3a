"""Output helpers: rich tables on a terminal, plain text when piped, JSON on request.

The ``--json`` output of every read command is a documented contract
(``docs/cli-json.md``): fields are only ever added, never renamed or removed.
JSON is indented on a terminal and compact (one line) when piped; ``--jsonl``
streams one compact object per line.  Values are plain text: no markup.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

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


def _cell(value: Any) -> str:
    if value is None:
        return "-"
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
    cells = [[_cell(v) for v in row] for row in rows]
    if stdout_is_tty():
        # rich loads only for a terminal: piped and --json output do without it.
        from rich.console import Console
        from rich.table import Table

        console = Console()
        shown = fit_columns(columns, cells, console.width, droppable)
        table = Table(title=title, show_lines=False)
        for i in shown:
            if columns[i] in keep:
                longest = max([len(columns[i]), *(len(row[i]) for row in cells)])
                table.add_column(columns[i], no_wrap=True, min_width=longest)
            else:
                table.add_column(columns[i], overflow="fold")
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
