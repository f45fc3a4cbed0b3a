"""A session's compaction spans, counted by mode and by how they ended.

A ``compaction_begin`` opens a span and the next ``compaction_end`` closes it
with its status.  A second begin before an end leaves the first span
*dangling*, counted with the status ``open``; so is a span still open when
the trace stops.  :class:`~pentrace.projections.session_summary.SummaryFold`
keeps one :class:`CompactionTally` per session.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["CompactionCount", "CompactionTally"]


class CompactionCount(msgspec.Struct, kw_only=True):
    """How many compactions of one mode ended with one status (``open``: no end yet)."""

    mode: str
    status: str
    count: int


class CompactionTally:
    """The spans seen so far; :meth:`counts` may be read and the tally fed again."""

    def __init__(self) -> None:
        self._open: tuple[str, str] | None = None
        self._counts: dict[tuple[str, str], int] = {}
        self._dangling = 0

    @property
    def in_span(self) -> bool:
        """True between a begin and its end."""
        return self._open is not None

    def begin(self, mode: str) -> None:
        """A span of ``mode`` opens; one still open dangles."""
        if self._open is not None:
            self._count(self._open[0], "open")
            self._dangling += 1
        self._open = (mode, "open")

    def end(self, mode: Any, status: str) -> None:
        """The open span ends with ``status``; an end without a mode takes the begin's."""
        if not isinstance(mode, str):
            mode = self._open[0] if self._open is not None else "unknown"
        self._count(mode, status)
        self._open = None

    def counts(self) -> tuple[list[CompactionCount], int]:
        """Every ``(mode, status)`` count, sorted, and how many spans dangle (the open one too)."""
        counts = dict(self._counts)
        dangling = self._dangling
        if self._open is not None:
            counts[self._open] = counts.get(self._open, 0) + 1
            dangling += 1
        listed = [
            CompactionCount(mode=mode, status=status, count=count)
            for (mode, status), count in sorted(counts.items())
        ]
        return listed, dangling

    def _count(self, mode: str, status: str) -> None:
        key = (mode, status)
        self._counts[key] = self._counts.get(key, 0) + 1
