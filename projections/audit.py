"""The pure half of ``pentrace audit``: what is wrong with a session, from facts alone.

One finding is a :class:`Problem` (its code, severity, place and safe fix).
:class:`SessionChecks` folds one session's records, shard by shard, into
problems; :func:`shard_index_problems`, :func:`parse_problems` and
:func:`temp_file_problems` turn facts the infrastructure layer gathered (shard
names, the reader's report, temp files) into problems, and
:class:`LedgerDrift` does the same for ledger rows.  Nothing here reads a file,
a database or a clock.

Ledger drift: the ledger is derived from the traces (one record = one row,
sequence = position), so for every record the row at its position must exist
(unless retention pruned it) and hold the record's event type and time, and no
row may sit beyond the trace's last position.  Comparing type and time is
cheap (the timestamp is sliced from the line, no payload is decoded) and
catches a trace that was replaced or cut under a ledger that still remembers
the old one.

Severities (the CLI's exit code is the worst one: 0 clean, 1 warnings, 2 errors):

* ``error``: the trace breaks a rule a correct writer never breaks (a
  malformed line in the middle of a shard, an output before or without its
  call, a gap or duplicate in the shard numbering, a rotated shard without
  ``session_meta``, a record PenguinHarness cannot resume, ledger rows that
  disagree with the trace);
* ``warning``: what a crash or an interrupted run leaves behind, which resume
  already tolerates (a torn tail, a healed torn fragment, a request left open
  when the next began or at the end of the trace, a dangling compaction, an
  unanswered tool call, a stale temp file, events the ledger is missing).

``fix`` names the safe repair ``audit --fix`` applies, ``None`` when there is none.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Final, Literal

import msgspec

from pentrace.domain.records import TraceRecord
from pentrace.domain.runtime import event_type_for, time_ms_of

__all__ = [
    "Fix",
    "LedgerDrift",
    "Problem",
    "ProblemLog",
    "SessionChecks",
    "Severity",
    "Where",
    "expected_ledger_row",
    "parse_problems",
    "record_time_ms",
    "shard_index_problems",
    "temp_file_problems",
    "worst_exit_code",
]


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


def shard_index_problems(session_id: str, shards: Sequence[tuple[int, str]]) -> list[Problem]:
    """Gaps (``_001``, ``_003``) and duplicates in a session's shard indexes.

    ``shards`` holds ``(index, path)`` pairs in any order.
    """
    problems: list[Problem] = []
    ordered = sorted(shards)
    for (index, path), (next_index, next_path) in itertools.pairwise(ordered):
        if index == next_index:
            problems.append(
                Problem(
                    code="duplicate_shard",
                    severity="error",
                    message=f"shard index {index:03d} appears twice (also {path}); "
                    "the record order is ambiguous",
                    session_id=session_id,
                    path=next_path,
                )
            )
    expected = 1
    for index, path in ordered:
        if index > expected:
            missing = ", ".join(f"_{n:03d}" for n in range(expected, index))
            problems.append(
                Problem(
                    code="shard_gap",
                    severity="error",
                    message=f"expected shard _{expected:03d} before _{index:03d}, "
                    f"found none (missing {missing})",
                    session_id=session_id,
                    path=path,
                )
            )
        expected = max(expected, index + 1)
    return problems


# What each kind of line the reader reports becomes: code, severity, message, fix.
_PARSE_PROBLEMS: Final[tuple[tuple[str, Severity, str, Fix | None], ...]] = (
    ("malformed_line", "error", "line is not a record: {reason}", None),
    (
        "torn_tail",
        "warning",
        "the last line is cut short (a crash mid-write): {reason}",
        "heal_torn_tail",
    ),
    (
        "healed_torn_fragment",
        "warning",
        "a record cut short by a crash, healed: the next writer started its "
        "first record on a new line; readers skip the fragment and import keeps it",
        None,
    ),
)


def parse_problems(
    session_id: str,
    skipped: Iterable[tuple[str, int, str]],
    torn: Iterable[tuple[str, int, str]],
    healed: Iterable[tuple[str, int, str]] = (),
) -> list[Problem]:
    """Problems for the reader's malformed lines, torn tails and healed torn fragments,
    each as ``(path, line, reason)``."""
    problems: list[Problem] = []
    for (code, severity, message, fix), found in zip(
        _PARSE_PROBLEMS, (skipped, torn, healed), strict=True
    ):
        problems.extend(
            Problem(
                code=code,
                severity=severity,
                message=message.format(reason=reason),
                session_id=session_id,
                path=path,
                line=line,
                fix=fix,
            )
            for path, line, reason in found
        )
    return problems


def temp_file_problems(session_id: str, temps: Iterable[tuple[str, int]]) -> list[Problem]:
    """Stale hidden temp files of a session, as ``(path, pid)``; ``--fix`` removes them."""
    return [
        Problem(
            code="stale_temp_file",
            severity="warning",
            message=f"a hidden temp file left by writer pid {pid}, which is gone (killed while "
            "rotating or writing a checkpoint); nothing reads it",
            session_id=session_id,
            path=path,
            fix="remove_temp",
        )
        for path, pid in temps
    ]


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string" if isinstance(value, str) else "array"


class SessionChecks(ProblemLog):
    """Fold a session's records (every shard, ``_001`` first) into problems.

    Call :meth:`start_shard` before each shard's records, :meth:`record` for
    every record, and :meth:`finish` once at the end.
    """

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id)
        self.position = 0
        self._path = ""
        self._index = 0
        self._first_in_shard = False
        self._open_request: tuple[str, int, int] | None = None
        self._compaction: tuple[str, int, int] | None = None
        self._calls: dict[str, tuple[str, int, int, str]] = {}
        self._answered: set[str] = set()
        self._early_outputs: dict[str, tuple[str, int, int]] = {}
        # Requests left open when the next began: (where, shard order, next begin's line).
        self._overlaps: list[tuple[tuple[str, int, int], int, int, int]] = []
        self._next_begins: list[int] = []
        self._healed: list[tuple[int, int]] = []
        self._order = 0
        self._begin_order = 0

    def start_shard(self, index: int, path: str) -> None:
        """The next records come from shard ``index`` at ``path``."""
        self._index, self._path, self._first_in_shard = index, path, True
        self._order += 1

    def healed_fragments(self, lines: Iterable[int]) -> None:
        """The lines of the current shard that are healed torn fragments (crash points)."""
        self._healed.extend((self._order, line) for line in lines)

    def record(self, record: TraceRecord) -> None:
        """Check one record (its ``line`` is the line number within the current shard)."""
        self.position += 1
        where = (self._path, record.line, self.position)
        if self._first_in_shard:
            self._first_in_shard = False
            if record.kind != "session_meta":
                found = record.kind if isinstance(record.kind, str) else type(record.kind).__name__
                self.found(
                    "shard_without_meta",
                    "error",
                    f"expected shard _{self._index:03d} to start with session_meta, found {found}",
                    where,
                )
        kind, ptype = record.kind, record.ptype
        if kind is None or not record.has_payload:
            self._shape(record, where)
        if kind == "event_msg":
            self._event(ptype, record, where)
        elif kind == "model_msg" and ptype in ("tool_call", "tool_call_output"):
            call_id = record.tool_call_id
            if isinstance(call_id, str) and call_id:
                if ptype == "tool_call":
                    self._call(call_id, record, where)
                else:
                    self._output(call_id, where)

    def _shape(self, record: TraceRecord, where: tuple[str, int, int]) -> None:
        """A record that is no JSON object, or an event or message with no payload object.

        PenguinHarness's resume throws a TypeError on a ``null`` line and on an
        ``event_msg`` or ``model_msg`` whose payload is missing or ``null``: the
        original cannot resume such a file, so each is an error.  Any other
        JSON value on a line of its own is ignored by both, but no writer
        writes one: a warning.
        """
        value = record.value()
        if value is None:
            self.found(
                "null_record",
                "error",
                "the line is JSON null, not a record object; PenguinHarness's resume fails "
                "on it with a TypeError (pentrace ignores it)",
                where,
            )
        elif not isinstance(value, dict):
            self.found(
                "non_object_record",
                "warning",
                f"the line is a JSON {_json_type(value)}, not a record object; resume ignores it",
                where,
            )
        elif record.kind in ("event_msg", "model_msg") and value.get("payload") is None:
            self.found(
                "missing_payload",
                "error",
                f"{record.kind} without a payload object (payload is "
                f"{'missing' if 'payload' not in value else 'null'}); PenguinHarness's resume "
                "fails on it with a TypeError (pentrace reads it as an empty payload)",
                where,
            )

    def _event(self, ptype: Any, record: TraceRecord, where: tuple[str, int, int]) -> None:
        if ptype == "request_begin":
            if self._open_request is not None:
                # Judged in finish(): a crash between the two makes it legal history.
                self._overlaps.append(
                    (self._open_request, self._begin_order, self._order, where[1])
                )
                self._next_begins.append(where[2])
            self._open_request = where
            self._begin_order = self._order
        elif ptype == "request_end":
            if self._open_request is None:
                self.found(
                    "unmatched_request_end",
                    "warning",
                    "request_end without an open request_begin",
                    where,
                )
            self._open_request = None
        elif ptype == "compaction_begin":
            self._compaction = where
        elif ptype == "compaction_end":
            self._compaction = None
        elif ptype == "foreign_record":
            self._foreign(record, where)

    def _foreign(self, record: TraceRecord, where: tuple[str, int, int]) -> None:
        """What an import from another agent's store found in its source that breaks that
        agent's own resume (a broken ``parentUuid`` link, a duplicate id; ADR 0095)."""
        payload = record.payload()
        code = payload.get("problem")
        if isinstance(code, str) and code:
            note = payload.get("note")
            self.found(code, "error", note if isinstance(note, str) else code, where)

    def _call(self, call_id: str, record: TraceRecord, where: tuple[str, int, int]) -> None:
        early = self._early_outputs.pop(call_id, None)
        if early is not None:
            self.found(
                "output_before_call",
                "error",
                f"tool_call_output for call {call_id!r} at position {early[2]} comes before "
                f"its tool_call at position {where[2]} (line {where[1]})",
                early,
            )
            self._answered.add(call_id)
        name = record.payload().get("name")
        first = self._calls.get(call_id)
        if first is not None:
            self.found(
                "duplicate_tool_call",
                "error",
                f"tool_call id {call_id!r} at position {where[2]} was used before, at position "
                f"{first[2]}: a resume sends both calls and their one answer pairs with neither",
                where,
            )
        self._calls.setdefault(call_id, (*where, name if isinstance(name, str) else "?"))

    def _output(self, call_id: str, where: tuple[str, int, int]) -> None:
        if call_id in self._calls:
            self._answered.add(call_id)
        else:
            self._early_outputs.setdefault(call_id, where)

    def _judge_overlaps(self) -> None:
        """A request still open when the next began: the run stopped or crashed inside it.

        A warning, not an error: only a writer that died leaves this (one process
        never begins a request while one is open), and resume - here as in
        PenguinHarness - drops the round.  A healed torn fragment between the two
        begins names the crash.
        """
        for (opened, order, next_order, next_line), next_position in zip(
            self._overlaps, self._next_begins, strict=True
        ):
            start, end = (order, opened[1]), (next_order, next_line)
            crash = next((h for h in self._healed if start < h < end), None)
            cause = (
                f"was interrupted by a crash (healed torn fragment at line {crash[1]})"
                if crash is not None
                else "has no request_end: the run stopped or crashed inside it"
            )
            self.found(
                "open_request",
                "warning",
                f"request_begin at position {opened[2]} (line {opened[1]}) {cause}; resume "
                f"drops the round, and the next request began at position {next_position}",
                opened,
            )

    def finish(self) -> list[Problem]:
        """Add the end-of-trace findings and return every problem, in trace order."""
        self._judge_overlaps()
        if self._open_request is not None:
            self.found(
                "open_request_at_end",
                "warning",
                "the trace ends inside a request (request_begin without request_end): "
                "the run stopped or crashed; resume drops the round",
                self._open_request,
            )
        if self._compaction is not None:
            self.found(
                "dangling_compaction",
                "warning",
                "compaction_begin without compaction_end; resume closes it as failed",
                self._compaction,
                fix="close_compaction",
            )
        for call_id, where in self._early_outputs.items():
            self.found(
                "orphan_tool_output",
                "error",
                f"tool_call_output answers call {call_id!r}, which no tool_call in the session has",
                where,
            )
        for call_id, (path, line, position, name) in self._calls.items():
            if call_id not in self._answered:
                self.found(
                    "unanswered_tool_call",
                    "warning",
                    f"tool_call {call_id!r} ({name}) has no tool_call_output; "
                    "resume answers it with a placeholder",
                    (path, line, position),
                )
        self.problems.sort(key=lambda p: (p.path or "", p.line or 0))
        return self.problems


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
