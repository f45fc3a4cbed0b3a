"""Catalog rows and filters: one session's listing entry, and which entries a listing keeps.

:func:`read_row` reads a session from its shards (no cache) into a
:class:`SessionRow`; :class:`SessionFilter` is the ``sessions list`` filter
set; :func:`parse_time_bound` reads ``--since`` / ``--until`` values.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import msgspec

from pentrace.errors import PentraceError
from pentrace.infrastructure.storage.layout import SessionRef
from pentrace.infrastructure.trace.reader import ParseReport, read_session
from pentrace.projections.session_summary import (
    SessionSummary,
    model_name,
    parse_timestamp,
    summarize_session,
)
from pentrace.values import parse_time

__all__ = ["STATUS_CHOICES", "SessionFilter", "SessionRow", "parse_time_bound", "read_row"]

STATUS_CHOICES: Final = (
    "completed",
    "failed",
    "aborted",
    "timeout",
    "malformed",
    "auth",
    "open",
    "none",
)


class SessionRow(msgspec.Struct, kw_only=True):
    """One session of the catalog: where it lives, its files and its summary.

    ``problem`` names why the session could not be read (an unreadable
    shard, two shards with one index); its summary is then empty.
    """

    project: str
    agent: str
    session_id: str
    shards: int
    bytes: int
    skipped_lines: int
    torn_tails: int
    summary: SessionSummary
    problem: str | None = None

    @property
    def start(self) -> str | None:
        """The first record's timestamp, as written."""
        return self.summary.first_timestamp

    @property
    def has_errors(self) -> bool:
        """Errors in the session's history, or damage in its files."""
        return (
            self.summary.has_errors
            or self.skipped_lines > 0
            or self.torn_tails > 0
            or self.problem is not None
        )

    @property
    def status(self) -> str:
        """The last request's status; ``none`` when the session made no request."""
        return self.summary.last_request_status or "none"


@dataclass(frozen=True, slots=True)
class SessionFilter:
    """Which sessions :func:`list_sessions` keeps; ``None`` means any."""

    project: str | None = None
    agent: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    model: str | None = None
    status: str | None = None
    has_errors: bool | None = None

    def keeps(self, row: SessionRow) -> bool:
        """True when ``row`` passes every filter."""
        if self.model is not None and self.model not in (
            row.summary.model_id,
            model_name(row.summary.provider, row.summary.model_id),
        ):
            return False
        if self.status is not None and row.status != self.status:
            return False
        if self.has_errors is not None and row.has_errors != self.has_errors:
            return False
        if self.since is not None or self.until is not None:
            start = parse_timestamp(row.start)
            if start is None:
                return False
            if self.since is not None and start < self.since:
                return False
            if self.until is not None and start > self.until:
                return False
        return True


def parse_time_bound(text: str, now: datetime, *, option: str = "--since") -> datetime:
    """A time bound in any form that :func:`pentrace.values.parse_time` reads (``7d`` ...)."""
    return parse_time(text, now, option=option)


def read_row(ref: SessionRef) -> SessionRow:
    """Read one session from its shards (no cache) into a :class:`SessionRow`."""
    report = ParseReport(max_kept=0)
    problem: str | None = None
    try:
        summary = summarize_session(read_session(ref.shards, report=report))
    except PentraceError as exc:
        summary, problem = SessionSummary(session_id=ref.session_id), exc.message
    size = 0
    for shard in ref.shards:
        try:
            size += os.stat(shard.path).st_size
        except OSError:
            continue  # gone since the walk (a concurrent delete): it adds nothing
    return SessionRow(
        project=ref.project,
        agent=ref.agent,
        session_id=ref.session_id,
        shards=len(ref.shards),
        bytes=size,
        skipped_lines=report.skipped_count,
        torn_tails=len(report.torn_tails),
        summary=summary,
        problem=problem,
    )
