"""The pure half of ``pentrace audit``: what is wrong with a session, from its records alone.

:class:`SessionChecks` folds one session's records, shard by shard, and
collects :class:`Problem` values; :func:`shard_index_problems`,
:func:`parse_problems` and :func:`ledger_drift_problems` turn facts that the
infrastructure layer gathered (shard names, the reader's report, ledger rows)
into problems.  Nothing here reads a file, a database or a clock.

Severities (the CLI's exit code is the worst one: 0 clean, 1 warnings, 2 errors):

* ``error``: the trace breaks a rule a correct writer never breaks (a
  malformed line in the middle of a shard, an output before or without its
  call, a request left open while the next one began, a gap or duplicate in the
  shard numbering, a rotated shard without ``session_meta``, ledger rows that
  disagree with the trace);
* ``warning``: what a crash or an interrupted run leaves behind, which resume
  already tolerates (a torn tail, an open request at the end of the trace, a
  dangling compaction, an unanswered tool call, events the ledger is missing).

``fix`` names the safe repair ``audit --fix`` applies, ``None`` when there is none.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import msgspec

from pentrace.domain.records import TraceRecord

__all__ = [
    "Fix",
    "Problem",
    "SessionChecks",
    "Severity",
    "parse_problems",
    "shard_index_problems",
    "temp_file_problems",
    "worst_exit_code",
]

Severity = Literal["error", "warning"]
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


def parse_problems(
    session_id: str,
    skipped: Iterable[tuple[str, int, str]],
    torn: Iterable[tuple[str, int, str]],
    healed: Iterable[tuple[str, int, str]] = (),
) -> list[Problem]:
    """Problems for the reader's malformed lines, torn tails and healed torn fragments,
    each as ``(path, line, reason)``."""
    problems = [
        Problem(
            code="malformed_line",
            severity="error",
            message=f"line is not a record: {reason}",
            session_id=session_id,
            path=path,
            line=line,
        )
        for path, line, reason in skipped
    ]
    problems.extend(
        Problem(
            code="torn_tail",
            severity="warning",
            message=f"the last line is cut short (a crash mid-write): {reason}",
            session_id=session_id,
            path=path,
            line=line,
            fix="heal_torn_tail",
        )
        for path, line, reason in torn
    )
    problems.extend(
        Problem(
            code="healed_torn_fragment",
            severity="warning",
            message="a record cut short by a crash, healed: the next writer started its "
            "first record on a new line; readers skip the fragment and import keeps it",
            session_id=session_id,
            path=path,
            line=line,
        )
        for path, line, _ in healed
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


class SessionChecks:
    """Fold a session's records (every shard, ``_001`` first) into problems.

    Call :meth:`start_shard` before each shard's records, :meth:`record` for
    every record, and :meth:`finish` once at the end.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.problems: list[Problem] = []
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

    def _add(
        self,
        code: str,
        severity: Severity,
        message: str,
        where: tuple[str, int, int],
        fix: Fix | None = None,
    ) -> None:
        path, line, position = where
        self.problems.append(
            Problem(
                code=code,
                severity=severity,
                message=message,
                session_id=self.session_id,
                path=path,
                line=line,
                position=position,
                fix=fix,
            )
        )

    def record(self, record: TraceRecord) -> None:
        """Check one record (its ``line`` is the line number within the current shard)."""
        self.position += 1
        where = (self._path, record.line, self.position)
        if self._first_in_shard:
            self._first_in_shard = False
            if record.kind != "session_meta":
                found = record.kind if isinstance(record.kind, str) else type(record.kind).__name__
                self._add(
                    "shard_without_meta",
                    "error",
                    f"expected shard _{self._index:03d} to start with session_meta, found {found}",
                    where,
                )
        kind, ptype = record.kind, record.ptype
        if kind == "event_msg":
            self._event(ptype, record, where)
        elif kind == "model_msg" and ptype in ("tool_call", "tool_call_output"):
            call_id = record.tool_call_id
            if isinstance(call_id, str) and call_id:
                if ptype == "tool_call":
                    self._call(call_id, record, where)
                else:
                    self._output(call_id, where)

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
                self._add(
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

    def _call(self, call_id: str, record: TraceRecord, where: tuple[str, int, int]) -> None:
        early = self._early_outputs.pop(call_id, None)
        if early is not None:
            self._add(
                "output_before_call",
                "error",
                f"tool_call_output for call {call_id!r} at position {early[2]} comes before "
                f"its tool_call at position {where[2]} (line {where[1]})",
                early,
            )
            self._answered.add(call_id)
        name = record.payload().get("name")
        self._calls.setdefault(call_id, (*where, name if isinstance(name, str) else "?"))

    def _output(self, call_id: str, where: tuple[str, int, int]) -> None:
        if call_id in self._calls:
            self._answered.add(call_id)
        else:
            self._early_outputs.setdefault(call_id, where)

    def _judge_overlaps(self) -> None:
        """A request open when the next began is an error, unless a healed torn fragment
        lies between the two: a crash interrupted it, and resume (here as in
        PenguinHarness) drops the round, so it is a warning."""
        for (opened, order, next_order, next_line), next_position in zip(
            self._overlaps, self._next_begins, strict=True
        ):
            start, end = (order, opened[1]), (next_order, next_line)
            crash = next((h for h in self._healed if start < h < end), None)
            if crash is not None:
                self._add(
                    "interrupted_request",
                    "warning",
                    f"request_begin at position {opened[2]} (line {opened[1]}) was interrupted "
                    f"by a crash (healed torn fragment at line {crash[1]}); resume drops the "
                    f"round and the next request began at position {next_position}",
                    opened,
                )
                continue
            self._add(
                "open_request",
                "error",
                f"request_begin at position {opened[2]} (line {opened[1]}) has no request_end; "
                f"the next request began at position {next_position}",
                opened,
            )

    def finish(self) -> list[Problem]:
        """Add the end-of-trace findings and return every problem, in trace order."""
        self._judge_overlaps()
        if self._open_request is not None:
            self._add(
                "open_request_at_end",
                "warning",
                "the trace ends inside a request (request_begin without request_end): "
                "the run stopped or crashed; resume drops the round",
                self._open_request,
            )
        if self._compaction is not None:
            self._add(
                "dangling_compaction",
                "warning",
                "compaction_begin without compaction_end; resume closes it as failed",
                self._compaction,
                fix="close_compaction",
            )
        for call_id, where in self._early_outputs.items():
            self._add(
                "orphan_tool_output",
                "error",
                f"tool_call_output answers call {call_id!r}, which no tool_call in the session has",
                where,
            )
        for call_id, (path, line, position, name) in self._calls.items():
            if call_id not in self._answered:
                self._add(
                    "unanswered_tool_call",
                    "warning",
                    f"tool_call {call_id!r} ({name}) has no tool_call_output; "
                    "resume answers it with a placeholder",
                    (path, line, position),
                )
        self.problems.sort(key=lambda p: (p.path or "", p.line or 0))
        return self.problems
