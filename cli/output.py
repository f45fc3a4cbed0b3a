"""Output helpers: rich tables on a terminal, plain text when piped, JSON on request.

The ``--json`` output of every read command is a documented contract
(``docs/cli.md``): fields are only ever added, never renamed or removed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

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


def emit_json(value: Any) -> None:
    """Write ``value`` as indented JSON to stdout, one document, newline-terminated."""
    text = json_format(_json_encoder.encode(value), indent=2)
    sys.stdout.buffer.write(text + b"\n")
    sys.stdout.flush()


def emit_json_lines(values: Iterable[Any]) -> None:
    """Write one compact JSON document per line (for streams such as ``ledger tail``)."""
    out = sys.stdout.buffer
    for value in values:
        out.write(_json_encoder.encode(value) + b"\n")
        out.flush()


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return str(value)


def emit_table(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None
) -> None:
    """A rich table on a terminal; tab-separated lines with a header when piped."""
    if stdout_is_tty():
        table = Table(title=title, show_lines=False)
        for column in columns:
            table.add_column(column)
        for row in rows:
            table.add_row(*(_cell(v) for v in row))
        Console().print(table)
        return
    write = sys.stdout.write
    write("\t".join(columns) + "\n")
    for row in rows:
        write("\t".join(_cell(v) for v in row) + "\n")
    sys.stdout.flush()


def progress(items: Iterable[T], *, total: int | None, label: str) -> Iterator[T]:
    """Yield ``items``, drawing a progress bar on stderr only when it is a terminal."""
    if not sys.stderr.isatty():
        yield from items
        return
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
    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda done: bar.advance(task, done)


def _ignore(_done: int) -> None:
    return None
