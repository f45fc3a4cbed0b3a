"""Drift between a session's trace and its ledger rows (pure; part of ``pentrace audit``).

The ledger is derived from the traces (one record = one row, sequence =
position), so for every record the row at its position must exist (unless
retention pruned it) and hold the record's event type and time, and no row may
sit beyond the trace's last position.  Comparing type and time is cheap (the
timestamp is sliced from the line, no payload is decoded) and catches a trace
that was replaced or cut under a ledger that still remembers the old one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final

from pentrace.domain.records import TraceRecord
from pentrace.domain.runtime import event_type_for, time_ms_of
from pentrace.projections.audit import Problem, ProblemLog

__all__ = ["LedgerDrift", "expected_ledger_row", "record_time_ms"]

_TIMESTAMP_HEAD: Final = b'{"timestamp":"'
_TIMESTAMP_LENGTH: Final = len("2026-07-18T03:10:22.531Z")


def record_time_ms(record: TraceRecord) -> int:
    """``time_ms_of`` for the common line that starts with its timestamp, without decoding it."""
    raw = record.raw
    if raw.startswith(_TIMESTAMP_HEAD):
        end = len(_TIMESTAMP_HEAD) + _TIMESTAMP_LENGTH
        if raw[end : end + 1] == b'"':
            try:
                moment = datetime.fromisoformat(raw[len(_TIMESTAMP_HEAD) : end].decode("ascii"))
            except (ValueError, UnicodeDecodeError):
                return time_ms_of(record)
            return int(moment.timestamp() * 1000)
    return time_ms_of(record)


def expected_ledger_row(record: TraceRecord, position: int) -> tuple[str, int]:
    """The ``(event_type, event_time)`` the ledger row of this record must hold."""
    return event_type_for(record, position), record_time_ms(record)


def _ranges(positions: Sequence[int]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for position in positions:
        if spans and spans[-1][1] == position - 1:
            spans[-1] = (spans[-1][0], position)
        else:
            spans.append((position, position))
    return spans


class LedgerDrift(ProblemLog):
    """Compare a session's trace with its ledger rows, one record at a time.

    ``held`` maps a ledger sequence to its ``(event_type, event_time)``;
    positions at or below ``pruned_through`` were removed by retention and are
    not missing.  Missing rows are reported as ranges of positions.
    """

    def __init__(
        self, session_id: str, held: dict[int, tuple[str, int]], pruned_through: int
    ) -> None:
        super().__init__(session_id)
        self.held = held
        self.pruned_through = pruned_through
        self.last_position = 0
        self._missing: list[tuple[int, int, str, int]] = []

    def record(self, record: TraceRecord, position: int, path: str) -> None:
        """Check the ledger row of the record at ``position`` (read from ``path``)."""
        self.last_position = position
        row = self.held.get(position)
        if row is None:
            if position > self.pruned_through:
                spans = self._missing
                if spans and spans[-1][1] == position - 1:
                    first, _, first_path, line = spans[-1]
                    spans[-1] = (first, position, first_path, line)
                else:
                    spans.append((position, position, path, record.line))
            return
        expected = expected_ledger_row(record, position)
        if row != expected:
            self.found(
                "ledger_mismatch",
                "error",
                f"ledger row at sequence {position} holds {row[0]} at {row[1]} ms, "
                f"the trace record is {expected[0]} at {expected[1]} ms",
                (path, record.line, position),
            )

    def finish(self) -> list[Problem]:
        """Add the missing ranges and the rows beyond the trace's end; return every problem."""
        for first, last, path, line in self._missing:
            count = last - first + 1
            span = f"position {first}" if count == 1 else f"positions {first}-{last}"
            self.found(
                "ledger_missing",
                "warning",
                f"{count} trace record(s) at {span} are not in the ledger",
                (path, line, first),
                fix="ledger_sync",
            )
        end = self.last_position
        beyond = sorted(sequence for sequence in self.held if sequence > end)
        for first, last in _ranges(beyond):
            self.found(
                "ledger_orphan",
                "error",
                f"{last - first + 1} ledger row(s) at sequence {first}-{last} have "
                f"no trace record (the trace has {end} records)",
                (None, None, first),
            )
        return self.problems
