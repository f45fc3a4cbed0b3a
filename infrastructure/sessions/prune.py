"""Prune: choose sessions to delete by age or by total size, then delete exactly those.

A session's age is the time since its last write (the newest shard's
``mtime``), so a long-running session is never pruned for being *started*
long ago.  By size, the sessions written least recently go first until the
total of every shard under the root fits.  Planning changes nothing
(``--dry-run`` prints the plan); :func:`apply_prune` deletes the planned
sessions one by one with :func:`~pentrace.infrastructure.sessions.files.delete_session`
and reports each one it could not delete (a live writer holds it) instead
of stopping half way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pentrace.errors import PentraceError, UsageError
from pentrace.infrastructure.sessions.files import delete_session
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef, iter_sessions
from pentrace.values import AGE_UNITS, parse_age, parse_size

__all__ = [
    "PruneCandidate",
    "PruneOutcome",
    "apply_prune",
    "parse_age",
    "parse_size",
    "plan_prune",
]


@dataclass(frozen=True, slots=True)
class PruneCandidate:
    """A session the plan would delete, why, its size and when it was last written."""

    project: str
    agent: str
    session_id: str
    last_write: datetime
    bytes: int
    reason: str


@dataclass(frozen=True, slots=True)
class PruneOutcome:
    """One planned session after :func:`apply_prune`: deleted, or the error that kept it."""

    candidate: PruneCandidate
    error: str | None


def _stat(ref: SessionRef) -> tuple[datetime, int]:
    newest = 0
    size = 0
    for shard in ref.shards:
        stat = os.stat(shard.path)
        newest = max(newest, stat.st_mtime_ns)
        size += stat.st_size
    return datetime.fromtimestamp(newest / 1e9, UTC), size


def plan_prune(
    root: DataRoot,
    *,
    older_than: timedelta | None = None,
    max_size: int | None = None,
    now: datetime,
) -> list[PruneCandidate]:
    """The sessions to delete, oldest last write first; at least one rule must be given."""
    if older_than is None and max_size is None:
        raise UsageError(
            "expected --older-than or --max-size, found neither",
            hint="for example: pentrace prune --older-than 30d --dry-run",
        )
    if not root.path.is_dir():
        return []
    sessions = []
    for ref in iter_sessions(root):
        try:
            last_write, size = _stat(ref)
        except FileNotFoundError:
            continue  # deleted since the walk
        sessions.append((last_write, ref.session_id, ref, size))
    sessions.sort(key=lambda entry: (entry[0], entry[1]))
    chosen: list[PruneCandidate] = []
    total = sum(entry[3] for entry in sessions)
    for last_write, _, ref, size in sessions:
        reason = None
        if older_than is not None and now - last_write > older_than:
            reason = f"last written more than {_shown_age(older_than)} ago"
        elif max_size is not None and total > max_size:
            reason = f"total size over {max_size} bytes"
        if reason is None:
            continue
        total -= size
        chosen.append(
            PruneCandidate(ref.project, ref.agent, ref.session_id, last_write, size, reason)
        )
    return chosen


def _shown_age(age: timedelta) -> str:
    seconds = int(age.total_seconds())
    for unit in ("w", "d", "h", "m"):
        if seconds % AGE_UNITS[unit] == 0:
            return f"{seconds // AGE_UNITS[unit]}{unit}"
    return f"{seconds}s"


def apply_prune(
    root: DataRoot,
    plan: Iterable[PruneCandidate],
    on_each: Callable[[PruneOutcome], None] | None = None,
) -> list[PruneOutcome]:
    """Delete every planned session; a session that cannot be deleted is reported, not fatal."""
    outcomes = []
    for candidate in plan:
        error: str | None = None
        try:
            delete_session(root, candidate.project, candidate.agent, candidate.session_id)
        except PentraceError as exc:
            error = exc.message
        outcome = PruneOutcome(candidate, error)
        outcomes.append(outcome)
        if on_each is not None:
            on_each(outcome)
    return outcomes
