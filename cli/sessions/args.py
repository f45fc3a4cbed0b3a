"""What the session commands share: the data root, SESSION arguments and confirmations.

A command about one session is declared with :func:`one_session`: it takes
``SESSION [--project] [--agent]`` first and its body gets the data root and the
session they name, resolved before the body runs.  Commands that read a trace
file as well (``show``, ``audit``, ``resume-check``) take their argument through
:func:`session_or_file`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from pentrace.cli.options import command_with, keyword, root_from_context
from pentrace.domain.session.key import SessionKey
from pentrace.errors import LedgerError, NoMatchError, UsageError
from pentrace.infrastructure.operations.sessions import (
    REFERENCE_HELP,
    DataRoot,
    ParseReport,
    SessionRef,
    ShardRef,
    activate_policy,
    parse_shard_name,
    read_shard,
    resolve_session,
)

__all__ = [
    "AgentOption",
    "JsonOption",
    "ProjectOption",
    "SessionArgument",
    "confirm_or_refuse",
    "data_root",
    "file_ref",
    "forget_in_ledger",
    "is_file_argument",
    "one_session",
    "resolve",
    "select_sessions",
    "session_or_file",
]

SessionArgument = Annotated[
    str,
    typer.Argument(
        help=REFERENCE_HELP,
        show_default=False,
    ),
]
ProjectOption = Annotated[
    str | None, typer.Option("--project", "-p", help="Only this project.", show_default=False)
]
AgentOption = Annotated[
    str | None, typer.Option("--agent", "-a", help="Only this agent.", show_default=False)
]
SessionOrFileArgument = Annotated[
    str,
    typer.Argument(
        help="A session (id, prefix, short id or project/agent/id), or the path of a trace "
        "file, read on its own.",
        show_default=False,
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Machine output (docs/cli-json.md); fields are only added.")
]


def data_root(ctx: typer.Context, *, must_exist: bool = True) -> DataRoot:
    """The root given by ``--data-root`` / ``PENGUIN_HOME``, else ``~/.penguin/data``.

    A root that does not exist is an error unless ``must_exist=False`` (see
    :mod:`pentrace.cli.options`).
    """
    root = root_from_context(ctx, must_exist=must_exist)
    rules: Path | None = getattr(ctx.find_root().obj, "redaction_rules", None)
    activate_policy(root.path, rules=rules)  # every command redacts with the root's rules
    return root


def resolve(
    ctx: typer.Context, session: str, project: str | None = None, agent: str | None = None
) -> tuple[DataRoot, SessionRef]:
    """The data root and the one session ``session`` names (a full id or a short one)."""
    root = data_root(ctx)
    return root, resolve_session(root, session, project=project, agent=agent)


def select_sessions(
    root: DataRoot, names: Sequence[str], project: str | None, agent: str | None
) -> list[SessionRef]:
    """The sessions ``names`` name (ids, unique prefixes or project/agent/id), or without
    names every session of the root (of ``project``/``agent`` when given); a root that
    does not exist yet has none."""
    if names:
        return [resolve_session(root, name, project=project, agent=agent) for name in names]
    return list(root.iter_sessions(project, agent)) if root.path.is_dir() else []


def is_file_argument(text: str) -> bool:
    """A SESSION-or-path argument names a file: a ``.jsonl`` name, or a path that exists."""
    candidate = Path(text)
    return candidate.suffix == ".jsonl" or candidate.exists()


def file_ref(path: Path) -> SessionRef:
    """One trace file, wherever it lies, as a session of that one shard.

    The id and the index come from a shard name (``<session id>_<NNN>.jsonl``), else
    from the file's first record (a ``session_meta``) or its stem; the owner from the
    data root's layout around it (``<project>/agents/<agent>/traces/<day>/``) when it
    has one, else ``-``.
    """
    if not path.exists():
        raise NoMatchError(
            f"trace file {path} does not exist",
            hint="pass the path of a .jsonl trace, or a session (`pentrace list` shows them)",
        )
    parsed = parse_shard_name(path.name)
    session_id, index = parsed if parsed is not None else (_named_id(path) or path.stem, 1)
    parts = path.absolute().parts
    owned = len(parts) >= 6 and parts[-5] == "agents" and parts[-3] == "traces"
    project, agent = (parts[-6], parts[-4]) if owned else ("-", "-")
    try:
        day = datetime.fromtimestamp(path.stat().st_mtime, UTC).date()
    except OSError:
        day = datetime.now(UTC).date()
    return SessionRef(project, agent, session_id, (ShardRef(path, index, day),))


def _named_id(path: Path) -> str | None:
    """The session id the file's first record names, when it is a ``session_meta``."""
    for record in read_shard(path, report=ParseReport(max_kept=0)):
        named = record.payload().get("session_id") if record.kind == "session_meta" else None
        return named if isinstance(named, str) and named else None
    return None


