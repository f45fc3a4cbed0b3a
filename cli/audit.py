"""``pentrace audit``: check sessions and report every problem with file and line.

Exit codes: 0 clean, 1 warnings only, 2 at least one error (after ``--fix``,
the code of what is left).  The workflow (audit, fix, refresh, re-audit) is
:func:`pentrace.infrastructure.operations.audit.run_audit`; this module parses
the arguments and formats the outcome.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from pentrace.cli.output import emit_json, emit_table, progress
from pentrace.cli.sessions.args import (
    AgentOption,
    JsonOption,
    ProjectOption,
    data_root,
    is_file_argument,
    select_sessions,
    session_or_file,
)
from pentrace.errors import UsageError
from pentrace.infrastructure.operations.audit import audit_document, run_audit
from pentrace.infrastructure.operations.sessions import short_id

if TYPE_CHECKING:
    from pentrace.infrastructure.operations.audit import AuditReport, Change

__all__ = ["audit"]


def _where(path: str | None, line: int | None) -> str:
    if path is None:
        return "-"
    return f"{path}:{line}" if line else path


def _print_report(report: AuditReport) -> None:
    problems = report.problems
    if problems:
        emit_table(
            ("severity", "session", "where", "problem", "detail", "fix"),
            (
                (
                    p.severity,
                    short_id(p.session_id),
                    _where(p.path, p.line),
                    p.code,
                    p.message,
                    p.fix,
                )
                for p in problems
            ),
        )
    counts = report.counts()
    ledger = report.ledger or "not checked (no ledger)"
    verdict = {0: "clean", 1: "warnings", 2: "errors"}[report.exit_code]
    typer.echo(
        f"{verdict}: {counts['sessions']} session(s), {counts['records']} record(s), "
        f"{counts['errors']} error(s), {counts['warnings']} warning(s); ledger: {ledger}"
    )


def _print_change(change: Change) -> None:
    where = f" {change.path}" if change.path else ""
    typer.echo(f"changed: [{change.action}] {change.session_id}{where}: {change.detail}")


def audit(
    ctx: typer.Context,
    session: Annotated[
        str | None,
        typer.Argument(
            help="Session id, unique prefix or project/agent/id, or the path of a trace "
            "file (read on its own); omit to audit every session.",
            show_default=False,
        ),
    ] = None,
    project: ProjectOption = None,
    agent: AgentOption = None,
    fix: Annotated[
        bool,
        typer.Option(
            "--fix",
            help="Repair what is safe (heal torn tails into a .torn sidecar, close dangling "
            "compactions, remove stale temp files, ledger sync) and print every change.",
        ),
    ] = False,
    check_ledger: Annotated[
        bool, typer.Option("--ledger/--no-ledger", help="Check the ledger for drift too.")
    ] = True,
    as_json: JsonOption = False,
) -> None:
    """Check sessions, or a trace file, and name every problem's file and line.

    Torn tails, healed torn fragments, malformed lines, dangling compactions,
    orphan or unanswered tool calls, requests without an end, shard gaps, stale
    temp files and ledger drift.

    Every problem names its file and line. Exit code 0 means clean, 1 warnings
    only, 2 errors (with --fix: what is left after the repairs). --fix never
    rewrites history: it only quarantines torn bytes, appends the failed
    compaction_end resume would write, removes temp files no live writer uses,
    and indexes missing ledger events.

    A trace file (a path) is audited on its own, without the ledger; --fix
    repairs sessions of the data root only.

    Example: pentrace audit --fix 3f8a

    Example: pentrace audit ./exported.jsonl
    """
    if session is not None and is_file_argument(session):
        if fix:
            raise UsageError(
                f"--fix repairs sessions of the data root; {session} is a file",
                hint=f"audit it without --fix, or import it first: pentrace import {session}",
            )
        root, ref, _ = session_or_file(ctx, session, project, agent)
        refs, check_ledger = [ref], False  # a file on its own has no ledger stream
    else:
        root = data_root(ctx)
        refs = select_sessions(root, [] if session is None else [session], project, agent)
    # Ledger streams without a trace can only be told apart when every session is read.
    outcome = run_audit(
        root,
        refs,
        whole_root=session is None and project is None and agent is None,
        fix=fix,
        check_ledger=check_ledger,
        # Text output shows each change as it happens.
        on_change=None if as_json else _print_change,
        progress=lambda refs: progress(refs, total=len(refs), label="auditing"),
    )
    if as_json:
        emit_json(audit_document(outcome))
    else:
        if outcome.changes == []:
            typer.echo("--fix: nothing to change")
        _print_report(outcome.report)
    raise typer.Exit(outcome.exit_code)
