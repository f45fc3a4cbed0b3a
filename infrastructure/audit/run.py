"""``pentrace audit``: read sessions from disk and the ledger, and report every problem.

The checks themselves are pure (:mod:`pentrace.projections.audit`, the
ledger drift included); this module feeds them: it reads
every shard of a session with the tolerant trace reader (one report per shard,
so each malformed line and torn tail names its file and line), numbers the
records across shards (positions), and, when a ledger exists, loads the
session's ledger rows to compare.  Auditing never writes anything and never
creates a ledger; repairs live in :mod:`pentrace.infrastructure.audit.fix`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pentrace.domain.session.key import SessionKey
from pentrace.errors import NotFoundError, PentraceError, TraceError
from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.opener import open_ledger
from pentrace.infrastructure.ledger.settings import default_ledger_path
from pentrace.infrastructure.storage.atomic import agent_temps, is_stale, session_temps
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef
from pentrace.infrastructure.trace.reader import ParseReport, read_shard
from pentrace.projections.audit import (
    LedgerDrift,
    Problem,
    SessionChecks,
    parse_problems,
    shard_index_problems,
    temp_file_problems,
    worst_exit_code,
)

__all__ = [
    "AuditReport",
    "SessionAudit",
    "audit_session",
    "audit_sessions",
    "ledger_orphans",
    "open_existing_ledger",
    "orphan_temps",
]


@dataclass(frozen=True)
class SessionAudit:
    """One session's findings: its records, shards and problems (in trace order)."""

    ref: SessionRef
    records: int
    problems: list[Problem]

    @property
    def exit_code(self) -> int:
        """0 clean, 1 warnings, 2 errors."""
        return worst_exit_code(self.problems)


@dataclass
class AuditReport:
    """Findings over many sessions; ``ledger`` says whether ledger drift was checked."""

    sessions: list[SessionAudit] = field(default_factory=list)
    ledger: str | None = None
    # Ledger streams and temp files of sessions with no trace (whole-root audits only).
    orphans: list[Problem] = field(default_factory=list)

    @property
    def problems(self) -> list[Problem]:
        """Every problem of every session, then the ledger's orphan streams."""
        return [problem for audit in self.sessions for problem in audit.problems] + self.orphans

    @property
    def exit_code(self) -> int:
        """The worst code: 0 clean, 1 warnings, 2 errors."""
        sessions = max((audit.exit_code for audit in self.sessions), default=0)
        return max(sessions, worst_exit_code(self.orphans))

    def counts(self) -> dict[str, int]:
        """Sessions audited, records read, errors and warnings."""
        problems = self.problems
        errors = sum(1 for problem in problems if problem.severity == "error")
        return {
            "sessions": len(self.sessions),
            "records": sum(audit.records for audit in self.sessions),
            "errors": errors,
            "warnings": len(problems) - errors,
        }


def open_existing_ledger(
    root: DataRoot, settings: LedgerSettings | None = None
) -> RuntimeEventLedger | None:
    """The configured ledger, or ``None`` when it is a SQLite file that does not exist yet.

    Retention is switched off: an audit or a repair must never prune rows.
    """
    try:
        return open_ledger(
            settings, root, must_exist=True, keep_everything=True, redaction_policy=False
        )
    except NotFoundError:
        return None


def audit_session(ref: SessionRef, ledger: RuntimeEventLedger | None = None) -> SessionAudit:
    """Check one session's shards, records and (with a ledger) its ledger rows."""
    sid = ref.session_id
    shards = sorted(ref.shards, key=lambda shard: (shard.index, shard.day))
    problems = shard_index_problems(sid, [(shard.index, str(shard.path)) for shard in shards])
    ambiguous = any(problem.code == "duplicate_shard" for problem in problems)
    checks = SessionChecks(sid)
    drift: LedgerDrift | None = None
    if ledger is not None and not ambiguous:
        held, pruned = ledger.stream_rows(ref.key.stream_id)
        drift = LedgerDrift(sid, held, pruned)
    position = 0
    for shard in shards:
        path = str(shard.path)
        report = ParseReport(max_kept=10_000)
        checks.start_shard(shard.index, path)
        try:
            for record in read_shard(shard.path, report=report):
                position += 1
                checks.record(record)
                if drift is not None:
                    drift.record(record, position, path)
        except (TraceError, OSError) as error:
            # One unreadable shard is this session's problem; the audit goes on.
            problems.append(_unreadable(sid, path, error))
        checks.healed_fragments(bad.line for bad in report.healed)
        problems.extend(
            parse_problems(
                sid,
                [(path, bad.line, bad.reason) for bad in report.skipped],
                [(path, bad.line, bad.reason) for bad in report.torn_tails],
                [(path, bad.line, bad.reason) for bad in report.healed],
            )
        )
    problems.extend(checks.finish())
    problems.extend(_stale_temps(ref))
    if drift is not None:
        problems.extend(drift.finish())
    return SessionAudit(ref, position, _in_file_order(problems))


