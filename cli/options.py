"""Options every command reads the same way: times, ages, sizes and ``--json FIELDS``.

Values go through :mod:`pentrace.values` (one parser for the whole CLI); the
clock is :func:`now`, which tests replace to make ages deterministic.
:func:`command_with` builds a command whose options several commands share,
declared once (the ``stats`` window, a ``SESSION`` with ``--project``/``--agent``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Final

import typer

from pentrace.cli.output import emit_json, emit_json_lines
from pentrace.errors import UsageError
from pentrace.values import parse_day, parse_time

__all__ = [
    "TIME_HELP",
    "FieldsOption",
    "JsonLinesOption",
    "check_fields",
    "command_with",
    "day_bound",
    "day_window",
    "emit_records",
    "keyword",
    "now",
    "pick_fields",
    "time_bound",
    "time_window",
    "unshown",
    "unshown_argument",
]

TIME_HELP: Final = "2026-11-01, an ISO time, 7d, 12h, 30m, 2w, today or yesterday"


def now() -> datetime:
    """The CLI's clock (UTC); tests replace it."""
    return datetime.now(UTC)


def time_bound(text: str | None, option: str) -> datetime | None:
    """``--since``/``--until`` as a UTC moment; None when the option was not given."""
    return None if text is None else parse_time(text, now(), option=option)


def day_bound(text: str | None, option: str) -> str | None:
    """``--since``/``--until`` as the UTC day (``YYYY-MM-DD``) the read models group by."""
    return None if text is None else parse_day(text, now(), option=option)


def _ordered(since: Any, until: Any, texts: tuple[str | None, str | None]) -> None:
    if since is not None and until is not None and since > until:
        raise UsageError(
            f"--since {texts[0]!r} is after --until {texts[1]!r}: expected the start of the "
            "window before its end",
            hint="swap the two values, or leave one out",
        )


def time_window(since: str | None, until: str | None) -> tuple[datetime | None, datetime | None]:
    """``--since``/``--until`` as UTC moments; a start after the end is a usage error."""
    window = time_bound(since, "--since"), time_bound(until, "--until")
    _ordered(*window, (since, until))
    return window


def day_window(since: str | None, until: str | None) -> tuple[str | None, str | None]:
    """``--since``/``--until`` as UTC days; a first day after the last is a usage error."""
    window = day_bound(since, "--since"), day_bound(until, "--until")
    _ordered(*window, (since, until))
    return window


def unshown(*names: str, help: str) -> Any:
    """A ``typer.Option`` whose default (None: not given) the help does not print."""
    return typer.Option(*names, help=help, show_default=False)


def unshown_argument(help: str) -> Any:
    """A ``typer.Argument`` whose default the help does not print."""
    return typer.Argument(help=help, show_default=False)


FieldsOption = Annotated[
    str | None,
    typer.Option(
        "--fields",
        metavar="<a,b,...>",
        help="Only these comma-separated fields in the JSON output (an unknown one lists all).",
        show_default=False,
    ),
]
JsonLinesOption = Annotated[
    bool,
    typer.Option("--jsonl", help="One compact JSON object per line (NDJSON), for streams."),
]


def _wanted(fields: str, available: Sequence[str]) -> list[str]:
    names = [name.strip() for name in fields.split(",") if name.strip()]
    unknown = [name for name in names if name not in available]
    if not names or unknown:
        found = ", ".join(unknown) if unknown else "none"
        raise UsageError(
            f"--fields: unknown field(s) {found}; available: {', '.join(available)}",
            hint=f"for example --fields {','.join(available[:3])}",
        )
    return names


def check_fields(fields: str | None, machine: bool) -> None:
    """``--fields`` picks JSON fields: without ``--json``/``--jsonl`` it would do nothing."""
    if fields is not None and not machine:
        raise UsageError(
            "--fields picks the fields of --json or --jsonl output, found neither",
            hint=f"add --json: --json --fields {fields}",
        )


def pick_fields(
    rows: Iterable[Mapping[str, Any]], fields: str | None, available: Sequence[str]
) -> list[dict[str, Any]]:
    """Each row with only the fields asked for (in that order), or whole when none were."""
    if fields is None:
        return [dict(row) for row in rows]
    names = _wanted(fields, available)
    return [{name: row.get(name) for name in names} for row in rows]


def emit_records(
    records: Iterable[Mapping[str, Any]],
    fields: str | None,
    available: Sequence[str],
    *,
    jsonl: bool,
    under: str,
    **document: Any,
) -> None:
    """The machine output of a listing: with ``jsonl`` one record a line, else one JSON
    document holding ``document``'s fields and then the records ``under`` a name; either way
    only the ``--fields`` asked for."""
    picked = pick_fields(records, fields, available)
    if jsonl:
        emit_json_lines(picked)
    else:
        emit_json({**document, under: picked})


def keyword(
    name: str, annotation: Any, default: Any = inspect.Parameter.empty
) -> inspect.Parameter:
    """One shared parameter for :func:`command_with`: its name, ``Annotated`` type, default."""
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


def command_with(
    body: Callable[..., None],
    *,
    fills: int,
    lead: Sequence[inspect.Parameter],
    tail: Sequence[inspect.Parameter] = (),
    bind: Callable[[typer.Context, dict[str, Any]], tuple[Any, ...]],
) -> Callable[..., None]:
    """A typer command taking the ``lead`` options, then the body's own, then ``tail``.

    typer reads a command's options from its signature; this builds that signature,
    so options several commands share are declared once.  When the command runs,
    ``bind`` turns the shared options' values into the body's first ``fills``
    arguments (for example the data root and the session they name); the body's
    own options follow as given.  The help shows the body's docstring.
    """
    own = list(inspect.signature(body, eval_str=True).parameters.values())[fills:]
    context = inspect.Parameter(
        "ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context
    )
    mine = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
    shared = [p.name for p in (*lead, *tail)]

    def command(ctx: typer.Context, **given: Any) -> None:
        values = {name: given.pop(name) for name in shared}
        body(*bind(ctx, values), **given)

    command.__name__, command.__doc__ = body.__name__, body.__doc__
    command.__qualname__ = body.__qualname__
    # typer reads the parameters from here: the shared ones around the body's own.
    setattr(command, "__signature__", inspect.Signature([context, *lead, *mine, *tail]))  # noqa: B010
    return command
