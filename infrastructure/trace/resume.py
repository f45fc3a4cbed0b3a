"""Resume a trace file from disk: the trace reader feeding the pure resume fold."""

from __future__ import annotations

from pathlib import Path

from pentrace.infrastructure.trace.reader import ParseReport, read_shard
from pentrace.projections.resume import ResumeResult, resume_trace

__all__ = ["resume_trace_file"]


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
    unreadable files raise the reader's errors, naming the path.
    """
    records = read_shard(Path(path), strict=strict, report=report)
    return resume_trace(records, strict_pairing=strict_pairing)
