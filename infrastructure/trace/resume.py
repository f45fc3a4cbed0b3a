"""Resume a trace file from disk: the trace reader feeding the pure resume fold."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from pentrace.errors import NotATraceError
from pentrace.infrastructure.trace.reader import ParseReport, last_record, read_shard
from pentrace.projections.resume import (
    ResumeResult,
    closes_context,
    resume_closed,
    resume_trace,
)

__all__ = ["resume_trace_file"]

_ENVELOPES: Final = frozenset({"session_meta", "model_msg", "event_msg"})


def resume_trace_file(
    path: Path | str,
    *,
    strict: bool = False,
    strict_pairing: bool = False,
    report: ParseReport | None = None,
) -> ResumeResult:
    """Fold one shard (a session resumes from its highest-index shard) into a ResumeResult.

    The file is read with PenguinHarness's rules: a torn last line is dropped,
    malformed middle lines are skipped and noted in ``report`` (``strict``
    raises :class:`~pentrace.errors.TraceFormatError` instead).  Missing or
    unreadable files raise the reader's errors, naming the path; a file with
    lines but not one trace record among them raises
    :class:`~pentrace.errors.NotATraceError`.

    Memory stays a small multiple of what the result holds: a file whose last
    record closes the context (a long session compacted at its end) is folded
    by :func:`~pentrace.projections.resume.resume_closed`, which keeps no
    history; only when its closure turns out void is the file read again.
    """
    path = Path(path)
    report = report if report is not None else ParseReport()
    if closes_context(last_record(path)):
        scratch = ParseReport(max_kept=report.max_kept)
        closed = resume_closed(read_shard(path, strict=strict, report=scratch))
        if closed is not None:
            report.absorb(scratch)
            return closed
    before = report.records, report.lines - report.blank_lines
    result = resume_trace(
        read_shard(path, strict=strict, report=report), strict_pairing=strict_pairing
    )
    records, content = report.records - before[0], report.lines - report.blank_lines - before[1]
    if content and _holds_no_envelope(result, records, path):
        raise NotATraceError(
            f"{path} is not a trace: none of its {content} non-blank line(s) is a "
            "session_meta, model_msg or event_msg record",
            hint="give the path of a session's .jsonl shard, or a session id "
            "(`pentrace sessions list`)",
        )
    return result


def _holds_no_envelope(result: ResumeResult, records: int, path: Path) -> bool:
    """True when the read found no record of a trace's three kinds (re-read only then)."""
    if result.meta is not None or result.render_messages or result.carry_over:
        return False
    if records == 0:
        return True
    # Rare: records, but none that resume kept; look at their kinds once more.
    return not any(record.kind in _ENVELOPES for record in read_shard(path))
