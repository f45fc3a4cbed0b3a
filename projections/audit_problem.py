"""The finding type of ``pentrace audit``: one :class:`Problem`, its severity and its fix."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import msgspec

__all__ = ["Fix", "Problem", "ProblemLog", "Severity", "Where", "worst_exit_code"]

Severity = Literal["error", "warning"]
Where = tuple[str | None, int | None, int | None]
"""Where a problem is: the shard's path, the line in it and the record's position."""
Fix = Literal["heal_torn_tail", "close_compaction", "ledger_sync", "ledger_forget", "remove_temp"]


class Problem(msgspec.Struct, kw_only=True, frozen=True):
    """One finding: what (``code``), how bad, where (file and line), and its safe fix.

    ``position`` is the record's 1-based position in the session (``None`` for
    lines that are not records, and for whole-shard problems).  ``message``
    names kinds, ids and counts, never payload text.
    """

    code: str
    severity: Severity
    message: str
    session_id: str
    path: str | None = None
    line: int | None = None
    position: int | None = None
    fix: Fix | None = None


class ProblemLog:
    """The problems one session's check has found so far; the audit's checkers extend it."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.problems: list[Problem] = []

    def found(
        self, code: str, severity: Severity, message: str, where: Where, fix: Fix | None = None
    ) -> None:
        """Add one problem of this session, found at ``where``: (path, line, position)."""
        self.problems.append(
            Problem(
                code=code,
                severity=severity,
                message=message,
                session_id=self.session_id,
                path=where[0],
                line=where[1],
                position=where[2],
                fix=fix,
            )
        )


def worst_exit_code(problems: Iterable[Problem]) -> int:
    """0 when there is no problem, 1 when the worst is a warning, 2 when any is an error."""
    code = 0
    for problem in problems:
        if problem.severity == "error":
            return 2
        code = 1
    return code
