"""The ``pentrace`` command: the typer app, global options and error handling.

Library errors (:class:`pentrace.errors.PentraceError`) become one line on
stderr with a hint and a non-zero exit code; a traceback appears only with
``--debug`` (or ``PENTRACE_DEBUG=1``).
"""

from __future__ import annotations

import atexit
import functools
import gc
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from pentrace import __version__
from pentrace.cli.lazy import LazyGroup
from pentrace.cli.output import escape_unencodable_text
from pentrace.cli.sessions import commands as _sessions
from pentrace.cli.sessions import io as _session_io
from pentrace.cli.sessions import replay as _replay
from pentrace.errors import PentraceError

# Commands whose modules pull in heavy libraries (SQLAlchemy, psycopg, eventsourcing,
# Starlette, Jinja) load only when they run, or when help lists them, so that
# quick commands start fast.  name -> "module:attribute" (a Typer app or a function).
LazyGroup.lazy_commands = {
    "audit": "pentrace.cli.audit:audit",
    "demo": "pentrace.cli.demo:demo",
    "ingest": "pentrace.cli.ingest:ingest",
    "ledger": "pentrace.cli.ledger:ledger_app",
    "otel": "pentrace.cli.otel:otel_app",
    "projections": "pentrace.cli.stats.projections:projections_app",
    "report": "pentrace.cli.report:report",
    "scan": "pentrace.cli.scan:scan",
    "search": "pentrace.cli.search:search",
    "serve": "pentrace.cli.serve:serve",
    "stats": "pentrace.cli.stats.commands:stats_app",
}
# The help lists the commands by task, in this order: a plan for the first hour (ADR 0092).
LazyGroup.panels = (
    ("Find sessions", ("list", "search")),
    ("Look at a session", ("show", "replay", "report", "resume-check")),
    ("Numbers", ("stats",)),
    ("Copy and move sessions", ("export", "import", "fork", "otel")),
    ("Keep the stores", ("audit", "scan", "delete", "prune", "ingest", "ledger", "projections")),
    ("Serve", ("serve",)),
    ("Get started", ("demo", "version")),
)
# Old spellings, hidden from the help and answered as the commands they now name, with the
# same output and exit codes (docs/cli.md, "Old spellings").  Never remove one.
LazyGroup.aliases = {
    "sessions list": "list",
    "ledger stats": "ledger status",
    "ledger replay": "ledger events",
}

app = typer.Typer(
    name="pentrace",
    cls=LazyGroup,
    no_args_is_help=True,
    add_completion=True,
    # -h as well as --help, on every command and group (inherited by their contexts).
    context_settings={"help_option_names": ["-h", "--help"]},
    # Pretty tracebacks print local variables, which may hold credentials.
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    # Help is plain text, as in docs/cli.md (pentrace.cli.lazy turns it off below too).
    rich_markup_mode=None,
)


class Settings:
    """Global options, shared with every command through the click context."""

    def __init__(
        self, data_root: Path | None, debug: bool, redaction_rules: Path | None = None
    ) -> None:
        self.data_root = data_root
        self.debug = debug
        self.redaction_rules = redaction_rules


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"pentrace {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    data_root: Annotated[
        Path | None,
        typer.Option(
            "--data-root",
            envvar="PENGUIN_HOME",
            help="Data root (default: $PENGUIN_HOME, else ~/.penguin/data).",
            show_default=False,
        ),
    ] = None,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks for errors.", envvar="PENTRACE_DEBUG")
    ] = False,
    _version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            help="Print the version and exit.",
            is_eager=True,
            callback=_print_version,
        ),
    ] = False,
    redaction_rules: Annotated[
        Path | None,
        typer.Option(
            "--redaction-rules",
            help="Your redaction rules (default: $PENTRACE_REDACTION_RULES, else "
            "<data root>/redaction.toml; docs/redaction.md).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Record, replay, resume and audit LLM agent sessions.

    Start with `pentrace demo`; then `pentrace list`, `pentrace show SESSION`.

    Example: pentrace --data-root /tmp/demo list
    """
    escape_unencodable_text()
    ctx.obj = Settings(data_root=data_root, debug=debug, redaction_rules=redaction_rules)


@app.command()
def version() -> None:
    """Print the pentrace version.

    Example: pentrace version
    """
    typer.echo(__version__)


# Session commands: list, show, replay, resume-check, export, import, fork, delete, prune.
_sessions.register(app)
_replay.register(app)
_session_io.register(app)
_sessions.register_prune(app)


def _debug_requested(argv: list[str]) -> bool:
    if "--debug" in argv:
        return True
    return os.environ.get("PENTRACE_DEBUG", "").lower() in {"1", "true", "yes", "on"}


def report_error(error: PentraceError) -> None:
    """Print a library error as ``error: ...`` plus ``hint: ...`` on stderr."""
    typer.echo(f"error: {error.message}", err=True)
    if error.hint:
        typer.echo(f"hint: {error.hint}", err=True)


@functools.cache
def _no_collection_at_exit() -> None:
    """Have the interpreter's exit skip the cycle collector's walks over every object left.

    Tearing down the modules a command imported (SQLAlchemy, pydantic, typer)
    collected again and again over all of them: about 0.3-0.5 s of a cold
    ``stats`` (docs/performance.md, "Cold analytics").  The freeze runs after
    the exit handlers registered later (a process pool's, multiprocessing's);
    then only garbage in reference cycles goes unfinalized, as the end of the
    process frees it (commands close their files and databases themselves).
    Registered once per process.
    """
    atexit.register(gc.freeze)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``pentrace`` console script and ``python -m pentrace``."""
    _no_collection_at_exit()
    args = list(sys.argv[1:] if argv is None else argv)
    debug = _debug_requested(args)
    escape_unencodable_text()
    try:
        # Usage errors print as `error:`/`hint:` lines and exit 2 in LazyGroup.main.
        app(args=args, prog_name="pentrace")
    except PentraceError as error:
        if debug:
            raise
        report_error(error)
        sys.exit(error.exit_code)
    except OSError as error:
        if debug:
            raise
        where = f" ({error.filename})" if error.filename else ""
        typer.echo(f"error: {error.strerror or error}{where}", err=True)
        typer.echo("hint: check the path and its permissions (--debug shows more)", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
