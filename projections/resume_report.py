"""The ``resume-check --json`` contract: a resume result as one JSON object.

Messages are embedded as the envelopes exactly as they stand in the trace
(``msgspec.Raw`` of each record's bytes), so numbers, key order and opaque
``fidelity`` blobs come out byte for byte.  Synthesized records are embedded
the same way and flagged *outside* the envelopes, in ``synthesized``.  Fields
are only ever added (``docs/resume.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import msgspec

from pentrace.domain.json_codec import JsonEncoder
from pentrace.domain.records import TraceRecord
from pentrace.projections.resume import ResumeResult
from pentrace.projections.synthetic import SyntheticRecord

__all__ = ["ParseReportLike", "encode_resume_report", "resume_report"]

_encoder = JsonEncoder()


class _LineLike(Protocol):
    @property
    def line(self) -> int: ...


class ParseReportLike(Protocol):
    """What the report needs from a reader's parse report (``trace_reader.ParseReport``)."""

    @property
    def skipped(self) -> Sequence[_LineLike]: ...

    @property
    def skipped_count(self) -> int: ...

    @property
    def torn_tails(self) -> Sequence[_LineLike]: ...


def _raw(record: TraceRecord | None) -> msgspec.Raw | None:
    return None if record is None else msgspec.Raw(record.raw)


def _synthesized(records: list[TraceRecord]) -> list[int]:
    return [index for index, record in enumerate(records) if isinstance(record, SyntheticRecord)]


def _parse_section(report: ParseReportLike | None) -> dict[str, Any] | None:
    if report is None:
        return None
    torn = report.torn_tails
    return {
        "skipped_lines": [bad.line for bad in report.skipped],
        "skipped_count": report.skipped_count,
        "torn_tail": torn[-1].line if torn else None,
    }


def resume_report(
    result: ResumeResult, parse_report: ParseReportLike | None = None
) -> dict[str, Any]:
    """The JSON-ready report of ``result``; message values are ``msgspec.Raw``.

    ``parse`` is ``None`` when no parse report is given.  ``last_request_total``
    is ``null`` where the reference leaves it undefined.
    """
    return {
        "history": [msgspec.Raw(record.raw) for record in result.history],
        "carry_over": [msgspec.Raw(record.raw) for record in result.carry_over],
        "context_closed": result.context_closed,
        "pending_summary": _raw(result.pending_summary),
        "session_tokens": result.session_tokens,
        "last_request_total": result.last_request_total,
        "session_turns": result.session_turns,
        "render_messages": [msgspec.Raw(record.raw) for record in result.render_messages],
        "meta": _raw(result.meta),
        "dangling_compaction": result.dangling_compaction,
        "synthesized": {
            "history": _synthesized(result.history),
            "carry_over": _synthesized(result.carry_over),
        },
        "parse": _parse_section(parse_report),
    }


def encode_resume_report(
    result: ResumeResult, parse_report: ParseReportLike | None = None
) -> bytes:
    """:func:`resume_report` encoded as compact JSON bytes."""
    return _encoder.encode(resume_report(result, parse_report))
