"""Options every command reads the same way: the data root, times, ages, sizes and
``--json FIELDS``; and the conventions every command follows, as the "Conventions"
section of docs/cli.md.

Values go through :mod:`pentrace.values` (one parser for the whole CLI); the
clock is :func:`now`, which tests replace to make ages deterministic.
:func:`command_with` builds a command whose options several commands share,
declared once (the ``stats`` window, a ``SESSION`` with ``--project``/``--agent``).

The data root a command works on is checked to exist (:func:`root_from_context`):
a root that does not exist (a typo in ``--data-root`` or ``PENGUIN_HOME``) must not
read as "no sessions", so every command that reads refuses it with a message naming
where the path came from.  Commands that create sessions (``import``, ``demo``,
``ledger import-penguin``) ask for the root with ``must_exist=False``.

``tests/integration/test_cli_conventions.py`` walks every command and checks the
conventions (:data:`CONVENTIONS`); the forms of times, ages and sizes come from
:mod:`pentrace.values`, so the text cannot drift from the parser.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Final

import typer

from pentrace.cli.output import emit_json, emit_json_lines
from pentrace.errors import UsageError
from pentrace.infrastructure.operations.sessions import DataRoot, check_data_root
from pentrace.values import AGE_FORMS, SIZE_FORMS, TIME_FORMS, parse_day, parse_time

__all__ = [
    "CONVENTIONS",
    "INDEXING_HELP",
    "SEE_INDEXING",
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
    "root_from_context",
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


def _source(ctx: typer.Context) -> str:
    root_ctx = ctx.find_root()
    given = root_ctx.get_parameter_source("data_root")
    name = given.name if given is not None else "DEFAULT"
    if name == "COMMANDLINE":
        return "--data-root"
    if name == "ENVIRONMENT":
        return "$PENGUIN_HOME"
    return "the default root (no --data-root, $PENGUIN_HOME unset)"


def root_from_context(ctx: typer.Context, *, must_exist: bool = True) -> DataRoot:
    """The root given by ``--data-root`` / ``PENGUIN_HOME``, else ``~/.penguin/data``.

    With ``must_exist`` (the default) a path that is missing or not a folder
    is a :class:`~pentrace.errors.UsageError` (exit code 2).
    """
    settings: Any = ctx.find_root().obj
    configured: Path | None = getattr(settings, "data_root", None)
    if configured is not None:
        root = DataRoot(configured.expanduser().absolute())
    else:
        root = DataRoot.from_env()
    check_data_root(root.path)  # a file or FIFO named as the root is refused at once
    if must_exist and not root.path.is_dir():
        what = "is not a folder" if root.path.exists() else "does not exist"
        raise UsageError(
            f"data root {root.path} {what} (from {_source(ctx)})",
            hint="check the path in --data-root or $PENGUIN_HOME; "
            "`pentrace demo` or `pentrace import` create a root",
        )
    return root


# The one explanation of which command indexes traces into the ledger, when: the help of
# `pentrace ledger` (and so docs/cli.md); the other commands and docs point here.
INDEXING_HELP: Final = """\
Inspect and maintain the RuntimeEvent ledger (derived from the traces).

Which command indexes traces into the ledger, and when:

\b
  ledger sync      Once, now: everything the ledger is missing, checked
                   session by session (idempotent; --workers for a backlog).
                   After a crash, or when the ledger was down or locked.
  ingest           Only what is new since its cursors: one pass (cron), or
                   --follow as a service on each agent host (docs/ingest.md).
  serve --ingest   The same follower inside `pentrace serve`, on one machine.
  ledger rebuild   From scratch, with the same event ids: after a redaction
                   rule changed, or when the ledger is damaged.

pentrace's own recorder indexes what it writes as it writes it; these are for
traces other programs write (PenguinHarness in Node) and for gaps.

Example: pentrace ledger tail -n 20
"""
SEE_INDEXING: Final = "Which indexing command to use when: `pentrace ledger -h`."

CONVENTIONS: Final = f"""\
## Conventions

Every command and group follows these rules; a test walks all of them.

**Help and version.** `-h` and `--help` work on every command and group;
`pentrace --version` (or `-V`, or `pentrace version`) prints the version.
Help is plain text, the same as below.

**Exit codes.** `0` success; `1` a failure or findings (`audit` exits `1` for
warnings only and `2` when it finds errors; `scan` exits `1` when it finds a
secret; `prune` and `delete` exit `1` when something could not be deleted);
`2` a usage error: an unknown option, a bad value, a missing argument, a data
root that does not exist, a name that matches nothing (a session, a trace
file, a shard, a `--session` the ledger holds no events of) or one that
matches several, a `--since` after its `--until`. `130` after Ctrl-C.

**Errors.** One line `error: <what was wrong, and where>` on stderr, usually
followed by `hint: <what to do>`; no box, no traceback (`--debug` or
`PENTRACE_DEBUG=1` shows it). Usage errors name the command, for example
`error: pentrace list: no such option: --bogus`.

**Data root.** `--data-root`, else `$PENGUIN_HOME`, else `~/.penguin/data`. A
root that does not exist (or is not a folder) is a usage error naming where the
path came from, so a typo never reads as "no sessions". Only `import`, `demo`
and `ledger import-penguin` create a root.

**Session references.** A `SESSION` argument takes the full session id, a
unique prefix of it, or (a prefix of) its 8-hex token, the `short_id` that
`list --json` prints; `-p/--project` and `-a/--agent` narrow it when
the same id exists under two agents. `show`, `audit` and `resume-check` also
take the path of a trace file (a `.jsonl` name, or any file that exists), read
on its own. Tables never cut an id: on a narrow terminal, other columns are
left out first.

**Text.** Tables are drawn for a terminal: counts with thousands separators
and numbers right-aligned, sizes in binary units (`8.2 KiB`), ages and
durations with units (`14 d`, `19.2 s`), ratios as percentages (`18.9%`),
times in UTC as the traces write them (`2026-12-07T15:31:01.124Z`; `list`
shortens the start to the minute on a terminal), `yes`/`no` and `-` for
nothing; never a Python value. Piped, a table is tab-separated lines under a
header line, in the same columns, with counts and byte sizes as bare
integers for scripts. `replay` shows records redacted on a terminal and as
written when piped (`--redacted`/`--no-redacted` choose).

**JSON.** `--json` prints one JSON document: indented on a terminal, compact
(one line) when piped. `--jsonl` (where offered: `list`, `search`,
`replay`) prints one compact object per line; streams such as `ledger tail
--json` are always one object per line. `--fields a,b` (with `--json` or
`--jsonl`; `list`, `search`, `stats tokens|cost|tools|sessions`) keeps
only those fields of each row; an unknown field is an error listing the
available ones. Values are plain text (no markup; search highlights are
offsets). Fields are only ever added: see [cli-json.md](cli-json.md).

**Times** (`--since`, `--until`): {TIME_FORMS}. `stats` reads them as UTC days.

**Ages** (`--older-than`): {AGE_FORMS}.

**Sizes** (`--max-size`): {SIZE_FORMS}; KB/MB/GB/TB are powers of 1000,
KiB/MiB/GiB/TiB powers of 1024.

**Flags** read as `--flag / --no-flag` where both make sense; a flag shows no
value placeholder.

Any other value of these options is a usage error naming the option, the value
and the accepted forms.
"""