def session_or_file(
    ctx: typer.Context, text: str, project: str | None, agent: str | None
) -> tuple[DataRoot, SessionRef, bool]:
    """The data root and the session ``text`` names, or the one trace file it is a path
    of; the flag says which (True: a file, read on its own)."""
    if not is_file_argument(text):
        return (*resolve(ctx, text, project, agent), False)
    if project is not None or agent is not None:
        raise UsageError(
            f"--project and --agent pick sessions of the data root; {text} is a file",
            hint="drop --project and --agent, or name a session instead of a file",
        )
    # A file needs no data root; the root's redaction rules apply when it has one.
    return data_root(ctx, must_exist=False), file_ref(Path(text)), True


def _resolved(ctx: typer.Context, given: dict[str, Any]) -> tuple[DataRoot, SessionRef]:
    return resolve(ctx, given["session"], given["project"], given["agent"])


_ONE_SESSION = (
    keyword("session", SessionArgument),
    keyword("project", ProjectOption, None),
    keyword("agent", AgentOption, None),
)


def one_session(body: Callable[..., None]) -> Callable[..., None]:
    """``body(root, ref, **own options)`` as a command taking ``SESSION``, ``--project`` and
    ``--agent`` first; ``root`` and ``ref`` are the data root and the session they name."""
    return command_with(body, fills=2, lead=_ONE_SESSION, bind=_resolved)


def confirm_or_refuse(question: str, *, yes: bool, what: str) -> bool:
    """True to go ahead: ``--yes``, or a ``y`` typed at a terminal.

    Without a terminal and without ``--yes`` nothing is deleted: refusing is
    safer than guessing what a script meant.
    """
    if yes:
        return True
    if not sys.stdin.isatty():
        raise UsageError(
            f"refusing to {what} without confirmation: standard input is not a terminal",
            hint="pass --yes to confirm in scripts",
        )
    return typer.confirm(question, default=False)


_LISTED = 3  # session ids a hint spells out in full


def forget_in_ledger(root: DataRoot, sessions: list[SessionKey]) -> int | None:
    """Remove deleted sessions' events from the ledger; the count, or None when it failed.

    The traces are already gone, so a ledger that cannot be written (locked,
    server down) is a warning on stderr, and the caller exits non-zero.
    """
    # Imported here: the session commands load eagerly, SQLAlchemy should not (ADR 0008).
    from pentrace.infrastructure.operations.ledger import forget_sessions

    try:
        return sum(forget_sessions(root, sessions).values())
    except LedgerError as exc:
        typer.echo(f"warning: the ledger still holds their events: {exc.message}", err=True)
        if len(sessions) <= _LISTED:
            named = " ".join(key.reference for key in sessions)
            hint = f"run `pentrace ledger forget {named} --yes`"
        else:  # a large prune: audit lists them rather than one very long command line
            hint = "run `pentrace audit`: it reports them as ledger_orphan_stream"
        typer.echo(f"hint: when the ledger can be written, {hint}", err=True)
        return None
