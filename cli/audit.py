"""``pentrace audit``: check sessions and report every problem with file and line.

Exit codes: 0 clean, 1 warnings only, 2 at least one error (after ``--fix``,
the code of what is left).  The checks are in
:mod:`pentrace.infrastructure.audit.run`; the repairs in
:mod:`pentrace.infrastructure.audit.fix`.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
import typer

from pentrace.cli.output import emit_json, emit_table, progress
from pentrace.cli.sessions.args import (
    AgentOption,
    JsonOption,
    ProjectOption,
    data_root,
    resolve,
)
from pentrace.infrastructure.audit.fix import Change, fix_sessions
from pentrace.infrastructure.audit.run import (
    AuditReport,
    audit_sessions,
    ledger_orphans,
    open_existing_ledger,
    orphan_temps,
)
from pentrace.infrastructure.catalog.listing import short_id
from pentrace.infrastructure.ledger import RuntimeEventLedger
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef
from pentrace.projections.audit_checks import Problem

__all__ = ["audit"]


def _refs(
    ctx: typer.Context, session: str | None, project: str | None, agent: str | None
) -> list[SessionRef]:
    if session is not None:
        return [resolve(ctx, session, project, agent)[1]]
    root = data_root(ctx)
    if not root.path.is_dir():
        return []
    return list(root.iter_sessions(project, agent))


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


def _as_json(report: AuditReport, changes: list[Change] | None) -> dict[str, Any]:
    value: dict[str, Any] = {
        **report.counts(),
        "exit_code": report.exit_code,
        "ledger": report.ledger,
        "problems": [msgspec.to_builtins(problem) for problem in report.problems],
        "changes": None,
    }
    if changes is not None:
        value["changes"] = [
            {"action": c.action, "session_id": c.session_id, "path": c.path, "detail": c.detail}
            for c in changes
        ]
    return value


def audit(
    ctx: typer.Context,
    session: Annotated[
        str | None,
        typer.Argument(
            help="Session id, unique prefix or project/agent/id; omit to audit every session.",
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
    """Check sessions: torn tails, healed torn fragments, malformed lines, dangling
    compactions, orphan or unanswered tool calls, requests without an end, shard gaps,
    stale temp files and ledger drift.

    Every problem names its file and line. Exit code 0 means clean, 1 warnings
    only, 2 errors (with --fix: what is left after the repairs). --fix never
    rewrites history: it only quarantines torn bytes, appends the failed
    compaction_end resume would write, removes temp files no live writer uses,
    and indexes missing ledger events.

    Example: pentrace audit --fix 3f8a
    """
    refs = _refs(ctx, session, project, agent)
    root = data_root(ctx)
    ledger = open_existing_ledger(root) if check_ledger else None
    # Ledger streams without a trace can only be told apart when every session is read.
    whole_root = session is None and project is None and agent is None
    try:
        report = audit_sessions(progress(refs, total=len(refs), label="auditing"), ledger)
        if whole_root:
            report.orphans = _orphans(root, refs, ledger)
        changes: list[Change] | None = None
        if fix:
            # Text output shows each change as it happens, so a fix that fails
            # later (a live writer holds a session's lock) still reports them.
            changes = fix_sessions(
                root,
                report.sessions,
                ledger,
                None if as_json else _print_change,
                orphans=report.orphans,
            )
            if changes:
                fixed = [audit.ref for audit in report.sessions]
                fresh = [_refresh(root_ref, root) for root_ref in fixed]
                report = audit_sessions([ref for ref in fresh if ref is not None], ledger)
                if whole_root:
                    report.orphans = _orphans(root, refs, ledger)
    finally:
        if ledger is not None:
            ledger.close()
    if as_json:
        emit_json(_as_json(report, changes))
    else:
        if changes == []:
            typer.echo("--fix: nothing to change")
        _print_report(report)
    raise typer.Exit(report.exit_code)


def _orphans(
    root: DataRoot, refs: list[SessionRef], ledger: RuntimeEventLedger | None
) -> list[Problem]:
    """Findings without a session on disk: stale temp files, then the ledger's streams."""
    found = orphan_temps(root, refs)
    if ledger is not None:
        found += ledger_orphans(ledger, root, (ref.key for ref in refs))
    return found


def _refresh(ref: SessionRef, root: Any) -> SessionRef | None:
    """The session's shards as they are now (a fix may have renamed a torn-only shard)."""
    shards = root.find_shards(ref.project, ref.agent, ref.session_id)
    return SessionRef(ref.project, ref.agent, ref.session_id, tuple(shards)) if shards else None
