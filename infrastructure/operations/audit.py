"""The audit workflow: audit, optionally fix, refresh what the fixes changed, re-audit.

``pentrace audit`` parses its arguments into :func:`run_audit` and formats the
:class:`AuditOutcome` (a table, or :func:`audit_document` as ``--json``).  The
checks are :mod:`pentrace.infrastructure.audit.run`, the repairs
:mod:`pentrace.infrastructure.audit.fix`; this module only orders them (ADR 0036).

The secret scans of ``pentrace scan`` are here too (ADR 0103).  The audit's own
modules open the ledger (SQLAlchemy and eventsourcing), which a trace scan never
needs, so the workflow imports them when it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from pentrace.infrastructure.audit.secrets import (
    ScanFinding,
    derived_findings,
    fix_derived,
    scan_traces,
)
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef
from pentrace.projections.audit import Problem

if TYPE_CHECKING:
    from pentrace.infrastructure.audit.fix import Change
    from pentrace.infrastructure.audit.run import AuditReport, SessionAudit
    from pentrace.infrastructure.ledger import RuntimeEventLedger

# AuditReport and Change are for annotations only (import them under TYPE_CHECKING).
__all__ = [
    "AuditOutcome",
    "AuditReport",
    "Change",
    "ScanFinding",
    "audit_document",
    "audit_session",
    "derived_findings",
    "fix_derived",
    "run_audit",
    "scan_traces",
]

Progress = Callable[[list[SessionRef]], Iterable[SessionRef]]


@dataclass(frozen=True, slots=True)
class AuditOutcome:
    """The report (after the fixes, when there were any) and the changes made.

    ``changes`` is None without ``fix``, and empty when nothing needed fixing.
    """

    report: AuditReport
    changes: list[Change] | None

    @property
    def exit_code(self) -> int:
        """0 clean, 1 warnings only, 2 at least one error (what is left after the fixes)."""
        return self.report.exit_code


def run_audit(
    root: DataRoot,
    refs: list[SessionRef],
    *,
    whole_root: bool,
    fix: bool = False,
    check_ledger: bool = True,
    on_change: Callable[[Change], None] | None = None,
    progress: Progress | None = None,
) -> AuditOutcome:
    """Audit ``refs`` (and with ``fix`` repair, refresh and re-audit them).

    ``whole_root`` says ``refs`` are every session of the root: only then can
    stale temp files and ledger streams without a trace be told apart from the
    sessions left out.  ``on_change`` sees each change as it happens, so a fix
    that fails later (a live writer holds a session's lock) still reports the
    ones before it.
    """
    from pentrace.infrastructure.audit.fix import fix_sessions
    from pentrace.infrastructure.audit.run import audit_sessions, open_existing_ledger

    ledger = open_existing_ledger(root) if check_ledger else None
    try:
        report = audit_sessions(progress(refs) if progress else refs, ledger)
        if whole_root:
            report.orphans = _orphans(root, refs, ledger)
        if not fix:
            return AuditOutcome(report, None)
        changes = fix_sessions(root, report.sessions, ledger, on_change, orphans=report.orphans)
        if changes:
            fresh = [_refresh(root, audit.ref) for audit in report.sessions]
            report = audit_sessions([ref for ref in fresh if ref is not None], ledger)
            if whole_root:
                report.orphans = _orphans(root, refs, ledger)
        return AuditOutcome(report, changes)
    finally:
        if ledger is not None:
            ledger.close()


def _orphans(
    root: DataRoot, refs: list[SessionRef], ledger: RuntimeEventLedger | None
) -> list[Problem]:
    """Findings without a session on disk: stale temp files, then the ledger's streams."""
    from pentrace.infrastructure.audit.run import ledger_orphans, orphan_temps

    found = orphan_temps(root, refs)
    if ledger is not None:
        found += ledger_orphans(ledger, root, (ref.key for ref in refs))
    return found


def _refresh(root: DataRoot, ref: SessionRef) -> SessionRef | None:
    """The session's shards as they are now (a fix may have renamed a torn-only shard)."""
    shards = root.find_shards(ref.project, ref.agent, ref.session_id)
    return SessionRef(ref.project, ref.agent, ref.session_id, tuple(shards)) if shards else None


def audit_document(outcome: AuditOutcome) -> dict[str, Any]:
    """The ``pentrace audit --json`` document (``docs/cli-json.md``)."""
    report, changes = outcome.report, outcome.changes
    return {
        **report.counts(),
        "exit_code": report.exit_code,
        "ledger": report.ledger,
        "problems": [msgspec.to_builtins(problem) for problem in report.problems],
        "changes": None
        if changes is None
        else [
            {"action": c.action, "session_id": c.session_id, "path": c.path, "detail": c.detail}
            for c in changes
        ],
    }


def audit_session(ref: SessionRef) -> SessionAudit:
    """One session's findings: its shards and records (the Session page's problems)."""
    from pentrace.infrastructure.audit import run

    return run.audit_session(ref)
