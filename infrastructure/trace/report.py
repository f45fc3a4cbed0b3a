"""What a trace read saw besides its records: bad lines, torn tails, healed fragments, counts.

The reader (:mod:`pentrace.infrastructure.trace.reader`) fills one
:class:`ParseReport` per read, or one shared by the shards of a session; the
CLI, the audit and imports print or inspect it.  Both names are importable
from the reader as well.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["BadLine", "ParseReport"]


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line that did not parse: where it is (``path`` is None for in-memory data) and why."""

    path: Path | None
    line: int
    reason: str


@dataclass(slots=True)
class ParseReport:
    """What a read saw besides records: bad lines, torn tails and counts.

    Only the first ``max_kept`` skipped (or healed) lines are kept in
    ``skipped`` (``healed``); ``skipped_count`` (``healed_count``) always counts
    them all.  Healed torn fragments are legal and leave a read ``clean``.
    One report may be shared by several reads (``read_session`` does this); the counts then add up.
    """

    max_kept: int = 1000
    skipped: list[BadLine] = field(default_factory=list)
    skipped_count: int = 0
    torn_tails: list[BadLine] = field(default_factory=list)
    healed: list[BadLine] = field(default_factory=list)
    healed_count: int = 0
    files: int = 0
    lines: int = 0
    blank_lines: int = 0
    records: int = 0
    bytes_read: int = 0

    @property
    def torn_tail(self) -> BadLine | None:
        """The torn last line of the most recently read file, or of any file read before."""
        return self.torn_tails[-1] if self.torn_tails else None

    @property
    def clean(self) -> bool:
        """True when no line was skipped and no tail was torn."""
        return self.skipped_count == 0 and not self.torn_tails

    def note(self, limit: int = 20) -> str:
        """A one-line summary naming up to ``limit`` skipped line numbers, like the reference
        (healed torn fragments, which the reference counts as malformed, are named apart)."""
        healed = ""
        if self.healed_count:
            lines = ", ".join(str(bad.line) for bad in self.healed[:limit])
            healed = f"; {self.healed_count} healed torn fragment(s): {lines}"
        if self.skipped_count == 0:
            return "no malformed lines" + healed
        shown = ", ".join(str(bad.line) for bad in self.skipped[:limit])
        more = self.skipped_count - min(limit, len(self.skipped))
        extra = f" (and {more} more)" if more > 0 else ""
        return f"skipped {self.skipped_count} malformed line(s): {shown}{extra}{healed}"

    def absorb(self, other: ParseReport) -> None:
        """Add what another read saw to this report, as if this report had been given to it."""
        for bad in other.skipped[: max(0, self.max_kept - len(self.skipped))]:
            self.skipped.append(bad)
        for bad in other.healed[: max(0, self.max_kept - len(self.healed))]:
            self.healed.append(bad)
        self.torn_tails.extend(other.torn_tails)
        self.skipped_count += other.skipped_count
        self.healed_count += other.healed_count
        self.files += other.files
        self.lines += other.lines
        self.blank_lines += other.blank_lines
        self.records += other.records
        self.bytes_read += other.bytes_read

    def _heal(self, bad: BadLine) -> None:
        self.healed_count += 1
        if len(self.healed) < self.max_kept:
            self.healed.append(bad)

    def _skip(self, bad: BadLine) -> None:
        self.skipped_count += 1
        if len(self.skipped) < self.max_kept:
            self.skipped.append(bad)
