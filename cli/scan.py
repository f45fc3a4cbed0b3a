"""``pentrace scan``: which secrets sit in the traces, and which derived stores leak them.

Exit codes: 0 when nothing was found, 1 when something was, 2 on an error.
Findings carry a masked preview cut from the redacted text; the secret itself
is never printed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Annotated

import typer

from pentrace.cli.output import byte_progress, emit_json, emit_table
from pentrace.cli.sessions.args import (
    AgentOption,
    JsonOption,
    ProjectOption,
    data_root,
    select_sessions,
)
from pentrace.errors import PentraceError, UsageError
from pentrace.infrastructure.operations.audit import (
    ScanFinding,
    derived_findings,
    fix_derived,
    scan_traces,
)
from pentrace.infrastructure.operations.sessions import DataRoot, SessionRef

__all__ = ["scan"]

_COLUMNS = ("store", "rule", "session", "file", "line", "path", "preview")
_ERROR_EXIT = 2


def _trace_findings(refs: list[SessionRef]) -> Iterator[ScanFinding]:
    total = 0
    for ref in refs:
        for shard in ref.shards:
            try:
                total += os.stat(shard.path).st_size
            except OSError:
                continue
    with byte_progress(total, "scanning") as advance:
        yield from scan_traces(refs, on_record=advance)


def _derived_findings(root: DataRoot) -> Iterator[ScanFinding]:
    yield from derived_findings(root)


def _fix(root: DataRoot, findings: list[ScanFinding]) -> list[str]:
    return fix_derived(root, findings)


def _row(finding: ScanFinding) -> tuple[object, ...]:
    return (
        finding.store,
        finding.rule,
        finding.session_id,
        finding.file,
        finding.line,
        finding.path,
        finding.preview,
    )


def scan(
    ctx: typer.Context,
    sessions: Annotated[
        list[str] | None,
        typer.Argument(
            help="Sessions to scan (ids or unique prefixes; default: all).", show_default=False
        ),
    ] = None,
    project: ProjectOption = None,
    agent: AgentOption = None,
    derived: Annotated[
        bool,
        typer.Option(
            "--derived",
            help="Check the ledger, the search index and the read models instead of the traces.",
        ),
    ] = False,
    fix: Annotated[
        bool,
        typer.Option("--fix", help="With --derived: rebuild every store that holds a finding."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """List the secrets left in traces, or in the derived stores.

    Secrets are what the redaction policy finds.

    Prints store, rule, session, file, line, path and a masked preview (the
    secret is never shown). Exits 0 when clean, 1 with findings, 2 on error.
    With --derived, looks for values the current policy would redact in the
    ledger, the search index and the analytics read models (written by an
    older version or before a rule was added); --fix rebuilds those stores.

    Example: pentrace scan --derived --fix
    """
    try:
        if fix and not derived:
            raise UsageError("--fix needs --derived", hint="pentrace scan --derived --fix")
        if derived and (sessions or project or agent):
            raise UsageError(
                "--derived checks whole stores: SESSION, --project and --agent do not apply",
                hint="pentrace scan --derived",
            )
        root = data_root(ctx)
        if derived:
            findings = list(_derived_findings(root))
        else:
            findings = list(_trace_findings(select_sessions(root, sessions or [], project, agent)))
        fixed = _fix(root, findings) if fix and findings else []
        remaining = list(_derived_findings(root)) if fixed else findings
    except PentraceError as error:
        error.exit_code = _ERROR_EXIT
        raise
    if as_json:
        emit_json(
            {
                "clean": not findings,
                "findings": [
                    {
                        "store": f.store,
                        "rule": f.rule,
                        "session_id": f.session_id,
                        "project": f.project,
                        "agent": f.agent,
                        "file": f.file,
                        "line": f.line,
                        "path": f.path,
                        "preview": f.preview,
                    }
                    for f in findings
                ],
                "fixed": fixed,
                "remaining": len(remaining),
            }
        )
    elif findings:
        emit_table(_COLUMNS, map(_row, findings))
        if fixed:
            typer.echo(f"rebuilt: {', '.join(fixed)}", err=True)
    else:
        typer.echo("no secrets found", err=True)
    if remaining:
        raise typer.Exit(1)
