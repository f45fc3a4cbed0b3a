"""What the session commands share: the data root, SESSION arguments and confirmations."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from pentrace.errors import LedgerError, UsageError
from pentrace.infrastructure.catalog import resolve_session
from pentrace.infrastructure.input_files import check_data_root
from pentrace.infrastructure.layout import DataRoot, SessionRef
from pentrace.infrastructure.redaction_policy import activate_policy

__all__ = [
    "AgentOption",
    "JsonOption",
    "ProjectOption",
    "SessionArgument",
    "confirm_or_refuse",
    "data_root",
    "forget_in_ledger",
    "resolve",
]

SessionArgument = Annotated[
    str,
    typer.Argument(
        help="Session id, a unique prefix of it, or (a prefix of) its 8-hex token.",
        show_default=False,
    ),
]
ProjectOption = Annotated[
    str | None, typer.Option("--project", "-p", help="Only this project.", show_default=False)
]
AgentOption = Annotated[
    str | None, typer.Option("--agent", "-a", help="Only this agent.", show_default=False)
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Machine output (docs/cli-json.md); fields are only added.")
]


def data_root(ctx: typer.Context) -> DataRoot:
    """The root given by ``--data-root`` / ``PENGUIN_HOME``, else ``~/.penguin/data``."""
    settings: Any = ctx.find_root().obj
    configured: Path | None = getattr(settings, "data_root", None)
    if configured is not None:
        root = DataRoot(configured.expanduser().absolute())
    else:
        root = DataRoot.from_env()
    check_data_root(root.path)  # a file or FIFO named as the root is refused at once
    rules: Path | None = getattr(settings, "redaction_rules", None)
    activate_policy(root.path, rules=rules)  # every command redacts with the root's rules
    return root


def resolve(
    ctx: typer.Context, session: str, project: str | None = None, agent: str | None = None
) -> tuple[DataRoot, SessionRef]:
    """The data root and the one session ``session`` names (a full id or a short one)."""
    root = data_root(ctx)
    return root, resolve_session(root, session, project=project, agent=agent)


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


def forget_in_ledger(root: DataRoot, session_ids: list[str]) -> int | None:
    """Remove deleted sessions' events from the ledger; the count, or None when it failed.

    The traces are already gone, so a ledger that cannot be written (locked,
    server down) is a warning on stderr, and the caller exits non-zero.
    """
    # Imported here: the session commands load eagerly, SQLAlchemy should not (ADR 0008).
    from pentrace.infrastructure.ledger_admin import forget_sessions

    try:
        return sum(forget_sessions(root, session_ids).values())
    except LedgerError as exc:
        typer.echo(f"warning: the ledger still holds their events: {exc.message}", err=True)
        if len(session_ids) <= _LISTED:
            hint = f"run `pentrace ledger forget {' '.join(session_ids)} --yes`"
        else:  # a large prune: audit lists them rather than one very long command line
            hint = "run `pentrace audit`: it reports them as ledger_orphan_stream"
        typer.echo(f"hint: when the ledger can be written, {hint}", err=True)
        return None