def _stale_temps(ref: SessionRef) -> list[Problem]:
    """The session's temp files no live writer is using (an audit holds no lock)."""
    if not ref.shards:
        return []
    traces = ref.shards[0].path.parent.parent
    stale = [t for t in session_temps(traces, ref.session_id) if is_stale(t, locked=False)]
    return temp_file_problems(ref.session_id, [(str(t.path), t.pid) for t in stale])


def orphan_temps(root: DataRoot, refs: Iterable[SessionRef]) -> list[Problem]:
    """Stale temp files of sessions with no shard at all (a writer killed while creating a
    session's first shard, or an import): only seen when every session is audited."""
    known = {(ref.project, ref.agent, ref.session_id) for ref in refs}
    problems: list[Problem] = []
    for traces in sorted(root.path.glob("*/agents/*/traces")):
        project, agent = traces.parent.parent.parent.name, traces.parent.name
        for temp in agent_temps(traces):
            if (project, agent, temp.session_id) in known or not is_stale(temp, locked=False):
                continue
            problems.extend(temp_file_problems(temp.session_id, [(str(temp.path), temp.pid)]))
    return problems


def ledger_orphans(
    ledger: RuntimeEventLedger, root: DataRoot, known: Iterable[SessionKey]
) -> list[Problem]:
    """Sessions the ledger holds events of but the data root has no trace for (deleted).

    ``known`` are the sessions with traces; a problem's ``session_id`` is the
    orphan's reference, ``project/agent/session-id``.

    Only a ledger that belongs to this data root (its default SQLite file) gets
    the ``ledger_forget`` fix: a configured ledger may be shared with other
    roots, whose sessions this audit cannot see.
    """
    present = set(known)
    path = ledger.db.path
    local = path is not None and path.resolve() == default_ledger_path(root.path).resolve()
    return [
        Problem(
            code="ledger_orphan_stream",
            severity="warning",
            message=f"the ledger holds {count} event(s) of this session, which has no trace "
            f"under the data root{_orphan_hint(key.reference, local)}",
            session_id=key.reference,
            path=ledger.db.where,
            fix="ledger_forget" if local else None,
        )
        for key, count in sorted(ledger.session_streams().items())
        if key not in present
    ]


def _orphan_hint(session_id: str, local: bool) -> str:
    if local:
        return ""
    return (
        " (a shared ledger: if no other data root holds the session, remove its events with "
        f"`pentrace ledger forget {session_id}`)"
    )


def _unreadable(session_id: str, path: str, error: Exception) -> Problem:
    reason = error.message if isinstance(error, PentraceError) else str(error)
    return Problem(
        code="unreadable_shard",
        severity="error",
        message=f"the shard could not be read to its end: {reason}",
        session_id=session_id,
        path=path,
    )


def _in_file_order(problems: list[Problem]) -> list[Problem]:
    return sorted(problems, key=lambda p: (p.path or "~", p.line or 0, p.code))


def audit_sessions(
    refs: Iterable[SessionRef], ledger: RuntimeEventLedger | None = None
) -> AuditReport:
    """Audit every session in ``refs``; ``ledger=None`` skips the drift checks."""
    report = AuditReport(ledger=ledger.db.where if ledger is not None else None)
    for ref in refs:
        report.sessions.append(audit_session(ref, ledger))
    return report
